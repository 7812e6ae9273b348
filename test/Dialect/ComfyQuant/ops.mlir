// RUN: comfyquant-opt %s | comfyquant-opt | FileCheck %s
// RUN: comfyquant-opt %s --mlir-print-op-generic | comfyquant-opt | FileCheck %s
// RUN: comfyquant-opt %s --verify-roundtrip -o /dev/null

// Round trip of every op and attribute of the comfyquant dialect. Shapes follow
// docs/Formats.md §2.2 (single Linear), §7.1 (embeddings) and §7.2 (MoE banks).

//===----------------------------------------------------------------------===//
// Tensor element types: every safetensors dtype (and a 0-dim tensor).
//===----------------------------------------------------------------------===//

// CHECK-LABEL: comfyquant.checkpoint @dtypes path "all_dtypes.safetensors" size 4096 hash "fnv1a64:0123456789abcdef" {
// CHECK-NEXT:    comfyquant.tensor @u8 : tensor<4xui8> at 0
// CHECK-NEXT:    comfyquant.tensor @i8 : tensor<4xi8> at 4
// CHECK-NEXT:    comfyquant.tensor @f8_e4m3 : tensor<4xf8E4M3FN> at 8
// CHECK-NEXT:    comfyquant.tensor @f8_e5m2 : tensor<4xf8E5M2> at 12
// CHECK-NEXT:    comfyquant.tensor @f8_e8m0 : tensor<4xf8E8M0FNU> at 16
// CHECK-NEXT:    comfyquant.tensor @f16 : tensor<2x2xf16> at 20
// CHECK-NEXT:    comfyquant.tensor @bf16 : tensor<2x2xbf16> at 28
// CHECK-NEXT:    comfyquant.tensor @f32 : tensor<f32> at 36
// CHECK-NEXT:    comfyquant.tensor @f64 : tensor<1xf64> at 40
// CHECK-NEXT:    comfyquant.tensor @bool : tensor<3xi1> at 48
// CHECK-NEXT:    comfyquant.tensor @i16 : tensor<2xi16> at 52
// CHECK-NEXT:    comfyquant.tensor @i32 : tensor<2xi32> at 56
// CHECK-NEXT:    comfyquant.tensor @i64 : tensor<2xi64> at 64
// CHECK-NEXT:    comfyquant.tensor @u16 : tensor<2xui16> at 80
// CHECK-NEXT:    comfyquant.tensor @u32 : tensor<2xui32> at 84
// CHECK-NEXT:    comfyquant.tensor @u64 : tensor<2xui64> at 92
// CHECK-NEXT:    comfyquant.tensor @empty : tensor<0x8xf32> at 108
// CHECK-NEXT:    comfyquant.tensor @blocks.0.attn.to_q.weight : tensor<4x4xf8E4M3FN> at 108
// CHECK-NEXT:    comfyquant.tensor @"blocks.0.attn-out weight" : tensor<4xf32> at 124
// CHECK-NEXT:  }
comfyquant.checkpoint @dtypes path "all_dtypes.safetensors" size 4096 hash "fnv1a64:0123456789abcdef" {
  comfyquant.tensor @u8 : tensor<4xui8> at 0
  comfyquant.tensor @i8 : tensor<4xi8> at 4
  comfyquant.tensor @f8_e4m3 : tensor<4xf8E4M3FN> at 8
  comfyquant.tensor @f8_e5m2 : tensor<4xf8E5M2> at 12
  comfyquant.tensor @f8_e8m0 : tensor<4xf8E8M0FNU> at 16
  comfyquant.tensor @f16 : tensor<2x2xf16> at 20
  comfyquant.tensor @bf16 : tensor<2x2xbf16> at 28
  comfyquant.tensor @f32 : tensor<f32> at 36
  comfyquant.tensor @f64 : tensor<1xf64> at 40
  comfyquant.tensor @bool : tensor<3xi1> at 48
  comfyquant.tensor @i16 : tensor<2xi16> at 52
  comfyquant.tensor @i32 : tensor<2xi32> at 56
  comfyquant.tensor @i64 : tensor<2xi64> at 64
  comfyquant.tensor @u16 : tensor<2xui16> at 80
  comfyquant.tensor @u32 : tensor<2xui32> at 84
  comfyquant.tensor @u64 : tensor<2xui64> at 92
  comfyquant.tensor @empty : tensor<0x8xf32> at 108
  comfyquant.tensor @blocks.0.attn.to_q.weight : tensor<4x4xf8E4M3FN> at 108
  comfyquant.tensor @"blocks.0.attn-out weight" : tensor<4xf32> at 124
}

// A sharded checkpoint (an index.json): tensors name their shard.
// CHECK-LABEL: comfyquant.checkpoint @sharded path "model.safetensors.index.json" size 7591 hash "fnv1a64:36c7f627a764c672" {
// CHECK-NEXT:    comfyquant.tensor @fc2.weight : tensor<32x64xi8> at 1252 in "model-00002-of-00002.safetensors"
// CHECK-NEXT:    comfyquant.tensor @fc2.weight_scale : tensor<32x1xf32> at 564 in "model-00002-of-00002.safetensors"
// CHECK-NEXT:    comfyquant.tensor @norm.weight : tensor<64xbf16> at 552 in "model-00001-of-00002.safetensors"
// CHECK-NEXT:  }
comfyquant.checkpoint @sharded path "model.safetensors.index.json" size 7591 hash "fnv1a64:36c7f627a764c672" {
  comfyquant.tensor @fc2.weight : tensor<32x64xi8> at 1252 in "model-00002-of-00002.safetensors"
  comfyquant.tensor @fc2.weight_scale : tensor<32x1xf32> at 564 in "model-00002-of-00002.safetensors"
  comfyquant.tensor @norm.weight : tensor<64xbf16> at 552 in "model-00001-of-00002.safetensors"
}
// CHECK: comfyquant.linear @fc2 format <int8_tensorwise, granularity = row>[32, 64] tensors {weight = @sharded::@fc2.weight, weight_scale = @sharded::@fc2.weight_scale}
comfyquant.linear @fc2 format <int8_tensorwise, granularity = row> [32, 64]
    tensors {weight = @sharded::@fc2.weight, weight_scale = @sharded::@fc2.weight_scale}

