// RUN: comfyquant-opt %s -split-input-file --comfyquant-decompose-modules | FileCheck %s
// RUN: comfyquant-opt %s -split-input-file --comfyquant-decompose-modules=activation-type=f32 | FileCheck %s --check-prefix=F32
// RUN: comfyquant-opt %s -split-input-file --comfyquant-decompose-modules=activation-type=f16 | FileCheck %s --check-prefix=F16
// RUN: not comfyquant-opt %s -split-input-file --comfyquant-decompose-modules=activation-type=f64 2>&1 | FileCheck %s --check-prefix=BADTYPE

// Every module op becomes a func.func of the same name carrying
// comfyquant.module, with the forward of docs/CpuCodegen.md §1 in computation
// ops: one split per format family (fp8, nvfp4, mxfp8, int8 ± ConvRot,
// convrot_w4a4, grouped), embeddings, 3-D and flattened MoE banks.

// BADTYPE: for the --activation-type option: Cannot find option named 'f64'

// Module ops are replaced; the checkpoint stays.
// CHECK-LABEL: comfyquant.checkpoint @ckpt path "fp8.safetensors"
// CHECK-NOT:   comfyquant.linear

// input_scale is the static activation scale; epilogue (acc·s)·s_w + bias.
// CHECK-LABEL: func.func @qkv(
// CHECK-SAME:    %[[X:.*]]: tensor<?x64xbf16>) -> tensor<?x32xbf16>
// CHECK-SAME:    attributes {comfyquant.module = #comfyquant.module<linear, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64>}
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@qkv.weight : tensor<32x64xf8E4M3FN>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@qkv.weight_scale : tensor<f32>
// CHECK-NEXT:    %[[IS:.*]] = comfyquant.weight @ckpt::@qkv.input_scale : tensor<f32>
// CHECK-NEXT:    %[[B:.*]] = comfyquant.weight @ckpt::@qkv.bias : tensor<32xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[S:.*]] = comfyquant.quantize %[[X]] <fp8_static, type = f8E4M3FN> scale %[[IS]] : tensor<f32> : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<f32>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[W]] : tensor<?x64xf8E4M3FN>, tensor<32x64xf8E4M3FN> -> tensor<?x32xf32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]] row_scale %[[S]] : tensor<f32> col_scale %[[WS]] : tensor<f32> bias %[[B]] : tensor<32xbf16> : tensor<?x32xf32> -> tensor<?x32xbf16>
// CHECK-NEXT:    return %[[Y]] : tensor<?x32xbf16>

// E5M2: activations quantized to E5M2 with scale 1.0; a bf16 [1] weight
// scale is extended to f32.
// CHECK-LABEL: func.func @e5(
// CHECK:         %[[W:.*]] = comfyquant.weight @ckpt::@e5.weight : tensor<32x64xf8E5M2>
// CHECK:         %[[WS:.*]] = comfyquant.weight @ckpt::@e5.weight_scale : tensor<1xbf16>
// CHECK:         %[[Q:.*]], %[[S:.*]] = comfyquant.quantize %{{.*}} <fp8_static, type = f8E5M2> : tensor<?x64xbf16> -> tensor<?x64xf8E5M2>, tensor<f32>
// CHECK:         %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[W]] : tensor<?x64xf8E5M2>, tensor<32x64xf8E5M2> -> tensor<?x32xf32>
// CHECK:         %[[WS32:.*]] = arith.extf %[[WS]] : tensor<1xbf16> to tensor<1xf32>
// CHECK:         comfyquant.epilogue %[[ACC]] row_scale %[[S]] : tensor<f32> col_scale %[[WS32]] : tensor<1xf32> : tensor<?x32xf32> -> tensor<?x32xbf16>

// An f32 bias is rounded to the activation type first.
// CHECK-LABEL: func.func @fb(
// CHECK:         %[[B:.*]] = comfyquant.weight @ckpt::@fb.bias : tensor<32xf32>
// CHECK:         %[[BT:.*]] = arith.truncf %[[B]] : tensor<32xf32> to tensor<32xbf16>
// CHECK:         comfyquant.quantize %{{.*}} <fp8_static, type = f8E4M3FN> : tensor<?x64xbf16>
// CHECK:         comfyquant.epilogue %{{.*}} bias %[[BT]] : tensor<32xbf16>

// full_precision_matrix_mult: dequantize (weight + weight_scale only) to the
// activation type, float GEMM, bias; no activation quantization.
// CHECK-LABEL: func.func @fpmm(
// CHECK-SAME:    %[[X:.*]]: tensor<?x64xbf16>)
// CHECK-SAME:    options = <full_precision_matrix_mult = true>
// CHECK:         %[[W:.*]] = comfyquant.weight @ckpt::@qkv.weight
// CHECK:         %[[WS:.*]] = comfyquant.weight @ckpt::@qkv.weight_scale
// CHECK:         %[[B:.*]] = comfyquant.weight @ckpt::@qkv.bias
// CHECK-NOT:     comfyquant.quantize
// CHECK:         %[[WD:.*]] = comfyquant.dequantize %[[W]], %[[WS]] roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor> : (tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xbf16>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[X]], %[[WD]] : tensor<?x64xbf16>, tensor<32x64xbf16> -> tensor<?x32xf32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] bias %[[B]] : tensor<32xbf16> : tensor<?x32xf32> -> tensor<?x32xbf16>

// F32-LABEL: func.func @qkv(
// F32-SAME:    tensor<?x64xf32>) -> tensor<?x32xf32>
// F32:         %[[B:.*]] = comfyquant.weight @ckpt::@qkv.bias : tensor<32xbf16>
// F32:         %[[BT:.*]] = arith.extf %[[B]] : tensor<32xbf16> to tensor<32xf32>
// F32:         comfyquant.quantize %{{.*}} <fp8_static, type = f8E4M3FN> scale %{{.*}} : tensor<f32> : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<f32>
// F32:         comfyquant.epilogue %{{.*}} bias %[[BT]] : tensor<32xf32> : tensor<?x32xf32> -> tensor<?x32xf32>
// F16-LABEL: func.func @qkv(
// F16-SAME:    tensor<?x64xf16>) -> tensor<?x32xf16>
// F16:         %[[B:.*]] = comfyquant.weight @ckpt::@qkv.bias : tensor<32xbf16>
// F16:         %[[B32:.*]] = arith.extf %[[B]] : tensor<32xbf16> to tensor<32xf32>
// F16:         %[[BT:.*]] = arith.truncf %[[B32]] : tensor<32xf32> to tensor<32xf16>
// F16:         comfyquant.epilogue %{{.*}} bias %[[BT]] : tensor<32xf16> : tensor<?x32xf32> -> tensor<?x32xf16>
// F16-LABEL: func.func @fpmm(
// F16:         comfyquant.dequantize {{.*}} -> tensor<32x64xf16>
// F16:         comfyquant.qmatmul %{{.*}}, %{{.*}} : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf32>

// float8 linears: input_scale + bias (bf16), e5m2 without either, f32 bias.
comfyquant.checkpoint @ckpt path "fp8.safetensors" size 100000 hash "fnv1a64:0000000000000001" {
  comfyquant.tensor @qkv.weight : tensor<32x64xf8E4M3FN> at 0
  comfyquant.tensor @qkv.weight_scale : tensor<f32> at 2048
  comfyquant.tensor @qkv.input_scale : tensor<f32> at 2052
  comfyquant.tensor @qkv.bias : tensor<32xbf16> at 2056
  comfyquant.tensor @e5.weight : tensor<32x64xf8E5M2> at 2120
  comfyquant.tensor @e5.weight_scale : tensor<1xbf16> at 4168
  comfyquant.tensor @fb.weight : tensor<32x64xf8E4M3FN> at 4170
  comfyquant.tensor @fb.weight_scale : tensor<f32> at 6218
  comfyquant.tensor @fb.bias : tensor<32xf32> at 6222
}
comfyquant.linear @qkv format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {bias = @ckpt::@qkv.bias, input_scale = @ckpt::@qkv.input_scale,
             weight = @ckpt::@qkv.weight, weight_scale = @ckpt::@qkv.weight_scale}
