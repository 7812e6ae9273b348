// RUN: comfyquant-opt %s -split-input-file --comfyquant-fuse-gemm-epilogue | FileCheck %s

// A quantized matmul whose accumulator only feeds its epilogue becomes one
// comfyquant.qgemm: no [M, N] i32 / f32 matrix reaches memory.

// Integer GEMM with row and column scales and a bias.
// CHECK-LABEL: func.func @int8(
// CHECK-SAME:    %[[Q:.*]]: tensor<?x256xi8>, %[[S:.*]]: tensor<?x1xf32>, %[[W:.*]]: tensor<32x256xi8>, %[[WS:.*]]: tensor<32x1xf32>, %[[B:.*]]: tensor<32xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.qgemm %[[Q]], %[[W]] row_scale %[[S]] : tensor<?x1xf32> col_scale %[[WS]] : tensor<32x1xf32> bias %[[B]] : tensor<32xbf16> : tensor<?x256xi8>, tensor<32x256xi8> -> tensor<?x32xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @int8(%q: tensor<?x256xi8>, %s: tensor<?x1xf32>, %w: tensor<32x256xi8>, %ws: tensor<32x1xf32>, %b: tensor<32xbf16>) -> tensor<?x32xbf16> {
  %acc = comfyquant.qmatmul %q, %w : tensor<?x256xi8>, tensor<32x256xi8> -> tensor<?x32xi32>
  %y = comfyquant.epilogue %acc row_scale %s : tensor<?x1xf32> col_scale %ws : tensor<32x1xf32> bias %b : tensor<32xbf16> : tensor<?x32xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// Block-scaled NVFP4 GEMM: the block scales move to the fused op, the
// alpha scalar stays a column scale.
// CHECK-LABEL: func.func @nvfp4(
// CHECK-SAME:    %[[A:.*]]: tensor<?x80xf4E2M1FN>, %[[AS:.*]]: tensor<?x5xf8E4M3FN>, %[[B:.*]]: tensor<48x80xf4E2M1FN>, %[[BS:.*]]: tensor<48x5xf8E4M3FN>, %[[ALPHA:.*]]: tensor<f32>)
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.qgemm %[[A]], %[[B]] block 16 scales(%[[AS]], %[[BS]] : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>) col_scale %[[ALPHA]] : tensor<f32> : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xf16>
// CHECK-NEXT:    return %[[Y]]
func.func @nvfp4(%a: tensor<?x80xf4E2M1FN>, %as: tensor<?x5xf8E4M3FN>, %b: tensor<48x80xf4E2M1FN>, %bs: tensor<48x5xf8E4M3FN>, %alpha: tensor<f32>) -> tensor<?x48xf16> {
  %acc = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>) : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xf32>
  %y = comfyquant.epilogue %acc col_scale %alpha : tensor<f32> : tensor<?x48xf32> -> tensor<?x48xf16>
  return %y : tensor<?x48xf16>
}

// -----

// MXFP8 (no scales in the epilogue) and a full-precision float GEMM with a
// bias.
// CHECK-LABEL: func.func @float_paths(
// CHECK:         comfyquant.qgemm %{{.*}}, %{{.*}} block 32 scales(%{{.*}}, %{{.*}} : tensor<4x3xf8E8M0FNU>, tensor<64x3xf8E8M0FNU>) : tensor<4x96xf8E4M3FN>, tensor<64x96xf8E4M3FN> -> tensor<4x64xbf16>
// CHECK-NEXT:    comfyquant.qgemm %{{.*}}, %{{.*}} bias %{{.*}} : tensor<64xf32> : tensor<4x96xf32>, tensor<64x96xf32> -> tensor<4x64xf32>
// CHECK-NOT:     comfyquant.qmatmul
// CHECK-NOT:     comfyquant.epilogue
func.func @float_paths(%a: tensor<4x96xf8E4M3FN>, %as: tensor<4x3xf8E8M0FNU>, %b: tensor<64x96xf8E4M3FN>, %bs: tensor<64x3xf8E8M0FNU>,
                       %x: tensor<4x96xf32>, %w: tensor<64x96xf32>, %bias: tensor<64xf32>) -> (tensor<4x64xbf16>, tensor<4x64xf32>) {
  %acc = comfyquant.qmatmul %a, %b block 32 scales(%as, %bs : tensor<4x3xf8E8M0FNU>, tensor<64x3xf8E8M0FNU>) : tensor<4x96xf8E4M3FN>, tensor<64x96xf8E4M3FN> -> tensor<4x64xf32>
  %y = comfyquant.epilogue %acc : tensor<4x64xf32> -> tensor<4x64xbf16>
  %acc2 = comfyquant.qmatmul %x, %w : tensor<4x96xf32>, tensor<64x96xf32> -> tensor<4x64xf32>
  %y2 = comfyquant.epilogue %acc2 bias %bias : tensor<64xf32> : tensor<4x64xf32> -> tensor<4x64xf32>
  return %y, %y2 : tensor<4x64xbf16>, tensor<4x64xf32>
}

// -----

// The accumulator is also returned: it must be materialised, nothing fuses.
// CHECK-LABEL: func.func @acc_escapes(
// CHECK:         %[[ACC:.*]] = comfyquant.qmatmul
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]]
// CHECK-NEXT:    return %[[ACC]], %[[Y]]
func.func @acc_escapes(%q: tensor<4x64xi8>, %w: tensor<16x64xi8>) -> (tensor<4x16xi32>, tensor<4x16xf32>) {
  %acc = comfyquant.qmatmul %q, %w : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xi32>
  %y = comfyquant.epilogue %acc : tensor<4x16xi32> -> tensor<4x16xf32>
  return %acc, %y : tensor<4x16xi32>, tensor<4x16xf32>
}

// -----

// An epilogue of an accumulator from elsewhere stays; discardable attributes
// of the fused pair survive on the qgemm.
// CHECK-LABEL: func.func @not_a_matmul(
// CHECK-SAME:    %[[ACC:.*]]: tensor<4x16xi32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] : tensor<4x16xi32> -> tensor<4x16xf32>
// CHECK-NEXT:    comfyquant.qgemm %{{.*}}, %{{.*}} {note = "epilogue", tile = 4 : i64} : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xf16>
func.func @not_a_matmul(%acc: tensor<4x16xi32>, %q: tensor<4x64xi8>, %w: tensor<16x64xi8>) -> (tensor<4x16xf32>, tensor<4x16xf16>) {
  %y = comfyquant.epilogue %acc : tensor<4x16xi32> -> tensor<4x16xf32>
  %a2 = comfyquant.qmatmul %q, %w {tile = 4} : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xi32>
  %y2 = comfyquant.epilogue %a2 {note = "epilogue"} : tensor<4x16xi32> -> tensor<4x16xf16>
  return %y, %y2 : tensor<4x16xf32>, tensor<4x16xf16>
}