//===----------------------------------------------------------------------===//
// The checkpoint the modules below bind to.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "model.safetensors" size 1000000 hash "fnv1a64:fedcba9876543210" {
comfyquant.checkpoint @ckpt path "model.safetensors" size 1000000 hash "fnv1a64:fedcba9876543210" {
  // float8_e4m3fn [32, 64]: scalar scale, input_scale, bias.
  comfyquant.tensor @fp8.weight : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @fp8.weight_scale : tensor<f32> at 2048
  comfyquant.tensor @fp8.input_scale : tensor<f32> at 2052
  comfyquant.tensor @fp8.bias : tensor<32xbf16> at 2056
  // float8_e5m2 [32, 64]: a [1] scale is a scalar too.
  comfyquant.tensor @e5m2.weight : tensor<32x64xf8E5M2> at 2120
  comfyquant.tensor @e5m2.weight_scale : tensor<1xf32> at 4168
  // nvfp4 [48, 80]: storage [48, 40] (Kp16 = 80), 128 x 8 swizzled scales,
  // pre_quant_scale [K], input_scale, bias.
  comfyquant.tensor @nvfp4.weight : tensor<48x40xui8> at 4172
  comfyquant.tensor @nvfp4.weight_scale : tensor<128x8xf8E4M3FN> at 6092
  comfyquant.tensor @nvfp4.weight_scale_2 : tensor<f32> at 7116
  comfyquant.tensor @nvfp4.input_scale : tensor<f32> at 7120
  comfyquant.tensor @nvfp4.pre_quant_scale : tensor<80xbf16> at 7124
  comfyquant.tensor @nvfp4.bias : tensor<48xf32> at 7284
  // nvfp4 [40, 24] padded to storage [48, 16]; U8 block scales stored flat.
  comfyquant.tensor @nvfp4u8.weight : tensor<48x16xui8> at 7476
  comfyquant.tensor @nvfp4u8.weight_scale : tensor<512xui8> at 8244
  comfyquant.tensor @nvfp4u8.weight_scale_2 : tensor<1xf32> at 8756
  // mxfp8 [64, 96]: E8M0 scales 128 x 4; input_scale is accepted (ignored).
  comfyquant.tensor @mxfp8.weight : tensor<64x96xf8E4M3FN> at 8760
  comfyquant.tensor @mxfp8.weight_scale : tensor<128x4xf8E8M0FNU> at 14904
  comfyquant.tensor @mxfp8.input_scale : tensor<f32> at 15416
  comfyquant.tensor @mxfp8.bias : tensor<64xbf16> at 15420
  // mxfp8 [50, 40] padded to storage [64, 64]; U8 scales.
  comfyquant.tensor @mxfp8u8.weight : tensor<64x64xf8E4M3FN> at 15548
  comfyquant.tensor @mxfp8u8.weight_scale : tensor<128x4xui8> at 19644
  // int8_tensorwise: scalar, per-row, per-row with ConvRot.
  comfyquant.tensor @int8s.weight : tensor<64x96xi8> at 20156
  comfyquant.tensor @int8s.weight_scale : tensor<f32> at 26300
  comfyquant.tensor @int8r.weight : tensor<32x64xi8> at 26304
  comfyquant.tensor @int8r.weight_scale : tensor<32x1xf32> at 28352
  comfyquant.tensor @int8r.bias : tensor<32xbf16> at 28480
  comfyquant.tensor @int8rot.weight : tensor<32x128xi8> at 28544
  comfyquant.tensor @int8rot.weight_scale : tensor<32x1xf32> at 32640
  comfyquant.tensor @int8rot.bias : tensor<32xbf16> at 32768
  // convrot_w4a4: [16, 256] Gr 256 linear_dtype int8; [32, 64] Gr 16.
  comfyquant.tensor @w4a4.weight : tensor<16x128xi8> at 32832
  comfyquant.tensor @w4a4.weight_scale : tensor<16xf32> at 34880
  comfyquant.tensor @w4a4g16.weight : tensor<32x32xi8> at 34944
  comfyquant.tensor @w4a4g16.weight_scale : tensor<32xf32> at 35968
  comfyquant.tensor @w4a4g16.bias : tensor<32xf16> at 36096
  // asym_w4a8_int8: E4M3 s_rel + codebook (G 16, Gr 256); F32 s_rel without
  // codebook (G 64, Gr 64); U8 s_rel (G 4, Gr 16).
  comfyquant.tensor @w4a8cb.weight : tensor<64x128xi8> at 36160
  comfyquant.tensor @w4a8cb.weight_s_rel : tensor<64x16xf8E4M3FN> at 44352
  comfyquant.tensor @w4a8cb.weight_s_channel : tensor<64xf32> at 45376
  comfyquant.tensor @w4a8cb.weight_codebook : tensor<16xf32> at 45632
  comfyquant.tensor @w4a8cb.bias : tensor<64xbf16> at 45696
  comfyquant.tensor @w4a8f32.weight : tensor<32x64xi8> at 45824
  comfyquant.tensor @w4a8f32.weight_s_rel : tensor<32x2xf32> at 47872
  comfyquant.tensor @w4a8f32.weight_s_channel : tensor<32xf32> at 48128
  comfyquant.tensor @w4a8u8.weight : tensor<16x32xi8> at 48256
  comfyquant.tensor @w4a8u8.weight_s_rel : tensor<16x16xui8> at 48768
  comfyquant.tensor @w4a8u8.weight_s_channel : tensor<16xf32> at 49024
  // w6a8_int8 [16, 128]: storage [N, 3K/4], G 32, Gr 64.
  comfyquant.tensor @w6a8.weight : tensor<16x96xi8> at 49088
  comfyquant.tensor @w6a8.weight_s_rel : tensor<16x4xf8E4M3FN> at 50624
  comfyquant.tensor @w6a8.weight_s_channel : tensor<16xf32> at 50688
  // Embeddings: fp8 with and without a scale, int8 per-row ± ConvRot.
  comfyquant.tensor @emb_fp8.weight : tensor<64x32xf8E4M3FN> at 50752
  comfyquant.tensor @emb_fp8.weight_scale : tensor<f32> at 52800
  comfyquant.tensor @emb_e5m2.weight : tensor<64x32xf8E5M2> at 52804
  comfyquant.tensor @emb_int8.weight : tensor<64x48xi8> at 54852
  comfyquant.tensor @emb_int8.weight_scale : tensor<64x1xf32> at 57924
  comfyquant.tensor @emb_rot.weight : tensor<48x128xi8> at 58180
  comfyquant.tensor @emb_rot.weight_scale : tensor<48x1xf32> at 64324
  // MoE 3-D banks.
  comfyquant.tensor @moe_fp8.weight : tensor<3x32x64xf8E4M3FN> at 64516
  comfyquant.tensor @moe_fp8.weight_scale : tensor<3xf32> at 70660
  comfyquant.tensor @moe_fp8.bias : tensor<3x32xbf16> at 70672
  comfyquant.tensor @moe_nvfp4.weight : tensor<2x48x24xui8> at 70864
  comfyquant.tensor @moe_nvfp4.weight_scale : tensor<2x128x4xf8E4M3FN> at 73168
  comfyquant.tensor @moe_nvfp4.weight_scale_2 : tensor<2xf32> at 74192
  comfyquant.tensor @moe_mxfp8.weight : tensor<2x32x64xf8E4M3FN> at 74200
  comfyquant.tensor @moe_mxfp8.weight_scale : tensor<2x128x4xui8> at 78296
  comfyquant.tensor @moe_w4a4.weight : tensor<2x32x32xi8> at 79320
  comfyquant.tensor @moe_w4a4.weight_scale : tensor<2x32xf32> at 81368
  comfyquant.tensor @moe_int8s.weight : tensor<2x32x64xi8> at 81624
  comfyquant.tensor @moe_int8s.weight_scale : tensor<f32> at 85720
  comfyquant.tensor @moe_int8e.weight : tensor<3x32x64xi8> at 85724
  comfyquant.tensor @moe_int8e.weight_scale : tensor<3xf32> at 91868
  comfyquant.tensor @moe_int8r.weight : tensor<3x16x64xi8> at 91880
  comfyquant.tensor @moe_int8r.weight_scale : tensor<3x16x1xf32> at 94952
  comfyquant.tensor @moe_w6a8.weight : tensor<2x16x192xi8> at 95144
  comfyquant.tensor @moe_w6a8.weight_s_rel : tensor<2x16x16xf8E4M3FN> at 101288
  comfyquant.tensor @moe_w6a8.weight_s_channel : tensor<2x16xf32> at 101800
  // MoE flattened banks: [E·N, ...].
  comfyquant.tensor @flat_int8.weight : tensor<32x64xi8> at 101928
  comfyquant.tensor @flat_int8.weight_scale : tensor<32x1xf32> at 103976
  comfyquant.tensor @flat_w4a8.weight : tensor<32x128xi8> at 104104
  comfyquant.tensor @flat_w4a8.weight_s_rel : tensor<32x16xf8E4M3FN> at 108200
  comfyquant.tensor @flat_w4a8.weight_s_channel : tensor<32xf32> at 108712
  comfyquant.tensor @flat_w4a8.weight_codebook : tensor<16xf32> at 108840
  comfyquant.tensor @flat_w6a8.weight : tensor<32x48xi8> at 108904
  comfyquant.tensor @flat_w6a8.weight_s_rel : tensor<32x4xf32> at 110440
  comfyquant.tensor @flat_w6a8.weight_s_channel : tensor<32xf32> at 110952
}
// CHECK:        comfyquant.tensor @fp8.weight : tensor<32x64xf8E4M3FN> at 0
// CHECK:        comfyquant.tensor @flat_w6a8.weight_s_channel : tensor<32xf32> at 110952
// CHECK-NEXT:  }

//===----------------------------------------------------------------------===//
// Attention preferences (docs/Formats.md §7.3): one object or an array of objects.
//===----------------------------------------------------------------------===//

// CHECK: comfyquant.attention "transformer_blocks.0.attn" config "{\22attention\22: \22comfy_kitchen_int8\22}"
comfyquant.attention "transformer_blocks.0.attn" config "{\"attention\": \"comfy_kitchen_int8\"}"
// CHECK: comfyquant.attention "blocks.0.attn" config "[{\22attention\22: \22comfy_kitchen_sol\22, \22tau\22: 1.5}, {\22attention\22: \22comfy_kitchen_int8\22}]"
comfyquant.attention "blocks.0.attn" config "[{\"attention\": \"comfy_kitchen_sol\", \"tau\": 1.5}, {\"attention\": \"comfy_kitchen_int8\"}]"
// An unknown method is kept verbatim (ComfyUI skips it with a warning).
// CHECK: comfyquant.attention "blocks.1.attn" config "[{\22attention\22: \22flash_v9\22}]"
comfyquant.attention "blocks.1.attn" config "[{\"attention\": \"flash_v9\"}]"
// CHECK: comfyquant.attention "blocks.2.attn" config "[]"
comfyquant.attention "blocks.2.attn" config "[]"

//===----------------------------------------------------------------------===//
// Linear modules: every format.
//===----------------------------------------------------------------------===//

// CHECK: comfyquant.linear @fp8 format <float8_e4m3fn, granularity = tensor>[32, 64] options <full_precision_matrix_mult = true> tensors {bias = @ckpt::@fp8.bias, input_scale = @ckpt::@fp8.input_scale, weight = @ckpt::@fp8.weight, weight_scale = @ckpt::@fp8.weight_scale}
comfyquant.linear @fp8 format <float8_e4m3fn, granularity = tensor> [32, 64]
    options <full_precision_matrix_mult = true>
    tensors {bias = @ckpt::@fp8.bias, input_scale = @ckpt::@fp8.input_scale,
             weight = @ckpt::@fp8.weight, weight_scale = @ckpt::@fp8.weight_scale}

// The default options print empty.
// CHECK: comfyquant.linear @e5m2 format <float8_e5m2, granularity = tensor>[32, 64] options <> tensors {weight = @ckpt::@e5m2.weight, weight_scale = @ckpt::@e5m2.weight_scale}
comfyquant.linear @e5m2 format <float8_e5m2, granularity = tensor> [32, 64]
    options <full_precision_matrix_mult = false>
    tensors {weight = @ckpt::@e5m2.weight, weight_scale = @ckpt::@e5m2.weight_scale}

// CHECK: comfyquant.linear @nvfp4 format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>[48, 80] tensors {bias = @ckpt::@nvfp4.bias, input_scale = @ckpt::@nvfp4.input_scale, pre_quant_scale = @ckpt::@nvfp4.pre_quant_scale, weight = @ckpt::@nvfp4.weight, weight_scale = @ckpt::@nvfp4.weight_scale, weight_scale_2 = @ckpt::@nvfp4.weight_scale_2}
comfyquant.linear @nvfp4 format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {bias = @ckpt::@nvfp4.bias, input_scale = @ckpt::@nvfp4.input_scale,
             pre_quant_scale = @ckpt::@nvfp4.pre_quant_scale,
             weight = @ckpt::@nvfp4.weight, weight_scale = @ckpt::@nvfp4.weight_scale,
             weight_scale_2 = @ckpt::@nvfp4.weight_scale_2}

