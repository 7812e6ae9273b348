// RUN: comfyquant-opt %s -split-input-file --comfyquant-fuse-rotate-quantize | FileCheck %s

// A rotation used only by a per-row integer quantization becomes the
// quantization's rotation: the rotated activation never reaches memory.

// CHECK-LABEL: func.func @int8_row(
// CHECK-SAME:    %[[X:.*]]: tensor<?x256xbf16>, %[[W:.*]]: tensor<32x256xi8>)
// CHECK-NOT:     comfyquant.rotate
// CHECK:         %[[Q:.*]], %[[S:.*]] = comfyquant.quantize %[[X]] <int8_row> rotation <256> : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[W]]
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] row_scale %[[S]]
func.func @int8_row(%x: tensor<?x256xbf16>, %w: tensor<32x256xi8>) -> tensor<?x32xbf16> {
  %xr = comfyquant.rotate %x <256> : tensor<?x256xbf16>
  %q, %s = comfyquant.quantize %xr <int8_row> : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
  %acc = comfyquant.qmatmul %q, %w : tensor<?x256xi8>, tensor<32x256xi8> -> tensor<?x32xi32>
  %y = comfyquant.epilogue %acc row_scale %s : tensor<?x1xf32> : tensor<?x32xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// int4 activations (convrot_w4a4, linear_dtype int4), groups 16 and 64.
// CHECK-LABEL: func.func @int4_row(
// CHECK-SAME:    %[[X:.*]]: tensor<4x128xf16>)
// CHECK-NOT:     comfyquant.rotate
// CHECK:         comfyquant.quantize %[[X]] <int4_row> rotation <16> : tensor<4x128xf16> -> tensor<4x128xi4>, tensor<4x1xf32>
// CHECK:         comfyquant.quantize %[[X]] <int4_row> rotation <64> : tensor<4x128xf16> -> tensor<4x128xi4>, tensor<4x1xf32>
func.func @int4_row(%x: tensor<4x128xf16>) -> (tensor<4x128xi4>, tensor<4x128xi4>) {
  %xr = comfyquant.rotate %x <16> : tensor<4x128xf16>
  %q, %s = comfyquant.quantize %xr <int4_row> : tensor<4x128xf16> -> tensor<4x128xi4>, tensor<4x1xf32>
  %xr2 = comfyquant.rotate %x <64> : tensor<4x128xf16>
  %q2, %s2 = comfyquant.quantize %xr2 <int4_row> : tensor<4x128xf16> -> tensor<4x128xi4>, tensor<4x1xf32>
  return %q, %q2 : tensor<4x128xi4>, tensor<4x128xi4>
}

// -----

// The rotated activation has another use: it must exist anyway, so the
// quantization keeps reading it (no second rotation).
// CHECK-LABEL: func.func @shared_rotation(
// CHECK-SAME:    %[[X:.*]]: tensor<?x64xbf16>)
// CHECK:         %[[XR:.*]] = comfyquant.rotate %[[X]] <64>
// CHECK-NEXT:    comfyquant.quantize %[[XR]] <int8_row> : tensor<?x64xbf16>
// CHECK-NEXT:    return %[[XR]],
func.func @shared_rotation(%x: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xi8>) {
  %xr = comfyquant.rotate %x <64> : tensor<?x64xbf16>
  %q, %s = comfyquant.quantize %xr <int8_row> : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xf32>
  return %xr, %q : tensor<?x64xbf16>, tensor<?x64xi8>
}

// -----

// Only the per-row integer schemes take a rotation.
// CHECK-LABEL: func.func @fp8_not_fused(
// CHECK:         %[[XR:.*]] = comfyquant.rotate
// CHECK-NEXT:    comfyquant.quantize %[[XR]] <fp8_static, type = f8E4M3FN> : tensor<4x64xbf16>
func.func @fp8_not_fused(%x: tensor<4x64xbf16>) -> tensor<4x64xf8E4M3FN> {
  %xr = comfyquant.rotate %x <64> : tensor<4x64xbf16>
  %q, %s = comfyquant.quantize %xr <fp8_static, type = f8E4M3FN> : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>, tensor<f32>
  return %q : tensor<4x64xf8E4M3FN>
}

// -----

// A quantization that already rotates keeps its input rotation op (two
// rotations are not one); an unrotated quantization is left alone.
// CHECK-LABEL: func.func @already_fused(
// CHECK-SAME:    %[[X:.*]]: tensor<4x64xbf16>)
// CHECK:         %[[XR:.*]] = comfyquant.rotate %[[X]] <16>
// CHECK-NEXT:    comfyquant.quantize %[[XR]] <int8_row> rotation <64>
// CHECK-NEXT:    comfyquant.quantize %[[X]] <int8_row> : tensor<4x64xbf16>
func.func @already_fused(%x: tensor<4x64xbf16>) -> (tensor<4x64xi8>, tensor<4x64xi8>) {
  %xr = comfyquant.rotate %x <16> : tensor<4x64xbf16>
  %q, %s = comfyquant.quantize %xr <int8_row> rotation <64> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4x1xf32>
  %q2, %s2 = comfyquant.quantize %x <int8_row> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4x1xf32>
  return %q, %q2 : tensor<4x64xi8>, tensor<4x64xi8>
}
