// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg -split-input-file | FileCheck %s
// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg=gemm-operands=native -split-input-file | FileCheck %s --check-prefix=NATIVE

// Integer GEMM: C[m,n] += sext(A[m,k]) * sext(B[n,k]), exact in i32, from a
// zero-filled accumulator.
// CHECK-DAG:   #[[A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[B:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @int_gemm
// CHECK:       %[[Z:.*]] = linalg.fill ins(%c0_i32 : i32)
// CHECK:       linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<?x32xi8>, tensor<16x32xi8>) outs(%[[Z]] : tensor<?x16xi32>)
// CHECK-SAME:    comfyquant.gemm_info = #comfyquant.gemm_info<i8, i8 x i8>
// CHECK:         arith.extsi %{{.*}} : i8 to i32
// CHECK:         arith.extsi %{{.*}} : i8 to i32
// CHECK:         arith.muli
// CHECK:         arith.addi
func.func @int_gemm(%a: tensor<?x32xi8>, %b: tensor<16x32xi8>) -> tensor<?x16xi32> {
  %c = comfyquant.qmatmul %a, %b : tensor<?x32xi8>, tensor<16x32xi8> -> tensor<?x16xi32>
  return %c : tensor<?x16xi32>
}

// -----

// qgemm = the GEMM then the epilogue (f32(acc)·row)·col + bias, one rounding.
// CHECK-LABEL: func.func @qgemm
// CHECK:       %[[ACC:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:       linalg.generic {{.*}} ins(%[[ACC]], %arg2, %arg3, %arg4 : tensor<?x16xi32>, tensor<?x1xf32>, tensor<16x1xf32>, tensor<16xbf16>)
// CHECK:         %[[F:.*]] = arith.sitofp %{{.*}} : i32 to f32
// CHECK:         %[[R:.*]] = arith.mulf %[[F]], %{{.*}} : f32
// CHECK:         %[[RC:.*]] = arith.mulf %[[R]], %{{.*}} : f32
// CHECK:         %[[B:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:         %[[Y:.*]] = arith.addf %[[RC]], %[[B]] : f32
// CHECK:         arith.truncf %[[Y]] : f32 to bf16
func.func @qgemm(%a: tensor<?x32xi8>, %b: tensor<16x32xi8>, %xs: tensor<?x1xf32>, %ws: tensor<16x1xf32>, %bias: tensor<16xbf16>) -> tensor<?x16xbf16> {
  %y = comfyquant.qgemm %a, %b row_scale %xs : tensor<?x1xf32> col_scale %ws : tensor<16x1xf32> bias %bias : tensor<16xbf16> : tensor<?x32xi8>, tensor<16x32xi8> -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// Block-scaled float GEMM (NVFP4): both operands decoded to exact values
// code · block scale (E2M1 · E4M3: at most 6 significant bits, so bf16),
// then a contraction in f32.
// CHECK-LABEL: func.func @nvfp4_gemm
// CHECK:       %[[AD:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK:         arith.divui %{{.*}}, %c16 : index
// CHECK:         tensor.extract
// CHECK:         arith.mulf
// CHECK:       %[[BD:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK:       linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[AD]], %[[BD]] : tensor<?x32xbf16>, tensor<8x32xbf16>)
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:         arith.addf
// CHECK-NOT:   unrealized_conversion_cast
// gemm-operands=native: one contraction reads the E2M1 codes (one per byte)
// and the E4M3 scales at (row, k floordiv 16), and multiplies each product
// of decoded codes by the product of the decoded scales.
// NATIVE-DAG:  #[[SA4:.*]] = affine_map<(d0, d1, d2) -> (d0, d2 floordiv 16)>
// NATIVE-DAG:  #[[SB4:.*]] = affine_map<(d0, d1, d2) -> (d1, d2 floordiv 16)>
// NATIVE-LABEL: func.func @nvfp4_gemm
// NATIVE-NOT:   iterator_types = ["parallel", "parallel"]}
// NATIVE:       linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[SA4]], #[[SB4]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg2, %arg1, %arg3 : tensor<?x32xi8>, tensor<8x32xi8>, tensor<?x2xi8>, tensor<8x2xi8>)
// NATIVE-SAME:    comfyquant.gemm_info = #comfyquant.gemm_info<fp4, f4E2M1FN x f4E2M1FN, block = 16>
// NATIVE:         %[[X:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// NATIVE:         %[[Y:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// NATIVE:         %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : f32
// NATIVE:         %[[SA:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// NATIVE:         %[[SB:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// NATIVE:         %[[S:.*]] = arith.mulf %[[SA]], %[[SB]] : f32
// NATIVE:         %[[PS:.*]] = arith.mulf %[[P]], %[[S]] : f32
// NATIVE:         arith.addf %{{.*}}, %[[PS]] : f32
func.func @nvfp4_gemm(%a: tensor<?x32xf4E2M1FN>, %as: tensor<?x2xf8E4M3FN>, %b: tensor<8x32xf4E2M1FN>, %bs: tensor<8x2xf8E4M3FN>) -> tensor<?x8xf32> {
  %c = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<?x2xf8E4M3FN>, tensor<8x2xf8E4M3FN>) : tensor<?x32xf4E2M1FN>, tensor<8x32xf4E2M1FN> -> tensor<?x8xf32>
  return %c : tensor<?x8xf32>
}