// struct() parameters parse in any order and print in declaration order.
// CHECK: comfyquant.linear @nvfp4_padded format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>[40, 24] tensors {weight = @ckpt::@nvfp4u8.weight, weight_scale = @ckpt::@nvfp4u8.weight_scale, weight_scale_2 = @ckpt::@nvfp4u8.weight_scale_2}
comfyquant.linear @nvfp4_padded format <nvfp4, nibbles = high_first, scale = f8E4M3FN, group = 16, granularity = block> [40, 24]
    tensors {weight = @ckpt::@nvfp4u8.weight, weight_scale = @ckpt::@nvfp4u8.weight_scale,
             weight_scale_2 = @ckpt::@nvfp4u8.weight_scale_2}

// CHECK: comfyquant.linear @mxfp8 format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU>[64, 96] tensors {bias = @ckpt::@mxfp8.bias, input_scale = @ckpt::@mxfp8.input_scale, weight = @ckpt::@mxfp8.weight, weight_scale = @ckpt::@mxfp8.weight_scale}
comfyquant.linear @mxfp8 format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {bias = @ckpt::@mxfp8.bias, input_scale = @ckpt::@mxfp8.input_scale,
             weight = @ckpt::@mxfp8.weight, weight_scale = @ckpt::@mxfp8.weight_scale}

// CHECK: comfyquant.linear @mxfp8_padded format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU>[50, 40] tensors {weight = @ckpt::@mxfp8u8.weight, weight_scale = @ckpt::@mxfp8u8.weight_scale}
comfyquant.linear @mxfp8_padded format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [50, 40]
    tensors {weight = @ckpt::@mxfp8u8.weight, weight_scale = @ckpt::@mxfp8u8.weight_scale}

// CHECK: comfyquant.linear @int8_scalar format <int8_tensorwise, granularity = tensor>[64, 96] tensors {weight = @ckpt::@int8s.weight, weight_scale = @ckpt::@int8s.weight_scale}
comfyquant.linear @int8_scalar format <int8_tensorwise, granularity = tensor> [64, 96]
    tensors {weight = @ckpt::@int8s.weight, weight_scale = @ckpt::@int8s.weight_scale}

// An explicit f32 scale type is accepted for tensor / row scales.
// CHECK: comfyquant.linear @int8_rows format <int8_tensorwise, granularity = row, scale = f32>[32, 64] tensors {bias = @ckpt::@int8r.bias, weight = @ckpt::@int8r.weight, weight_scale = @ckpt::@int8r.weight_scale}
comfyquant.linear @int8_rows format <int8_tensorwise, granularity = row, scale = f32> [32, 64]
    tensors {bias = @ckpt::@int8r.bias, weight = @ckpt::@int8r.weight,
             weight_scale = @ckpt::@int8r.weight_scale}

// CHECK: comfyquant.linear @int8_convrot format <int8_tensorwise, granularity = row>[32, 128] rotation <64> tensors {bias = @ckpt::@int8rot.bias, weight = @ckpt::@int8rot.weight, weight_scale = @ckpt::@int8rot.weight_scale}
comfyquant.linear @int8_convrot format <int8_tensorwise, granularity = row> [32, 128] rotation <64>
    tensors {bias = @ckpt::@int8rot.bias, weight = @ckpt::@int8rot.weight,
             weight_scale = @ckpt::@int8rot.weight_scale}

// CHECK: comfyquant.linear @w4a4 format <convrot_w4a4, granularity = row, nibbles = low_first>[16, 256] rotation <256> options <linear_dtype = int8> tensors {weight = @ckpt::@w4a4.weight, weight_scale = @ckpt::@w4a4.weight_scale}
comfyquant.linear @w4a4 format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256]
    rotation <256> options <linear_dtype = int8>
    tensors {weight = @ckpt::@w4a4.weight, weight_scale = @ckpt::@w4a4.weight_scale}

// CHECK: comfyquant.linear @w4a4_g16 format <convrot_w4a4, granularity = row, nibbles = low_first>[32, 64] rotation <16> options <full_precision_matrix_mult = true, linear_dtype = int4> tensors {bias = @ckpt::@w4a4g16.bias, weight = @ckpt::@w4a4g16.weight, weight_scale = @ckpt::@w4a4g16.weight_scale}
comfyquant.linear @w4a4_g16 format <convrot_w4a4, granularity = row, nibbles = low_first> [32, 64]
    rotation <16> options <linear_dtype = int4, full_precision_matrix_mult = true>
    tensors {bias = @ckpt::@w4a4g16.bias, weight = @ckpt::@w4a4g16.weight,
             weight_scale = @ckpt::@w4a4g16.weight_scale}

// CHECK: comfyquant.linear @w4a8_codebook format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>[64, 256] rotation <256> tensors {bias = @ckpt::@w4a8cb.bias, weight = @ckpt::@w4a8cb.weight, weight_codebook = @ckpt::@w4a8cb.weight_codebook, weight_s_channel = @ckpt::@w4a8cb.weight_s_channel, weight_s_rel = @ckpt::@w4a8cb.weight_s_rel}
comfyquant.linear @w4a8_codebook format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [64, 256]
    rotation <256>
    tensors {bias = @ckpt::@w4a8cb.bias, weight = @ckpt::@w4a8cb.weight,
             weight_codebook = @ckpt::@w4a8cb.weight_codebook,
             weight_s_channel = @ckpt::@w4a8cb.weight_s_channel,
             weight_s_rel = @ckpt::@w4a8cb.weight_s_rel}

// CHECK: comfyquant.linear @w4a8_f32 format <asym_w4a8_int8, granularity = group, group = 64, scale = f32, nibbles = low_first>[32, 128] rotation <64> tensors {weight = @ckpt::@w4a8f32.weight, weight_s_channel = @ckpt::@w4a8f32.weight_s_channel, weight_s_rel = @ckpt::@w4a8f32.weight_s_rel}
comfyquant.linear @w4a8_f32 format <asym_w4a8_int8, granularity = group, group = 64, scale = f32, nibbles = low_first> [32, 128]
    rotation <64>
    tensors {weight = @ckpt::@w4a8f32.weight, weight_s_channel = @ckpt::@w4a8f32.weight_s_channel,
             weight_s_rel = @ckpt::@w4a8f32.weight_s_rel}

// U8 s_rel holds E4M3 bits (docs/Formats.md §1.3 step 5).
// CHECK: comfyquant.linear @w4a8_u8 format <asym_w4a8_int8, granularity = group, group = 4, scale = f8E4M3FN, nibbles = low_first>[16, 64] rotation <16> tensors {weight = @ckpt::@w4a8u8.weight, weight_s_channel = @ckpt::@w4a8u8.weight_s_channel, weight_s_rel = @ckpt::@w4a8u8.weight_s_rel}
comfyquant.linear @w4a8_u8 format <asym_w4a8_int8, granularity = group, group = 4, scale = f8E4M3FN, nibbles = low_first> [16, 64]
    rotation <16>
    tensors {weight = @ckpt::@w4a8u8.weight, weight_s_channel = @ckpt::@w4a8u8.weight_s_channel,
             weight_s_rel = @ckpt::@w4a8u8.weight_s_rel}

// CHECK: comfyquant.linear @w6a8 format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first>[16, 128] rotation <64> tensors {weight = @ckpt::@w6a8.weight, weight_s_channel = @ckpt::@w6a8.weight_s_channel, weight_s_rel = @ckpt::@w6a8.weight_s_rel}
comfyquant.linear @w6a8 format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 128]
    rotation <64>
    tensors {weight = @ckpt::@w6a8.weight, weight_s_channel = @ckpt::@w6a8.weight_s_channel,
             weight_s_rel = @ckpt::@w6a8.weight_s_rel}

// Extra attributes survive the round trip.
// CHECK: comfyquant.linear @fp8_tagged format <float8_e4m3fn, granularity = tensor>[32, 64] tensors {weight = @ckpt::@fp8.weight, weight_scale = @ckpt::@fp8.weight_scale} {note = "shared"}
comfyquant.linear @fp8_tagged format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {weight = @ckpt::@fp8.weight, weight_scale = @ckpt::@fp8.weight_scale} {note = "shared"}

//===----------------------------------------------------------------------===//
// Embeddings (docs/Formats.md §7.1).
//===----------------------------------------------------------------------===//

// CHECK: comfyquant.embedding @emb_fp8 format <float8_e4m3fn, granularity = tensor>[64, 32] tensors {weight = @ckpt::@emb_fp8.weight, weight_scale = @ckpt::@emb_fp8.weight_scale}
comfyquant.embedding @emb_fp8 format <float8_e4m3fn, granularity = tensor> [64, 32]
    tensors {weight = @ckpt::@emb_fp8.weight, weight_scale = @ckpt::@emb_fp8.weight_scale}
// The scale is optional on embeddings (1.0).
// CHECK: comfyquant.embedding @emb_e5m2 format <float8_e5m2, granularity = tensor>[64, 32] tensors {weight = @ckpt::@emb_e5m2.weight}
comfyquant.embedding @emb_e5m2 format <float8_e5m2, granularity = tensor> [64, 32]
    tensors {weight = @ckpt::@emb_e5m2.weight}
// CHECK: comfyquant.embedding @emb_int8 format <int8_tensorwise, granularity = row>[64, 48] tensors {weight = @ckpt::@emb_int8.weight, weight_scale = @ckpt::@emb_int8.weight_scale}
comfyquant.embedding @emb_int8 format <int8_tensorwise, granularity = row> [64, 48]
    tensors {weight = @ckpt::@emb_int8.weight, weight_scale = @ckpt::@emb_int8.weight_scale}
// CHECK: comfyquant.embedding @emb_rot format <int8_tensorwise, granularity = row>[48, 128] rotation <64> tensors {weight = @ckpt::@emb_rot.weight, weight_scale = @ckpt::@emb_rot.weight_scale}
comfyquant.embedding @emb_rot format <int8_tensorwise, granularity = row> [48, 128] rotation <64>
    tensors {weight = @ckpt::@emb_rot.weight, weight_scale = @ckpt::@emb_rot.weight_scale}

