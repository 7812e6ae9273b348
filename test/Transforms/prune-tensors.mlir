// RUN: comfyquant-opt %s -split-input-file --comfyquant-prune-tensors | FileCheck %s

// Tensors bound by module ops stay; everything else in the checkpoint
// (unquantized weights, norms, other layers' tensors) is dropped. The
// checkpoint, the modules and the attention preferences are left as they are.

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "model.safetensors" size 66316 hash "fnv1a64:a3955fdcaac61613" {
// CHECK-NEXT:    comfyquant.tensor @proj.bias : tensor<64xbf16> at 4340
// CHECK-NEXT:    comfyquant.tensor @proj.weight : tensor<64x64xi8> at 18427
// CHECK-NEXT:    comfyquant.tensor @proj.weight_scale : tensor<64x1xf32> at 3240
// CHECK-NEXT:    comfyquant.tensor @qkv.weight : tensor<192x64xf8E4M3FN> at 22550
// CHECK-NEXT:    comfyquant.tensor @qkv.weight_scale : tensor<f32> at 3500
// CHECK-NEXT:  }
// CHECK-NEXT:  comfyquant.attention "blocks.0.attn" config
// CHECK-NEXT:  comfyquant.linear @proj format <int8_tensorwise, granularity = row>[64, 64] rotation <64> tensors {bias = @ckpt::@proj.bias, weight = @ckpt::@proj.weight, weight_scale = @ckpt::@proj.weight_scale}
// CHECK-NEXT:  comfyquant.linear @qkv format <float8_e4m3fn, granularity = tensor>[192, 64] tensors {weight = @ckpt::@qkv.weight, weight_scale = @ckpt::@qkv.weight_scale}
// CHECK-NEXT:  }
comfyquant.checkpoint @ckpt path "model.safetensors" size 66316 hash "fnv1a64:a3955fdcaac61613" {
  comfyquant.tensor @norm.key_norm.scale : tensor<64xbf16> at 4084
  comfyquant.tensor @proj.bias : tensor<64xbf16> at 4340
  comfyquant.tensor @proj.weight : tensor<64x64xi8> at 18427
  comfyquant.tensor @proj.weight_scale : tensor<64x1xf32> at 3240
  comfyquant.tensor @qkv.bias : tensor<192xbf16> at 4468
  comfyquant.tensor @qkv.input_scale : tensor<f32> at 3496
  comfyquant.tensor @qkv.weight : tensor<192x64xf8E4M3FN> at 22550
  comfyquant.tensor @qkv.weight_scale : tensor<f32> at 3500
  comfyquant.tensor @img_mod.lin.weight : tensor<96x64xbf16> at 5684
}
comfyquant.attention "blocks.0.attn" config "{\"attention\": \"comfy_kitchen_int8\"}"
comfyquant.linear @proj format <int8_tensorwise, granularity = row> [64, 64] rotation <64>
    tensors {bias = @ckpt::@proj.bias, weight = @ckpt::@proj.weight, weight_scale = @ckpt::@proj.weight_scale}
// @qkv was selected without its optional bias and input_scale: they go too.
comfyquant.linear @qkv format <float8_e4m3fn, granularity = tensor> [192, 64]
    tensors {weight = @ckpt::@qkv.weight, weight_scale = @ckpt::@qkv.weight_scale}

// -----

// No module and no use: the checkpoint is emptied but kept (it still
// identifies the file).
// CHECK-LABEL: comfyquant.checkpoint @ckpt path "model.safetensors" size 100 hash "h" {
// CHECK-NEXT:  }
// CHECK-NOT:   comfyquant.tensor
comfyquant.checkpoint @ckpt path "model.safetensors" size 100 hash "h" {
  comfyquant.tensor @a : tensor<4xf32> at 0
  comfyquant.tensor @b : tensor<4xi8> at 16
}

// -----

// comfyquant.weight uses keep tensors too (after decomposition the module ops
// may be gone), including uses nested in regions of function bodies.
// CHECK-LABEL: comfyquant.checkpoint @ckpt
// CHECK-NEXT:    comfyquant.tensor @w : tensor<32x64xi8> at 0
// CHECK-NEXT:    comfyquant.tensor @s : tensor<32x1xf32> at 2048
// CHECK-NEXT:    comfyquant.tensor @b : tensor<32xbf16> at 2176
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @f(
// CHECK:         comfyquant.weight @ckpt::@w : tensor<32x64xi8>
// CHECK:         comfyquant.weight @ckpt::@s : tensor<32x1xf32>
// CHECK:         scf.execute_region
// CHECK:           comfyquant.weight @ckpt::@b : tensor<32xbf16>
comfyquant.checkpoint @ckpt path "model.safetensors" size 4096 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
  comfyquant.tensor @unused : tensor<32x64xi8> at 1024
  comfyquant.tensor @s : tensor<32x1xf32> at 2048
  comfyquant.tensor @b : tensor<32xbf16> at 2176
}
func.func @f(%x: tensor<4x64xbf16>) -> tensor<4x32xbf16> {
  %w = comfyquant.weight @ckpt::@w : tensor<32x64xi8>
  %s = comfyquant.weight @ckpt::@s : tensor<32x1xf32>
  %xq, %xs = comfyquant.quantize %x <int8_row> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4x1xf32>
  %acc = comfyquant.qmatmul %xq, %w : tensor<4x64xi8>, tensor<32x64xi8> -> tensor<4x32xi32>
  %y = scf.execute_region -> tensor<4x32xbf16> {
    %b = comfyquant.weight @ckpt::@b : tensor<32xbf16>
    %r = comfyquant.epilogue %acc row_scale %xs : tensor<4x1xf32> col_scale %s : tensor<32x1xf32> bias %b : tensor<32xbf16> : tensor<4x32xi32> -> tensor<4x32xbf16>
    scf.yield %r : tensor<4x32xbf16>
  }
  return %y : tensor<4x32xbf16>
}

// -----

// References resolve through their checkpoint: a tensor of the same name in
// another checkpoint is not kept by accident. Shards are preserved.
// CHECK-LABEL: comfyquant.checkpoint @a path "a.safetensors.index.json"
// CHECK-NEXT:    comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0 in "a-00001-of-00002.safetensors"
// CHECK-NEXT:    comfyquant.tensor @s : tensor<f32> at 8 in "a-00002-of-00002.safetensors"
// CHECK-NEXT:  }
// CHECK-LABEL: comfyquant.checkpoint @b path "b.safetensors"
// CHECK-NEXT:    comfyquant.tensor @emb : tensor<64x32xf8E4M3FN> at 64
// CHECK-NEXT:  }
// CHECK:       comfyquant.linear @l
// CHECK:       comfyquant.embedding @e
comfyquant.checkpoint @a path "a.safetensors.index.json" size 8192 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0 in "a-00001-of-00002.safetensors"
  comfyquant.tensor @s : tensor<f32> at 8 in "a-00002-of-00002.safetensors"
  comfyquant.tensor @emb : tensor<64x32xf8E4M3FN> at 2048 in "a-00001-of-00002.safetensors"
}
comfyquant.checkpoint @b path "b.safetensors" size 8192 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 2048
  comfyquant.tensor @emb : tensor<64x32xf8E4M3FN> at 64
}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @a::@w, weight_scale = @a::@s}
comfyquant.embedding @e format <float8_e4m3fn, granularity = tensor> [64, 32]
    tensors {weight = @b::@emb}