comfyquant.linear @e5 format <float8_e5m2, granularity = tensor> [32, 64]
    tensors {weight = @ckpt::@e5.weight, weight_scale = @ckpt::@e5.weight_scale}
comfyquant.linear @fb format <float8_e4m3fn, granularity = tensor> [32, 64]
    tensors {bias = @ckpt::@fb.bias, weight = @ckpt::@fb.weight, weight_scale = @ckpt::@fb.weight_scale}
comfyquant.linear @fpmm format <float8_e4m3fn, granularity = tensor> [32, 64]
    options <full_precision_matrix_mult = true>
    tensors {bias = @ckpt::@qkv.bias, input_scale = @ckpt::@qkv.input_scale,
             weight = @ckpt::@qkv.weight, weight_scale = @ckpt::@qkv.weight_scale}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "nvfp4.safetensors"

// x·pqs (pqs rounded to T, f32 product, one rounding to T); static global
// scale; E2M1 codes and unswizzled E4M3 block scales into a block-scaled
// GEMM; epilogue acc·(g·s2) + bias.
// CHECK-LABEL: func.func @p(
// CHECK-SAME:    %[[X:.*]]: tensor<?x80xbf16>) -> tensor<?x48xbf16>
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@p.weight : tensor<48x40xui8>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@p.weight_scale : tensor<128x8xf8E4M3FN>
// CHECK-NEXT:    %[[WS2:.*]] = comfyquant.weight @ckpt::@p.weight_scale_2 : tensor<f32>
// CHECK-NEXT:    %[[IS:.*]] = comfyquant.weight @ckpt::@p.input_scale : tensor<f32>
// CHECK-NEXT:    %[[PQS:.*]] = comfyquant.weight @ckpt::@p.pre_quant_scale : tensor<80xbf16>
// CHECK-NEXT:    %[[B:.*]] = comfyquant.weight @ckpt::@p.bias : tensor<48xf32>
// CHECK:         %[[DIM:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x80xbf16>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty(%[[DIM]]) : tensor<?x80xbf16>
// CHECK-NEXT:    %[[XS:.*]] = linalg.generic {indexing_maps = [#[[ID:.*]], #[[COL:.*]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[PQS]] : tensor<?x80xbf16>, tensor<80xbf16>) outs(%[[INIT]] : tensor<?x80xbf16>) {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: bf16, %[[P:.*]]: bf16, %{{.*}}: bf16):
// CHECK-NEXT:      %[[A32:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:      %[[P32:.*]] = arith.extf %[[P]] : bf16 to f32
// CHECK-NEXT:      %[[PROD:.*]] = arith.mulf %[[A32]], %[[P32]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.truncf %[[PROD]] : f32 to bf16
// CHECK-NEXT:      linalg.yield %[[R]] : bf16
// CHECK-NEXT:    } -> tensor<?x80xbf16>
// CHECK-NEXT:    %[[BT:.*]] = arith.truncf %[[B]] : tensor<48xf32> to tensor<48xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]], %[[G:.*]] = comfyquant.quantize %[[XS]] <nvfp4_block, block = 16> scale %[[IS]] : tensor<f32> : tensor<?x80xbf16> -> tensor<?x80xf4E2M1FN>, tensor<?x5xf8E4M3FN>, tensor<f32>
// CHECK-NEXT:    %[[WQ:.*]] = comfyquant.unpack %[[W]] roles [] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> : (tensor<48x40xui8>) -> tensor<48x80xf4E2M1FN>
// CHECK-NEXT:    %[[WBS:.*]] = comfyquant.unswizzle %[[WS]] : tensor<128x8xf8E4M3FN> -> tensor<48x5xf8E4M3FN>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[WQ]] block 16 scales(%[[QS]], %[[WBS]] : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>) : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xf32>
// CHECK-NEXT:    %[[GV:.*]] = tensor.extract %[[G]][] : tensor<f32>
// CHECK-NEXT:    %[[S2:.*]] = tensor.extract %[[WS2]][] : tensor<f32>
// CHECK-NEXT:    %[[ALPHA:.*]] = arith.mulf %[[GV]], %[[S2]] : f32
// CHECK-NEXT:    %[[AT:.*]] = tensor.from_elements %[[ALPHA]] : tensor<f32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]] col_scale %[[AT]] : tensor<f32> bias %[[BT]] : tensor<48xbf16> : tensor<?x48xf32> -> tensor<?x48xbf16>
// CHECK-NEXT:    return %[[Y]]

// Padded storage [48, 16] for [40, 24]: unpack and unswizzle drop the
// padding; no input_scale: dynamic global scale; no bias.
// CHECK-LABEL: func.func @pad(
// CHECK-SAME:    %[[X:.*]]: tensor<?x24xbf16>) -> tensor<?x40xbf16>
// CHECK:         %[[Q:.*]], %[[QS:.*]], %[[G:.*]] = comfyquant.quantize %[[X]] <nvfp4_block, block = 16> : tensor<?x24xbf16> -> tensor<?x24xf4E2M1FN>, tensor<?x2xf8E4M3FN>, tensor<f32>
// CHECK-NEXT:    %[[WQ:.*]] = comfyquant.unpack %{{.*}} roles [] format <nvfp4, {{.*}}> : (tensor<48x16xui8>) -> tensor<40x24xf4E2M1FN>
// CHECK-NEXT:    %[[WBS:.*]] = comfyquant.unswizzle %{{.*}} : tensor<512xui8> -> tensor<40x2xf8E4M3FN>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[WQ]] block 16 scales(%[[QS]], %[[WBS]] : tensor<?x2xf8E4M3FN>, tensor<40x2xf8E4M3FN>)
// CHECK:         tensor.extract %{{.*}}[%{{.*}}] : tensor<1xf32>
// CHECK:         comfyquant.epilogue %[[ACC]] col_scale %{{.*}} : tensor<f32> : tensor<?x40xf32> -> tensor<?x40xbf16>

// Full precision still applies pre_quant_scale, then dequantizes (without
// input_scale / pre_quant_scale / bias roles).
// CHECK-LABEL: func.func @fpmm(
// CHECK:         %[[XS:.*]] = linalg.generic
// CHECK:         %[[WD:.*]] = comfyquant.dequantize %{{.*}}, %{{.*}}, %{{.*}} roles ["weight_scale", "weight_scale_2"] format <nvfp4, {{.*}}> : (tensor<48x40xui8>, tensor<128x8xf8E4M3FN>, tensor<f32>) -> tensor<48x80xbf16>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[XS]], %[[WD]] : tensor<?x80xbf16>, tensor<48x80xbf16> -> tensor<?x48xf32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] bias %{{.*}} : tensor<48xbf16>

// F32-LABEL: func.func @p(
// F32:         linalg.generic
// F32:         ^bb0(%[[A:.*]]: f32, %[[P:.*]]: bf16, %{{.*}}: f32):
// F32-NEXT:      %[[P32:.*]] = arith.extf %[[P]] : bf16 to f32
// F32-NEXT:      %[[PROD:.*]] = arith.mulf %[[A]], %[[P32]] : f32
// F32-NEXT:      linalg.yield %[[PROD]] : f32
// F16-LABEL: func.func @p(
// F16:         ^bb0(%[[A:.*]]: f16, %[[P:.*]]: bf16, %{{.*}}: f16):
// F16-NEXT:      %[[P32:.*]] = arith.extf %[[P]] : bf16 to f32
// F16-NEXT:      %[[PT:.*]] = arith.truncf %[[P32]] : f32 to f16
// F16-NEXT:      %[[A32:.*]] = arith.extf %[[A]] : f16 to f32
// F16-NEXT:      %[[PT32:.*]] = arith.extf %[[PT]] : f16 to f32
// F16-NEXT:      %[[PROD:.*]] = arith.mulf %[[A32]], %[[PT32]] : f32
// F16-NEXT:      %[[R:.*]] = arith.truncf %[[PROD]] : f32 to f16
// F16-NEXT:      linalg.yield %[[R]] : f16