//===----------------------------------------------------------------------===//
// MoE banks (docs/Formats.md §7.2): 3-D and flattened.
//===----------------------------------------------------------------------===//

// CHECK: comfyquant.moe @moe_fp8 format <float8_e4m3fn, granularity = tensor>[3 x 32, 64] tensors {bias = @ckpt::@moe_fp8.bias, weight = @ckpt::@moe_fp8.weight, weight_scale = @ckpt::@moe_fp8.weight_scale}
comfyquant.moe @moe_fp8 format <float8_e4m3fn, granularity = tensor> [3 x 32, 64]
    tensors {bias = @ckpt::@moe_fp8.bias, weight = @ckpt::@moe_fp8.weight,
             weight_scale = @ckpt::@moe_fp8.weight_scale}
// CHECK: comfyquant.moe @moe_nvfp4 format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>[2 x 48, 48] tensors {weight = @ckpt::@moe_nvfp4.weight, weight_scale = @ckpt::@moe_nvfp4.weight_scale, weight_scale_2 = @ckpt::@moe_nvfp4.weight_scale_2}
comfyquant.moe @moe_nvfp4 format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [2 x 48, 48]
    tensors {weight = @ckpt::@moe_nvfp4.weight, weight_scale = @ckpt::@moe_nvfp4.weight_scale,
             weight_scale_2 = @ckpt::@moe_nvfp4.weight_scale_2}
// CHECK: comfyquant.moe @moe_mxfp8 format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU>[2 x 32, 64] options <full_precision_matrix_mult = true> tensors {weight = @ckpt::@moe_mxfp8.weight, weight_scale = @ckpt::@moe_mxfp8.weight_scale}
comfyquant.moe @moe_mxfp8 format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [2 x 32, 64]
    options <full_precision_matrix_mult = true>
    tensors {weight = @ckpt::@moe_mxfp8.weight, weight_scale = @ckpt::@moe_mxfp8.weight_scale}
// CHECK: comfyquant.moe @moe_w4a4 format <convrot_w4a4, granularity = row, nibbles = low_first>[2 x 32, 64] rotation <64> tensors {weight = @ckpt::@moe_w4a4.weight, weight_scale = @ckpt::@moe_w4a4.weight_scale}
comfyquant.moe @moe_w4a4 format <convrot_w4a4, granularity = row, nibbles = low_first> [2 x 32, 64]
    rotation <64>
    tensors {weight = @ckpt::@moe_w4a4.weight, weight_scale = @ckpt::@moe_w4a4.weight_scale}
// CHECK: comfyquant.moe @moe_int8_scalar format <int8_tensorwise, granularity = tensor>[2 x 32, 64] tensors {weight = @ckpt::@moe_int8s.weight, weight_scale = @ckpt::@moe_int8s.weight_scale}
comfyquant.moe @moe_int8_scalar format <int8_tensorwise, granularity = tensor> [2 x 32, 64]
    tensors {weight = @ckpt::@moe_int8s.weight, weight_scale = @ckpt::@moe_int8s.weight_scale}
// CHECK: comfyquant.moe @moe_int8_per_expert format <int8_tensorwise, granularity = tensor>[3 x 32, 64] tensors {weight = @ckpt::@moe_int8e.weight, weight_scale = @ckpt::@moe_int8e.weight_scale}
comfyquant.moe @moe_int8_per_expert format <int8_tensorwise, granularity = tensor> [3 x 32, 64]
    tensors {weight = @ckpt::@moe_int8e.weight, weight_scale = @ckpt::@moe_int8e.weight_scale}
// CHECK: comfyquant.moe @moe_int8_rows format <int8_tensorwise, granularity = row>[3 x 16, 64] tensors {weight = @ckpt::@moe_int8r.weight, weight_scale = @ckpt::@moe_int8r.weight_scale}
comfyquant.moe @moe_int8_rows format <int8_tensorwise, granularity = row> [3 x 16, 64]
    tensors {weight = @ckpt::@moe_int8r.weight, weight_scale = @ckpt::@moe_int8r.weight_scale}
// CHECK: comfyquant.moe @moe_w6a8 format <w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>[2 x 16, 256] rotation <256> tensors {weight = @ckpt::@moe_w6a8.weight, weight_s_channel = @ckpt::@moe_w6a8.weight_s_channel, weight_s_rel = @ckpt::@moe_w6a8.weight_s_rel}
comfyquant.moe @moe_w6a8 format <w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [2 x 16, 256]
    rotation <256>
    tensors {weight = @ckpt::@moe_w6a8.weight, weight_s_channel = @ckpt::@moe_w6a8.weight_s_channel,
             weight_s_rel = @ckpt::@moe_w6a8.weight_s_rel}
// Flattened banks: weight [E·N, K], per-row scales [E·N, 1].
// CHECK: comfyquant.moe @flat_int8 format <int8_tensorwise, granularity = row>[2 x 16, 64] rotation <16> tensors {weight = @ckpt::@flat_int8.weight, weight_scale = @ckpt::@flat_int8.weight_scale}
comfyquant.moe @flat_int8 format <int8_tensorwise, granularity = row> [2 x 16, 64] rotation <16>
    tensors {weight = @ckpt::@flat_int8.weight, weight_scale = @ckpt::@flat_int8.weight_scale}
// CHECK: comfyquant.moe @flat_w4a8 format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>[2 x 16, 256] rotation <256> tensors {weight = @ckpt::@flat_w4a8.weight, weight_codebook = @ckpt::@flat_w4a8.weight_codebook, weight_s_channel = @ckpt::@flat_w4a8.weight_s_channel, weight_s_rel = @ckpt::@flat_w4a8.weight_s_rel}
comfyquant.moe @flat_w4a8 format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [2 x 16, 256]
    rotation <256>
    tensors {weight = @ckpt::@flat_w4a8.weight, weight_codebook = @ckpt::@flat_w4a8.weight_codebook,
             weight_s_channel = @ckpt::@flat_w4a8.weight_s_channel,
             weight_s_rel = @ckpt::@flat_w4a8.weight_s_rel}
// CHECK: comfyquant.moe @flat_w6a8 format <w6a8_int8, granularity = group, group = 16, scale = f32, nibbles = low_first>[2 x 16, 64] rotation <64> tensors {weight = @ckpt::@flat_w6a8.weight, weight_s_channel = @ckpt::@flat_w6a8.weight_s_channel, weight_s_rel = @ckpt::@flat_w6a8.weight_s_rel}
comfyquant.moe @flat_w6a8 format <w6a8_int8, granularity = group, group = 16, scale = f32, nibbles = low_first> [2 x 16, 64]
    rotation <64>
    tensors {weight = @ckpt::@flat_w6a8.weight, weight_s_channel = @ckpt::@flat_w6a8.weight_s_channel,
             weight_s_rel = @ckpt::@flat_w6a8.weight_s_rel}

