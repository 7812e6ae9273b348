// RUN: comfyquant-opt %s -canonicalize -split-input-file | FileCheck %s

// The dialect has no folders or canonicalization patterns yet. This checks
// that -canonicalize leaves the checkpoint level untouched (tensors, modules
// and attention preferences are not erased, reordered or rewritten, even when
// nothing uses them) and that the computation ops are only subject to the
// generic rules their traits allow (Pure: dead ones are erased).

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "model.safetensors" size 4096 hash "fnv1a64:0123456789abcdef" {
// CHECK-NEXT:    comfyquant.tensor @unused : tensor<64xbf16> at 0
// CHECK-NEXT:    comfyquant.tensor @proj.weight : tensor<32x128xi8> at 128 in "model-00002-of-00002.safetensors"
// CHECK-NEXT:    comfyquant.tensor @proj.weight_scale : tensor<32x1xf32> at 4224
// CHECK-NEXT:    comfyquant.tensor @emb.weight : tensor<64x32xf8E4M3FN> at 4352
// CHECK-NEXT:  }
// CHECK-NEXT:  comfyquant.attention "blocks.0.attn" config "{\22attention\22: \22comfy_kitchen_int8\22}"
// CHECK-NEXT:  comfyquant.linear @proj format <int8_tensorwise, granularity = row>[32, 128] rotation <64> options <full_precision_matrix_mult = true> tensors {weight = @ckpt::@proj.weight, weight_scale = @ckpt::@proj.weight_scale}
// CHECK-NEXT:  comfyquant.embedding @emb format <float8_e4m3fn, granularity = tensor>[64, 32] tensors {weight = @ckpt::@emb.weight}
// CHECK-NEXT:  }
comfyquant.checkpoint @ckpt path "model.safetensors" size 4096 hash "fnv1a64:0123456789abcdef" {
  comfyquant.tensor @unused : tensor<64xbf16> at 0
  comfyquant.tensor @proj.weight : tensor<32x128xi8> at 128 in "model-00002-of-00002.safetensors"
  comfyquant.tensor @proj.weight_scale : tensor<32x1xf32> at 4224
  comfyquant.tensor @emb.weight : tensor<64x32xf8E4M3FN> at 4352
}
comfyquant.attention "blocks.0.attn" config "{\"attention\": \"comfy_kitchen_int8\"}"
comfyquant.linear @proj format <int8_tensorwise, granularity = row> [32, 128] rotation <64>
    options <full_precision_matrix_mult = true>
    tensors {weight = @ckpt::@proj.weight, weight_scale = @ckpt::@proj.weight_scale}
comfyquant.embedding @emb format <float8_e4m3fn, granularity = tensor> [64, 32]
    tensors {weight = @ckpt::@emb.weight}

// -----

comfyquant.checkpoint @ckpt path "model.safetensors" size 4096 hash "h" {
  comfyquant.tensor @w : tensor<32x128xi8> at 0
  comfyquant.tensor @s : tensor<32x1xf32> at 4096
}

// Used computation ops are kept as they are; dead ones (all are Pure) go.
// CHECK-LABEL: func.func @int8_convrot(
// CHECK-SAME:    %[[X:.*]]: tensor<8x128xbf16>)
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@w : tensor<32x128xi8>
// CHECK-NEXT:    %[[S:.*]] = comfyquant.weight @ckpt::@s : tensor<32x1xf32>
// CHECK-NEXT:    %[[XR:.*]] = comfyquant.rotate %[[X]] <64> : tensor<8x128xbf16>
// CHECK-NEXT:    %[[XQ:.*]], %[[XS:.*]] = comfyquant.quantize %[[XR]] <int8_row> : tensor<8x128xbf16> -> tensor<8x128xi8>, tensor<8x1xf32>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[XQ]], %[[W]] : tensor<8x128xi8>, tensor<32x128xi8> -> tensor<8x32xi32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]] row_scale %[[XS]] : tensor<8x1xf32> col_scale %[[S]] : tensor<32x1xf32> : tensor<8x32xi32> -> tensor<8x32xbf16>
// CHECK-NEXT:    return %[[Y]] : tensor<8x32xbf16>
// CHECK-NEXT:  }
func.func @int8_convrot(%x: tensor<8x128xbf16>) -> tensor<8x32xbf16> {
  %w = comfyquant.weight @ckpt::@w : tensor<32x128xi8>
  %s = comfyquant.weight @ckpt::@s : tensor<32x1xf32>
  %dead = comfyquant.dequantize %w, %s roles ["weight_scale"] format <int8_tensorwise, granularity = row>
            rotation <64> : (tensor<32x128xi8>, tensor<32x1xf32>) -> tensor<32x128xbf16>
  %xr = comfyquant.rotate %x <64> : tensor<8x128xbf16>
  %xq, %xs = comfyquant.quantize %xr <int8_row> : tensor<8x128xbf16> -> tensor<8x128xi8>, tensor<8x1xf32>
  %acc = comfyquant.qmatmul %xq, %w : tensor<8x128xi8>, tensor<32x128xi8> -> tensor<8x32xi32>
  %y = comfyquant.epilogue %acc row_scale %xs : tensor<8x1xf32> col_scale %s : tensor<32x1xf32> : tensor<8x32xi32> -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// CHECK-LABEL: func.func @all_dead(
// CHECK-NEXT:    return
// CHECK-NEXT:  }
func.func @all_dead(%x: tensor<8x128xbf16>) {
  %w = comfyquant.weight @ckpt::@w : tensor<32x128xi8>
  %xr = comfyquant.rotate %x <64> : tensor<8x128xbf16>
  %xq, %xs = comfyquant.quantize %xr <int8_row> : tensor<8x128xbf16> -> tensor<8x128xi8>, tensor<8x1xf32>
  %acc = comfyquant.qmatmul %xq, %w : tensor<8x128xi8>, tensor<32x128xi8> -> tensor<8x32xi32>
  return
}
