// RUN: comfyquant-opt %s -split-input-file -verify-diagnostics

// Every verifier rule of the comfyquant dialect, one case per split. Format
// rules come from the runtime format registry (docs/Formats.md §2.2, §3, §7);
// messages name the rule that was broken.

//===----------------------------------------------------------------------===//
// #comfyquant.format parameters (verifyFormatParams)
//===----------------------------------------------------------------------===//

// NVFP4 packs the even column in the high nibble (docs/Formats.md §4.0).
// expected-error @+1 {{nvfp4 packs nibbles high_first, not low_first}}
func.func private @f() attributes {fmt = #comfyquant.format<nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = low_first>}

// -----

// expected-error @+1 {{convrot_w4a4 packs nibbles low_first, not none}}
func.func private @f() attributes {fmt = #comfyquant.format<convrot_w4a4, granularity = row>}

// -----

// expected-error @+1 {{asym_w4a8_int8 packs nibbles low_first, not high_first}}
func.func private @f() attributes {fmt = #comfyquant.format<asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = high_first>}

// -----

// expected-error @+1 {{w6a8_int8 packs nibbles low_first, not none}}
func.func private @f() attributes {fmt = #comfyquant.format<w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN>}

// -----

// 8-bit formats have no nibbles.
// expected-error @+1 {{int8_tensorwise packs nibbles none, not low_first}}
func.func private @f() attributes {fmt = #comfyquant.format<int8_tensorwise, granularity = tensor, nibbles = low_first>}

// -----

// expected-error @+1 {{nvfp4 block size is 16, not 32}}
func.func private @f() attributes {fmt = #comfyquant.format<nvfp4, granularity = block, group = 32, scale = f8E4M3FN, nibbles = high_first>}

// -----

// expected-error @+1 {{mxfp8 block size is 32, not 16}}
func.func private @f() attributes {fmt = #comfyquant.format<mxfp8, granularity = block, group = 16, scale = f8E8M0FNU>}

// -----

// expected-error @+1 {{nvfp4 block scales are F8_E4M3}}
func.func private @f() attributes {fmt = #comfyquant.format<nvfp4, granularity = block, group = 16, scale = f8E8M0FNU, nibbles = high_first>}

// -----

// The block scale type is not optional.
// expected-error @+1 {{nvfp4 block scales are F8_E4M3}}
func.func private @f() attributes {fmt = #comfyquant.format<nvfp4, granularity = block, group = 16, nibbles = high_first>}

// -----

// expected-error @+1 {{mxfp8 block scales are F8_E8M0}}
func.func private @f() attributes {fmt = #comfyquant.format<mxfp8, granularity = block, group = 32, scale = f8E4M3FN>}

// -----

// expected-error @+1 {{nvfp4 scales have granularity block, not group}}
func.func private @f() attributes {fmt = #comfyquant.format<nvfp4, granularity = group, group = 16, scale = f8E4M3FN, nibbles = high_first>}

// -----

// expected-error @+1 {{float8_e4m3fn scales have granularity tensor, not row}}
func.func private @f() attributes {fmt = #comfyquant.format<float8_e4m3fn, granularity = row>}

// -----

// int8_tensorwise scales are a scalar or per row, never blocks.
// expected-error @+1 {{int8_tensorwise scales have granularity tensor, not block}}
func.func private @f() attributes {fmt = #comfyquant.format<int8_tensorwise, granularity = block>}

// -----

// expected-error @+1 {{convrot_w4a4 scales have granularity row, not tensor}}
func.func private @f() attributes {fmt = #comfyquant.format<convrot_w4a4, granularity = tensor, nibbles = low_first>}

// -----

// expected-error @+1 {{asym_w4a8_int8 scales have granularity group, not row}}
func.func private @f() attributes {fmt = #comfyquant.format<asym_w4a8_int8, granularity = row, nibbles = low_first>}

// -----

// group_size rules (docs/Formats.md §2.2): G >= 4 ...
// expected-error @+1 {{group_size 2 must be >= 4}}
func.func private @f() attributes {fmt = #comfyquant.format<asym_w4a8_int8, granularity = group, group = 2, scale = f8E4M3FN, nibbles = low_first>}

// -----

// expected-error @+1 {{group_size 0 must be >= 4}}
func.func private @f() attributes {fmt = #comfyquant.format<asym_w4a8_int8, granularity = group, scale = f8E4M3FN, nibbles = low_first>}

// -----

// ... G divides 16 or is a multiple of 16 ...
// expected-error @+1 {{group_size 24 must divide 16 or be a multiple of 16}}
func.func private @f() attributes {fmt = #comfyquant.format<asym_w4a8_int8, granularity = group, group = 24, scale = f8E4M3FN, nibbles = low_first>}

// -----

// expected-error @+1 {{group_size 12 must divide 16 or be a multiple of 16}}
func.func private @f() attributes {fmt = #comfyquant.format<w6a8_int8, granularity = group, group = 12, scale = f8E4M3FN, nibbles = low_first>}

// -----

// ... and w6a8_int8 needs G % 16 == 0.
// expected-error @+1 {{w6a8_int8 group_size 8 must be a multiple of 16}}
func.func private @f() attributes {fmt = #comfyquant.format<w6a8_int8, granularity = group, group = 8, scale = f8E4M3FN, nibbles = low_first>}

// -----

// expected-error @+1 {{float8_e4m3fn takes no group size}}
func.func private @f() attributes {fmt = #comfyquant.format<float8_e4m3fn, granularity = tensor, group = 4>}

// -----

// expected-error @+1 {{int8_tensorwise takes no group size}}
func.func private @f() attributes {fmt = #comfyquant.format<int8_tensorwise, granularity = row, group = 16>}

// -----

// weight_s_rel is E4M3 (or U8 bits of it) or F32.
// expected-error @+1 {{asym_w4a8_int8 group scales (weight_s_rel) are F8_E4M3 or F32}}
func.func private @f() attributes {fmt = #comfyquant.format<asym_w4a8_int8, granularity = group, group = 16, scale = bf16, nibbles = low_first>}

// -----

// expected-error @+1 {{w6a8_int8 group scales (weight_s_rel) are F8_E4M3 or F32}}
func.func private @f() attributes {fmt = #comfyquant.format<w6a8_int8, granularity = group, group = 16, nibbles = low_first>}

// -----

// Tensor / row scales are f32.
// expected-error @+1 {{int8_tensorwise scales are f32}}
func.func private @f() attributes {fmt = #comfyquant.format<int8_tensorwise, granularity = row, scale = bf16>}

// -----

// expected-error @+1 {{float8_e5m2 scales are f32}}
func.func private @f() attributes {fmt = #comfyquant.format<float8_e5m2, granularity = tensor, scale = f8E4M3FN>}

// -----

// expected-error @+1 {{scale type 'index' is not a safetensors element type}}
func.func private @f() attributes {fmt = #comfyquant.format<float8_e4m3fn, granularity = tensor, scale = index>}

// -----

//===----------------------------------------------------------------------===//
// #comfyquant.convrot / #comfyquant.act
//===----------------------------------------------------------------------===//

// expected-error @+1 {{convrot group size 8 must be a power of 4 >= 4}}
func.func private @f() attributes {rot = #comfyquant.convrot<8>}

// -----

// expected-error @+1 {{convrot group size 1 must be a power of 4 >= 4}}
func.func private @f() attributes {rot = #comfyquant.convrot<1>}

// -----

// expected-error @+1 {{convrot group size 0 must be a power of 4 >= 4}}
func.func private @f() attributes {rot = #comfyquant.convrot<0>}

// -----

// expected-error @+1 {{convrot group size -64 must be a power of 4 >= 4}}
func.func private @f() attributes {rot = #comfyquant.convrot<-64>}

// -----

// expected-error @+1 {{fp8_static needs type = f8E4M3FN or f8E5M2 (the weight's)}}
func.func private @f() attributes {act = #comfyquant.act<fp8_static>}

// -----

// expected-error @+1 {{fp8_static needs type = f8E4M3FN or f8E5M2 (the weight's)}}
func.func private @f() attributes {act = #comfyquant.act<fp8_static, type = bf16>}

// -----

// expected-error @+1 {{int8_row has a fixed code type; drop `type`}}
func.func private @f() attributes {act = #comfyquant.act<int8_row, type = i8>}

// -----

// expected-error @+1 {{fp8_static takes block size 0, not 16}}
func.func private @f() attributes {act = #comfyquant.act<fp8_static, type = f8E4M3FN, block = 16>}

// -----

// expected-error @+1 {{mxfp8_block takes block size 32, not 0}}
func.func private @f() attributes {act = #comfyquant.act<mxfp8_block>}

// -----

// expected-error @+1 {{nvfp4_block takes block size 16, not 0}}
func.func private @f() attributes {act = #comfyquant.act<nvfp4_block>}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.checkpoint / comfyquant.tensor
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // Safetensors integers are signless (I*) or unsigned (U*), never signed.
  // expected-error @+1 {{'comfyquant.tensor' op element type 'si8' is not a safetensors dtype}}
  comfyquant.tensor @w : tensor<32x64xsi8> at 0
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // FP4 has no safetensors dtype: NVFP4 codes are stored as U8.
  // expected-error @+1 {{'comfyquant.tensor' op element type 'f4E2M1FN' is not a safetensors dtype}}
  comfyquant.tensor @w : tensor<32x64xf4E2M1FN> at 0
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // expected-error @+1 {{'comfyquant.tensor' op element type 'i4' is not a safetensors dtype}}
  comfyquant.tensor @w : tensor<32x32xi4> at 0
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // BOOL is i1; there is no unsigned bool.
  // expected-error @+1 {{'comfyquant.tensor' op element type 'ui1' is not a safetensors dtype}}
  comfyquant.tensor @w : tensor<4xui1> at 0
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // expected-error @+1 {{'comfyquant.tensor' op element type 'f8E4M3FNUZ' is not a safetensors dtype}}
  comfyquant.tensor @w : tensor<4xf8E4M3FNUZ> at 0
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // expected-error @+1 {{'comfyquant.tensor' op offset must be non-negative}}
  comfyquant.tensor @w : tensor<4xf32> at -8
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // expected-error @+1 {{'comfyquant.tensor' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor}}
  comfyquant.tensor @w : tensor<?x4xf32> at 0
}

// -----

// expected-error @+1 {{'comfyquant.checkpoint' op size must be non-negative}}
comfyquant.checkpoint @c path "m.safetensors" size -1 hash "h" {
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // expected-error @+1 {{'comfyquant.attention' op is not allowed in a checkpoint (only comfyquant.tensor)}}
  comfyquant.attention "blocks.0.attn" config "{\"attention\": \"comfy_kitchen_int8\"}"
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<4xf32> at 0
  // expected-error @+1 {{'comfyquant.checkpoint' op is not allowed in a checkpoint (only comfyquant.tensor)}}
  comfyquant.checkpoint @inner path "n.safetensors" size 0 hash "h" {
  }
}

// -----

// expected-error @+1 {{'comfyquant.tensor' op expects parent op 'comfyquant.checkpoint'}}
comfyquant.tensor @w : tensor<4xf32> at 0

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  // expected-note @+1 {{see existing symbol definition here}}
  comfyquant.tensor @w : tensor<4xf32> at 0
  // expected-error @+1 {{redefinition of symbol named 'w'}}
  comfyquant.tensor @w : tensor<8xf32> at 16
}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.attention (docs/Formats.md §7.3)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'comfyquant.attention' op comfy_attention.config is not valid JSON}}
comfyquant.attention "blocks.0.attn" config "{\"attention\": "

// -----

// expected-error @+1 {{'comfyquant.attention' op comfy_attention.config must be an object or an array of objects, got string}}
comfyquant.attention "blocks.0.attn" config "\"comfy_kitchen_int8\""

// -----

// expected-error @+1 {{'comfyquant.attention' op comfy_attention.config entries must be objects, got}}
comfyquant.attention "blocks.0.attn" config "[{\"attention\": \"comfy_kitchen_sol\"}, \"comfy_kitchen_int8\"]"


// -----

// expected-error @+1 {{'comfyquant.attention' op comfy_kitchen_sol option tau must be a number, got}}
comfyquant.attention "blocks.0.attn" config "{\"attention\": \"comfy_kitchen_sol\", \"tau\": \"high\"}"

// -----

//===----------------------------------------------------------------------===//
// Module ops: attributes and bindings
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op logical shape [0, 64] must be positive}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [0, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
}
// expected-error @+1 {{'comfyquant.embedding' op logical shape [32, -64] must be positive}}
comfyquant.embedding @e format <float8_e4m3fn, granularity = tensor> [32, -64]
    tensors {weight = @c::@w}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.moe' op experts must be positive}}
comfyquant.moe @m format <float8_e4m3fn, granularity = tensor> [0 x 32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.moe' op experts must be positive}}
comfyquant.moe @m format <float8_e4m3fn, granularity = tensor> [-2 x 32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
  // Module ops live next to the checkpoint, not in it.
  // expected-error @+1 {{'comfyquant.linear' op is not allowed in a checkpoint (only comfyquant.tensor)}}
  comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
      tensors {weight = @w, weight_scale = @s}
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// Tensors are reached through their checkpoint: @c::@w, not @w.
// expected-error @+1 {{'comfyquant.linear' op tensor binding 'weight' references @w, which is not a comfyquant.tensor}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
}
// expected-error @+1 {{'comfyquant.linear' op tensor binding 'weight_scale' references @c::@missing, which is not a comfyquant.tensor}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@missing}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
comfyquant.linear @other format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}
// A module is a symbol too, but not a tensor.
// expected-error @+1 {{'comfyquant.linear' op tensor binding 'weight' references @other, which is not a comfyquant.tensor}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @other, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// The checkpoint itself is not a tensor.
// expected-error @+1 {{'comfyquant.linear' op tensor binding 'weight' references @c, which is not a comfyquant.tensor}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op tensor binding 'weight' must be a symbol reference}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = "c.w", weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
  comfyquant.tensor @r : tensor<32x4xf8E4M3FN> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': tensor 'weight_s_rel' is not part of format 'float8_e4m3fn'}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_s_rel = @c::@r, weight_scale = @c::@s}

// -----

// Unknown side tensors are rejected (ComfyUI leaves them as unexpected keys,
// e.g. kitchen's weight_correction, which it cannot load).
comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
  comfyquant.tensor @corr : tensor<16x16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': tensor 'weight_correction' is not part of format 'asym_w4a8_int8'}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256>
    tensors {weight = @c::@w, weight_correction = @c::@corr, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

//===----------------------------------------------------------------------===//
// Missing required tensors
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
}
// weight_scale is effectively required for fp8 Linears (docs/Formats.md §2.2).
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': missing required tensor weight_scale scalar (MoE: scalar or [E])}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c::@w}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': missing required tensor weight [N, K]}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xui8> at 0
  comfyquant.tensor @s : tensor<128x8xf8E4M3FN> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': missing required tensor weight_scale_2 scalar (MoE: scalar or [E])}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x96xf8E4M3FN> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'mxfp8': missing required tensor weight_scale swizzled, roundup(Np32,128) x roundup(Kp32/32,4) entries}}
comfyquant.linear @l format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {weight = @c::@w}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': missing required tensor weight_scale scalar or [N, 1] (ConvRot: [N, 1])}}
comfyquant.linear @l format <int8_tensorwise, granularity = tensor> [32, 64]
    tensors {weight = @c::@w}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'convrot_w4a4': missing required tensor weight_scale [N]}}
comfyquant.linear @l format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': missing required tensor weight_s_rel [N, K/G]}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x96xi8> at 0
  comfyquant.tensor @r : tensor<16x4xf8E4M3FN> at 0
}
// s_channel is required by kitchen.
// expected-error @+1 {{'comfyquant.linear' op format 'w6a8_int8': missing required tensor weight_s_channel [N]}}
comfyquant.linear @l format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 128]
    rotation <64> tensors {weight = @c::@w, weight_s_rel = @c::@r}

// -----

//===----------------------------------------------------------------------===//
// Dtype rules per format
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E5M2> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': weight must be F8_E4M3, got F8_E5M2 [32, 64]}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

// An FP8 weight stored as U8 would be value-converted (mangled) by ComfyUI.
comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xui8> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e5m2': weight must be F8_E5M2, got U8 [32, 64]}}
comfyquant.linear @l format <float8_e5m2, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f8E4M3FN> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': weight_scale must be F32 or F16 or BF16 or F64, got F8_E4M3 []}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
  comfyquant.tensor @is : tensor<i32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': input_scale must be F32 or F16 or BF16 or F64, got I32 []}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {input_scale = @c::@is, weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xi8> at 0
  comfyquant.tensor @s : tensor<128x8xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': weight must be U8, got I8 [48, 40]}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xui8> at 0
  comfyquant.tensor @s : tensor<128x8xf32> at 0
  comfyquant.tensor @s2 : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': weight_scale must be F8_E4M3 or U8, got F32 [128, 8]}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xui8> at 0
  comfyquant.tensor @s : tensor<128x8xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<f32> at 0
  comfyquant.tensor @pqs : tensor<80xi16> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': pre_quant_scale must be F32 or F16 or BF16 or F64, got I16 [80]}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {pre_quant_scale = @c::@pqs, weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x96xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<128x4xf8E4M3FN> at 0
}
// E8M0 block scales: F8_E8M0 or U8 bits.
// expected-error @+1 {{'comfyquant.linear' op format 'mxfp8': weight_scale must be F8_E8M0 or U8, got F8_E4M3 [128, 4]}}
comfyquant.linear @l format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x96xf8E5M2> at 0
  comfyquant.tensor @s : tensor<128x4xui8> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'mxfp8': weight must be F8_E4M3, got F8_E5M2 [64, 96]}}
comfyquant.linear @l format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xui8> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': weight must be I8, got U8 [32, 64]}}
comfyquant.linear @l format <int8_tensorwise, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @s : tensor<16xbf16> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'convrot_w4a4': weight_scale must be F32, got BF16 [16]}}
comfyquant.linear @l format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xbf16> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': weight_s_rel must be F8_E4M3 or U8 or F32, got BF16 [16, 16]}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf16> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': weight_s_channel must be F32, got F16 [16]}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
  comfyquant.tensor @cb : tensor<16xbf16> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': weight_codebook must be F32, got BF16 [16]}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_codebook = @c::@cb, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x96xui8> at 0
  comfyquant.tensor @r : tensor<16x4xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'w6a8_int8': weight must be I8, got U8 [16, 96]}}
comfyquant.linear @l format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 128]
    rotation <64> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
  comfyquant.tensor @s : tensor<32x1xf32> at 0
  comfyquant.tensor @b : tensor<32xi8> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': bias must be F32 or F16 or BF16 or F64, got I8 [32]}}
comfyquant.linear @l format <int8_tensorwise, granularity = row> [32, 64]
    tensors {bias = @c::@b, weight = @c::@w, weight_scale = @c::@s}

// -----

//===----------------------------------------------------------------------===//
// Shape rules per format
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<32xf32> at 0
}
// FP8 scales are per tensor.
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': weight_scale must be a scalar, got F32 [32]}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
  comfyquant.tensor @is : tensor<2xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': input_scale must be a scalar, got F32 [2]}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {input_scale = @c::@is, weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// The logical shape must match the (unpadded) FP8 storage.
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': weight must be storage [N, K] = [32, 48], got F8_E4M3 [32, 64]}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 48]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
  comfyquant.tensor @b : tensor<64xbf16> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': bias must be [N] = [32], got BF16 [64]}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {bias = @c::@b, weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xui8> at 0
  comfyquant.tensor @s : tensor<48x5xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<f32> at 0
}
// NVFP4 block scales must be stored swizzled and padded (docs/Formats.md §4.0);
// a plain [N, K/16] matrix has the wrong entry count.
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': weight_scale must hold the swizzled block scales: 1024 entries (128 x 8), got F8_E4M3 [48, 5]}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<40x12xui8> at 0
  comfyquant.tensor @s : tensor<128x4xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<f32> at 0
}
// NVFP4 storage is padded to 16 in N and K.
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': weight must be storage [Np16, Kp16/2] = [48, 16], got U8 [40, 12]}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [40, 24]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xui8> at 0
  comfyquant.tensor @s : tensor<128x8xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<2xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': weight_scale_2 must be a scalar, got F32 [2]}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xui8> at 0
  comfyquant.tensor @s : tensor<128x8xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<f32> at 0
  comfyquant.tensor @pqs : tensor<64xbf16> at 0
}
// pre_quant_scale is [K] (logical K, not the padded storage).
// expected-error @+1 {{'comfyquant.linear' op format 'nvfp4': pre_quant_scale must be [K] = [80], got BF16 [64]}}
comfyquant.linear @l format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {pre_quant_scale = @c::@pqs, weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<50x40xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<128x4xui8> at 0
}
// MXFP8 storage is padded to 32 in N and K.
// expected-error @+1 {{'comfyquant.linear' op format 'mxfp8': weight must be storage [Np32, Kp32] = [64, 64], got F8_E4M3 [50, 40]}}
comfyquant.linear @l format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [50, 40]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x96xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<64x3xui8> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'mxfp8': weight_scale must hold the swizzled block scales: 512 entries (128 x 4), got U8 [64, 3]}}
comfyquant.linear @l format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x96xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<128x4xui8> at 0
  comfyquant.tensor @is : tensor<64xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'mxfp8': input_scale must be a scalar, got F32 [64]}}
comfyquant.linear @l format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {input_scale = @c::@is, weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x96xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<128x4xui8> at 0
  comfyquant.tensor @pqs : tensor<96xf32> at 0
}
// pre_quant_scale is an NVFP4 parameter only.
// expected-error @+1 {{'comfyquant.linear' op format 'mxfp8': tensor 'pre_quant_scale' is not part of format 'mxfp8'}}
comfyquant.linear @l format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {pre_quant_scale = @c::@pqs, weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
  comfyquant.tensor @s : tensor<32xf32> at 0
}
// A 1-D [N] int8 scale broadcasts along K in ComfyUI's dequant (docs/Formats.md §4.4).
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': weight_scale must be a scalar or per-row [N, 1] = [32, 1] (a 1-D [N] scale broadcasts along K in ComfyUI's dequant), got F32 [32]}}
comfyquant.linear @l format <int8_tensorwise, granularity = row> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
  comfyquant.tensor @s : tensor<16x1xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': weight_scale must be a scalar or per-row [N, 1] = [32, 1], got F32 [16, 1]}}
comfyquant.linear @l format <int8_tensorwise, granularity = row> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x128xi8> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// ConvRot int8 is always per-row.
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': ConvRot int8 weight_scale must be per-row [N, 1], got F32 []}}
comfyquant.linear @l format <int8_tensorwise, granularity = tensor> [32, 128] rotation <64>
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x96xi8> at 0
  comfyquant.tensor @s : tensor<32x1xf32> at 0
}
// K % Gr == 0.
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': K = 96 must be divisible by convrot_groupsize 64}}
comfyquant.linear @l format <int8_tensorwise, granularity = row> [32, 96] rotation <64>
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x64xi8> at 0
  comfyquant.tensor @s : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'convrot_w4a4': K = 128 must be divisible by convrot_groupsize 256}}
comfyquant.linear @l format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 128]
    rotation <256> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x24xi8> at 0
  comfyquant.tensor @s : tensor<16xf32> at 0
}
// W4A4 kernels tile K by 64 (quant_group_size).
// expected-error @+1 {{'comfyquant.linear' op format 'convrot_w4a4': K = 48 must be divisible by 64 (convrot_w4a4 quant_group_size)}}
comfyquant.linear @l format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 48]
    rotation <16> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x256xi8> at 0
  comfyquant.tensor @s : tensor<16xf32> at 0
}
// Two signed int4 per byte: [N, K/2].
// expected-error @+1 {{'comfyquant.linear' op format 'convrot_w4a4': weight must be storage [N, K/2] = [16, 128], got I8 [16, 256]}}
comfyquant.linear @l format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @s : tensor<16x1xf32> at 0
}
// The W4A4 scale is per row, [N] (not [N, 1]).
// expected-error @+1 {{'comfyquant.linear' op format 'convrot_w4a4': weight_scale must be [N] = [16], got F32 [16, 1]}}
comfyquant.linear @l format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x24xi8> at 0
  comfyquant.tensor @r : tensor<16x1xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// K % G == 0.
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': K = 48 must be divisible by group_size 32}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 48]
    rotation <16> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x20xi8> at 0
  comfyquant.tensor @r : tensor<16x10xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// K % 16 == 0 even when G divides K.
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': K = 40 must be divisible by 16}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 4, scale = f8E4M3FN, nibbles = low_first> [16, 40]
    rotation <4> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x32xi8> at 0
  comfyquant.tensor @r : tensor<16x4xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': K = 64 must be divisible by convrot_groupsize 256}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 64]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x36xi8> at 0
  comfyquant.tensor @r : tensor<16x3xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// w6a8_int8 additionally needs K % 32 == 0.
