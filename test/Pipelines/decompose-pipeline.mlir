// RUN: comfyquant-opt %s --comfyquant-decompose-pipeline | FileCheck %s
// RUN: comfyquant-opt %s --pass-pipeline='builtin.module(comfyquant-decompose-pipeline{activation-type=f16})' | FileCheck %s --check-prefix=F16

// decompose -> fuse rotate+quantize -> fuse gemm+epilogue -> canonicalize:
// the IR a CPU / GPU lowering receives. ConvRot activations are rotated
// inside the quantization, every GEMM carries its epilogue, and canonicalize
// drops what the computation does not read (the mxfp8 input_scale binding).

// The checkpoint and the attention preference are untouched.
// CHECK-LABEL: comfyquant.checkpoint @ckpt path "model.safetensors"
// CHECK:         comfyquant.tensor @unused : tensor<64xbf16> at 0
// CHECK:       comfyquant.attention "blocks.0.attn"
// CHECK-NOT:   comfyquant.linear
// CHECK-NOT:   comfyquant.embedding
// CHECK-NOT:   comfyquant.moe

// int8 ConvRot linear: one fused rotate+quantize, one fused GEMM+epilogue.
// CHECK-LABEL: func.func @proj(
// CHECK-SAME:    %[[X:.*]]: tensor<?x128xbf16>) -> tensor<?x32xbf16>
// CHECK-SAME:    attributes {comfyquant.module = #comfyquant.module<linear, format = <int8_tensorwise, granularity = row>, out_features = 32, in_features = 128, rotation = <64>>} {
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@proj.weight : tensor<32x128xi8>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@proj.weight_scale : tensor<32x1xf32>
// CHECK-NEXT:    %[[B:.*]] = comfyquant.weight @ckpt::@proj.bias : tensor<32xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[S:.*]] = comfyquant.quantize %[[X]] <int8_row> rotation <64> : tensor<?x128xbf16> -> tensor<?x128xi8>, tensor<?x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.qgemm %[[Q]], %[[W]] row_scale %[[S]] : tensor<?x1xf32> col_scale %[[WS]] : tensor<32x1xf32> bias %[[B]] : tensor<32xbf16> : tensor<?x128xi8>, tensor<32x128xi8> -> tensor<?x32xbf16>
// CHECK-NEXT:    return %[[Y]] : tensor<?x32xbf16>
// CHECK-NEXT:  }

// nvfp4 linear with pre_quant_scale, a static global scale and a bias.
// CHECK-LABEL: func.func @fc(
// CHECK-SAME:    %[[X:.*]]: tensor<?x80xbf16>) -> tensor<?x48xbf16>
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[W:.*]] = comfyquant.weight @ckpt::@fc.weight : tensor<48x40xui8>
// CHECK-NEXT:    %[[WS:.*]] = comfyquant.weight @ckpt::@fc.weight_scale : tensor<128x8xf8E4M3FN>
// CHECK-NEXT:    %[[WS2:.*]] = comfyquant.weight @ckpt::@fc.weight_scale_2 : tensor<f32>
// CHECK-NEXT:    %[[IS:.*]] = comfyquant.weight @ckpt::@fc.input_scale : tensor<f32>
// CHECK-NEXT:    %[[PQS:.*]] = comfyquant.weight @ckpt::@fc.pre_quant_scale : tensor<80xbf16>
// CHECK-NEXT:    %[[B:.*]] = comfyquant.weight @ckpt::@fc.bias : tensor<48xbf16>
// CHECK-NEXT:    %[[DIM:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x80xbf16>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[DIM]]) : tensor<?x80xbf16>
// CHECK-NEXT:    %[[XS:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[PQS]] : tensor<?x80xbf16>, tensor<80xbf16>) outs(%[[E]] : tensor<?x80xbf16>)
// CHECK:         } -> tensor<?x80xbf16>
// CHECK-NEXT:    %[[Q:.*]], %[[QS:.*]], %[[G:.*]] = comfyquant.quantize %[[XS]] <nvfp4_block, block = 16> scale %[[IS]] : tensor<f32> : tensor<?x80xbf16> -> tensor<?x80xf4E2M1FN>, tensor<?x5xf8E4M3FN>, tensor<f32>
// CHECK-NEXT:    %[[WQ:.*]] = comfyquant.unpack %[[W]] roles [] format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> : (tensor<48x40xui8>) -> tensor<48x80xf4E2M1FN>
// CHECK-NEXT:    %[[WBS:.*]] = comfyquant.unswizzle %[[WS]] : tensor<128x8xf8E4M3FN> -> tensor<48x5xf8E4M3FN>
// CHECK-NEXT:    %[[GV:.*]] = tensor.extract %[[G]][] : tensor<f32>
// CHECK-NEXT:    %[[S2:.*]] = tensor.extract %[[WS2]][] : tensor<f32>
// CHECK-NEXT:    %[[ALPHA:.*]] = arith.mulf %[[GV]], %[[S2]] : f32
// CHECK-NEXT:    %[[AT:.*]] = tensor.from_elements %[[ALPHA]] : tensor<f32>
// CHECK-NEXT:    %[[Y:.*]] = comfyquant.qgemm %[[Q]], %[[WQ]] block 16 scales(%[[QS]], %[[WBS]] : tensor<?x5xf8E4M3FN>, tensor<48x5xf8E4M3FN>) col_scale %[[AT]] : tensor<f32> bias %[[B]] : tensor<48xbf16> : tensor<?x80xf4E2M1FN>, tensor<48x80xf4E2M1FN> -> tensor<?x48xbf16>
// CHECK-NEXT:    return %[[Y]] : tensor<?x48xbf16>