//===----------------------------------------------------------------------===//
// Attributes on their own (generic attribute syntax).
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func private @attrs()
// CHECK-SAME: act_fp8 = #comfyquant.act<fp8_static, type = f8E4M3FN>
// CHECK-SAME: act_i4 = #comfyquant.act<int4_row>
// CHECK-SAME: act_i8 = #comfyquant.act<int8_row>
// CHECK-SAME: fmt = #comfyquant.format<w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
// CHECK-SAME: opts = #comfyquant.options<full_precision_matrix_mult = true, linear_dtype = int4>
// CHECK-SAME: rot = #comfyquant.convrot<1024>
func.func private @attrs() attributes {
  act_fp8 = #comfyquant.act<fp8_static, type = f8E4M3FN>,
  act_i4 = #comfyquant.act<int4_row>,
  act_i8 = #comfyquant.act<int8_row>,
  fmt = #comfyquant.format<w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>,
  opts = #comfyquant.options<full_precision_matrix_mult = true, linear_dtype = int4>,
  rot = #comfyquant.convrot<1024>}

//===----------------------------------------------------------------------===//
// Computation level: weight / rotate / quantize / dequantize / qmatmul /
// epilogue.
//===----------------------------------------------------------------------===//

// int8 ConvRot Linear (docs/Formats.md §5 step 5): rotate, per-row int8 quantize,
// int32 GEMM, epilogue.
// CHECK-LABEL: func.func @int8_convrot_linear(
// CHECK-SAME:    %[[X:.*]]: tensor<8x128xbf16>)
// CHECK:         %[[W:.*]] = comfyquant.weight @ckpt::@int8rot.weight : tensor<32x128xi8>
// CHECK:         %[[WS:.*]] = comfyquant.weight @ckpt::@int8rot.weight_scale : tensor<32x1xf32>
// CHECK:         %[[B:.*]] = comfyquant.weight @ckpt::@int8rot.bias : tensor<32xbf16>
// CHECK:         %[[XR:.*]] = comfyquant.rotate %[[X]] <64> : tensor<8x128xbf16>
// CHECK:         %[[XQ:.*]], %[[XS:.*]] = comfyquant.quantize %[[XR]] <int8_row> : tensor<8x128xbf16> -> tensor<8x128xi8>, tensor<8x1xf32>
// CHECK:         %[[ACC:.*]] = comfyquant.qmatmul %[[XQ]], %[[W]] : tensor<8x128xi8>, tensor<32x128xi8> -> tensor<8x32xi32>
// CHECK:         %[[Y:.*]] = comfyquant.epilogue %[[ACC]] row_scale %[[XS]] : tensor<8x1xf32> col_scale %[[WS]] : tensor<32x1xf32> bias %[[B]] : tensor<32xbf16> : tensor<8x32xi32> -> tensor<8x32xbf16>
// CHECK:         return %[[Y]]
func.func @int8_convrot_linear(%x: tensor<8x128xbf16>) -> tensor<8x32xbf16> {
  %w = comfyquant.weight @ckpt::@int8rot.weight : tensor<32x128xi8>
  %ws = comfyquant.weight @ckpt::@int8rot.weight_scale : tensor<32x1xf32>
  %b = comfyquant.weight @ckpt::@int8rot.bias : tensor<32xbf16>
  %xr = comfyquant.rotate %x <64> : tensor<8x128xbf16>
  %xq, %xs = comfyquant.quantize %xr <int8_row> : tensor<8x128xbf16> -> tensor<8x128xi8>, tensor<8x1xf32>
  %acc = comfyquant.qmatmul %xq, %w : tensor<8x128xi8>, tensor<32x128xi8> -> tensor<8x32xi32>
  %y = comfyquant.epilogue %acc row_scale %xs : tensor<8x1xf32> col_scale %ws : tensor<32x1xf32> bias %b : tensor<32xbf16> : tensor<8x32xi32> -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// FP8 static activation quantization with and without input_scale; scalar
// scales in the epilogue; dynamic M.
// CHECK-LABEL: func.func @fp8_linear(
// CHECK-SAME:    %[[X:.*]]: tensor<?x64xbf16>, %[[IS:.*]]: tensor<f32>)
// CHECK:         %[[W:.*]] = comfyquant.weight @ckpt::@fp8.weight : tensor<32x64xf8E4M3FN>
// CHECK:         %[[WS:.*]] = comfyquant.weight @ckpt::@fp8.weight_scale : tensor<f32>
// CHECK:         %[[XQ:.*]], %[[XS:.*]] = comfyquant.quantize %[[X]] <fp8_static, type = f8E4M3FN> scale %[[IS]] : tensor<f32> : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<f32>
// CHECK:         %[[ACC:.*]] = comfyquant.qmatmul %[[XQ]], %[[W]] : tensor<?x64xf8E4M3FN>, tensor<32x64xf8E4M3FN> -> tensor<?x32xf32>
// CHECK:         comfyquant.epilogue %[[ACC]] row_scale %[[XS]] : tensor<f32> col_scale %[[WS]] : tensor<f32> : tensor<?x32xf32> -> tensor<?x32xbf16>
// CHECK:         %[[XQ2:.*]], %[[XS2:.*]] = comfyquant.quantize %[[X]] <fp8_static, type = f8E5M2> : tensor<?x64xbf16> -> tensor<?x64xf8E5M2>, tensor<1xf32>
// CHECK:         comfyquant.epilogue %{{.*}} : tensor<?x32xf32> -> tensor<?x32xf16>
func.func @fp8_linear(%x: tensor<?x64xbf16>, %is: tensor<f32>) -> (tensor<?x32xbf16>, tensor<?x32xf16>) {
  %w = comfyquant.weight @ckpt::@fp8.weight : tensor<32x64xf8E4M3FN>
  %ws = comfyquant.weight @ckpt::@fp8.weight_scale : tensor<f32>
  %xq, %xs = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> scale %is : tensor<f32> : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<f32>
  %acc = comfyquant.qmatmul %xq, %w : tensor<?x64xf8E4M3FN>, tensor<32x64xf8E4M3FN> -> tensor<?x32xf32>
  %y = comfyquant.epilogue %acc row_scale %xs : tensor<f32> col_scale %ws : tensor<f32> : tensor<?x32xf32> -> tensor<?x32xbf16>
  %w2 = comfyquant.weight @ckpt::@e5m2.weight : tensor<32x64xf8E5M2>
  %xq2, %xs2 = comfyquant.quantize %x <fp8_static, type = f8E5M2> : tensor<?x64xbf16> -> tensor<?x64xf8E5M2>, tensor<1xf32>
  %acc2 = comfyquant.qmatmul %xq2, %w2 : tensor<?x64xf8E5M2>, tensor<32x64xf8E5M2> -> tensor<?x32xf32>
  %y2 = comfyquant.epilogue %acc2 : tensor<?x32xf32> -> tensor<?x32xf16>
  return %y, %y2 : tensor<?x32xbf16>, tensor<?x32xf16>
}

// int4 rows with an i4 x i4 matmul (convrot_w4a4, linear_dtype int4); int8
// activations against int4 weights (linear_dtype int8); float matmuls of FP4
// codes and of bf16 (dequantized) weights.
// CHECK-LABEL: func.func @int4_and_float_matmuls(
// CHECK-SAME:    %[[Z:.*]]: tensor<4x256xf32>, %[[W4:.*]]: tensor<16x256xi4>, %[[A8:.*]]: tensor<4x256xi8>, %[[AF4:.*]]: tensor<4x80xf4E2M1FN>, %[[WF4:.*]]: tensor<48x80xf4E2M1FN>, %[[WBF:.*]]: tensor<64x96xbf16>, %[[ABF:.*]]: tensor<4x96xbf16>)
// CHECK:         %[[ZR:.*]] = comfyquant.rotate %[[Z]] <256> : tensor<4x256xf32>
// CHECK:         %[[ZQ:.*]], %{{.*}} = comfyquant.quantize %[[ZR]] <int4_row> : tensor<4x256xf32> -> tensor<4x256xi4>, tensor<4x1xf32>
// CHECK:         comfyquant.qmatmul %[[ZQ]], %[[W4]] : tensor<4x256xi4>, tensor<16x256xi4> -> tensor<4x16xi32>
// CHECK:         comfyquant.qmatmul %[[A8]], %[[W4]] : tensor<4x256xi8>, tensor<16x256xi4> -> tensor<4x16xi32>
// CHECK:         comfyquant.qmatmul %[[AF4]], %[[WF4]] : tensor<4x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<4x48xf32>
// CHECK:         comfyquant.qmatmul %[[ABF]], %[[WBF]] : tensor<4x96xbf16>, tensor<64x96xbf16> -> tensor<4x64xf32>
func.func @int4_and_float_matmuls(%z: tensor<4x256xf32>, %w4: tensor<16x256xi4>, %a8: tensor<4x256xi8>,
                                  %af4: tensor<4x80xf4E2M1FN>, %wf4: tensor<48x80xf4E2M1FN>,
                                  %wbf: tensor<64x96xbf16>, %abf: tensor<4x96xbf16>) {
  %zr = comfyquant.rotate %z <256> : tensor<4x256xf32>
  %zq, %zs = comfyquant.quantize %zr <int4_row> : tensor<4x256xf32> -> tensor<4x256xi4>, tensor<4x1xf32>
  %0 = comfyquant.qmatmul %zq, %w4 : tensor<4x256xi4>, tensor<16x256xi4> -> tensor<4x16xi32>
  %1 = comfyquant.qmatmul %a8, %w4 : tensor<4x256xi8>, tensor<16x256xi4> -> tensor<4x16xi32>
  %2 = comfyquant.qmatmul %af4, %wf4 : tensor<4x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<4x48xf32>
  %3 = comfyquant.qmatmul %abf, %wbf : tensor<4x96xbf16>, tensor<64x96xbf16> -> tensor<4x64xf32>
  return
}

// Block activation schemes: NVFP4 (E4M3 16-blocks, static or dynamic global
// scale, returned as the third result) and MXFP8 (E8M0 32-blocks).
// CHECK-LABEL: func.func @block_schemes(
// CHECK:         comfyquant.quantize %{{.*}} <nvfp4_block, block = 16> scale %{{.*}} : tensor<f32> : tensor<4x80xbf16> -> tensor<4x80xf4E2M1FN>, tensor<4x5xf8E4M3FN>, tensor<f32>
// CHECK:         comfyquant.quantize %{{.*}} <nvfp4_block, block = 16> : tensor<?x80xbf16> -> tensor<?x80xf4E2M1FN>, tensor<?x5xf8E4M3FN>, tensor<f32>
// CHECK:         comfyquant.quantize %{{.*}} <mxfp8_block, block = 32> : tensor<4x96xf16> -> tensor<4x96xf8E4M3FN>, tensor<4x3xf8E8M0FNU>
func.func @block_schemes(%x: tensor<4x80xbf16>, %xd: tensor<?x80xbf16>, %y: tensor<4x96xf16>, %gs: tensor<f32>) {
  %c0, %s0, %g0 = comfyquant.quantize %x <nvfp4_block, block = 16> scale %gs : tensor<f32> : tensor<4x80xbf16> -> tensor<4x80xf4E2M1FN>, tensor<4x5xf8E4M3FN>, tensor<f32>
  %c1, %s1, %g1 = comfyquant.quantize %xd <nvfp4_block, block = 16> : tensor<?x80xbf16> -> tensor<?x80xf4E2M1FN>, tensor<?x5xf8E4M3FN>, tensor<f32>
  %c2, %s2 = comfyquant.quantize %y <mxfp8_block, block = 32> : tensor<4x96xf16> -> tensor<4x96xf8E4M3FN>, tensor<4x3xf8E8M0FNU>
  return
}

// Rotation fused into per-row integer quantization (int8 and int4 codes).
// CHECK-LABEL: func.func @rotate_quantize(
// CHECK:         comfyquant.quantize %{{.*}} <int8_row> rotation <256> : tensor<?x512xbf16> -> tensor<?x512xi8>, tensor<?x1xf32>
// CHECK:         comfyquant.quantize %{{.*}} <int4_row> rotation <16> : tensor<?x512xbf16> -> tensor<?x512xi4>, tensor<?x1xf32>
func.func @rotate_quantize(%x: tensor<?x512xbf16>) {
  %q, %s = comfyquant.quantize %x <int8_row> rotation <256> : tensor<?x512xbf16> -> tensor<?x512xi8>, tensor<?x1xf32>
  %q4, %s4 = comfyquant.quantize %x <int4_row> rotation <16> : tensor<?x512xbf16> -> tensor<?x512xi4>, tensor<?x1xf32>
  return
}

// GEMM operands from packed storage: E2M1 codes (padded nvfp4 storage),
// signed nibbles (native i4 or widened i8), the int8 grid of the grouped
// formats (E4M3 / U8 / F32 group scales, with and without codebook; 6-bit).
// CHECK-LABEL: func.func @unpack_all(
// CHECK:         comfyquant.unpack %{{.*}} roles [] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> : (tensor<48x16xui8>) -> tensor<40x24xf4E2M1FN>
// CHECK:         comfyquant.unpack %{{.*}} roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x128xi8>) -> tensor<16x256xi4>
// CHECK:         comfyquant.unpack %{{.*}} roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x128xi8>) -> tensor<16x256xi8>
// CHECK:         comfyquant.unpack %{{.*}}, %{{.*}}, %{{.*}} roles ["weight_s_rel", "weight_codebook"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<16xf32>) -> tensor<64x256xi8>
// CHECK:         comfyquant.unpack %{{.*}}, %{{.*}} roles ["weight_s_rel"] format <asym_w4a8_int8, granularity = group, group = 4, scale = f8E4M3FN, nibbles = low_first> : (tensor<16x32xi8>, tensor<16x16xui8>) -> tensor<16x64xi8>
// CHECK:         comfyquant.unpack %{{.*}}, %{{.*}} roles ["weight_s_rel"] format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> : (tensor<16x96xi8>, tensor<16x4xf8E4M3FN>) -> tensor<16x128xi8>
func.func @unpack_all() {
  %nv = comfyquant.weight @ckpt::@nvfp4u8.weight : tensor<48x16xui8>
  %0 = comfyquant.unpack %nv roles [] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>
         : (tensor<48x16xui8>) -> tensor<40x24xf4E2M1FN>
  %w4 = comfyquant.weight @ckpt::@w4a4.weight : tensor<16x128xi8>
  %1 = comfyquant.unpack %w4 roles [] format <convrot_w4a4, granularity = row, nibbles = low_first>
         : (tensor<16x128xi8>) -> tensor<16x256xi4>
  %2 = comfyquant.unpack %w4 roles [] format <convrot_w4a4, granularity = row, nibbles = low_first>
         : (tensor<16x128xi8>) -> tensor<16x256xi8>
  %a = comfyquant.weight @ckpt::@w4a8cb.weight : tensor<64x128xi8>
  %ar = comfyquant.weight @ckpt::@w4a8cb.weight_s_rel : tensor<64x16xf8E4M3FN>
  %acb = comfyquant.weight @ckpt::@w4a8cb.weight_codebook : tensor<16xf32>
  %3 = comfyquant.unpack %a, %ar, %acb roles ["weight_s_rel", "weight_codebook"]
         format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<16xf32>) -> tensor<64x256xi8>
  %u = comfyquant.weight @ckpt::@w4a8u8.weight : tensor<16x32xi8>
  %ur = comfyquant.weight @ckpt::@w4a8u8.weight_s_rel : tensor<16x16xui8>
  %4 = comfyquant.unpack %u, %ur roles ["weight_s_rel"]
         format <asym_w4a8_int8, granularity = group, group = 4, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<16x32xi8>, tensor<16x16xui8>) -> tensor<16x64xi8>
  %s6 = comfyquant.weight @ckpt::@w6a8.weight : tensor<16x96xi8>
  %s6r = comfyquant.weight @ckpt::@w6a8.weight_s_rel : tensor<16x4xf8E4M3FN>
  %5 = comfyquant.unpack %s6, %s6r roles ["weight_s_rel"]
         format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first>
         : (tensor<16x96xi8>, tensor<16x4xf8E4M3FN>) -> tensor<16x128xi8>
  return
}