// expected-error @+1 {{'comfyquant.linear' op format 'w6a8_int8': w6a8_int8 K = 48 must be divisible by 32}}
comfyquant.linear @l format <w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 48]
    rotation <16> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x64xi8> at 0
  comfyquant.tensor @r : tensor<16x4xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// 6-bit codes: [N, 3K/4] bytes, not [N, K/2].
// expected-error @+1 {{'comfyquant.linear' op format 'w6a8_int8': weight must be storage [N, 3K/4] = [16, 96], got I8 [16, 64]}}
comfyquant.linear @l format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 128]
    rotation <64> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x8xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// s_rel is [N, K/G] for the G of the format attribute.
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': weight_s_rel must be [N, K/G] = [16, 16], got F8_E4M3 [16, 8]}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16x1xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': weight_s_channel must be [N] = [16], got F32 [16, 1]}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
  comfyquant.tensor @cb : tensor<8xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': weight_codebook must be F32 [16], got F32 [8]}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_codebook = @c::@cb, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x96xi8> at 0
  comfyquant.tensor @r : tensor<16x4xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
  comfyquant.tensor @cb : tensor<16xf32> at 0
}
// 6-bit codes are uniform: no codebook (docs/Formats.md §4.6).
// expected-error @+1 {{'comfyquant.linear' op format 'w6a8_int8': tensor 'weight_codebook' is not part of format 'w6a8_int8'}}
comfyquant.linear @l format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 128]
    rotation <64> tensors {weight = @c::@w, weight_codebook = @c::@cb, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

//===----------------------------------------------------------------------===//
// Rotation use
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'float8_e4m3fn': format does not take a ConvRot rotation}}
comfyquant.linear @l format <float8_e4m3fn, granularity = tensor> [32, 64] rotation <64>
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @s : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'convrot_w4a4': format requires a ConvRot group size}}
comfyquant.linear @l format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// ConvRot is unconditional for the grouped formats.
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': format requires a ConvRot group size}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x128xi8> at 0
  comfyquant.tensor @s : tensor<32x1xf32> at 0
}
// expected-error @+1 {{convrot group size 32 must be a power of 4 >= 4}}
comfyquant.linear @l format <int8_tensorwise, granularity = row> [32, 128] rotation <32>
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x128xi8> at 0
  comfyquant.tensor @s : tensor<32x1xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'int8_tensorwise': linear_dtype is only valid for convrot_w4a4}}
