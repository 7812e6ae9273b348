// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg -split-input-file | FileCheck %s

// unpack: signed low-first nibbles (convrot_w4a4) -> sign-extended i8
// operand, indexed in the flat storage (row n at n * rowBytes).
// CHECK-LABEL: func.func @unpack_w4a4
// CHECK:       %[[FLAT:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1]] : tensor<8x16xi8> into tensor<128xi8>
// CHECK:       linalg.generic {{.*}} outs(%{{.*}} : tensor<8x32xi8>)
// CHECK:         %[[N:.*]] = linalg.index 0 : index
// CHECK:         %[[K:.*]] = linalg.index 1 : index
// CHECK:         arith.divui %[[K]], %c2 : index
// CHECK:         tensor.extract %[[FLAT]]
// CHECK:         arith.select
// CHECK:         arith.subi %{{.*}}, %c16_i32 : i32
// CHECK:         arith.trunci %{{.*}} : i32 to i8
func.func @unpack_w4a4(%w: tensor<8x16xi8>) -> tensor<8x32xi8> {
  %b = comfyquant.unpack %w roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<8x16xi8>) -> tensor<8x32xi8>
  return %b : tensor<8x32xi8>
}

// -----

// unpack through the W4A8 int8 grid: g8 = clamp(RNE(level · s_rel), ±127),
// levels from the codebook.
// CHECK-LABEL: func.func @unpack_w4a8
// CHECK:         tensor.extract %{{.*}} : tensor<16xf32>
// CHECK:         %[[R:.*]] = math.roundeven %{{.*}} : f32
// CHECK-NEXT:    %[[L:.*]] = arith.maxnumf %[[R]], %{{.*}} : f32
// CHECK-NEXT:    %[[H:.*]] = arith.minnumf %[[L]], %{{.*}} : f32
// CHECK-NEXT:    arith.fptosi %[[H]] : f32 to i8
func.func @unpack_w4a8(%w: tensor<8x16xi8>, %rel: tensor<8x2xf8E4M3FN>, %cb: tensor<16xf32>) -> tensor<8x32xi8> {
  %b = comfyquant.unpack %w, %rel, %cb roles ["weight_s_rel", "weight_codebook"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> : (tensor<8x16xi8>, tensor<8x2xf8E4M3FN>, tensor<16xf32>) -> tensor<8x32xi8>
  return %b : tensor<8x32xi8>
}

// -----

// unswizzle: result[r][c] = flat[offset(r, c)] of the cuBLAS 128x4 layout.
// CHECK-LABEL: func.func @unswizzle
// CHECK:       linalg.generic
// CHECK:         arith.divui %{{.*}}, %c128 : index
// CHECK:         arith.muli %{{.*}}, %c512 : index
// CHECK:         arith.remui %{{.*}}, %c32 : index
// CHECK:         tensor.extract
func.func @unswizzle(%s: tensor<128x8xf8E4M3FN>) -> tensor<48x5xf8E4M3FN> {
  %u = comfyquant.unswizzle %s : tensor<128x8xf8E4M3FN> -> tensor<48x5xf8E4M3FN>
  return %u : tensor<48x5xf8E4M3FN>
}

// -----

// dequantize with ConvRot: operand · row scale in f32, the butterfly, one
// rounding to the result type.
// CHECK-LABEL: func.func @dequantize_int8_rot
// CHECK:       linalg.generic {{.*}} outs(%{{.*}} : tensor<8x64xf32>)
// CHECK:         arith.sitofp
// CHECK:         arith.mulf
// CHECK:       linalg.generic {{.*}} outs(%{{.*}} : tensor<8x64xf32>)
// CHECK:         tensor.extract %{{.*}} : tensor<8x64xf32>
// CHECK:       linalg.generic {{.*}} outs(%{{.*}} : tensor<8x64xf32>)
// CHECK:         tensor.extract %{{.*}} : tensor<8x64xf32>
// CHECK:       linalg.generic {{.*}} outs(%{{.*}} : tensor<8x1x4x16xbf16>)
// CHECK:         linalg.index 2
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
func.func @dequantize_int8_rot(%w: tensor<8x64xi8>, %s: tensor<8x1xf32>) -> tensor<8x64xbf16> {
  %d = comfyquant.dequantize %w, %s roles ["weight_scale"] format <int8_tensorwise, granularity = row> rotation <64> : (tensor<8x64xi8>, tensor<8x1xf32>) -> tensor<8x64xbf16>
  return %d : tensor<8x64xbf16>
}

// -----

// lookup: only the rows named by the indices, clamped into the table.
// CHECK-LABEL: func.func @lookup
// CHECK:       linalg.generic {{.*}} ins(%arg1 : tensor<?xi64>)
// CHECK:         arith.index_cast %{{.*}} : i64 to index
// CHECK:         arith.minsi %{{.*}}, %c47 : index
// CHECK:         arith.maxsi
// CHECK:       return %{{.*}} : tensor<?x32xf32>
func.func @lookup(%w: tensor<48x32xf8E4M3FN>, %idx: tensor<?xi64>, %s: tensor<f32>) -> tensor<?x32xf32> {
  %y = comfyquant.lookup %w[%idx], %s roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor> : (tensor<48x32xf8E4M3FN>, tensor<?xi64>, tensor<f32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