// nvfp4: pre_quant_scale, static global scale, f32 bias; a padded [40, 24]
// with a dynamic global scale; full precision with pre_quant_scale.
comfyquant.checkpoint @ckpt path "nvfp4.safetensors" size 100000 hash "fnv1a64:0000000000000002" {
  comfyquant.tensor @p.weight : tensor<48x40xui8> at 0
  comfyquant.tensor @p.weight_scale : tensor<128x8xf8E4M3FN> at 1920
  comfyquant.tensor @p.weight_scale_2 : tensor<f32> at 2944
  comfyquant.tensor @p.input_scale : tensor<f32> at 2948
  comfyquant.tensor @p.pre_quant_scale : tensor<80xbf16> at 2952
  comfyquant.tensor @p.bias : tensor<48xf32> at 3112
  comfyquant.tensor @pad.weight : tensor<48x16xui8> at 3304
  comfyquant.tensor @pad.weight_scale : tensor<512xui8> at 4072
  comfyquant.tensor @pad.weight_scale_2 : tensor<1xf32> at 4584
}
comfyquant.linear @p format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {bias = @ckpt::@p.bias, input_scale = @ckpt::@p.input_scale,
             pre_quant_scale = @ckpt::@p.pre_quant_scale, weight = @ckpt::@p.weight,
             weight_scale = @ckpt::@p.weight_scale, weight_scale_2 = @ckpt::@p.weight_scale_2}
comfyquant.linear @pad format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [40, 24]
    tensors {weight = @ckpt::@pad.weight, weight_scale = @ckpt::@pad.weight_scale,
             weight_scale_2 = @ckpt::@pad.weight_scale_2}
comfyquant.linear @fpmm format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    options <full_precision_matrix_mult = true>
    tensors {bias = @ckpt::@p.bias, input_scale = @ckpt::@p.input_scale,
             pre_quant_scale = @ckpt::@p.pre_quant_scale, weight = @ckpt::@p.weight,
             weight_scale = @ckpt::@p.weight_scale, weight_scale_2 = @ckpt::@p.weight_scale_2}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "mxfp8.safetensors"

// Dynamic E8M0 32-blocks (input_scale is bound but unused); epilogue + bias.
// CHECK-LABEL: func.func @m(
// CHECK-SAME:    %[[X:.*]]: tensor<?x96xbf16>)
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@m.weight : tensor<64x96xf8E4M3FN>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@m.weight_scale : tensor<128x4xf8E8M0FNU>
// CHECK-NEXT:    %[[IS:.*]] = comfyquant.weight @ckpt::@m.input_scale : tensor<f32>
// CHECK-NEXT:    %[[B:.*]] = comfyquant.weight @ckpt::@m.bias : tensor<64xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %[[X]] <mxfp8_block, block = 32> : tensor<?x96xbf16> -> tensor<?x96xf8E4M3FN>, tensor<?x3xf8E8M0FNU>
// CHECK-NEXT:    %[[WBS:.*]] = comfyquant.unswizzle %[[WS]] : tensor<128x4xf8E8M0FNU> -> tensor<64x3xf8E8M0FNU>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[W]] block 32 scales(%[[QS]], %[[WBS]] : tensor<?x3xf8E8M0FNU>, tensor<64x3xf8E8M0FNU>) : tensor<?x96xf8E4M3FN>, tensor<64x96xf8E4M3FN> -> tensor<?x64xf32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]] bias %[[B]] : tensor<64xbf16> : tensor<?x64xf32> -> tensor<?x64xbf16>
// CHECK-NEXT:    return %[[Y]]

// Padded storage: the weight is sliced to [50, 40]; U8 scales unswizzle to E8M0.
// CHECK-LABEL: func.func @pad(
// CHECK:         %[[W:.*]] = comfyquant.weight @ckpt::@pad.weight : tensor<64x64xf8E4M3FN>
// CHECK:         %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %{{.*}} <mxfp8_block, block = 32> : tensor<?x40xbf16> -> tensor<?x40xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
// CHECK-NEXT:    %[[WL:.*]] = tensor.extract_slice %[[W]][0, 0] [50, 40] [1, 1] : tensor<64x64xf8E4M3FN> to tensor<50x40xf8E4M3FN>
// CHECK-NEXT:    %[[WBS:.*]] = comfyquant.unswizzle %{{.*}} : tensor<128x4xui8> -> tensor<50x2xf8E8M0FNU>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[WL]] block 32 scales(%[[QS]], %[[WBS]] : tensor<?x2xf8E8M0FNU>, tensor<50x2xf8E8M0FNU>)
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] : tensor<?x50xf32> -> tensor<?x50xbf16>

// mxfp8: input_scale is bound but ignored; a padded [50, 40] (U8 scales).
comfyquant.checkpoint @ckpt path "mxfp8.safetensors" size 100000 hash "fnv1a64:0000000000000003" {
  comfyquant.tensor @m.weight : tensor<64x96xf8E4M3FN> at 0
  comfyquant.tensor @m.weight_scale : tensor<128x4xf8E8M0FNU> at 6144
  comfyquant.tensor @m.input_scale : tensor<f32> at 6656
  comfyquant.tensor @m.bias : tensor<64xbf16> at 6660
  comfyquant.tensor @pad.weight : tensor<64x64xf8E4M3FN> at 6788
  comfyquant.tensor @pad.weight_scale : tensor<128x4xui8> at 10884
}
comfyquant.linear @m format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {bias = @ckpt::@m.bias, input_scale = @ckpt::@m.input_scale,
             weight = @ckpt::@m.weight, weight_scale = @ckpt::@m.weight_scale}
comfyquant.linear @pad format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [50, 40]
    tensors {weight = @ckpt::@pad.weight, weight_scale = @ckpt::@pad.weight_scale}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "int8.safetensors"

// Per-row dynamic int8, i32 GEMM; a bf16 scalar weight scale becomes f32.
// CHECK-LABEL: func.func @s(
// CHECK-SAME:    %[[X:.*]]: tensor<?x96xbf16>)
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@s.weight : tensor<64x96xi8>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@s.weight_scale : tensor<bf16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %[[X]] <int8_row> : tensor<?x96xbf16> -> tensor<?x96xi8>, tensor<?x1xf32>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[W]] : tensor<?x96xi8>, tensor<64x96xi8> -> tensor<?x64xi32>
// CHECK-NEXT:    %[[WS32:.*]] = arith.extf %[[WS]] : tensor<bf16> to tensor<f32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] row_scale %[[QS]] : tensor<?x1xf32> col_scale %[[WS32]] : tensor<f32> : tensor<?x64xi32> -> tensor<?x64xbf16>

// Per-row weight scale and bias.
// CHECK-LABEL: func.func @r(
// CHECK:         %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %{{.*}} <int8_row>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %{{.*}} : tensor<?x64xi8>, tensor<32x64xi8> -> tensor<?x32xi32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] row_scale %[[QS]] : tensor<?x1xf32> col_scale %{{.*}} : tensor<32x1xf32> bias %{{.*}} : tensor<32xbf16> : tensor<?x32xi32> -> tensor<?x32xbf16>