comfyquant.linear @l format <int8_tensorwise, granularity = row> [32, 128] rotation <64>
    options <linear_dtype = int8> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format 'asym_w4a8_int8': linear_dtype is only valid for convrot_w4a4}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> options <linear_dtype = int4>
    tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

// expected-error @+2 {{expected one of [int4, int8] for activation precision of convrot_w4a4 matmuls, got: fp8}}
// expected-error @+1 {{failed to parse ComfyQuant_OptionsAttr parameter 'linear_dtype'}}
func.func private @f() attributes {opts = #comfyquant.options<linear_dtype = fp8>}

// -----

//===----------------------------------------------------------------------===//
// Format attribute vs bound tensors
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op int8_tensorwise weight_scale is a scalar, so granularity must be tensor}}
comfyquant.linear @l format <int8_tensorwise, granularity = row> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
  comfyquant.tensor @s : tensor<32x1xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op int8_tensorwise weight_scale is per-row, so granularity must be row}}
comfyquant.linear @l format <int8_tensorwise, granularity = tensor> [32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x48xi8> at 0
}
// An embedding without a scale uses 1.0: a tensor-wise scale.
// expected-error @+1 {{'comfyquant.embedding' op int8_tensorwise weight_scale is absent (1.0), so granularity must be tensor}}
comfyquant.embedding @e format <int8_tensorwise, granularity = row> [64, 48]
    tensors {weight = @c::@w}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<3x16x64xi8> at 0
  comfyquant.tensor @s : tensor<3xf32> at 0
}
// One scale per expert is still a tensor-wise scale.
// expected-error @+1 {{'comfyquant.moe' op int8_tensorwise weight_scale is a scalar, so granularity must be tensor}}
comfyquant.moe @m format <int8_tensorwise, granularity = row> [3 x 16, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format scale type 'f32' does not match weight_s_rel (F8_E4M3)}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f32, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x96xi8> at 0
  comfyquant.tensor @r : tensor<16x4xf32> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.linear' op format scale type 'f8E4M3FN' does not match weight_s_rel (F32)}}
comfyquant.linear @l format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 128]
    rotation <64> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xui8> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// U8 s_rel holds E4M3 bits.
// expected-error @+1 {{'comfyquant.linear' op format scale type 'f32' does not match weight_s_rel (U8)}}
comfyquant.linear @l format <asym_w4a8_int8, granularity = group, group = 16, scale = f32, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

//===----------------------------------------------------------------------===//
// Module kinds (docs/Formats.md §7)
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<48x40xui8> at 0
  comfyquant.tensor @s : tensor<128x8xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.embedding' op format 'nvfp4': format 'nvfp4' cannot be used by an embedding (not row-addressable; ComfyUI loads such a table as a plain tensor)}}
comfyquant.embedding @e format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x96xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<128x4xui8> at 0
}
// expected-error @+1 {{'comfyquant.embedding' op format 'mxfp8': format 'mxfp8' cannot be used by an embedding}}
comfyquant.embedding @e format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @s : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.embedding' op format 'convrot_w4a4': format 'convrot_w4a4' cannot be used by an embedding}}
comfyquant.embedding @e format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<16x128xi8> at 0
  comfyquant.tensor @r : tensor<16x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// expected-error @+1 {{'comfyquant.embedding' op format 'asym_w4a8_int8': format 'asym_w4a8_int8' cannot be used by an embedding}}
comfyquant.embedding @e format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x32xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
  comfyquant.tensor @is : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.embedding' op format 'float8_e4m3fn': input_scale is only valid on Linear modules}}
comfyquant.embedding @e format <float8_e4m3fn, granularity = tensor> [64, 32]
    tensors {input_scale = @c::@is, weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x32xf8E4M3FN> at 0
  comfyquant.tensor @b : tensor<64xf32> at 0
}
// expected-error @+1 {{'comfyquant.embedding' op format 'float8_e4m3fn': bias is not valid on an embedding}}
comfyquant.embedding @e format <float8_e4m3fn, granularity = tensor> [64, 32]
    tensors {bias = @c::@b, weight = @c::@w}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x32xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// ConvRot embeddings are int8 only.
// expected-error @+1 {{'comfyquant.embedding' op format 'float8_e4m3fn': format does not take a ConvRot rotation}}
comfyquant.embedding @e format <float8_e4m3fn, granularity = tensor> [64, 32] rotation <16>
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<3x32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<3xf32> at 0
  comfyquant.tensor @is : tensor<f32> at 0
}
// MoE banks carry no input_scale (activations are dynamic).
// expected-error @+1 {{'comfyquant.moe' op format 'float8_e4m3fn': input_scale is only valid on Linear modules}}
comfyquant.moe @m format <float8_e4m3fn, granularity = tensor> [3 x 32, 64]
    tensors {input_scale = @c::@is, weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<2x48x40xui8> at 0
  comfyquant.tensor @s : tensor<2x128x8xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<2xf32> at 0
  comfyquant.tensor @pqs : tensor<80xf32> at 0
}
// expected-error @+1 {{'comfyquant.moe' op format 'nvfp4': pre_quant_scale is only valid on Linear modules}}
comfyquant.moe @m format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [2 x 48, 80]
    tensors {pre_quant_scale = @c::@pqs, weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<3x32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<2xf32> at 0
}
// One scale per expert: [E].
// expected-error @+1 {{'comfyquant.moe' op format 'float8_e4m3fn': weight_scale must be a scalar or [E] = [3], got F32 [2]}}
comfyquant.moe @m format <float8_e4m3fn, granularity = tensor> [3 x 32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<2x48x24xui8> at 0
  comfyquant.tensor @s : tensor<2x128x4xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<3xf32> at 0
}
// expected-error @+1 {{'comfyquant.moe' op format 'nvfp4': weight_scale_2 must be a scalar or [E] = [2], got F32 [3]}}
comfyquant.moe @m format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [2 x 48, 48]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<2x48x24xui8> at 0
  comfyquant.tensor @s : tensor<256x4xf8E4M3FN> at 0
  comfyquant.tensor @s2 : tensor<2xf32> at 0
}
// Banked block scales lead with E.
// expected-error @+1 {{'comfyquant.moe' op format 'nvfp4': weight_scale must hold the swizzled block scales: 1024 entries (2 x 128 x 4), got F8_E4M3 [256, 4]}}
comfyquant.moe @m format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [2 x 48, 48]
    tensors {weight = @c::@w, weight_scale = @c::@s, weight_scale_2 = @c::@s2}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<3x32x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// expected-error @+1 {{'comfyquant.moe' op format 'float8_e4m3fn': weight must be storage [N, K] per expert = [2, 32, 64], got F8_E4M3 [3, 32, 64]}}