// Swizzled block scales to [rows, blocks]: E4M3 (nvfp4), flat U8 holding
// E4M3, U8 holding E8M0 (mxfp8), padded rows dropped.
// CHECK-LABEL: func.func @unswizzle_all(
// CHECK:         comfyquant.unswizzle %{{.*}} : tensor<128x8xf8E4M3FN> -> tensor<48x5xf8E4M3FN>
// CHECK:         comfyquant.unswizzle %{{.*}} : tensor<512xui8> -> tensor<40x2xf8E4M3FN>
// CHECK:         comfyquant.unswizzle %{{.*}} : tensor<128x4xui8> -> tensor<50x2xf8E8M0FNU>
func.func @unswizzle_all() {
  %a = comfyquant.weight @ckpt::@nvfp4.weight_scale : tensor<128x8xf8E4M3FN>
  %0 = comfyquant.unswizzle %a : tensor<128x8xf8E4M3FN> -> tensor<48x5xf8E4M3FN>
  %b = comfyquant.weight @ckpt::@nvfp4u8.weight_scale : tensor<512xui8>
  %1 = comfyquant.unswizzle %b : tensor<512xui8> -> tensor<40x2xf8E4M3FN>
  %c = comfyquant.weight @ckpt::@mxfp8u8.weight_scale : tensor<128x4xui8>
  %2 = comfyquant.unswizzle %c : tensor<128x4xui8> -> tensor<50x2xf8E8M0FNU>
  return
}

// Embedding lookups: fp8 with and without scale, int8 per-row with ConvRot.
// CHECK-LABEL: func.func @lookup_all(
// CHECK-SAME:    %[[IDX:.*]]: tensor<?xi64>)
// CHECK:         comfyquant.lookup %{{.*}}[%[[IDX]]], %{{.*}} roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor> : (tensor<64x32xf8E4M3FN>, tensor<?xi64>, tensor<f32>) -> tensor<?x32xbf16>
// CHECK:         comfyquant.lookup %{{.*}}[%[[IDX]]] roles [] format <float8_e5m2, granularity = tensor> : (tensor<64x32xf8E5M2>, tensor<?xi64>) -> tensor<?x32xf32>
// CHECK:         comfyquant.lookup %{{.*}}[%[[IDX]]], %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = row> rotation <64> : (tensor<48x128xi8>, tensor<?xi64>, tensor<48x1xf32>) -> tensor<?x128xf16>
func.func @lookup_all(%idx: tensor<?xi64>) {
  %e = comfyquant.weight @ckpt::@emb_fp8.weight : tensor<64x32xf8E4M3FN>
  %es = comfyquant.weight @ckpt::@emb_fp8.weight_scale : tensor<f32>
  %0 = comfyquant.lookup %e[%idx], %es roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<64x32xf8E4M3FN>, tensor<?xi64>, tensor<f32>) -> tensor<?x32xbf16>
  %e5 = comfyquant.weight @ckpt::@emb_e5m2.weight : tensor<64x32xf8E5M2>
  %1 = comfyquant.lookup %e5[%idx] roles [] format <float8_e5m2, granularity = tensor>
         : (tensor<64x32xf8E5M2>, tensor<?xi64>) -> tensor<?x32xf32>
  %r = comfyquant.weight @ckpt::@emb_rot.weight : tensor<48x128xi8>
  %rs = comfyquant.weight @ckpt::@emb_rot.weight_scale : tensor<48x1xf32>
  %2 = comfyquant.lookup %r[%idx], %rs roles ["weight_scale"] format <int8_tensorwise, granularity = row> rotation <64>
         : (tensor<48x128xi8>, tensor<?xi64>, tensor<48x1xf32>) -> tensor<?x128xf16>
  return
}

// Block-scaled GEMMs (NVFP4, MXFP8) and fused GEMM + epilogue.
// CHECK-LABEL: func.func @block_gemms(
// CHECK:         comfyquant.qmatmul %{{.*}}, %{{.*}} block 16 scales(%{{.*}}, %{{.*}} : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>) : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xf32>
// CHECK:         comfyquant.qmatmul %{{.*}}, %{{.*}} block 32 scales(%{{.*}}, %{{.*}} : tensor<?x3xf8E8M0FNU>, tensor<64x3xf8E8M0FNU>) : tensor<?x96xf8E4M3FN>, tensor<64x96xf8E4M3FN> -> tensor<?x64xf32>
// CHECK:         comfyquant.qgemm %{{.*}}, %{{.*}} block 16 scales(%{{.*}}, %{{.*}} : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>) col_scale %{{.*}} : tensor<f32> bias %{{.*}} : tensor<48xbf16> : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xbf16>
func.func @block_gemms(%a: tensor<?x80xf4E2M1FN>, %as: tensor<?x5xf8E4M3FN>, %b: tensor<48x80xf4E2M1FN>, %bs: tensor<48x5xf8E4M3FN>,
                       %c: tensor<?x96xf8E4M3FN>, %cs: tensor<?x3xf8E8M0FNU>, %d: tensor<64x96xf8E4M3FN>, %ds: tensor<64x3xf8E8M0FNU>,
                       %alpha: tensor<f32>, %bias: tensor<48xbf16>) {
  %0 = comfyquant.qmatmul %a, %b block 16 scales(%as, %bs : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>)
         : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xf32>
  %1 = comfyquant.qmatmul %c, %d block 32 scales(%cs, %ds : tensor<?x3xf8E8M0FNU>, tensor<64x3xf8E8M0FNU>)
         : tensor<?x96xf8E4M3FN>, tensor<64x96xf8E4M3FN> -> tensor<?x64xf32>
  %2 = comfyquant.qgemm %a, %b block 16 scales(%as, %bs : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>)
         col_scale %alpha : tensor<f32> bias %bias : tensor<48xbf16>
         : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xbf16>
  return
}