// -----

// FP8 GEMM (per-tensor scales): decoded element-wise to bf16 first (every
// FP8 value is a bf16); with
// gemm-operands=native the contraction reads the i8 codes and widens them
// through the FP8 type in its body (what a tensor core multiplies).
// CHECK-LABEL: func.func @fp8_gemm
// CHECK:       %[[AD:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK:       %[[BD:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK:       linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[AD]], %[[BD]] : tensor<?x64xbf16>, tensor<16x64xbf16>)
// NATIVE-LABEL: func.func @fp8_gemm(%arg0: tensor<?x64xi8>, %arg1: tensor<16x64xi8>
// NATIVE-NOT:   iterator_types = ["parallel", "parallel"]}
// NATIVE:       linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<?x64xi8>, tensor<16x64xi8>)
// NATIVE-SAME:    comfyquant.gemm_info = #comfyquant.gemm_info<fp8, f8E4M3FN x f8E5M2>
// NATIVE:         %[[X8:.*]] = arith.bitcast %{{.*}} : i8 to f8E4M3FN
// NATIVE:         %[[X:.*]] = arith.extf %[[X8]] : f8E4M3FN to f32
// NATIVE:         %[[W8:.*]] = arith.bitcast %{{.*}} : i8 to f8E5M2
// NATIVE:         %[[W:.*]] = arith.extf %[[W8]] : f8E5M2 to f32
// NATIVE:         %[[P:.*]] = arith.mulf %[[X]], %[[W]] : f32
// NATIVE:         arith.addf %{{.*}}, %[[P]] : f32
func.func @fp8_gemm(%a: tensor<?x64xf8E4M3FN>, %b: tensor<16x64xf8E5M2>, %xs: tensor<f32>, %ws: tensor<f32>) -> tensor<?x16xbf16> {
  %y = comfyquant.qgemm %a, %b row_scale %xs : tensor<f32> col_scale %ws : tensor<f32> : tensor<?x64xf8E4M3FN>, tensor<16x64xf8E5M2> -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// MXFP8 (FP8 codes, E8M0 scales per 32 K): decoded to bf16 with the scales
// applied (an FP8 value times a power of two has 4 significant bits: a
// bf16 wherever it is in bf16's normal range), the f32 product's high
// half; with gemm-operands=native one contraction reads codes and
// scales, the scales at (row, k floordiv 32), and multiplies each product
// by the two decoded scales.
// CHECK-LABEL: func.func @mxfp8_gemm
// CHECK:       linalg.generic
// CHECK:         arith.mulf
// CHECK:         arith.shrui %{{.*}}, %c16_i32 : i32
// CHECK:         arith.bitcast %{{.*}} : i16 to bf16
// CHECK:       } -> tensor<?x64xbf16>
// CHECK:       linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<16x64xbf16>)
// NATIVE-DAG:  #[[SA:.*]] = affine_map<(d0, d1, d2) -> (d0, d2 floordiv 32)>
// NATIVE-DAG:  #[[SB:.*]] = affine_map<(d0, d1, d2) -> (d1, d2 floordiv 32)>
// NATIVE-LABEL: func.func @mxfp8_gemm
// NATIVE:       linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[SA]], #[[SB]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg2, %arg1, %arg3 : tensor<?x64xi8>, tensor<16x64xi8>, tensor<?x2xi8>, tensor<16x2xi8>)
// NATIVE-SAME:    comfyquant.gemm_info = #comfyquant.gemm_info<fp8, f8E4M3FN x f8E4M3FN, block = 32>
// NATIVE:         arith.extf %{{.*}} : f8E4M3FN to f32
// NATIVE:         arith.extf %{{.*}} : f8E4M3FN to f32
// NATIVE:         %[[P:.*]] = arith.mulf
// NATIVE:         arith.shli
// NATIVE:         arith.shli
// NATIVE:         %[[S:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// NATIVE:         %[[PS:.*]] = arith.mulf %[[P]], %[[S]] : f32
// NATIVE:         arith.addf %{{.*}}, %[[PS]] : f32
func.func @mxfp8_gemm(%a: tensor<?x64xf8E4M3FN>, %as: tensor<?x2xf8E8M0FNU>, %b: tensor<16x64xf8E4M3FN>, %bs: tensor<16x2xf8E8M0FNU>) -> tensor<?x16xbf16> {
  %y = comfyquant.qgemm %a, %b block 32 scales(%as, %bs : tensor<?x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) : tensor<?x64xf8E4M3FN>, tensor<16x64xf8E4M3FN> -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}