comfyquant.moe @m format <float8_e4m3fn, granularity = tensor> [2 x 32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<64x64xf8E4M3FN> at 0
  comfyquant.tensor @s : tensor<f32> at 0
}
// Only int8_tensorwise and the grouped formats have flattened [E·N, K] banks.
// expected-error @+1 {{'comfyquant.moe' op format 'float8_e4m3fn': weight must be storage [N, K] per expert = [2, 32, 64], got F8_E4M3 [64, 64]}}
comfyquant.moe @m format <float8_e4m3fn, granularity = tensor> [2 x 32, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<2x32x32xi8> at 0
  comfyquant.tensor @s : tensor<32xf32> at 0
}
// expected-error @+1 {{'comfyquant.moe' op format 'convrot_w4a4': weight_scale must be [N] per expert = [2, 32], got F32 [32]}}
comfyquant.moe @m format <convrot_w4a4, granularity = row, nibbles = low_first> [2 x 32, 64]
    rotation <64> tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<2x16x64xi8> at 0
  comfyquant.tensor @s : tensor<2xf32> at 0
}
// ConvRot int8 banks need per-row scales.
// expected-error @+1 {{'comfyquant.moe' op format 'int8_tensorwise': ConvRot int8 weight_scale must be per-row [E, N, 1], got F32 [2]}}
comfyquant.moe @m format <int8_tensorwise, granularity = tensor> [2 x 16, 64] rotation <16>
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<2x16x64xi8> at 0
  comfyquant.tensor @s : tensor<2x16xf32> at 0
}
// expected-error @+1 {{'comfyquant.moe' op format 'int8_tensorwise': weight_scale must be a scalar or per-row [E] / [E, N, 1] = [2, 16, 1], got F32 [2, 16]}}
comfyquant.moe @m format <int8_tensorwise, granularity = row> [2 x 16, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x128xi8> at 0
  comfyquant.tensor @r : tensor<32x16xf8E4M3FN> at 0
  comfyquant.tensor @ch : tensor<16xf32> at 0
}
// Flattened banks flatten s_channel to [E·N] as well.
// expected-error @+1 {{'comfyquant.moe' op format 'asym_w4a8_int8': weight_s_channel must be [N] per expert = [2, 16], got F32 [16]}}
comfyquant.moe @m format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [2 x 16, 256]
    rotation <256> tensors {weight = @c::@w, weight_s_channel = @c::@ch, weight_s_rel = @c::@r}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<40x64xi8> at 0
  comfyquant.tensor @s : tensor<40x1xf32> at 0
}
// A flattened bank holds E·N rows.
// expected-error @+1 {{'comfyquant.moe' op format 'int8_tensorwise': weight must be storage [N, K] per expert = [2, 16, 64], got I8 [40, 64]}}
comfyquant.moe @m format <int8_tensorwise, granularity = row> [2 x 16, 64]
    tensors {weight = @c::@w, weight_scale = @c::@s}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.weight
//===----------------------------------------------------------------------===//

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
}
func.func @f() {
  // expected-error @+1 {{'comfyquant.weight' op references @c::@missing, which is not a comfyquant.tensor}}
  %0 = comfyquant.weight @c::@missing : tensor<32x64xi8>
  return
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
}
func.func @f() {
  // expected-error @+1 {{'comfyquant.weight' op references @f, which is not a comfyquant.tensor}}
  %0 = comfyquant.weight @f : tensor<32x64xi8>
  return
}

// -----

comfyquant.checkpoint @c path "m.safetensors" size 10 hash "h" {
  comfyquant.tensor @w : tensor<32x64xi8> at 0
}
func.func @f() {
  // expected-error @+1 {{'comfyquant.weight' op result type 'tensor<32x64xui8>' differs from the checkpoint tensor 'tensor<32x64xi8>'}}
  %0 = comfyquant.weight @c::@w : tensor<32x64xui8>
  return
}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.rotate
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<4x96xf32>) {
  // expected-error @+1 {{'comfyquant.rotate' op last dimension 96 must be divisible by the rotation group 64}}
  %0 = comfyquant.rotate %x <64> : tensor<4x96xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xi8>) {
  // expected-error @+1 {{'comfyquant.rotate' op rotates float activations}}
  %0 = comfyquant.rotate %x <64> : tensor<4x64xi8>
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.rotate' op input must have rank >= 1}}
  %0 = comfyquant.rotate %x <4> : tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'comfyquant.rotate' op failed to verify that all of {input, result} have same type}}
  %0 = "comfyquant.rotate"(%x) {rotation = #comfyquant.convrot<64>} : (tensor<4x64xf32>) -> tensor<4x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.quantize
//===----------------------------------------------------------------------===//

func.func @q(%x: tensor<4x80xbf16>, %y: tensor<4x96xf16>, %gs: tensor<f32>, %g4: tensor<4xf32>) {
  // expected-error @+1 {{mxfp8 ignores input_scale; blocks are dynamic}}
  %c2, %s2 = comfyquant.quantize %y <mxfp8_block, block = 32> scale %gs : tensor<f32> : tensor<4x96xf16> -> tensor<4x96xf8E4M3FN>, tensor<4x3xf8E8M0FNU>
  return
}
// -----
func.func @q(%x: tensor<4x80xbf16>) {
  // expected-error @+1 {{nvfp4 scales must be [M, ceil(K/16)]}}
  %c1, %s1, %g1 = comfyquant.quantize %x <nvfp4_block, block = 16> : tensor<4x80xbf16> -> tensor<4x80xf4E2M1FN>, tensor<4x4xf8E4M3FN>, tensor<f32>
  return
}
// -----
func.func @q(%x: tensor<4x80xbf16>) {
  // expected-error @+1 {{nvfp4 codes are f4E2M1FN with f8E4M3FN scales}}
  %c1, %s1, %g1 = comfyquant.quantize %x <nvfp4_block, block = 16> : tensor<4x80xbf16> -> tensor<4x80xf4E2M1FN>, tensor<4x5xf8E8M0FNU>, tensor<f32>
  return
}
// -----
func.func @q(%y: tensor<4x96xf16>) {
  // expected-error @+1 {{mxfp8 scales must be [M, ceil(K/32)]}}
  %c2, %s2 = comfyquant.quantize %y <mxfp8_block, block = 32> : tensor<4x96xf16> -> tensor<4x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  return
}
// -----
func.func @q(%y: tensor<4x96xf16>) {
  // expected-error @+1 {{mxfp8 codes are f8E4M3FN with f8E8M0FNU scales}}
  %c2, %s2 = comfyquant.quantize %y <mxfp8_block, block = 32> : tensor<4x96xf16> -> tensor<4x96xf8E5M2>, tensor<4x3xf8E8M0FNU>
  return
}
// -----
func.func @q(%x: tensor<4x80xbf16>, %g4: tensor<4xf32>) {
  // expected-error @+1 {{static scale (input_scale) must be one f32}}
  %c1, %s1, %g1 = comfyquant.quantize %x <nvfp4_block, block = 16> scale %g4 : tensor<4xf32> : tensor<4x80xbf16> -> tensor<4x80xf4E2M1FN>, tensor<4x5xf8E4M3FN>, tensor<f32>
  return
}
// -----
// expected-error @+1 {{int8_row takes block size 0, not 32}}
func.func private @f() attributes {act = #comfyquant.act<int8_row, block = 32>}

// -----

func.func @f(%x: tensor<2x4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op input must be [M, K]}}
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<2x4x64xbf16> -> tensor<2x4x64xi8>, tensor<2x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xi8>) {
  // expected-error @+1 {{'comfyquant.quantize' op quantizes float activations}}
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<4x64xi8> -> tensor<4x64xi8>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op codes must have the input's shape}}
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<4x64xbf16> -> tensor<4x32xi8>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op codes must be i8}}
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<4x64xbf16> -> tensor<4x64xui8>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op per-row scales must be f32 [M, 1]}}
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op per-row scales must be f32 [M, 1]}}
  %c, %s = comfyquant.quantize %x <int8_row> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4x1xbf16>
  return
}

// -----

// int8 activation scales are dynamic per row (docs/Formats.md §5 step 5).
func.func @f(%x: tensor<4x64xbf16>, %is: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.quantize' op per-row activation scales are dynamic}}
  %c, %s = comfyquant.quantize %x <int8_row> scale %is : tensor<f32> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op codes must be i4}}
  %c, %s = comfyquant.quantize %x <int4_row> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>, %is: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.quantize' op per-row activation scales are dynamic}}
  %c, %s = comfyquant.quantize %x <int4_row> scale %is : tensor<f32> : tensor<4x64xbf16> -> tensor<4x64xi4>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op codes must be 'f8E4M3FN'}}
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> : tensor<4x64xbf16> -> tensor<4x64xf8E5M2>, tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // FP8 activations use one static scale (input_scale or 1.0), not per row.
  // expected-error @+1 {{'comfyquant.quantize' op fp8 activation scale must be one f32}}
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op fp8 activation scale must be one f32}}
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>, tensor<?xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>, %is: tensor<4xf32>) {
  // expected-error @+1 {{'comfyquant.quantize' op static scale (input_scale) must be one f32}}
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> scale %is : tensor<4xf32> : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>, tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>, %is: tensor<bf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op static scale (input_scale) must be one f32}}
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> scale %is : tensor<bf16> : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>, tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.dequantize
//===----------------------------------------------------------------------===//

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op names 2 roles for 1 side tensors}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale", "input_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op names 0 roles for 1 side tensors}}
  %0 = comfyquant.dequantize %w, %s roles [] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>, %t: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op role 'weight_scale' is named twice}}
  %0 = comfyquant.dequantize %w, %s, %t roles ["weight_scale", "weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>, %w2: tensor<32x64xf8E4M3FN>) {
  // The packed weight is the first operand, never a side tensor.
  // expected-error @+1 {{'comfyquant.dequantize' op role 'weight' is the first operand, not a side tensor}}
  %0 = comfyquant.dequantize %w, %w2, %s roles ["weight", "weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op result must be a float tensor}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xi32>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op result must be a static [N, K] or [E, N, K]}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<2048xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op result must be a static [N, K] or [E, N, K]}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<?x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xsi8>, %s: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op operand 'weight' element type is not a safetensors dtype}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <int8_tensorwise, granularity = tensor>
         : (tensor<32x64xsi8>, tensor<f32>) -> tensor<32x64xbf16>
  return
}

// -----

// Registry rules apply to the operands exactly as to bound tensors.
func.func @f(%w: tensor<32x64xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.dequantize' op format 'float8_e4m3fn': missing required tensor weight_scale scalar (MoE: scalar or [E])}}
  %0 = comfyquant.dequantize %w roles [] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<32xf32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op format 'float8_e4m3fn': weight_scale must be a scalar, got F32 [32]}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<32xf32>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op format 'float8_e4m3fn': weight must be storage [N, K] = [32, 32], got F8_E4M3 [32, 64]}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x32xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op format 'float8_e4m3fn': tensor 'smooth_factor' is not part of format 'float8_e4m3fn'}}
  %0 = comfyquant.dequantize %w, %s, %x roles ["weight_scale", "smooth_factor"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<4xf32>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<16x128xi8>, %s: tensor<16xf32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op format 'convrot_w4a4': format requires a ConvRot group size}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <convrot_w4a4, granularity = row, nibbles = low_first>
         : (tensor<16x128xi8>, tensor<16xf32>) -> tensor<16x256xbf16>
  return
}