// Fused integer GEMM with every epilogue operand, and a float (full
// precision) one with only a bias.
// CHECK-LABEL: func.func @qgemm_int_and_float(
// CHECK:         comfyquant.qgemm %{{.*}}, %{{.*}} row_scale %{{.*}} : tensor<?x1xf32> col_scale %{{.*}} : tensor<32x1xf32> bias %{{.*}} : tensor<32xbf16> : tensor<?x128xi8>, tensor<32x128xi8> -> tensor<?x32xbf16>
// CHECK:         comfyquant.qgemm %{{.*}}, %{{.*}} bias %{{.*}} : tensor<32xf16> : tensor<?x128xf16>, tensor<32x128xf16> -> tensor<?x32xf16>
func.func @qgemm_int_and_float(%a: tensor<?x128xi8>, %as: tensor<?x1xf32>, %b: tensor<32x128xi8>, %bs: tensor<32x1xf32>,
                               %bias: tensor<32xbf16>, %x: tensor<?x128xf16>, %w: tensor<32x128xf16>, %bias16: tensor<32xf16>) {
  %0 = comfyquant.qgemm %a, %b row_scale %as : tensor<?x1xf32> col_scale %bs : tensor<32x1xf32> bias %bias : tensor<32xbf16>
         : tensor<?x128xi8>, tensor<32x128xi8> -> tensor<?x32xbf16>
  %1 = comfyquant.qgemm %x, %w bias %bias16 : tensor<32xf16> : tensor<?x128xf16>, tensor<32x128xf16> -> tensor<?x32xf16>
  return
}

// A decomposed function states its module (comfyquant.module) and has the
// kernel signature of its kind.
// CHECK-LABEL: func.func private @blocks.0.proj(tensor<?x256xbf16>) -> tensor<?x64xbf16>
// CHECK-SAME:    attributes {comfyquant.module = #comfyquant.module<linear, format = <int8_tensorwise, granularity = row>, out_features = 64, in_features = 256, rotation = <256>>}
// CHECK-LABEL: func.func private @experts(tensor<?x64xf16>, index) -> tensor<?x32xf16>
// CHECK-SAME:    attributes {comfyquant.module = #comfyquant.module<moe, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64, experts = 3, options = <full_precision_matrix_mult = true>>}
// CHECK-LABEL: func.func private @tok(tensor<?xi64>) -> tensor<?x48xf32>
// CHECK-SAME:    attributes {comfyquant.module = #comfyquant.module<embedding, format = <int8_tensorwise, granularity = row>, out_features = 64, in_features = 48>, comfyquant.strategy = "any"}
func.func private @"blocks.0.proj"(tensor<?x256xbf16>) -> tensor<?x64xbf16>
    attributes {comfyquant.module = #comfyquant.module<linear, format = <int8_tensorwise, granularity = row>, in_features = 256, out_features = 64, rotation = <256>>}
func.func private @experts(tensor<?x64xf16>, index) -> tensor<?x32xf16>
    attributes {comfyquant.module = #comfyquant.module<moe, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64, experts = 3, options = <full_precision_matrix_mult = true>>}
func.func private @tok(tensor<?xi64>) -> tensor<?x48xf32>
    attributes {comfyquant.module = #comfyquant.module<embedding, format = <int8_tensorwise, granularity = row>, out_features = 64, in_features = 48>, comfyquant.strategy = "any"}

// Dequantize every format (docs/Formats.md §4), including a MoE bank ([E, N, K])
// and the un-rotation of ConvRot formats.
// CHECK-LABEL: func.func @dequantize_all(
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor> : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xbf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <float8_e5m2, granularity = tensor> : (tensor<32x64xf8E5M2>, tensor<1xf32>) -> tensor<32x64xf32>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}}, %{{.*}} roles ["weight_scale", "weight_scale_2"] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> : (tensor<48x40xui8>, tensor<128x8xf8E4M3FN>, tensor<f32>) -> tensor<48x80xf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> : (tensor<64x96xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) -> tensor<64x96xbf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = tensor> : (tensor<64x96xi8>, tensor<f32>) -> tensor<64x96xf32>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = row> rotation <64> : (tensor<32x128xi8>, tensor<32x1xf32>) -> tensor<32x128xbf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <convrot_w4a4, granularity = row, nibbles = low_first> rotation <256> : (tensor<16x128xi8>, tensor<16xf32>) -> tensor<16x256xbf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} roles ["weight_s_rel", "weight_s_channel", "weight_codebook"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> rotation <256> : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<64xf32>, tensor<16xf32>) -> tensor<64x256xbf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}}, %{{.*}} roles ["weight_s_rel", "weight_s_channel"] format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> rotation <64> : (tensor<16x96xi8>, tensor<16x4xf8E4M3FN>, tensor<16xf32>) -> tensor<16x128xf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}}, %{{.*}} roles ["weight_scale", "weight_scale_2"] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> : (tensor<2x48x24xui8>, tensor<2x128x4xf8E4M3FN>, tensor<2xf32>) -> tensor<2x48x48xbf16>
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = row> rotation <16> : (tensor<32x64xi8>, tensor<32x1xf32>) -> tensor<2x16x64xf32>
func.func @dequantize_all() {
  %fp8 = comfyquant.weight @ckpt::@fp8.weight : tensor<32x64xf8E4M3FN>
  %fp8s = comfyquant.weight @ckpt::@fp8.weight_scale : tensor<f32>
  %0 = comfyquant.dequantize %fp8, %fp8s roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor>
         : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xbf16>
  %e5 = comfyquant.weight @ckpt::@e5m2.weight : tensor<32x64xf8E5M2>
  %e5s = comfyquant.weight @ckpt::@e5m2.weight_scale : tensor<1xf32>
  %1 = comfyquant.dequantize %e5, %e5s roles ["weight_scale"] format <float8_e5m2, granularity = tensor>
         : (tensor<32x64xf8E5M2>, tensor<1xf32>) -> tensor<32x64xf32>
  %nv = comfyquant.weight @ckpt::@nvfp4.weight : tensor<48x40xui8>
  %nvs = comfyquant.weight @ckpt::@nvfp4.weight_scale : tensor<128x8xf8E4M3FN>
  %nvs2 = comfyquant.weight @ckpt::@nvfp4.weight_scale_2 : tensor<f32>
  %2 = comfyquant.dequantize %nv, %nvs, %nvs2 roles ["weight_scale", "weight_scale_2"]
         format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>
         : (tensor<48x40xui8>, tensor<128x8xf8E4M3FN>, tensor<f32>) -> tensor<48x80xf16>
  %mx = comfyquant.weight @ckpt::@mxfp8.weight : tensor<64x96xf8E4M3FN>
  %mxs = comfyquant.weight @ckpt::@mxfp8.weight_scale : tensor<128x4xf8E8M0FNU>
  %3 = comfyquant.dequantize %mx, %mxs roles ["weight_scale"]
         format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU>
         : (tensor<64x96xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) -> tensor<64x96xbf16>
  %i8 = comfyquant.weight @ckpt::@int8s.weight : tensor<64x96xi8>
  %i8s = comfyquant.weight @ckpt::@int8s.weight_scale : tensor<f32>
  %4 = comfyquant.dequantize %i8, %i8s roles ["weight_scale"] format <int8_tensorwise, granularity = tensor>
         : (tensor<64x96xi8>, tensor<f32>) -> tensor<64x96xf32>
  %ir = comfyquant.weight @ckpt::@int8rot.weight : tensor<32x128xi8>
  %irs = comfyquant.weight @ckpt::@int8rot.weight_scale : tensor<32x1xf32>
  %5 = comfyquant.dequantize %ir, %irs roles ["weight_scale"] format <int8_tensorwise, granularity = row>
         rotation <64> : (tensor<32x128xi8>, tensor<32x1xf32>) -> tensor<32x128xbf16>
  %w4 = comfyquant.weight @ckpt::@w4a4.weight : tensor<16x128xi8>
  %w4s = comfyquant.weight @ckpt::@w4a4.weight_scale : tensor<16xf32>
  %6 = comfyquant.dequantize %w4, %w4s roles ["weight_scale"]
         format <convrot_w4a4, granularity = row, nibbles = low_first> rotation <256>
         : (tensor<16x128xi8>, tensor<16xf32>) -> tensor<16x256xbf16>
  %a = comfyquant.weight @ckpt::@w4a8cb.weight : tensor<64x128xi8>
  %ar = comfyquant.weight @ckpt::@w4a8cb.weight_s_rel : tensor<64x16xf8E4M3FN>
  %ac = comfyquant.weight @ckpt::@w4a8cb.weight_s_channel : tensor<64xf32>
  %acb = comfyquant.weight @ckpt::@w4a8cb.weight_codebook : tensor<16xf32>
  %7 = comfyquant.dequantize %a, %ar, %ac, %acb roles ["weight_s_rel", "weight_s_channel", "weight_codebook"]
         format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first>
         rotation <256>
         : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<64xf32>, tensor<16xf32>) -> tensor<64x256xbf16>
  %s6 = comfyquant.weight @ckpt::@w6a8.weight : tensor<16x96xi8>
  %s6r = comfyquant.weight @ckpt::@w6a8.weight_s_rel : tensor<16x4xf8E4M3FN>
  %s6c = comfyquant.weight @ckpt::@w6a8.weight_s_channel : tensor<16xf32>
  %8 = comfyquant.dequantize %s6, %s6r, %s6c roles ["weight_s_rel", "weight_s_channel"]
         format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first>
         rotation <64>
         : (tensor<16x96xi8>, tensor<16x4xf8E4M3FN>, tensor<16xf32>) -> tensor<16x128xf16>
  %mn = comfyquant.weight @ckpt::@moe_nvfp4.weight : tensor<2x48x24xui8>
  %mns = comfyquant.weight @ckpt::@moe_nvfp4.weight_scale : tensor<2x128x4xf8E4M3FN>
  %mns2 = comfyquant.weight @ckpt::@moe_nvfp4.weight_scale_2 : tensor<2xf32>
  %9 = comfyquant.dequantize %mn, %mns, %mns2 roles ["weight_scale", "weight_scale_2"]
         format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first>
         : (tensor<2x48x24xui8>, tensor<2x128x4xf8E4M3FN>, tensor<2xf32>) -> tensor<2x48x48xbf16>
  %fi = comfyquant.weight @ckpt::@flat_int8.weight : tensor<32x64xi8>
  %fis = comfyquant.weight @ckpt::@flat_int8.weight_scale : tensor<32x1xf32>
  %10 = comfyquant.dequantize %fi, %fis roles ["weight_scale"] format <int8_tensorwise, granularity = row>
         rotation <16> : (tensor<32x64xi8>, tensor<32x1xf32>) -> tensor<2x16x64xf32>
  return
}