// ConvRot groups 16, 64, 256: rotate, then quantize the rotated activation.
// CHECK-LABEL: func.func @g16(
// CHECK-SAME:    %[[X:.*]]: tensor<?x256xbf16>)
// CHECK-SAME:    rotation = <16>
// CHECK:         %[[XR:.*]] = comfyquant.rotate %[[X]] <16> : tensor<?x256xbf16>
// CHECK-NEXT:    %{{.*}}, %{{.*}} = comfyquant.quantize %[[XR]] <int8_row> : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
// CHECK-LABEL: func.func @g64(
// CHECK:         %[[XR:.*]] = comfyquant.rotate %{{.*}} <64> : tensor<?x256xbf16>
// CHECK-NEXT:    comfyquant.quantize %[[XR]] <int8_row>
// CHECK-LABEL: func.func @g256(
// CHECK:         %[[XR:.*]] = comfyquant.rotate %{{.*}} <256> : tensor<?x256xbf16>
// CHECK-NEXT:    comfyquant.quantize %[[XR]] <int8_row>

// Full precision un-rotates the weight in dequantize; x is not rotated.
// CHECK-LABEL: func.func @g64fp(
// CHECK-SAME:    %[[X:.*]]: tensor<?x256xbf16>)
// CHECK-NOT:     comfyquant.rotate
// CHECK:         %[[WD:.*]] = comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = row> rotation <64> : (tensor<32x256xi8>, tensor<32x1xf32>) -> tensor<32x256xbf16>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[X]], %[[WD]] : tensor<?x256xbf16>, tensor<32x256xbf16> -> tensor<?x32xf32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] : tensor<?x32xf32> -> tensor<?x32xbf16>

// int8_tensorwise: scalar (bf16) scale, per-row + bias, ConvRot 16/64/256.
comfyquant.checkpoint @ckpt path "int8.safetensors" size 100000 hash "fnv1a64:0000000000000004" {
  comfyquant.tensor @s.weight : tensor<64x96xi8> at 0
  comfyquant.tensor @s.weight_scale : tensor<bf16> at 6144
  comfyquant.tensor @r.weight : tensor<32x64xi8> at 6146
  comfyquant.tensor @r.weight_scale : tensor<32x1xf32> at 8194
  comfyquant.tensor @r.bias : tensor<32xbf16> at 8322
  comfyquant.tensor @g.weight : tensor<32x256xi8> at 8386
  comfyquant.tensor @g.weight_scale : tensor<32x1xf32> at 16578
}
comfyquant.linear @s format <int8_tensorwise, granularity = tensor> [64, 96]
    tensors {weight = @ckpt::@s.weight, weight_scale = @ckpt::@s.weight_scale}
comfyquant.linear @r format <int8_tensorwise, granularity = row> [32, 64]
    tensors {bias = @ckpt::@r.bias, weight = @ckpt::@r.weight, weight_scale = @ckpt::@r.weight_scale}
comfyquant.linear @g16 format <int8_tensorwise, granularity = row> [32, 256] rotation <16>
    tensors {weight = @ckpt::@g.weight, weight_scale = @ckpt::@g.weight_scale}
comfyquant.linear @g64 format <int8_tensorwise, granularity = row> [32, 256] rotation <64>
    tensors {weight = @ckpt::@g.weight, weight_scale = @ckpt::@g.weight_scale}
comfyquant.linear @g256 format <int8_tensorwise, granularity = row> [32, 256] rotation <256>
    tensors {weight = @ckpt::@g.weight, weight_scale = @ckpt::@g.weight_scale}
comfyquant.linear @g64fp format <int8_tensorwise, granularity = row> [32, 256] rotation <64>
    options <full_precision_matrix_mult = true>
    tensors {weight = @ckpt::@g.weight, weight_scale = @ckpt::@g.weight_scale}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "w4a4.safetensors"

// Default linear_dtype is int4: int4 activations, weight nibbles as i4.
// CHECK-LABEL: func.func @dflt(
// CHECK-SAME:    %[[X:.*]]: tensor<?x256xbf16>)
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@w.weight : tensor<16x128xi8>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@w.weight_scale : tensor<16xf32>
// CHECK-NEXT:    %[[XR:.*]] = comfyquant.rotate %[[X]] <256> : tensor<?x256xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %[[XR]] <int4_row> : tensor<?x256xbf16> -> tensor<?x256xi4>, tensor<?x1xf32>
// CHECK-NEXT:    %[[WQ:.*]] = comfyquant.unpack %[[W]] roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x128xi8>) -> tensor<16x256xi4>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[WQ]] : tensor<?x256xi4>, tensor<16x256xi4> -> tensor<?x16xi32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]] row_scale %[[QS]] : tensor<?x1xf32> col_scale %[[WS]] : tensor<16xf32> : tensor<?x16xi32> -> tensor<?x16xbf16>
// CHECK-NEXT:    return %[[Y]]

// Explicit int4, ConvRot 16, an f16 bias cast to bf16 through f32.
// CHECK-LABEL: func.func @i4(
// CHECK:         %[[B:.*]] = comfyquant.weight @ckpt::@w.bias : tensor<16xf16>
// CHECK-NEXT:    %[[B32:.*]] = arith.extf %[[B]] : tensor<16xf16> to tensor<16xf32>
// CHECK-NEXT:    %[[BT:.*]] = arith.truncf %[[B32]] : tensor<16xf32> to tensor<16xbf16>
// CHECK-NEXT:    %[[XR:.*]] = comfyquant.rotate %{{.*}} <16>
// CHECK-NEXT:    comfyquant.quantize %[[XR]] <int4_row> : tensor<?x256xbf16> -> tensor<?x256xi4>, tensor<?x1xf32>
// CHECK-NEXT:    comfyquant.unpack {{.*}} -> tensor<16x256xi4>
// CHECK:         comfyquant.epilogue {{.*}} bias %[[BT]] : tensor<16xbf16>

// linear_dtype int8: int8 activations, nibbles sign-extended to i8.
// CHECK-LABEL: func.func @i8(
// CHECK:         %[[XR:.*]] = comfyquant.rotate %{{.*}} <64>
// CHECK-NEXT:    %[[Q:.*]], %{{.*}} = comfyquant.quantize %[[XR]] <int8_row> : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
// CHECK-NEXT:    %[[WQ:.*]] = comfyquant.unpack %{{.*}} roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<16x128xi8>) -> tensor<16x256xi8>
// CHECK-NEXT:    comfyquant.qmatmul %[[Q]], %[[WQ]] : tensor<?x256xi8>, tensor<16x256xi8> -> tensor<?x16xi32>

// CHECK-LABEL: func.func @fp(
// CHECK-NOT:     comfyquant.unpack
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}} roles ["weight_scale"] format <convrot_w4a4, granularity = row, nibbles = low_first> rotation <64> : (tensor<16x128xi8>, tensor<16xf32>) -> tensor<16x256xbf16>

// convrot_w4a4: linear_dtype int4 (the default, and explicit), int8; bias;
// full precision.
comfyquant.checkpoint @ckpt path "w4a4.safetensors" size 100000 hash "fnv1a64:0000000000000005" {
  comfyquant.tensor @w.weight : tensor<16x128xi8> at 0
  comfyquant.tensor @w.weight_scale : tensor<16xf32> at 2048
  comfyquant.tensor @w.bias : tensor<16xf16> at 2112
}
comfyquant.linear @dflt format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256] rotation <256>
    tensors {weight = @ckpt::@w.weight, weight_scale = @ckpt::@w.weight_scale}
comfyquant.linear @i4 format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256] rotation <16>
    options <linear_dtype = int4>
    tensors {bias = @ckpt::@w.bias, weight = @ckpt::@w.weight, weight_scale = @ckpt::@w.weight_scale}
comfyquant.linear @i8 format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256] rotation <64>
    options <linear_dtype = int8>
    tensors {bias = @ckpt::@w.bias, weight = @ckpt::@w.weight, weight_scale = @ckpt::@w.weight_scale}
