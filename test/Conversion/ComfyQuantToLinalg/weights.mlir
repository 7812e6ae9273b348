// RUN: comfyquant-opt %s --convert-comfyquant-to-linalg | FileCheck %s

// comfyquant.weight becomes a function argument of the storage type (f8 ->
// i8, ui8 -> i8), one per tensor in order of first use, and the weight list
// of the artifact manifest is recorded on the function.

comfyquant.checkpoint @checkpoint path "m.safetensors" size 4096 hash "fnv1a64:0123456789abcdef" {
  comfyquant.tensor @"p.weight" : tensor<8x16xf8E4M3FN> at 256
  comfyquant.tensor @"p.weight_scale" : tensor<f32> at 128
  comfyquant.tensor @"p.input_scale" : tensor<f32> at 132
  comfyquant.tensor @"q.weight" : tensor<8x16xi8> at 512 in "shard-2.safetensors"
}

// CHECK-LABEL: func.func @fp8(
// CHECK-SAME:    %[[X:.*]]: tensor<?x16xf32>,
// CHECK-SAME:    %[[W:.*]]: tensor<8x16xi8> {bufferization.writable = false, comfyquant.dtype = "F8_E4M3", comfyquant.offset = 256 : i64, comfyquant.tensor = "p.weight"},
// CHECK-SAME:    %{{.*}}: tensor<f32> {bufferization.writable = false, comfyquant.dtype = "F32", comfyquant.offset = 132 : i64, comfyquant.tensor = "p.input_scale"},
// CHECK-SAME:    %{{.*}}: tensor<f32> {bufferization.writable = false, comfyquant.dtype = "F32", comfyquant.offset = 128 : i64, comfyquant.tensor = "p.weight_scale"})
// CHECK-SAME:  comfyquant.weights = [{arg = 1 : i64, dtype = "F8_E4M3", offset = 256 : i64, shape = [8, 16], tensor = "p.weight"}, {arg = 2 : i64, dtype = "F32", offset = 132 : i64, shape = [], tensor = "p.input_scale"}, {arg = 3 : i64, dtype = "F32", offset = 128 : i64, shape = [], tensor = "p.weight_scale"}]
// The contraction carries the conversion's tag, and nothing else of the
// dialect is left.
// CHECK-NOT:   comfyquant.
// CHECK:       comfyquant.gemm_info = #comfyquant.gemm_info<float, bf16 x bf16>
// CHECK-NOT:   comfyquant.
// CHECK:       return
func.func @fp8(%x: tensor<?x16xf32>) -> tensor<?x8xf32> {
  %w = comfyquant.weight @checkpoint::@"p.weight" : tensor<8x16xf8E4M3FN>
  %is = comfyquant.weight @checkpoint::@"p.input_scale" : tensor<f32>
  %ws = comfyquant.weight @checkpoint::@"p.weight_scale" : tensor<f32>
  %w2 = comfyquant.weight @checkpoint::@"p.weight" : tensor<8x16xf8E4M3FN>
  %c, %s = comfyquant.quantize %x <fp8_static, type = f8E4M3FN> scale %is : tensor<f32> : tensor<?x16xf32> -> tensor<?x16xf8E4M3FN>, tensor<f32>
  %y = comfyquant.qgemm %c, %w2 row_scale %s : tensor<f32> col_scale %ws : tensor<f32> : tensor<?x16xf8E4M3FN>, tensor<8x16xf8E4M3FN> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// CHECK-LABEL: func.func @sharded(
// CHECK-SAME:    comfyquant.shard = "shard-2.safetensors"
// CHECK-SAME:  comfyquant.weights = [{arg = 1 : i64, dtype = "I8", offset = 512 : i64, shape = [8, 16], shard = "shard-2.safetensors", tensor = "q.weight"}]
func.func @sharded(%x: tensor<?x16xi8>) -> tensor<?x8xi32> {
  %w = comfyquant.weight @checkpoint::@"q.weight" : tensor<8x16xi8>
  %y = comfyquant.qmatmul %x, %w : tensor<?x16xi8>, tensor<8x16xi8> -> tensor<?x8xi32>
  return %y : tensor<?x8xi32>
}