// Epilogue scale shapes: row [M, 1], col [N] / [N, 1] / scalar; bias of
// the result type or none.
// CHECK-LABEL: func.func @epilogue_shapes(
// CHECK-SAME:    %[[ACC:.*]]: tensor<4x16xi32>, %[[RS:.*]]: tensor<4x1xf32>, %[[CS:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf16>, %[[BB:.*]]: tensor<16xbf16>, %[[CS2:.*]]: tensor<16x1xf32>, %[[FACC:.*]]: tensor<?x16xf32>, %[[S:.*]]: tensor<f32>)
// CHECK:         comfyquant.epilogue %[[ACC]] row_scale %[[RS]] : tensor<4x1xf32> col_scale %[[CS]] : tensor<16xf32> : tensor<4x16xi32> -> tensor<4x16xf16>
// CHECK:         comfyquant.epilogue %[[ACC]] col_scale %[[CS2]] : tensor<16x1xf32> bias %[[B]] : tensor<16xf16> : tensor<4x16xi32> -> tensor<4x16xf16>
// CHECK:         comfyquant.epilogue %[[ACC]] bias %[[BB]] : tensor<16xbf16> : tensor<4x16xi32> -> tensor<4x16xbf16>
// CHECK:         comfyquant.epilogue %[[FACC]] row_scale %[[S]] : tensor<f32> col_scale %[[S]] : tensor<f32> : tensor<?x16xf32> -> tensor<?x16xf32>
func.func @epilogue_shapes(%acc: tensor<4x16xi32>, %rs: tensor<4x1xf32>, %cs: tensor<16xf32>, %b: tensor<16xf16>,
                           %bb: tensor<16xbf16>, %cs2: tensor<16x1xf32>, %facc: tensor<?x16xf32>, %s: tensor<f32>) {
  %0 = comfyquant.epilogue %acc row_scale %rs : tensor<4x1xf32> col_scale %cs : tensor<16xf32> : tensor<4x16xi32> -> tensor<4x16xf16>
  %1 = comfyquant.epilogue %acc col_scale %cs2 : tensor<16x1xf32> bias %b : tensor<16xf16> : tensor<4x16xi32> -> tensor<4x16xf16>
  %2 = comfyquant.epilogue %acc bias %bb : tensor<16xbf16> : tensor<4x16xi32> -> tensor<4x16xbf16>
  %3 = comfyquant.epilogue %facc row_scale %s : tensor<f32> col_scale %s : tensor<f32> : tensor<?x16xf32> -> tensor<?x16xf32>
  return
}

// CHECK-LABEL: func.func @mma_fp8
// CHECK:         %[[D:.*]] = comfyquant.mma_fp8 %arg0, %arg1, %arg2 : f8E4M3FN x f8E5M2 : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
// CHECK:         comfyquant.mma_fp8 %arg0, %arg1 : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
func.func @mma_fp8(%a: vector<4x4xi8>, %b: vector<2x4xi8>, %c: vector<2x2xf32>) -> (vector<2x2xf32>, vector<2x2xf32>) {
  %d = comfyquant.mma_fp8 %a, %b, %c : f8E4M3FN x f8E5M2 : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
  %e = comfyquant.mma_fp8 %a, %b : f8E4M3FN x f8E4M3FN : vector<4x4xi8>, vector<2x4xi8> -> vector<2x2xf32>
  return %d, %e : vector<2x2xf32>, vector<2x2xf32>
}

// CHECK-LABEL: func.func @warpgroup_mma
// CHECK:         comfyquant.warpgroup_mma %arg0, %arg1, %arg2 : i8 x i8 : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xi32>
// CHECK:         comfyquant.warpgroup_mma %arg0, %arg1 : f8E5M2 x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
// CHECK:         comfyquant.warpgroup_mma %arg0, %arg3 : f16 x f16 : memref<512xi32, #gpu.address_space<workgroup>>, memref<512xi32, #gpu.address_space<workgroup>> -> vector<8x2x2xf32>
// CHECK:         comfyquant.warpgroup_mma %arg0, %arg1, %{{.*}} scales(%arg4, %arg5 : memref<64xi8, #gpu.address_space<workgroup>>, memref<128xi8, #gpu.address_space<workgroup>>) : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
// CHECK:         comfyquant.warpgroup_mma %arg0, %arg1 scales(%arg6, %arg7 : memref<256xi8, #gpu.address_space<workgroup>>, memref<512xi8, #gpu.address_space<workgroup>>) : f4E2M1FN x f4E2M1FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
func.func @warpgroup_mma(%a: memref<512xi32, #gpu.address_space<workgroup>>, %b: memref<1024xi32, #gpu.address_space<workgroup>>, %c: vector<16x2x2xi32>, %b64: memref<512xi32, #gpu.address_space<workgroup>>, %sa: memref<64xi8, #gpu.address_space<workgroup>>, %sb: memref<128xi8, #gpu.address_space<workgroup>>, %sa4: memref<256xi8, #gpu.address_space<workgroup>>, %sb4: memref<512xi8, #gpu.address_space<workgroup>>) -> (vector<16x2x2xi32>, vector<16x2x2xf32>, vector<8x2x2xf32>, vector<16x2x2xf32>, vector<16x2x2xf32>) {
  %d = comfyquant.warpgroup_mma %a, %b, %c : i8 x i8 : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xi32>
  %e = comfyquant.warpgroup_mma %a, %b : f8E5M2 x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
  %f = comfyquant.warpgroup_mma %a, %b64 : f16 x f16 : memref<512xi32, #gpu.address_space<workgroup>>, memref<512xi32, #gpu.address_space<workgroup>> -> vector<8x2x2xf32>
  %g = comfyquant.warpgroup_mma %a, %b, %e scales(%sa, %sb : memref<64xi8, #gpu.address_space<workgroup>>, memref<128xi8, #gpu.address_space<workgroup>>) : f8E4M3FN x f8E4M3FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
  %h = comfyquant.warpgroup_mma %a, %b scales(%sa4, %sb4 : memref<256xi8, #gpu.address_space<workgroup>>, memref<512xi8, #gpu.address_space<workgroup>>) : f4E2M1FN x f4E2M1FN : memref<512xi32, #gpu.address_space<workgroup>>, memref<1024xi32, #gpu.address_space<workgroup>> -> vector<16x2x2xf32>
  return %d, %e, %f, %g, %h : vector<16x2x2xi32>, vector<16x2x2xf32>, vector<8x2x2xf32>, vector<16x2x2xf32>, vector<16x2x2xf32>
}

// The accumulator form and the one-row kernel are printed only when they
// are not the defaults (inner; ukernel, the GEMM's own).
// CHECK-LABEL: func.func private @cpu_gemm_forms
// CHECK-SAME:    a = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer>
// CHECK-SAME:    b = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 8, mc = 64, decode = none>
// CHECK-SAME:    c = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, kc = 256, decode = adaptive, form = outer>
// CHECK-SAME:    d = #comfyquant.cpu_gemm<bf16_dot_emulated, mr = 4, nr = 4, kv = 16, mc = 64, decode = panel>
// CHECK-SAME:    e = #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = adaptive, form = outer, row = bf16_dot>
// CHECK-SAME:    f = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer, row = f32_fma>
// CHECK-SAME:    g = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer>
// CHECK-SAME:    h = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 6, nr = 2, kv = 16, mc = 258, decode = adaptive, form = outer, row = i8_planes>}
func.func private @cpu_gemm_forms() attributes {h = #comfyquant.cpu_gemm<i8_pmaddwd, mr = 6, nr = 2, kv = 16, mc = 258, decode = adaptive, form = outer, row = i8_planes>, a = #comfyquant.cpu_gemm<i8_vnni, mr = 6, nr = 4, kv = 64, mc = 258, decode = adaptive, form = outer>, b = #comfyquant.cpu_gemm<f32_fma, mr = 4, nr = 3, kv = 8, mc = 64, decode = none, form = inner>, c = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, kc = 256, decode = adaptive, form = outer>, d = #comfyquant.cpu_gemm<bf16_dot_emulated, mr = 4, nr = 4, kv = 16, mc = 64, decode = panel>, e = #comfyquant.cpu_gemm<f32_fma, mr = 6, nr = 4, kv = 16, mc = 258, decode = adaptive, form = outer, row = bf16_dot>, f = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer, row = f32_fma>, g = #comfyquant.cpu_gemm<bf16_dot, mr = 6, nr = 4, kv = 32, mc = 258, decode = adaptive, form = outer, row = ukernel>}

// The code generators' typed records round-trip.
// CHECK-LABEL: func.func private @codegen_records()
// CHECK-SAME:    comfyquant.gemms = [#comfyquant.gpu_gemm<fp8_ue8m0_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>, #comfyquant.cpu_gemm<i8_amx_emulated, mr = 16, nr = 16, kv = 64, mc = 256, decode = whole>]
// CHECK-SAME:    comfyquant.target = #comfyquant.target<cuda, "sm_120a">
func.func private @codegen_records() attributes {comfyquant.target = #comfyquant.target<cuda, "sm_120a">, comfyquant.gemms = [#comfyquant.gpu_gemm<fp8_ue8m0_scaled, block = [64, 128], warp = [16, 128], k_bytes = 32, stages = 1>, #comfyquant.cpu_gemm<i8_amx_emulated, mr = 16, nr = 16, kv = 64, mc = 256, decode = whole>]}