comfyquant.linear @fp format <convrot_w4a4, granularity = row, nibbles = low_first> [16, 256] rotation <64>
    options <full_precision_matrix_mult = true>
    tensors {bias = @ckpt::@w.bias, weight = @ckpt::@w.weight, weight_scale = @ckpt::@w.weight_scale}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "grouped.safetensors"

// The int8 grid from codes, E4M3 group scales and the codebook; s_channel
// is the epilogue's column scale.
// CHECK-LABEL: func.func @cb(
// CHECK-SAME:    %[[X:.*]]: tensor<?x256xbf16>)
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@cb.weight : tensor<64x128xi8>
// CHECK-NEXT:    %[[REL:.*]] = comfyquant.weight @ckpt::@cb.weight_s_rel : tensor<64x16xf8E4M3FN>
// CHECK-NEXT:    %[[CH:.*]] = comfyquant.weight @ckpt::@cb.weight_s_channel : tensor<64xf32>
// CHECK-NEXT:    %[[CB:.*]] = comfyquant.weight @ckpt::@cb.weight_codebook : tensor<16xf32>
// CHECK-NEXT:    %[[B:.*]] = comfyquant.weight @ckpt::@cb.bias : tensor<64xbf16>
// CHECK-NEXT:    %[[XR:.*]] = comfyquant.rotate %[[X]] <256> : tensor<?x256xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %[[XR]] <int8_row> : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
// CHECK-NEXT:    %[[G8:.*]] = comfyquant.unpack %[[W]], %[[REL]], %[[CB]] roles ["weight_s_rel", "weight_codebook"] format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<16xf32>) -> tensor<64x256xi8>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[G8]] : tensor<?x256xi8>, tensor<64x256xi8> -> tensor<?x64xi32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]] row_scale %[[QS]] : tensor<?x1xf32> col_scale %[[CH]] : tensor<64xf32> bias %[[B]] : tensor<64xbf16> : tensor<?x64xi32> -> tensor<?x64xbf16>
// CHECK-NEXT:    return %[[Y]]

// U8 and F32 group scales, no codebook.
// CHECK-LABEL: func.func @u8(
// CHECK:         comfyquant.rotate %{{.*}} <16>
// CHECK:         comfyquant.unpack %{{.*}}, %{{.*}} roles ["weight_s_rel"] format <asym_w4a8_int8, granularity = group, group = 4, scale = f8E4M3FN, nibbles = low_first> : (tensor<16x32xi8>, tensor<16x16xui8>) -> tensor<16x64xi8>
// CHECK-LABEL: func.func @f(
// CHECK:         comfyquant.rotate %{{.*}} <64>
// CHECK:         comfyquant.unpack %{{.*}}, %{{.*}} roles ["weight_s_rel"] format <asym_w4a8_int8, granularity = group, group = 64, scale = f32, nibbles = low_first> : (tensor<32x64xi8>, tensor<32x2xf32>) -> tensor<32x128xi8>

// 6-bit codes.
// CHECK-LABEL: func.func @w6(
// CHECK:         %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %{{.*}} <int8_row>
// CHECK-NEXT:    %[[G8:.*]] = comfyquant.unpack %{{.*}}, %{{.*}} roles ["weight_s_rel"] format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> : (tensor<16x96xi8>, tensor<16x4xf8E4M3FN>) -> tensor<16x128xi8>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[G8]] : tensor<?x128xi8>, tensor<16x128xi8> -> tensor<?x16xi32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] row_scale %[[QS]] : tensor<?x1xf32> col_scale %{{.*}} : tensor<16xf32> : tensor<?x16xi32> -> tensor<?x16xbf16>

// Full precision: every weight tensor goes to dequantize (s_channel too).
// CHECK-LABEL: func.func @cbfp(
// CHECK:         comfyquant.dequantize %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} roles ["weight_s_rel", "weight_s_channel", "weight_codebook"] format <asym_w4a8_int8, {{.*}}> rotation <256> : (tensor<64x128xi8>, tensor<64x16xf8E4M3FN>, tensor<64xf32>, tensor<16xf32>) -> tensor<64x256xbf16>

// Grouped formats: W4A8 with codebook (E4M3 s_rel), U8 s_rel, F32 s_rel;
// W6A8; full precision.
comfyquant.checkpoint @ckpt path "grouped.safetensors" size 100000 hash "fnv1a64:0000000000000006" {
  comfyquant.tensor @cb.weight : tensor<64x128xi8> at 0
  comfyquant.tensor @cb.weight_s_rel : tensor<64x16xf8E4M3FN> at 8192
  comfyquant.tensor @cb.weight_s_channel : tensor<64xf32> at 9216
  comfyquant.tensor @cb.weight_codebook : tensor<16xf32> at 9472
  comfyquant.tensor @cb.bias : tensor<64xbf16> at 9536
  comfyquant.tensor @u8.weight : tensor<16x32xi8> at 9664
  comfyquant.tensor @u8.weight_s_rel : tensor<16x16xui8> at 10176
  comfyquant.tensor @u8.weight_s_channel : tensor<16xf32> at 10432
  comfyquant.tensor @f.weight : tensor<32x64xi8> at 10496
  comfyquant.tensor @f.weight_s_rel : tensor<32x2xf32> at 12544
  comfyquant.tensor @f.weight_s_channel : tensor<32xf32> at 12800
  comfyquant.tensor @w6.weight : tensor<16x96xi8> at 12928
  comfyquant.tensor @w6.weight_s_rel : tensor<16x4xf8E4M3FN> at 14464
  comfyquant.tensor @w6.weight_s_channel : tensor<16xf32> at 14528
}
comfyquant.linear @cb format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [64, 256]
    rotation <256>
    tensors {bias = @ckpt::@cb.bias, weight = @ckpt::@cb.weight, weight_codebook = @ckpt::@cb.weight_codebook,
             weight_s_channel = @ckpt::@cb.weight_s_channel, weight_s_rel = @ckpt::@cb.weight_s_rel}
comfyquant.linear @u8 format <asym_w4a8_int8, granularity = group, group = 4, scale = f8E4M3FN, nibbles = low_first> [16, 64]
    rotation <16>
    tensors {weight = @ckpt::@u8.weight, weight_s_channel = @ckpt::@u8.weight_s_channel, weight_s_rel = @ckpt::@u8.weight_s_rel}
comfyquant.linear @f format <asym_w4a8_int8, granularity = group, group = 64, scale = f32, nibbles = low_first> [32, 128]
    rotation <64>
    tensors {weight = @ckpt::@f.weight, weight_s_channel = @ckpt::@f.weight_s_channel, weight_s_rel = @ckpt::@f.weight_s_rel}
comfyquant.linear @w6 format <w6a8_int8, granularity = group, group = 32, scale = f8E4M3FN, nibbles = low_first> [16, 128]
    rotation <64>
    tensors {weight = @ckpt::@w6.weight, weight_s_channel = @ckpt::@w6.weight_s_channel, weight_s_rel = @ckpt::@w6.weight_s_rel}
comfyquant.linear @cbfp format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [64, 256]
    rotation <256> options <full_precision_matrix_mult = true>
    tensors {bias = @ckpt::@cb.bias, weight = @ckpt::@cb.weight, weight_codebook = @ckpt::@cb.weight_codebook,
             weight_s_channel = @ckpt::@cb.weight_s_channel, weight_s_rel = @ckpt::@cb.weight_s_rel}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "emb.safetensors"
// CHECK-NOT:   comfyquant.embedding

