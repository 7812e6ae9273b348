// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg -split-input-file | FileCheck %s

// Activation quantization, bit for bit the reference's (runtime/src/Forward.cpp):
// int8_row: s = max(amax/127, 1e-30) in f32; codes RNE(T(x / T(s))) clamped
// to [-128, 127].
// CHECK-LABEL: func.func @int8_row
// CHECK:       linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:         math.absf
// CHECK:         arith.maxnumf
// CHECK:       linalg.generic
// CHECK:         arith.divf %{{.*}}, %[[C127:.*]] : f32
// CHECK:         arith.maxnumf %{{.*}}, %[[TINY:.*]] : f32
// CHECK:       linalg.generic
// CHECK:         %[[SB:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK:         %[[S:.*]] = arith.extf %[[SB]] : bf16 to f32
// CHECK:         %[[X:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:         %[[Q:.*]] = arith.divf %[[X]], %[[S]] : f32
// CHECK:         %[[QB:.*]] = arith.truncf %[[Q]] : f32 to bf16
// CHECK:         %[[QF:.*]] = arith.extf %[[QB]] : bf16 to f32
// CHECK:         %[[R:.*]] = math.roundeven %[[QF]] : f32
// CHECK:         %[[LO:.*]] = arith.maxnumf %[[R]], %{{.*}} : f32
// CHECK:         %[[HI:.*]] = arith.minnumf %[[LO]], %[[C127]] : f32
// CHECK:         arith.fptosi %[[HI]] : f32 to i8
func.func @int8_row(%x: tensor<?x64xbf16>) -> (tensor<?x64xi8>, tensor<?x1xf32>) {
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xf32>
  return %c, %s : tensor<?x64xi8>, tensor<?x1xf32>
}

// -----

// Fused rotation: the butterfly first (rounded to T), then the same scheme.
// int4 codes are carried as sign-extended i8 and cast back to i4.
// CHECK-LABEL: func.func @int4_row_rotated
// CHECK:       arith.extf %{{.*}} : f16 to f32
// CHECK:       tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<?x32xf32>
// CHECK:       arith.divui %{{.*}}, %c4 : index
// CHECK:       tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<?x32xf32>
// CHECK:       arith.maxnumf %{{.*}}, %cst{{.*}} : f32
// CHECK:       arith.divf
// CHECK:       math.roundeven
// CHECK:       arith.fptosi %{{.*}} : f32 to i8
// CHECK:       %[[C:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<?x32xi8> to tensor<?x32xi4>
// CHECK:       return %[[C]]
func.func @int4_row_rotated(%x: tensor<?x32xf16>) -> (tensor<?x32xi4>, tensor<?x1xf32>) {
  %c, %s = comfyquant.quantize %x <int4_row> rotation <16> : tensor<?x32xf16> -> tensor<?x32xi4>, tensor<?x1xf32>
  return %c, %s : tensor<?x32xi4>, tensor<?x1xf32>
}

// -----

// fp8_static: codes of fp8_RNE(clamp(T(x · T(1/s)), ±448)) as E4M3 bytes.
// CHECK-LABEL: func.func @fp8
// CHECK:       %[[S:.*]] = tensor.extract %arg1[] : tensor<f32>
// CHECK:       arith.divf %cst{{.*}}, %[[S]] : f32
// CHECK:       linalg.generic
// CHECK:         arith.mulf
// CHECK:         arith.maxnumf
// CHECK:         arith.minnumf
// CHECK:         arith.bitcast %{{.*}} : f32 to i32
// CHECK:         math.roundeven
// CHECK:         arith.trunci %{{.*}} : i32 to i8
// CHECK:       tensor.from_elements %[[S]] : tensor<f32>
// CHECK:       builtin.unrealized_conversion_cast %{{.*}} : tensor<?x32xi8> to tensor<?x32xf8E4M3FN>
func.func @fp8(%x: tensor<?x32xbf16>, %is: tensor<f32>) -> (tensor<?x32xf8E4M3FN>, tensor<f32>) {
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> scale %is : tensor<f32> : tensor<?x32xbf16> -> tensor<?x32xf8E4M3FN>, tensor<f32>
  return %c, %s : tensor<?x32xf8E4M3FN>, tensor<f32>
}

// -----

// mxfp8_block: K padded to the block, per-block amax, E8M0 exponent bytes,
// codes x / 2^(e-127) clamped to ±448; the padding is dropped.
// CHECK-LABEL: func.func @mxfp8
// CHECK:       tensor.pad
// CHECK:       tensor.expand_shape {{.*}} into tensor<?x2x32xf32>
// CHECK:       arith.trunci %{{.*}} : i32 to i8
// CHECK:       tensor.collapse_shape {{.*}} into tensor<?x64xi8>
// CHECK:       tensor.extract_slice {{.*}} to tensor<?x40xi8>
// CHECK-DAG:   builtin.unrealized_conversion_cast %{{.*}} : tensor<?x40xi8> to tensor<?x40xf8E4M3FN>
// CHECK-DAG:   builtin.unrealized_conversion_cast %{{.*}} : tensor<?x2xi8> to tensor<?x2xf8E8M0FNU>
func.func @mxfp8(%x: tensor<?x40xf32>) -> (tensor<?x40xf8E4M3FN>, tensor<?x2xf8E8M0FNU>) {
  %c, %s = comfyquant.quantize %x <mxfp8_block, block = 32> : tensor<?x40xf32> -> tensor<?x40xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
  return %c, %s : tensor<?x40xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
}

// -----

// nvfp4_block with a dynamic global scale g = T(amax(|x|)/2688), returned
// as the third result.
// CHECK-LABEL: func.func @nvfp4
// CHECK:       %[[G:.*]] = arith.divf %{{.*}}, %cst{{.*}} : f32
// CHECK:       %[[GT:.*]] = arith.truncf %[[G]] : f32 to bf16
// CHECK:       %[[GF:.*]] = arith.extf %[[GT]] : bf16 to f32
// CHECK:       tensor.from_elements %[[GF]] : tensor<f32>
func.func @nvfp4(%x: tensor<?x32xbf16>) -> (tensor<?x32xf4E2M1FN>, tensor<?x2xf8E4M3FN>, tensor<f32>) {
  %c, %s, %g = comfyquant.quantize %x <nvfp4_block, block = 16> : tensor<?x32xbf16> -> tensor<?x32xf4E2M1FN>, tensor<?x2xf8E4M3FN>, tensor<f32>
  return %c, %s, %g : tensor<?x32xf4E2M1FN>, tensor<?x2xf8E4M3FN>, tensor<f32>
}