// -----

func.func @f(%w: tensor<2x48x24xui8>, %s: tensor<2x128x4xf8E4M3FN>, %s2: tensor<3xf32>) {
  // A rank-3 result is a MoE bank [E, N, K].
  // expected-error @+1 {{'comfyquant.dequantize' op format 'nvfp4': weight_scale_2 must be a scalar or [E] = [2], got F32 [3]}}
  %0 = comfyquant.dequantize %w, %s, %s2 roles ["weight_scale", "weight_scale_2"]
         format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>
         : (tensor<2x48x24xui8>, tensor<2x128x4xf8E4M3FN>, tensor<3xf32>) -> tensor<2x48x48xbf16>
  return
}

// -----

func.func @f(%w: tensor<32x64xi8>, %s: tensor<32x1xf32>) {
  // The format attribute must describe the scale operand, as on module ops.
  // expected-error @+1 {{'comfyquant.dequantize' op int8_tensorwise weight_scale is per-row, so granularity must be row}}
  %0 = comfyquant.dequantize %w, %s roles ["weight_scale"] format <int8_tensorwise, granularity = tensor>
         : (tensor<32x64xi8>, tensor<32x1xf32>) -> tensor<32x64xbf16>
  return
}

// -----

func.func @f(%w: tensor<16x128xi8>, %r: tensor<16x16xf32>, %ch: tensor<16xf32>) {
  // expected-error @+1 {{'comfyquant.dequantize' op format scale type 'f8E4M3FN' does not match weight_s_rel (F32)}}
  %0 = comfyquant.dequantize %w, %r, %ch roles ["weight_s_rel", "weight_s_channel"]
         format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> rotation <256>
         : (tensor<16x128xi8>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<16x256xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.qmatmul
//===----------------------------------------------------------------------===//

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x32xi8>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op K of A and B differ}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xi8>, tensor<16x32xi8> -> tensor<4x16xi32>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op result must be [M, N]}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<16x4xi32>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<64x16xi8>) {
  // B is [N, K] (K contiguous), not [K, N].
  // expected-error @+1 {{'comfyquant.qmatmul' op K of A and B differ}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xi8>, tensor<64x16xi8> -> tensor<4x64xi32>
  return
}

// -----

func.func @f(%a: tensor<2x4x64xi8>, %b: tensor<16x64xi8>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op operands are A [M, K], B [N, K] and C [M, N]}}
  %0 = comfyquant.qmatmul %a, %b : tensor<2x4x64xi8>, tensor<16x64xi8> -> tensor<4x16xi32>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op integer operands accumulate exactly in i32}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op integer operands accumulate exactly in i32}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xi64>
  return
}

// -----

func.func @f(%a: tensor<4x64xi16>, %b: tensor<16x64xi16>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op integer operands are at most 8 bits}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xi16>, tensor<16x64xi16> -> tensor<4x16xi32>
  return
}

// -----

func.func @f(%a: tensor<4x64xf8E4M3FN>, %b: tensor<16x64xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op float operands accumulate in f32}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xf8E4M3FN>, tensor<16x64xf8E4M3FN> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x64xf8E4M3FN>, %b: tensor<16x64xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op float operands accumulate in f32}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xf8E4M3FN>, tensor<16x64xf8E4M3FN> -> tensor<4x16xi32>
  return
}

// -----

func.func @f(%a: tensor<4x64xbf16>, %b: tensor<16x64xi8>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op operands must both be integers or both floats}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xbf16>, tensor<16x64xi8> -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4x64xui8>, %b: tensor<16x64xui8>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op operands must both be integers or both floats}}
  %0 = comfyquant.qmatmul %a, %b : tensor<4x64xui8>, tensor<16x64xui8> -> tensor<4x16xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// comfyquant.epilogue
//===----------------------------------------------------------------------===//

func.func @f(%acc: tensor<4x16xi32>, %rs: tensor<4xf32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op row_scale must be f32 [M, 1] or a scalar}}
  %0 = comfyquant.epilogue %acc row_scale %rs : tensor<4xf32> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>, %rs: tensor<4x1xbf16>) {
  // expected-error @+1 {{'comfyquant.epilogue' op row_scale must be f32 [M, 1] or a scalar}}
  %0 = comfyquant.epilogue %acc row_scale %rs : tensor<4x1xbf16> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>, %rs: tensor<?xf32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op row_scale must be f32 [M, 1] or a scalar}}
  %0 = comfyquant.epilogue %acc row_scale %rs : tensor<?xf32> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>, %cs: tensor<16x2xf32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op col_scale must be f32 [N], [N, 1] or a scalar}}
  %0 = comfyquant.epilogue %acc col_scale %cs : tensor<16x2xf32> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>, %cs: tensor<4xf32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op col_scale must be f32 [N], [N, 1] or a scalar}}
  %0 = comfyquant.epilogue %acc col_scale %cs : tensor<4xf32> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>, %b: tensor<16x1xbf16>) {
  // expected-error @+1 {{'comfyquant.epilogue' op bias must be [N] of the result element type 'bf16'}}
  %0 = comfyquant.epilogue %acc bias %b : tensor<16x1xbf16> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>, %b: tensor<16xi32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op bias must be [N] of the result element type 'bf16'}}
  %0 = comfyquant.epilogue %acc bias %b : tensor<16xi32> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xf16>) {
  // expected-error @+1 {{'comfyquant.epilogue' op accumulator must be i32 or f32}}
  %0 = comfyquant.epilogue %acc : tensor<4x16xf16> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op result must be float}}
  %0 = comfyquant.epilogue %acc : tensor<4x16xi32> -> tensor<4x16xi8>
  return
}

// -----

func.func @f(%acc: tensor<4x16xi32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op result must have the accumulator's [M, N] shape}}
  %0 = comfyquant.epilogue %acc : tensor<4x16xi32> -> tensor<4x32xbf16>
  return
}

// -----

func.func @f(%acc: tensor<64xi32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op result must have the accumulator's [M, N] shape}}
  %0 = comfyquant.epilogue %acc : tensor<64xi32> -> tensor<64xbf16>
  return
}

// -----

// The bias is added in the result (activation) type: the producer casts it.
func.func @f(%acc: tensor<4x16xi32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'comfyquant.epilogue' op bias must be [N] of the result element type 'bf16'}}
  %0 = comfyquant.epilogue %acc bias %b : tensor<16xf32> : tensor<4x16xi32> -> tensor<4x16xbf16>
  return
}

//===----------------------------------------------------------------------===//
// comfyquant.quantize: rotation and the nvfp4 global scale
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op rotation fuses only with the per-row integer schemes (ConvRot formats)}}
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> rotation <64> : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>, tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<?x96xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op K = 96 must be divisible by the rotation group 64}}
  %c, %s = comfyquant.quantize %x <int8_row> rotation <64> : tensor<?x96xbf16> -> tensor<?x96xi8>, tensor<?x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op only nvfp4_block returns a global scale}}
  %c, %s, %g = comfyquant.quantize %x <int8_row> : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4x1xf32>, tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<4x80xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op global scale must be tensor<f32>}}
  %c, %s, %g = comfyquant.quantize %x <nvfp4_block, block = 16> : tensor<4x80xbf16> -> tensor<4x80xf4E2M1FN>, tensor<4x5xf8E4M3FN>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x80xbf16>) {
  // expected-error @+1 {{'comfyquant.quantize' op nvfp4_block returns the global scale as a third result (tensor<f32>)}}
  %c, %s = comfyquant.quantize %x <nvfp4_block, block = 16> : tensor<4x80xbf16> -> tensor<4x80xf4E2M1FN>, tensor<4x5xf8E4M3FN>
  return
}

//===----------------------------------------------------------------------===//
// comfyquant.unpack
//===----------------------------------------------------------------------===//

// -----

// 8-bit formats feed their storage to the GEMM.
func.func @f(%w: tensor<32x64xi8>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'int8_tensorwise' stores its GEMM operand directly (8-bit codes); only packed formats unpack}}
  %0 = comfyquant.unpack %w roles [] format <int8_tensorwise, granularity = row> : (tensor<32x64xi8>) -> tensor<32x64xi8>
  return
}

// -----

func.func @f(%w: tensor<16x256xi8>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'convrot_w4a4' stores [16, 256] as I8 [N, K/2] = [16, 128], got 'tensor<16x256xi8>'}}
  %0 = comfyquant.unpack %w roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x256xi8>) -> tensor<16x256xi8>
  return
}

// -----

// NVFP4 storage is padded to 16 rows (registry storageRows).
func.func @f(%w: tensor<40x12xui8>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'nvfp4' stores [40, 24] as U8 [Np16, Kp16/2] = [48, 16], got 'tensor<40x12xui8>'}}
  %0 = comfyquant.unpack %w roles [] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> : (tensor<40x12xui8>) -> tensor<40x24xf4E2M1FN>
  return
}

// -----

func.func @f(%w: tensor<16x128xui8>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'convrot_w4a4' stores [16, 256] as I8 [N, K/2] = [16, 128], got 'tensor<16x128xui8>'}}
  %0 = comfyquant.unpack %w roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x128xui8>) -> tensor<16x256xi8>
  return
}

// -----

func.func @f(%w: tensor<48x40xui8>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'nvfp4' unpacks to f4E2M1FN codes}}
  %0 = comfyquant.unpack %w roles [] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> : (tensor<48x40xui8>) -> tensor<48x80xi8>
  return
}

// -----

func.func @f(%w: tensor<16x128xi8>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'convrot_w4a4' unpacks to i4 or sign-extended i8 codes}}
  %0 = comfyquant.unpack %w roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x128xi8>) -> tensor<16x256xi16>
  return
}

// -----

func.func @f(%w: tensor<64x128xi8>, %r: tensor<64x16xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'asym_w4a8_int8' unpacks to its int8 grid (i8)}}
  %0 = comfyquant.unpack %w, %r roles ["weight_s_rel"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>) -> tensor<64x256xi4>
  return
}