// Embeddings take i64 indices and dequantize only the gathered rows.
// CHECK-LABEL: func.func @fp8(
// CHECK-SAME:    %[[I:.*]]: tensor<?xi64>) -> tensor<?x32xbf16>
// CHECK-SAME:    attributes {comfyquant.module = #comfyquant.module<embedding, format = <float8_e4m3fn, granularity = tensor>, out_features = 64, in_features = 32>}
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@fp8.weight : tensor<64x32xf8E4M3FN>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@fp8.weight_scale : tensor<f32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.lookup %[[W]][%[[I]]], %[[WS]] roles ["weight_scale"] format <float8_e4m3fn, granularity = tensor> : (tensor<64x32xf8E4M3FN>, tensor<?xi64>, tensor<f32>) -> tensor<?x32xbf16>
// CHECK-NEXT:    return %[[Y]]
// No scale (1.0).
// CHECK-LABEL: func.func @e5(
// CHECK:         comfyquant.lookup %{{.*}}[%{{.*}}] roles [] format <float8_e5m2, granularity = tensor> : (tensor<64x32xf8E5M2>, tensor<?xi64>) -> tensor<?x32xbf16>
// CHECK-LABEL: func.func @rows(
// CHECK:         comfyquant.lookup %{{.*}}[%{{.*}}], %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = row> : (tensor<64x48xi8>, tensor<?xi64>, tensor<64x1xf32>) -> tensor<?x48xbf16>
// ConvRot tables un-rotate each looked-up row.
// CHECK-LABEL: func.func @rot(
// CHECK:         comfyquant.lookup %{{.*}}[%{{.*}}], %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = row> rotation <64> : (tensor<48x128xi8>, tensor<?xi64>, tensor<48x1xf32>) -> tensor<?x128xbf16>
// CHECK-LABEL: func.func @sc(
// CHECK:         comfyquant.lookup %{{.*}}[%{{.*}}], %{{.*}} roles ["weight_scale"] format <int8_tensorwise, granularity = tensor> : (tensor<64x48xi8>, tensor<?xi64>, tensor<f32>) -> tensor<?x48xbf16>

// F32-LABEL: func.func @fp8(
// F32-SAME:    tensor<?xi64>) -> tensor<?x32xf32>
// F32:         comfyquant.lookup {{.*}} -> tensor<?x32xf32>
// F16-LABEL: func.func @rot(
// F16:         comfyquant.lookup {{.*}} -> tensor<?x128xf16>

comfyquant.checkpoint @ckpt path "emb.safetensors" size 100000 hash "fnv1a64:0000000000000007" {
  comfyquant.tensor @fp8.weight : tensor<64x32xf8E4M3FN> at 0
  comfyquant.tensor @fp8.weight_scale : tensor<f32> at 2048
  comfyquant.tensor @e5.weight : tensor<64x32xf8E5M2> at 2052
  comfyquant.tensor @rows.weight : tensor<64x48xi8> at 4100
  comfyquant.tensor @rows.weight_scale : tensor<64x1xf32> at 7172
  comfyquant.tensor @rot.weight : tensor<48x128xi8> at 7428
  comfyquant.tensor @rot.weight_scale : tensor<48x1xf32> at 13572
  comfyquant.tensor @sc.weight : tensor<64x48xi8> at 13764
  comfyquant.tensor @sc.weight_scale : tensor<f32> at 16836
}
comfyquant.embedding @fp8 format <float8_e4m3fn, granularity = tensor> [64, 32]
    tensors {weight = @ckpt::@fp8.weight, weight_scale = @ckpt::@fp8.weight_scale}
comfyquant.embedding @e5 format <float8_e5m2, granularity = tensor> [64, 32]
    tensors {weight = @ckpt::@e5.weight}
comfyquant.embedding @rows format <int8_tensorwise, granularity = row> [64, 48]
    tensors {weight = @ckpt::@rows.weight, weight_scale = @ckpt::@rows.weight_scale}
comfyquant.embedding @rot format <int8_tensorwise, granularity = row> [48, 128] rotation <64>
    tensors {weight = @ckpt::@rot.weight, weight_scale = @ckpt::@rot.weight_scale}
comfyquant.embedding @sc format <int8_tensorwise, granularity = tensor> [64, 48]
    tensors {weight = @ckpt::@sc.weight, weight_scale = @ckpt::@sc.weight_scale}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "moe.safetensors"
// CHECK-NOT:   comfyquant.moe

// 3-D banks: every per-expert tensor is sliced at the expert argument;
// [E] scales give a one-element slice.
// CHECK-LABEL: func.func @fp8(
// CHECK-SAME:    %[[X:.*]]: tensor<?x64xbf16>, %[[E:.*]]: index) -> tensor<?x32xbf16>
// CHECK-SAME:    attributes {comfyquant.module = #comfyquant.module<moe, format = <float8_e4m3fn, granularity = tensor>, out_features = 32, in_features = 64, experts = 3>}
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@fp8.weight : tensor<3x32x64xf8E4M3FN>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@fp8.weight_scale : tensor<3xf32>
// CHECK-NEXT:    %[[B:.*]] = comfyquant.weight @ckpt::@fp8.bias : tensor<3x32xbf16>
// CHECK-NEXT:    %[[WE:.*]] = tensor.extract_slice %[[W]][%[[E]], 0, 0] [1, 32, 64] [1, 1, 1] : tensor<3x32x64xf8E4M3FN> to tensor<32x64xf8E4M3FN>
// CHECK-NEXT:    %[[WSE:.*]] = tensor.extract_slice %[[WS]][%[[E]]] [1] [1] : tensor<3xf32> to tensor<1xf32>
// CHECK-NEXT:    %[[BE:.*]] = tensor.extract_slice %[[B]][%[[E]], 0] [1, 32] [1, 1] : tensor<3x32xbf16> to tensor<32xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %[[X]] <fp8_static, type = f8E4M3FN> : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<f32>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[WE]] : tensor<?x64xf8E4M3FN>, tensor<32x64xf8E4M3FN> -> tensor<?x32xf32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.epilogue %[[ACC]] row_scale %[[QS]] : tensor<f32> col_scale %[[WSE]] : tensor<1xf32> bias %[[BE]] : tensor<32xbf16> : tensor<?x32xf32> -> tensor<?x32xbf16>
// CHECK-NEXT:    return %[[Y]]

// NVFP4 bank: weight, swizzled scales [E, ...] and weight_scale_2 [E].
// CHECK-LABEL: func.func @nv(
// CHECK-SAME:    %[[X:.*]]: tensor<?x48xbf16>, %[[E:.*]]: index)
// CHECK:         %[[WE:.*]] = tensor.extract_slice %{{.*}}[%[[E]], 0, 0] [1, 48, 24] [1, 1, 1] : tensor<2x48x24xui8> to tensor<48x24xui8>
// CHECK-NEXT:    %[[SE:.*]] = tensor.extract_slice %{{.*}}[%[[E]], 0, 0] [1, 128, 4] [1, 1, 1] : tensor<2x128x4xf8E4M3FN> to tensor<128x4xf8E4M3FN>
// CHECK-NEXT:    %[[S2E:.*]] = tensor.extract_slice %{{.*}}[%[[E]]] [1] [1] : tensor<2xf32> to tensor<1xf32>
// CHECK-NEXT:    comfyquant.quantize %[[X]] <nvfp4_block, block = 16> : tensor<?x48xbf16> -> tensor<?x48xf4E2M1FN>, tensor<?x3xf8E4M3FN>, tensor<f32>
// CHECK-NEXT:    comfyquant.unpack %[[WE]] roles [] format <nvfp4, {{.*}}> : (tensor<48x24xui8>) -> tensor<48x48xf4E2M1FN>
// CHECK-NEXT:    comfyquant.unswizzle %[[SE]] : tensor<128x4xf8E4M3FN> -> tensor<48x3xf8E4M3FN>
// CHECK:         tensor.extract %[[S2E]][%{{.*}}] : tensor<1xf32>