// mxfp8: the unused input_scale binding is gone.
// CHECK-LABEL: func.func @mx(
// CHECK-NOT:     input_scale
// CHECK:         comfyquant.quantize %{{.*}} <mxfp8_block, block = 32>
// CHECK:         comfyquant.qgemm %{{.*}}, %{{.*}} block 32 scales({{.*}}) : tensor<?x96xf8E4M3FN>, tensor<64x96xf8E4M3FN> -> tensor<?x64xbf16>

// CHECK-LABEL: func.func @emb(
// CHECK-SAME:    tensor<?xi64>) -> tensor<?x32xbf16>
// CHECK:         comfyquant.lookup

// The expert slice feeds a fused int4 rotate+quantize / GEMM+epilogue.
// CHECK-LABEL: func.func @ex(
// CHECK-SAME:    %[[X:.*]]: tensor<?x64xbf16>, %[[E:.*]]: index)
// CHECK:         %[[WE:.*]] = tensor.extract_slice %{{.*}}[%[[E]], 0, 0] [1, 32, 32] [1, 1, 1]
// CHECK:         %[[SE:.*]] = tensor.extract_slice %{{.*}}[%[[E]], 0] [1, 32] [1, 1]
// CHECK-NEXT:    %[[Q:.*]], %[[S:.*]] = comfyquant.quantize %[[X]] <int4_row> rotation <64> : tensor<?x64xbf16> -> tensor<?x64xi4>, tensor<?x1xf32>
// CHECK-NEXT:    %[[WQ:.*]] = comfyquant.unpack %[[WE]] roles [] format <convrot_w4a4, granularity = row, nibbles = low_first> : (tensor<32x32xi8>) -> tensor<32x64xi4>
// CHECK-NEXT:    comfyquant.qgemm %[[Q]], %[[WQ]] row_scale %[[S]] : tensor<?x1xf32> col_scale %[[SE]] : tensor<32xf32> : tensor<?x64xi4>, tensor<32x64xi4> -> tensor<?x32xbf16>
// CHECK-NOT:   comfyquant.rotate
// CHECK-NOT:   comfyquant.qmatmul
// CHECK-NOT:   comfyquant.epilogue

// The pipeline option reaches the decomposition.
// F16-LABEL: func.func @proj(
// F16-SAME:    tensor<?x128xf16>) -> tensor<?x32xf16>
// F16:         comfyquant.quantize %{{.*}} <int8_row> rotation <64> : tensor<?x128xf16>
// F16:         comfyquant.qgemm {{.*}} -> tensor<?x32xf16>

comfyquant.checkpoint @ckpt path "model.safetensors" size 100000 hash "fnv1a64:00000000000000aa" {
  comfyquant.tensor @unused : tensor<64xbf16> at 0
  comfyquant.tensor @proj.weight : tensor<32x128xi8> at 128
  comfyquant.tensor @proj.weight_scale : tensor<32x1xf32> at 4224
  comfyquant.tensor @proj.bias : tensor<32xbf16> at 4352
  comfyquant.tensor @fc.weight : tensor<48x40xui8> at 4416
  comfyquant.tensor @fc.weight_scale : tensor<128x8xf8E4M3FN> at 6336
  comfyquant.tensor @fc.weight_scale_2 : tensor<f32> at 7360
  comfyquant.tensor @fc.input_scale : tensor<f32> at 7364
  comfyquant.tensor @fc.pre_quant_scale : tensor<80xbf16> at 7368
  comfyquant.tensor @fc.bias : tensor<48xbf16> at 7528
  comfyquant.tensor @mx.weight : tensor<64x96xf8E4M3FN> at 7624
  comfyquant.tensor @mx.weight_scale : tensor<128x4xf8E8M0FNU> at 13768
  comfyquant.tensor @mx.input_scale : tensor<f32> at 14280
  comfyquant.tensor @emb.weight : tensor<64x32xf8E4M3FN> at 14284
  comfyquant.tensor @emb.weight_scale : tensor<f32> at 16332
  comfyquant.tensor @ex.weight : tensor<2x32x32xi8> at 16336
  comfyquant.tensor @ex.weight_scale : tensor<2x32xf32> at 18384
}
comfyquant.attention "blocks.0.attn" config "{\"attention\": \"comfy_kitchen_int8\"}"
comfyquant.linear @proj format <int8_tensorwise, granularity = row> [32, 128] rotation <64>
    tensors {bias = @ckpt::@proj.bias, weight = @ckpt::@proj.weight, weight_scale = @ckpt::@proj.weight_scale}
comfyquant.linear @fc format <nvfp4, granularity = block, group = 16, scale = f8E4M3FN, nibbles = high_first> [48, 80]
    tensors {bias = @ckpt::@fc.bias, input_scale = @ckpt::@fc.input_scale, pre_quant_scale = @ckpt::@fc.pre_quant_scale,
             weight = @ckpt::@fc.weight, weight_scale = @ckpt::@fc.weight_scale, weight_scale_2 = @ckpt::@fc.weight_scale_2}
comfyquant.linear @mx format <mxfp8, granularity = block, group = 32, scale = f8E8M0FNU> [64, 96]
    tensors {input_scale = @ckpt::@mx.input_scale, weight = @ckpt::@mx.weight, weight_scale = @ckpt::@mx.weight_scale}
comfyquant.embedding @emb format <float8_e4m3fn, granularity = tensor> [64, 32]
    tensors {weight = @ckpt::@emb.weight, weight_scale = @ckpt::@emb.weight_scale}
comfyquant.moe @ex format <convrot_w4a4, granularity = row, nibbles = low_first> [2 x 32, 64] rotation <64>
    tensors {weight = @ckpt::@ex.weight, weight_scale = @ckpt::@ex.weight_scale}