// -----

func.func @f(%w: tensor<64x128xi8>) {
  // expected-error @+1 {{'comfyquant.unpack' op format 'asym_w4a8_int8' unpacks through weight_s_rel}}
  %0 = comfyquant.unpack %w roles [] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>) -> tensor<64x256xi8>
  return
}

// -----

func.func @f(%w: tensor<16x128xi8>, %s: tensor<16xf32>) {
  // expected-error @+1 {{'comfyquant.unpack' op 'weight_scale' is not an operand of unpack for 'convrot_w4a4' (it takes no side tensors)}}
  %0 = comfyquant.unpack %w, %s roles ["weight_scale"] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x128xi8>, tensor<16xf32>) -> tensor<16x256xi8>
  return
}

// -----

// s_channel is an epilogue factor, not part of the int8 grid.
func.func @f(%w: tensor<64x128xi8>, %r: tensor<64x16xf8E4M3FN>, %c: tensor<64xf32>) {
  // expected-error @+1 {{'comfyquant.unpack' op 'weight_s_channel' is not an operand of unpack for 'asym_w4a8_int8' (weight_s_rel and weight_codebook only)}}
  %0 = comfyquant.unpack %w, %r, %c roles ["weight_s_rel", "weight_s_channel"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<64xf32>) -> tensor<64x256xi8>
  return
}

// -----

// 6-bit codes have no codebook (registry roles).
func.func @f(%w: tensor<16x96xi8>, %r: tensor<16x4xf8E4M3FN>, %cb: tensor<16xf32>) {
  // expected-error @+1 {{'comfyquant.unpack' op tensor 'weight_codebook' is not part of format 'w6a8_int8'}}
  %0 = comfyquant.unpack %w, %r, %cb roles ["weight_s_rel", "weight_codebook"] format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<16x96xi8>, tensor<16x4xf8E4M3FN>, tensor<16xf32>) -> tensor<16x128xi8>
  return
}

// -----

func.func @f(%w: tensor<64x128xi8>, %r: tensor<64x16xbf16>) {
  // expected-error @+1 {{'comfyquant.unpack' op 'weight_s_rel' has element type 'bf16', not one the registry accepts}}
  %0 = comfyquant.unpack %w, %r roles ["weight_s_rel"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x16xbf16>) -> tensor<64x256xi8>
  return
}

// -----

func.func @f(%w: tensor<64x128xi8>, %r: tensor<64x8xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.unpack' op weight_s_rel must be [N, K/G] = [64, 16], got 'tensor<64x8xf8E4M3FN>'}}
  %0 = comfyquant.unpack %w, %r roles ["weight_s_rel"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x8xf8E4M3FN>) -> tensor<64x256xi8>
  return
}

// -----

func.func @f(%w: tensor<64x128xi8>, %r: tensor<64x16xf8E4M3FN>, %cb: tensor<15xf32>) {
  // expected-error @+1 {{'comfyquant.unpack' op weight_codebook must be one level per code: [16], got 'tensor<15xf32>'}}
  %0 = comfyquant.unpack %w, %r, %cb roles ["weight_s_rel", "weight_codebook"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<15xf32>) -> tensor<64x256xi8>
  return
}

// -----

func.func @f(%w: tensor<64x128xi8>, %r: tensor<64x16xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.unpack' op role 'weight_s_rel' is named twice}}
  %0 = comfyquant.unpack %w, %r, %r roles ["weight_s_rel", "weight_s_rel"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<64x16xf8E4M3FN>) -> tensor<64x256xi8>
  return
}

// -----

func.func @f(%w: tensor<64x128xi8>, %r: tensor<64x16xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.unpack' op names 0 roles for 1 side tensors}}
  %0 = comfyquant.unpack %w, %r roles [] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>) -> tensor<64x256xi8>
  return
}

//===----------------------------------------------------------------------===//
// comfyquant.unswizzle
//===----------------------------------------------------------------------===//

// -----

func.func @f(%s: tensor<128x8xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.unswizzle' op result element type 'f32' is not the block-scale type of a block-scaled format}}
  %0 = comfyquant.unswizzle %s : tensor<128x8xf8E4M3FN> -> tensor<48x5xf32>
  return
}

// -----

// U8 holds the bits; other dtypes cannot.
func.func @f(%s: tensor<128x8xbf16>) {
  // expected-error @+1 {{'comfyquant.unswizzle' op input element type 'bf16' cannot hold nvfp4 block scales}}
  %0 = comfyquant.unswizzle %s : tensor<128x8xbf16> -> tensor<48x5xf8E4M3FN>
  return
}

// -----

// E8M0 storage cannot hold E4M3 scales (registry weight_scale dtypes).
func.func @f(%s: tensor<128x8xf8E8M0FNU>) {
  // expected-error @+1 {{'comfyquant.unswizzle' op input element type 'f8E8M0FNU' cannot hold nvfp4 block scales}}
  %0 = comfyquant.unswizzle %s : tensor<128x8xf8E8M0FNU> -> tensor<48x5xf8E4M3FN>
  return
}

// -----

// 48 rows x 5 blocks are stored as 128 x 8.
func.func @f(%s: tensor<128x5xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.unswizzle' op a swizzled [48, 5] scale matrix holds 1024 entries, got 'tensor<128x5xf8E4M3FN>'}}
  %0 = comfyquant.unswizzle %s : tensor<128x5xf8E4M3FN> -> tensor<48x5xf8E4M3FN>
  return
}

// -----

func.func @f(%s: tensor<128x8xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.unswizzle' op result must be the logical [rows, blocks] matrix}}
  %0 = comfyquant.unswizzle %s : tensor<128x8xf8E4M3FN> -> tensor<1024xf8E4M3FN>
  return
}

//===----------------------------------------------------------------------===//
// comfyquant.lookup
//===----------------------------------------------------------------------===//

// -----

func.func @f(%w: tensor<48x40xui8>, %s: tensor<128x8xf8E4M3FN>, %s2: tensor<f32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{'comfyquant.lookup' op format 'nvfp4': format 'nvfp4' cannot be used by an embedding (not row-addressable; ComfyUI loads such a table as a plain tensor)}}
  %0 = comfyquant.lookup %w[%i], %s, %s2 roles ["weight_scale", "weight_scale_2"] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>
         : (tensor<48x40xui8>, tensor<?xi64>, tensor<128x8xf8E4M3FN>, tensor<f32>) -> tensor<?x80xbf16>
  return
}

// -----

func.func @f(%w: tensor<64x32xf8E4M3FN>, %b: tensor<64xf32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{'comfyquant.lookup' op format 'float8_e4m3fn': bias is not valid on an embedding}}
  %0 = comfyquant.lookup %w[%i], %b roles ["bias"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<64x32xf8E4M3FN>, tensor<?xi64>, tensor<64xf32>) -> tensor<?x32xbf16>
  return
}

// -----

// D comes from the result and must match the table.
func.func @f(%w: tensor<64x32xf8E4M3FN>, %i: tensor<?xi64>) {
  // expected-error @+1 {{'comfyquant.lookup' op format 'float8_e4m3fn': weight must be storage [N, K] = [64, 48], got F8_E4M3 [64, 32]}}
  %0 = comfyquant.lookup %w[%i] roles [] format <float8_e4m3fn, granularity = tensor>
         : (tensor<64x32xf8E4M3FN>, tensor<?xi64>) -> tensor<?x48xbf16>
  return
}

// -----

func.func @f(%w: tensor<64x32xf8E4M3FN>, %i: tensor<4x2xi64>) {
  // expected-error @+1 {{'comfyquant.lookup' op indices must be 1-D}}
  %0 = comfyquant.lookup %w[%i] roles [] format <float8_e4m3fn, granularity = tensor>
         : (tensor<64x32xf8E4M3FN>, tensor<4x2xi64>) -> tensor<8x32xbf16>
  return
}

// -----

func.func @f(%w: tensor<64x32xf8E4M3FN>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'comfyquant.lookup' op result has one row per index}}
  %0 = comfyquant.lookup %w[%i] roles [] format <float8_e4m3fn, granularity = tensor>
         : (tensor<64x32xf8E4M3FN>, tensor<4xi64>) -> tensor<5x32xbf16>
  return
}

// -----

func.func @f(%w: tensor<64x32xi8>, %s: tensor<64x1xf32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{'comfyquant.lookup' op result must be a float [M, D] with static D}}
  %0 = comfyquant.lookup %w[%i], %s roles ["weight_scale"] format <int8_tensorwise, granularity = row>
         : (tensor<64x32xi8>, tensor<?xi64>, tensor<64x1xf32>) -> tensor<?x32xi8>
  return
}

// -----

func.func @f(%w: tensor<64x32xi8>, %s: tensor<64x1xf32>, %i: tensor<?xf32>) {
  // expected-error @+1 {{'comfyquant.lookup' op operand #1 must be ranked tensor of signless integer or index values}}
  %0 = comfyquant.lookup %w[%i], %s roles ["weight_scale"] format <int8_tensorwise, granularity = row>
         : (tensor<64x32xi8>, tensor<?xf32>, tensor<64x1xf32>) -> tensor<?x32xbf16>
  return
}

// -----

// The registry's granularity check: a per-row scale says granularity = row.
func.func @f(%w: tensor<64x32xi8>, %s: tensor<64x1xf32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{'comfyquant.lookup' op int8_tensorwise weight_scale is per-row, so granularity must be row}}
  %0 = comfyquant.lookup %w[%i], %s roles ["weight_scale"] format <int8_tensorwise, granularity = tensor>
         : (tensor<64x32xi8>, tensor<?xi64>, tensor<64x1xf32>) -> tensor<?x32xbf16>
  return
}

//===----------------------------------------------------------------------===//
// comfyquant.qmatmul / comfyquant.qgemm block scales
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: tensor<4x80xf4E2M1FN>, %b: tensor<48x80xf4E2M1FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op block scales come as a pair with their block size}}
  %0 = "comfyquant.qmatmul"(%a, %b) <{block = 16 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>}> : (tensor<4x80xf4E2M1FN>, tensor<48x80xf4E2M1FN>) -> tensor<4x48xf32>
  return
}

// -----

func.func @f(%a: tensor<4x80xf4E2M1FN>, %as: tensor<4x5xf8E4M3FN>, %b: tensor<48x80xf4E2M1FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op block scales come as a pair with their block size}}
  %0 = "comfyquant.qmatmul"(%a, %b, %as) <{block = 16 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>}> : (tensor<4x80xf4E2M1FN>, tensor<48x80xf4E2M1FN>, tensor<4x5xf8E4M3FN>) -> tensor<4x48xf32>
  return
}

// -----

// MXFP8 blocks are 32 with E8M0 scales: no format has E4M3 32-blocks.
func.func @f(%a: tensor<4x96xf8E4M3FN>, %as: tensor<4x3xf8E4M3FN>, %b: tensor<64x96xf8E4M3FN>, %bs: tensor<64x3xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op block 32 with 'f8E4M3FN' scales is not a block-scaled format}}
  %0 = comfyquant.qmatmul %a, %b block 32 scales(%as, %bs : tensor<4x3xf8E4M3FN>, tensor<64x3xf8E4M3FN>) : tensor<4x96xf8E4M3FN>, tensor<64x96xf8E4M3FN> -> tensor<4x64xf32>
  return
}