// CHECK-LABEL: func.func @mx(
// CHECK-SAME:    %{{.*}}: tensor<?x64xbf16>, %[[E:.*]]: index)
// CHECK:         %[[WE:.*]] = tensor.extract_slice %{{.*}}[%[[E]], 0, 0] [1, 32, 64] [1, 1, 1] : tensor<2x32x64xf8E4M3FN> to tensor<32x64xf8E4M3FN>
// CHECK-NEXT:    %[[SE:.*]] = tensor.extract_slice %{{.*}}[%[[E]], 0, 0] [1, 128, 4] [1, 1, 1] : tensor<2x128x4xui8> to tensor<128x4xui8>
// CHECK:         comfyquant.unswizzle %[[SE]] : tensor<128x4xui8> -> tensor<32x2xf8E8M0FNU>
// CHECK:         comfyquant.qmatmul %{{.*}}, %[[WE]] block 32

// Full precision dequantizes only the selected expert.
// CHECK-LABEL: func.func @mxfp(
// CHECK:         %[[WE:.*]] = tensor.extract_slice
// CHECK-NEXT:    %[[SE:.*]] = tensor.extract_slice
// CHECK-NEXT:    comfyquant.dequantize %[[WE]], %[[SE]] roles ["weight_scale"] format <mxfp8, {{.*}}> : (tensor<32x64xf8E4M3FN>, tensor<128x4xui8>) -> tensor<32x64xbf16>

// CHECK-LABEL: func.func @w4(
// CHECK:         %[[WE:.*]] = tensor.extract_slice %{{.*}} : tensor<2x32x32xi8> to tensor<32x32xi8>
// CHECK-NEXT:    %[[SE:.*]] = tensor.extract_slice %{{.*}} : tensor<2x32xf32> to tensor<32xf32>
// CHECK-NEXT:    comfyquant.rotate %{{.*}} <64>
// CHECK-NEXT:    comfyquant.quantize %{{.*}} <int4_row>
// CHECK-NEXT:    comfyquant.unpack %[[WE]] roles [] format <convrot_w4a4, {{.*}}> : (tensor<32x32xi8>) -> tensor<32x64xi4>
// CHECK:         comfyquant.epilogue %{{.*}} col_scale %[[SE]] : tensor<32xf32>

// A shared scalar scale is not sliced.
// CHECK-LABEL: func.func @i8s(
// CHECK:         %[[WS:.*]] = comfyquant.weight @ckpt::@i8s.weight_scale : tensor<f32>
// CHECK-NOT:     tensor.extract_slice %[[WS]]
// CHECK:         comfyquant.epilogue %{{.*}} col_scale %[[WS]] : tensor<f32>
// CHECK-LABEL: func.func @i8e(
// CHECK:         %[[SE:.*]] = tensor.extract_slice %{{.*}} : tensor<3xf32> to tensor<1xf32>
// CHECK:         comfyquant.epilogue %{{.*}} col_scale %[[SE]] : tensor<1xf32>
// CHECK-LABEL: func.func @i8r(
// CHECK:         %[[SE:.*]] = tensor.extract_slice %{{.*}}[%{{.*}}, 0, 0] [1, 16, 1] [1, 1, 1] : tensor<3x16x1xf32> to tensor<16x1xf32>
// CHECK:         comfyquant.epilogue %{{.*}} col_scale %[[SE]] : tensor<16x1xf32>
// CHECK-LABEL: func.func @w6(
// CHECK:         %[[WE:.*]] = tensor.extract_slice %{{.*}} : tensor<2x16x192xi8> to tensor<16x192xi8>
// CHECK-NEXT:    %[[RE:.*]] = tensor.extract_slice %{{.*}} : tensor<2x16x16xf8E4M3FN> to tensor<16x16xf8E4M3FN>
// CHECK-NEXT:    %[[CE:.*]] = tensor.extract_slice %{{.*}} : tensor<2x16xf32> to tensor<16xf32>
// CHECK:         comfyquant.unpack %[[WE]], %[[RE]] roles ["weight_s_rel"] format <w6a8_int8, {{.*}}> : (tensor<16x192xi8>, tensor<16x16xf8E4M3FN>) -> tensor<16x256xi8>
// CHECK:         comfyquant.epilogue %{{.*}} col_scale %[[CE]] : tensor<16xf32>

comfyquant.checkpoint @ckpt path "moe.safetensors" size 200000 hash "fnv1a64:0000000000000008" {
  comfyquant.tensor @fp8.weight : tensor<3x32x64xf8E4M3FN> at 0
  comfyquant.tensor @fp8.weight_scale : tensor<3xf32> at 6144
  comfyquant.tensor @fp8.bias : tensor<3x32xbf16> at 6156
  comfyquant.tensor @nv.weight : tensor<2x48x24xui8> at 6348
  comfyquant.tensor @nv.weight_scale : tensor<2x128x4xf8E4M3FN> at 8652
  comfyquant.tensor @nv.weight_scale_2 : tensor<2xf32> at 9676
  comfyquant.tensor @mx.weight : tensor<2x32x64xf8E4M3FN> at 9684
  comfyquant.tensor @mx.weight_scale : tensor<2x128x4xui8> at 13780
  comfyquant.tensor @w4.weight : tensor<2x32x32xi8> at 14804
  comfyquant.tensor @w4.weight_scale : tensor<2x32xf32> at 16852
  comfyquant.tensor @i8s.weight : tensor<2x32x64xi8> at 17108
  comfyquant.tensor @i8s.weight_scale : tensor<f32> at 21204
  comfyquant.tensor @i8e.weight : tensor<3x32x64xi8> at 21208
  comfyquant.tensor @i8e.weight_scale : tensor<3xf32> at 27352
  comfyquant.tensor @i8r.weight : tensor<3x16x64xi8> at 27364
  comfyquant.tensor @i8r.weight_scale : tensor<3x16x1xf32> at 30436
  comfyquant.tensor @w6.weight : tensor<2x16x192xi8> at 30628
  comfyquant.tensor @w6.weight_s_rel : tensor<2x16x16xf8E4M3FN> at 36772
  comfyquant.tensor @w6.weight_s_channel : tensor<2x16xf32> at 37284
}
comfyquant.moe @fp8 format <float8_e4m3fn, granularity = tensor> [3 x 32, 64]
    tensors {bias = @ckpt::@fp8.bias, weight = @ckpt::@fp8.weight, weight_scale = @ckpt::@fp8.weight_scale}
comfyquant.moe @nv format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [2 x 48, 48]
    tensors {weight = @ckpt::@nv.weight, weight_scale = @ckpt::@nv.weight_scale, weight_scale_2 = @ckpt::@nv.weight_scale_2}
comfyquant.moe @mx format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [2 x 32, 64]
    tensors {weight = @ckpt::@mx.weight, weight_scale = @ckpt::@mx.weight_scale}
comfyquant.moe @mxfp format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [2 x 32, 64]
    options <full_precision_matrix_mult = true>
    tensors {weight = @ckpt::@mx.weight, weight_scale = @ckpt::@mx.weight_scale}
comfyquant.moe @w4 format <convrot_w4a4, granularity = row, nibbles = low_first> [2 x 32, 64] rotation <64>
    tensors {weight = @ckpt::@w4.weight, weight_scale = @ckpt::@w4.weight_scale}
comfyquant.moe @i8s format <int8_tensorwise, granularity = tensor> [2 x 32, 64]
    tensors {weight = @ckpt::@i8s.weight, weight_scale = @ckpt::@i8s.weight_scale}
comfyquant.moe @i8e format <int8_tensorwise, granularity = tensor> [3 x 32, 64]
    tensors {weight = @ckpt::@i8e.weight, weight_scale = @ckpt::@i8e.weight_scale}
comfyquant.moe @i8r format <int8_tensorwise, granularity = row> [3 x 16, 64]
    tensors {weight = @ckpt::@i8r.weight, weight_scale = @ckpt::@i8r.weight_scale}