// -----

// MoE and embedding bindings, and a nested module with its own checkpoint.
// CHECK-LABEL: comfyquant.checkpoint @ckpt
// CHECK-NEXT:    comfyquant.tensor @experts.weight : tensor<2x16x192xi8> at 0
// CHECK-NEXT:    comfyquant.tensor @experts.weight_s_rel : tensor<2x16x16xf8E4M3FN> at 6144
// CHECK-NEXT:    comfyquant.tensor @experts.weight_s_channel : tensor<2x16xf32> at 6656
// CHECK-NEXT:  }
// CHECK:       module @inner {
// CHECK-NEXT:    comfyquant.checkpoint @ckpt
// CHECK-NEXT:      comfyquant.tensor @tok.weight : tensor<48x128xi8> at 0
// CHECK-NEXT:      comfyquant.tensor @tok.weight_scale : tensor<48x1xf32> at 6144
// CHECK-NEXT:    }
comfyquant.checkpoint @ckpt path "model.safetensors" size 8192 hash "h" {
  comfyquant.tensor @experts.weight : tensor<2x16x192xi8> at 0
  comfyquant.tensor @experts.weight_s_rel : tensor<2x16x16xf8E4M3FN> at 6144
  comfyquant.tensor @experts.weight_s_channel : tensor<2x16xf32> at 6656
  comfyquant.tensor @tok.weight : tensor<48x128xi8> at 6784
}
comfyquant.moe @experts format <w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [2 x 16, 256]
    rotation <256>
    tensors {weight = @ckpt::@experts.weight, weight_s_channel = @ckpt::@experts.weight_s_channel,
             weight_s_rel = @ckpt::@experts.weight_s_rel}
module @inner {
  comfyquant.checkpoint @ckpt path "te.safetensors" size 8192 hash "h" {
    comfyquant.tensor @tok.weight : tensor<48x128xi8> at 0
    comfyquant.tensor @tok.weight_scale : tensor<48x1xf32> at 6144
    comfyquant.tensor @unused : tensor<4xf32> at 6400
  }
  comfyquant.embedding @tok format <int8_tensorwise, granularity = row> [48, 128] rotation <64>
      tensors {weight = @ckpt::@tok.weight, weight_scale = @ckpt::@tok.weight_scale}
}