// -----

func.func @f(%a: tensor<4x80xf8E4M3FN>, %as: tensor<4x5xf8E4M3FN>, %b: tensor<48x80xf8E4M3FN>, %bs: tensor<48x5xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op 'nvfp4' block-scaled operands are 4-bit float codes of one type}}
  %0 = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<4x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>) : tensor<4x80xf8E4M3FN>, tensor<48x80xf8E4M3FN> -> tensor<4x48xf32>
  return
}

// -----

func.func @f(%a: tensor<4x96xi8>, %as: tensor<4x3xf8E8M0FNU>, %b: tensor<64x96xi8>, %bs: tensor<64x3xf8E8M0FNU>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op 'mxfp8' block-scaled operands are 8-bit float codes of one type}}
  %0 = comfyquant.qmatmul %a, %b block 32 scales(%as, %bs : tensor<4x3xf8E8M0FNU>, tensor<64x3xf8E8M0FNU>) : tensor<4x96xi8>, tensor<64x96xi8> -> tensor<4x64xi32>
  return
}

// -----

func.func @f(%a: tensor<4x80xf4E2M1FN>, %as: tensor<4x4xf8E4M3FN>, %b: tensor<48x80xf4E2M1FN>, %bs: tensor<48x5xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op A block scales must be [M, ceil(K/16)]}}
  %0 = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<4x4xf8E4M3FN>, tensor<48x5xf8E4M3FN>) : tensor<4x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<4x48xf32>
  return
}

// -----

func.func @f(%a: tensor<?x80xf4E2M1FN>, %as: tensor<?x5xf8E4M3FN>, %b: tensor<48x80xf4E2M1FN>, %bs: tensor<40x5xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op B block scales must be [N, ceil(K/16)]}}
  %0 = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<?x5xf8E4M3FN>, tensor<40x5xf8E4M3FN>) : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xf32>
  return
}

// -----

func.func @f(%a: tensor<4x80xf4E2M1FN>, %as: tensor<4x5xf8E4M3FN>, %b: tensor<48x80xf4E2M1FN>, %bs: tensor<48x5xf8E8M0FNU>) {
  // expected-error @+1 {{'comfyquant.qmatmul' op block scales of A and B differ in type}}
  %0 = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<4x5xf8E4M3FN>, tensor<48x5xf8E8M0FNU>) : tensor<4x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<4x48xf32>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xf8E4M3FN>) {
  // expected-error @+1 {{'comfyquant.qgemm' op operands must both be integers or both floats}}
  %0 = comfyquant.qgemm %a, %b : tensor<4x64xi8>, tensor<16x64xf8E4M3FN> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>) {
  // expected-error @+1 {{'comfyquant.qgemm' op result must be [M, N]}}
  %0 = comfyquant.qgemm %a, %b : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x64xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>) {
  // expected-error @+1 {{'comfyquant.qgemm' op result must be float}}
  %0 = comfyquant.qgemm %a, %b : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xi32>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>, %rs: tensor<4xf32>) {
  // expected-error @+1 {{'comfyquant.qgemm' op row_scale must be f32 [M, 1] or a scalar}}
  %0 = comfyquant.qgemm %a, %b row_scale %rs : tensor<4xf32> : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>, %cs: tensor<16x1xbf16>) {
  // expected-error @+1 {{'comfyquant.qgemm' op col_scale must be f32 [N], [N, 1] or a scalar}}
  %0 = comfyquant.qgemm %a, %b col_scale %cs : tensor<16x1xbf16> : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x64xi8>, %b: tensor<16x64xi8>, %bias: tensor<16xf32>) {
  // expected-error @+1 {{'comfyquant.qgemm' op bias must be [N] of the result element type 'f16'}}
  %0 = comfyquant.qgemm %a, %b bias %bias : tensor<16xf32> : tensor<4x64xi8>, tensor<16x64xi8> -> tensor<4x16xf16>
  return
}

// -----

func.func @f(%a: tensor<4x64xi16>, %b: tensor<16x64xi16>) {
  // expected-error @+1 {{'comfyquant.qgemm' op integer operands are at most 8 bits}}
  %0 = comfyquant.qgemm %a, %b : tensor<4x64xi16>, tensor<16x64xi16> -> tensor<4x16xbf16>
  return
}

//===----------------------------------------------------------------------===//
// #comfyquant.module and the comfyquant.module function attribute
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{experts must be > 0 exactly for moe, got 3}}
func.func private @f(tensor<?x64xbf16>) -> tensor<?x32xbf16> attributes {comfyquant.module = #comfyquant.module<linear, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64, experts = 3>}

// -----

// expected-error @+1 {{experts must be > 0 exactly for moe, got 0}}
func.func private @f(tensor<?x64xbf16>, index) -> tensor<?x32xbf16> attributes {comfyquant.module = #comfyquant.module<moe, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64>}

// -----

// expected-error @+1 {{logical shape [0, 64] must be positive}}
func.func private @f(tensor<?x64xbf16>) -> tensor<?x32xbf16> attributes {comfyquant.module = #comfyquant.module<linear, format = <float8_e4m3fn, granularity = tensor>, out_features = 0, in_features = 64>}

// -----

// expected-error @+1 {{'builtin.module' op 'comfyquant.module' is only valid on a function}}
module attributes {comfyquant.module = #comfyquant.module<linear, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64>} {
}

// -----

// expected-error @+1 {{'func.func' op 'comfyquant.module' must be a #comfyquant.module}}
func.func private @f(tensor<?x64xbf16>) -> tensor<?x32xbf16> attributes {comfyquant.module = "proj"}

// -----

// K of the input must be in_features.
// expected-error @+1 {{'func.func' op signature of a linear module must be (tensor<Mx64xT>) -> tensor<Mx32xT> with T = f32, bf16 or f16}}
func.func private @f(tensor<?x32xbf16>) -> tensor<?x32xbf16> attributes {comfyquant.module = #comfyquant.module<linear, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64>}

// -----

// Input and output share the activation type.
// expected-error @+1 {{'func.func' op signature of a linear module must be (tensor<Mx64xT>) -> tensor<Mx32xT> with T = f32, bf16 or f16}}
func.func private @f(tensor<?x64xf16>) -> tensor<?x32xbf16> attributes {comfyquant.module = #comfyquant.module<linear, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64>}

// -----

// expected-error @+1 {{'func.func' op signature of a linear module must be (tensor<Mx64xT>) -> tensor<Mx32xT> with T = f32, bf16 or f16}}
func.func private @f(tensor<?x64xf64>) -> tensor<?x32xf64> attributes {comfyquant.module = #comfyquant.module<linear, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64>}

// -----

// A bank takes the expert index.
// expected-error @+1 {{'func.func' op signature of a moe module must be (tensor<Mx64xT>, index) -> tensor<Mx32xT> with T = f32, bf16 or f16}}
func.func private @f(tensor<?x64xbf16>) -> tensor<?x32xbf16> attributes {comfyquant.module = #comfyquant.module<moe, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64, experts = 2>}

// -----

// expected-error @+1 {{'func.func' op signature of a embedding module must be (tensor<Mxi64>) -> tensor<Mx32xT> with T = f32, bf16 or f16}}
func.func private @f(tensor<?xi32>) -> tensor<?x32xbf16> attributes {comfyquant.module = #comfyquant.module<embedding, format = <float8_e4m3fn, granularity = tensor>, out_features = 64, in_features = 32>}

// -----

// The warp-level FP8 MMA multiplies FP8 codes only, in the m16n8k32
// register layout.
func.func @mma_fp8_type(%a: vector<4x4xi8>, %b: vector<2x4xi8>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  // expected-error @+1 {{'comfyquant.mma_fp8' op operand type must be f8E4M3FN or f8E5M2, not 'i8'}}
  %d = comfyquant.mma_fp8 %a, %b, %c : i8 x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// -----

func.func @mma_fp8_a(%a: vector<2x4xi8>, %b: vector<2x4xi8>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  // expected-error @+1 {{'comfyquant.mma_fp8' op a must be vector<4x4xi8> (four registers of four codes)}}
  %d = comfyquant.mma_fp8 %a, %b, %c : f8E4M3FN x f8E4M3FN : vector<2x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// -----

func.func @mma_fp8_b(%a: vector<4x4xi8>, %b: vector<4x4xi8>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  // expected-error @+1 {{'comfyquant.mma_fp8' op b must be vector<2x4xi8> (two registers of four codes)}}
  %d = comfyquant.mma_fp8 %a, %b, %c : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<4x4xi8> -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// -----

func.func @mma_fp8_result(%a: vector<4x4xi8>, %b: vector<2x4xi8>) -> vector<4x2xf32> {
  // expected-error @+1 {{'comfyquant.mma_fp8' op result must be vector<2x2xf32>}}
  %d = comfyquant.mma_fp8 %a, %b : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<4x2xf32>
  return %d : vector<4x2xf32>
}

// -----

// The block-level MMA: i8 x i8 -> i32, FP8 x FP8, f16 x f16 or FP4 x FP4 -> f32,
// tiles of 64 and N rows of 32 bytes, N a multiple of 16 up to 256.
func.func @warpgroup_mma_types(%a: memref<512xi32>, %b: memref<1024xi32>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op operands must be i8 x i8, FP8 x FP8, f16 x f16, bf16 x bf16 or f4E2M1FN x f4E2M1FN, not 'i8' x 'f8E4M3FN'}}
  %d = comfyquant.warpgroup_mma %a, %b : i8 x f8E4M3FN : memref<512xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

func.func @warpgroup_mma_acc(%a: memref<512xi32>, %b: memref<1024xi32>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op accumulates into i32 for these operands}}
  %d = comfyquant.warpgroup_mma %a, %b : i8 x i8 : memref<512xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

func.func @warpgroup_mma_n(%a: memref<512xi32>, %b: memref<64xi32>) -> vector<1x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op result must be vector<(N/8)x2x2> with N a multiple of 16 in [16, 256]}}
  %d = comfyquant.warpgroup_mma %a, %b : f16 x f16 : memref<512xi32>, memref<64xi32> -> vector<1x2x2xf32>
  return %d : vector<1x2x2xf32>
}

// -----

func.func @warpgroup_mma_a(%a: memref<256xi32>, %b: memref<1024xi32>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op a must hold 64 rows of 32 bytes per warpgroup, at most 2 warpgroups}}
  %d = comfyquant.warpgroup_mma %a, %b : f16 x f16 : memref<256xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

func.func @warpgroup_mma_a_three_warpgroups(%a: memref<1536xi32>, %b: memref<1024xi32>) -> vector<16x2x2xi32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op a must hold 64 rows of 32 bytes per warpgroup, at most 2 warpgroups}}
  %d = comfyquant.warpgroup_mma %a, %b : i8 x i8 : memref<1536xi32>, memref<1024xi32> -> vector<16x2x2xi32>
  return %d : vector<16x2x2xi32>
}

// -----

func.func @warpgroup_mma_scales_two_warpgroups(%a: memref<1024xi32>, %b: memref<1024xi32>, %sa: memref<128xi8>, %sb: memref<128xi8>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op scales and FP4 operands take one warpgroup (a of 64 rows)}}
  %d = comfyquant.warpgroup_mma %a, %b scales(%sa, %sb : memref<128xi8>, memref<128xi8>) : f8E4M3FN x f8E4M3FN : memref<1024xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

func.func @warpgroup_mma_b(%a: memref<512xi32>, %b: memref<?xi32>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op b must hold N = 128 rows of 32 bytes}}
  %d = comfyquant.warpgroup_mma %a, %b : f16 x f16 : memref<512xi32>, memref<?xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