comfyquant.moe @w6 format <w6a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [2 x 16, 256]
    rotation <256>
    tensors {weight = @ckpt::@w6.weight, weight_s_channel = @ckpt::@w6.weight_s_channel, weight_s_rel = @ckpt::@w6.weight_s_rel}

// -----

// CHECK-LABEL: comfyquant.checkpoint @ckpt path "flat.safetensors"

// Flattened banks [E·N, ...]: expert e is rows [e·N, (e+1)·N) of every
// per-expert tensor (one offset computation per row count).
// CHECK-LABEL: func.func @i8(
// CHECK-SAME:    %[[X:.*]]: tensor<?x64xbf16>, %[[E:.*]]: index)
// CHECK:         %[[N:.*]] = arith.constant 16 : index
// CHECK-NEXT:    %[[OFF:.*]] = arith.muli %[[E]], %[[N]] : index
// CHECK-NEXT:    %[[WE:.*]] = tensor.extract_slice %{{.*}}[%[[OFF]], 0] [16, 64] [1, 1] : tensor<32x64xi8> to tensor<16x64xi8>
// CHECK-NEXT:    %[[SE:.*]] = tensor.extract_slice %{{.*}}[%[[OFF]], 0] [16, 1] [1, 1] : tensor<32x1xf32> to tensor<16x1xf32>
// CHECK-NEXT:    %[[BE:.*]] = tensor.extract_slice %{{.*}}[%[[OFF]]] [16] [1] : tensor<32xbf16> to tensor<16xbf16>
// CHECK-NEXT:    %[[XR:.*]] = comfyquant.rotate %[[X]] <16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]] = comfyquant.quantize %[[XR]] <int8_row>
// CHECK-NEXT:    %[[ACC:.*]] = comfyquant.qmatmul %[[Q]], %[[WE]] : tensor<?x64xi8>, tensor<16x64xi8> -> tensor<?x16xi32>
// CHECK-NEXT:    comfyquant.epilogue %[[ACC]] row_scale %[[QS]] : tensor<?x1xf32> col_scale %[[SE]] : tensor<16x1xf32> bias %[[BE]] : tensor<16xbf16>

// The codebook is one table for all experts; a [E, N] bias is stacked.
// CHECK-LABEL: func.func @w4(
// CHECK-SAME:    %{{.*}}: tensor<?x256xbf16>, %[[E:.*]]: index)
// CHECK:         %[[CB:.*]] = comfyquant.weight @ckpt::@w4.weight_codebook : tensor<16xf32>
// CHECK:         %[[OFF:.*]] = arith.muli %[[E]], %{{.*}} : index
// CHECK-NEXT:    %[[WE:.*]] = tensor.extract_slice %{{.*}}[%[[OFF]], 0] [16, 128] [1, 1] : tensor<32x128xi8> to tensor<16x128xi8>
// CHECK-NEXT:    %[[RE:.*]] = tensor.extract_slice %{{.*}}[%[[OFF]], 0] [16, 16] [1, 1] : tensor<32x16xf8E4M3FN> to tensor<16x16xf8E4M3FN>
// CHECK-NEXT:    %[[CE:.*]] = tensor.extract_slice %{{.*}}[%[[OFF]]] [16] [1] : tensor<32xf32> to tensor<16xf32>
// CHECK-NEXT:    %[[BE:.*]] = tensor.extract_slice %{{.*}}[%[[E]], 0] [1, 16] [1, 1] : tensor<2x16xbf16> to tensor<16xbf16>
// CHECK:         comfyquant.unpack %[[WE]], %[[RE]], %[[CB]] roles ["weight_s_rel", "weight_codebook"]
// CHECK:         comfyquant.epilogue %{{.*}} col_scale %[[CE]] : tensor<16xf32> bias %[[BE]] : tensor<16xbf16>

// CHECK-LABEL: func.func @w6(
// CHECK:         %[[WE:.*]] = tensor.extract_slice %{{.*}} : tensor<32x48xi8> to tensor<16x48xi8>
// CHECK-NEXT:    %[[RE:.*]] = tensor.extract_slice %{{.*}} : tensor<32x4xf32> to tensor<16x4xf32>
// CHECK-NEXT:    %[[CE:.*]] = tensor.extract_slice %{{.*}} : tensor<32xf32> to tensor<16xf32>
// CHECK-NEXT:    comfyquant.dequantize %[[WE]], %[[RE]], %[[CE]] roles ["weight_s_rel", "weight_s_channel"] format <w6a8_int8, {{.*}}> rotation <64> : (tensor<16x48xi8>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<16x64xbf16>

// One row per expert: the bank's per-row scales slice to one element, which
// the registry reads as a scalar, so the dequantized slice says so.
// CHECK-LABEL: func.func @one(
// CHECK-SAME:    format = <int8_tensorwise, granularity = row>
// CHECK:         %[[SE:.*]] = tensor.extract_slice %{{.*}} : tensor<2x1x1xf32> to tensor<1x1xf32>
// CHECK-NEXT:    comfyquant.dequantize %{{.*}}, %[[SE]] roles ["weight_scale"] format <int8_tensorwise, granularity = tensor> : (tensor<1x64xi8>, tensor<1x1xf32>) -> tensor<1x64xbf16>

comfyquant.checkpoint @ckpt path "flat.safetensors" size 200000 hash "fnv1a64:0000000000000009" {
  comfyquant.tensor @i8.weight : tensor<32x64xi8> at 0
  comfyquant.tensor @i8.weight_scale : tensor<32x1xf32> at 2048
  comfyquant.tensor @i8.bias : tensor<32xbf16> at 2176
  comfyquant.tensor @w4.weight : tensor<32x128xi8> at 2240
  comfyquant.tensor @w4.weight_s_rel : tensor<32x16xf8E4M3FN> at 6336
  comfyquant.tensor @w4.weight_s_channel : tensor<32xf32> at 6848
  comfyquant.tensor @w4.weight_codebook : tensor<16xf32> at 6976
  comfyquant.tensor @w4.bias : tensor<2x16xbf16> at 7040
  comfyquant.tensor @w6.weight : tensor<32x48xi8> at 7104
  comfyquant.tensor @w6.weight_s_rel : tensor<32x4xf32> at 8640
  comfyquant.tensor @w6.weight_s_channel : tensor<32xf32> at 9152
  comfyquant.tensor @one.weight : tensor<2x1x64xi8> at 9280
  comfyquant.tensor @one.weight_scale : tensor<2x1x1xf32> at 9408
}
comfyquant.moe @i8 format <int8_tensorwise, granularity = row> [2 x 16, 64] rotation <16>
    tensors {bias = @ckpt::@i8.bias, weight = @ckpt::@i8.weight, weight_scale = @ckpt::@i8.weight_scale}
comfyquant.moe @w4 format <asym_w4a8_int8, granularity = group, group = 16, scale = f8E4M3FN, nibbles = low_first> [2 x 16, 256]
    rotation <256>
    tensors {bias = @ckpt::@w4.bias, weight = @ckpt::@w4.weight, weight_codebook = @ckpt::@w4.weight_codebook,
             weight_s_channel = @ckpt::@w4.weight_s_channel, weight_s_rel = @ckpt::@w4.weight_s_rel}
comfyquant.moe @w6 format <w6a8_int8, granularity = group, group = 16, scale = f32, nibbles = low_first> [2 x 16, 64]
    rotation <64> options <full_precision_matrix_mult = true>
    tensors {weight = @ckpt::@w6.weight, weight_s_channel = @ckpt::@w6.weight_s_channel, weight_s_rel = @ckpt::@w6.weight_s_rel}
comfyquant.moe @one format <int8_tensorwise, granularity = row> [2 x 1, 64]
    options <full_precision_matrix_mult = true>
    tensors {weight = @ckpt::@one.weight, weight_scale = @ckpt::@one.weight_scale}