func.func @warpgroup_mma_scales_not_fp8(%a: memref<512xi32>, %b: memref<1024xi32>, %sa: memref<64xi8>, %sb: memref<128xi8>) -> vector<16x2x2xi32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op scales apply to FP8 and FP4 operands only}}
  %d = comfyquant.warpgroup_mma %a, %b scales(%sa, %sb : memref<64xi8>, memref<128xi8>) : i8 x i8 : memref<512xi32>, memref<1024xi32> -> vector<16x2x2xi32>
  return %d : vector<16x2x2xi32>
}

// -----

func.func @warpgroup_mma_scales_count(%a: memref<512xi32>, %b: memref<1024xi32>, %sa: memref<64xi8>, %sb: memref<64xi8>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op scales must be 1 byte(s) per row of A (64) and per column of B (128)}}
  %d = comfyquant.warpgroup_mma %a, %b scales(%sa, %sb : memref<64xi8>, memref<64xi8>) : f8E4M3FN x f8E4M3FN : memref<512xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

// FP4 (NVFP4): four UE4M3 scales per row and step, always given.
func.func @warpgroup_mma_fp4_scales_count(%a: memref<512xi32>, %b: memref<1024xi32>, %sa: memref<64xi8>, %sb: memref<128xi8>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op scales must be 4 byte(s) per row of A (256) and per column of B (512)}}
  %d = comfyquant.warpgroup_mma %a, %b scales(%sa, %sb : memref<64xi8>, memref<128xi8>) : f4E2M1FN x f4E2M1FN : memref<512xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

func.func @warpgroup_mma_fp4_no_scales(%a: memref<512xi32>, %b: memref<1024xi32>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op FP4 operands take scales}}
  %d = comfyquant.warpgroup_mma %a, %b : f4E2M1FN x f4E2M1FN : memref<512xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

//===----------------------------------------------------------------------===//
// #comfyquant.target / #comfyquant.cpu_gemm / #comfyquant.gpu_gemm and the
// code generators' records
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{unknown cpu target 'haswell' (known: x86-64-v3 avx512-vnni avx512-bf16 amx)}}
func.func private @f() attributes {t = #comfyquant.target<cpu, "haswell">}

// -----

// expected-error @+1 {{unknown cuda target 'sm_75' (known: sm_80 sm_86 sm_89 sm_90a sm_100a sm_120a sm_100f sm_120f)}}
func.func private @f() attributes {t = #comfyquant.target<cuda, "sm_75">}

// -----

// The tuning CPU is an x86 one: LLVM must know the name.
// expected-error @+1 {{tune = "pentium-z" is not generic, host or an LLVM x86-64 CPU name}}
func.func private @f() attributes {t = #comfyquant.target<cpu, "avx512-bf16", tune = "pentium-z">}

// -----

// expected-error @+1 {{tune = "znver4" applies to CPU targets only}}
func.func private @f() attributes {t = #comfyquant.target<cuda, "sm_90a", tune = "znver4">}

// -----

// A GEMM tag states types its kind multiplies: NVFP4 codes come in blocks.
// expected-error @+1 {{a fp4 GEMM does not multiply 'f4E2M1FN' x 'f4E2M1FN'}}
func.func private @f() attributes {t = #comfyquant.gemm_info<fp4, f4E2M1FN x f4E2M1FN>}

// -----

// expected-error @+1 {{a i8 GEMM does not multiply 'f32' x 'i8'}}
func.func private @f() attributes {t = #comfyquant.gemm_info<i8, f32 x i8>}

// -----

// expected-error @+1 {{'comfyquant.gemm_info' must be a #comfyquant.gemm_info}}
func.func private @f() attributes {comfyquant.gemm_info = 1 : i64}

// -----

// expected-error @+1 {{i8_amx computes one or two 16 x 16 tiles per direction (mr, nr = 16 or 32) with K steps of 64}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_amx, mr = 4, nr = 4, kv = 64, mc = 64, decode = none>}

// -----

// expected-error @+1 {{bf16_amx computes one or two 16 x 16 tiles per direction (mr, nr = 16 or 32) with K steps of 32}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<bf16_amx, mr = 32, nr = 32, kv = 64, mc = 64, decode = whole>}

// -----

// expected-error @+1 {{min_rows = 0 must be at least 1}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_amx, mr = 32, nr = 32, kv = 64, mc = 64, decode = none, min_rows = 0>}

// -----

// expected-error @+1 {{i8_vnni takes K steps of 64}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_vnni, mr = 4, nr = 4, kv = 16, mc = 64, decode = none>}

// -----

// expected-error @+1 {{mc = 30 must be a multiple of mr = 4}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 8, mc = 30, decode = none>}

// -----

// expected-error @+1 {{mr, nr, kv and mc must be positive}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 0, nr = 3, kv = 8, mc = 64, decode = none>}

// -----

// expected-error @+1 {{i8_amx reads B as stored or decoded whole, not decode = panel}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_amx, mr = 16, nr = 16, kv = 64, mc = 64, decode = panel>}

// -----

// expected-error @+1 {{f32_fma decodes B per tile or per step, not whole}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 8, mc = 64, decode = whole>}

// -----

// expected-error @+2 {{expected ::mlir::comfyquant::CpuDecode to be one of: none, whole, panel, register, adaptive}}
// expected-error @+1 {{failed to parse ComfyQuant_CpuGemmAttr parameter 'decode'}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 8, mc = 64, decode = somewhere>}

// -----

// expected-error @+1 {{form = outer needs f32_fma, i8_pmaddwd, a VNNI or a bf16 micro-kernel, not i8_generic}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_generic, mr = 6, nr = 2, kv = 16, mc = 60, decode = none, form = outer>}

// -----

// expected-error @+1 {{form = outer packs B per N tile; decode = register does not apply}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 60, decode = register, form = outer>}

// -----

// expected-error @+1 {{kc = 48 must be 0 (all of K) or a positive multiple of kv = 32}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 60, kc = 48, decode = none, form = outer>}

// -----

// expected-error @+1 {{kc = 64: K blocks are for the outer form (its panel)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 8, mc = 64, kc = 64, decode = none>}

// -----

// expected-error @+1 {{row = f32_fma is for a bf16 micro-kernel, not i8_vnni}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer, row = f32_fma>}

// -----

// expected-error @+1 {{row = bf16_dot is for f32_fma decoding B in registers (decode = register or adaptive)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = panel, form = outer, row = bf16_dot>}

// -----

// expected-error @+1 {{row = bf16_dot is for f32_fma decoding B in registers (decode = register or adaptive)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer, row = bf16_dot>}

// -----

// expected-error @+1 {{row = i8_planes is for an integer dot product (VNNI, pmaddwd or generic) decoding B in registers (decode = register or adaptive)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer, row = i8_planes>}

// -----

// expected-error @+1 {{row = i8_planes is for an integer dot product (VNNI, pmaddwd or generic) decoding B in registers (decode = register or adaptive)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = panel, form = outer, row = i8_planes>}

// -----

// expected-error @+1 {{bf16_dot takes K steps of 32 (one 512-bit register)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 16, mc = 60, decode = none, form = outer>}

// -----

// expected-error @+1 {{bf16_dot_emulated takes K steps of 16 or 32 (one register)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<bf16_dot_emulated, mr = 6, nr = 2, kv = 8, mc = 60, decode = none, form = outer>}

// -----

// expected-error @+2 {{expected ::mlir::comfyquant::CpuGemmForm to be one of: inner, outer}}
// expected-error @+1 {{failed to parse ComfyQuant_CpuGemmAttr parameter 'form'}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 8, mc = 64, decode = none, form = sideways>}

// -----

// expected-error @+1 {{the block tile [64, 128] must be a positive multiple of the warp tile [48, 128]}}
func.func private @f() attributes {g = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [48, 128], k_bytes = 32, stages = 1>}

// -----

// expected-error @+1 {{a warp tile is made of 16 x 8 MMA fragments}}
func.func private @f() attributes {g = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [64, 4], k_bytes = 32, stages = 1>}

// -----

// expected-error @+1 {{a K step is 32 bytes (one 8-bit MMA K)}}
func.func private @f() attributes {g = #comfyquant.gpu_gemm<f16, block = [64, 128], warp = [16, 128], k_bytes = 64, stages = 1>}

// -----

// expected-error @+1 {{block and warp are [rows, columns]}}
func.func private @f() attributes {g = #comfyquant.gpu_gemm<f16, block = [64], warp = [16, 128], k_bytes = 32, stages = 1>}

// -----

// expected-error @+1 {{split_k must be in [1, 16]}}
func.func private @f() attributes {g = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, split_k = 17>}

// -----

// expected-error @+1 {{decode_rows must be 0 (never) or above 16, the rows split K covers}}
func.func private @f() attributes {g = #comfyquant.gpu_gemm<s8, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1, decode_rows = 16>}

// -----

// expected-error @+1 {{'comfyquant.target' must be a #comfyquant.target}}
func.func private @f() attributes {comfyquant.target = "x86-64-v3"}

// -----

// expected-error @+1 {{'comfyquant.gemm' must be a GEMM config (#comfyquant.cpu_gemm, #comfyquant.gpu_gemm)}}
func.func private @f() attributes {comfyquant.gemm = {ukernel = "i8-vnni"}}

// -----

// expected-error @+1 {{'comfyquant.gemms' must be an array of GEMM configs}}
func.func private @f() attributes {comfyquant.gemms = [#comfyquant.target<cpu, "amx">]}

// -----

func.func @warpgroup_mma_space(%a: memref<512xi32>, %b: memref<1024xi32>) -> vector<16x2x2xf32> {
  // expected-error @+1 {{'comfyquant.warpgroup_mma' op tiles must be in workgroup memory (#gpu.address_space<workgroup>)}}
  %d = comfyquant.warpgroup_mma %a, %b : f16 x f16 : memref<512xi32>, memref<1024xi32> -> vector<16x2x2xf32>
  return %d : vector<16x2x2xf32>
}

// -----

// expected-error @+1 {{i8_pmaddwd takes K steps of 16 or 32 (one register)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 4, nr = 2, kv = 8, mc = 64, decode = none>}

// -----

// expected-error @+1 {{f32_fma takes K steps of 8 or 16 (one register)}}
func.func private @f() attributes {g = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 4, mc = 64, decode = none>}
