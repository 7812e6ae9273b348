// RUN: not comfyquant-opt %s --split-input-file --comfyquant-cpu-prepare-abi 2>/dev/null | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --comfyquant-cpu-prepare-abi --verify-diagnostics -o /dev/null

// y becomes a memref argument at position 1 written through
// materialize_in_destination; the column range trails; tensor arguments are
// read-only; private functions keep their signature.
// CHECK: module attributes {comfyquant.entries = {linear = "linear_entry", noresult = "named"}}
// CHECK: func.func @linear(%[[X:.*]]: tensor<?x8xf32> {bufferization.writable = false}, %[[Y:.*]]: memref<?x4xf32> {comfyquant.output}, %{{.*}}: tensor<4x8xf32> {bufferization.writable = false}, %{{.*}}: index {comfyquant.column_begin}, %{{.*}}: index {comfyquant.column_end}) attributes {llvm.emit_c_interface} {
// CHECK:   %[[E:.*]] = tensor.empty
// CHECK:   bufferization.materialize_in_destination %[[E]] in restrict writable %[[Y]]
// CHECK-NEXT: return{{$}}
func.func @linear(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  return %e : tensor<?x4xf32>
}
// A function without y gets no column range.
// CHECK: func.func @noresult(%{{.*}}: tensor<8xf32> {bufferization.writable = false}) attributes {comfyquant.entry = "named", llvm.emit_c_interface}
func.func @noresult(%x: tensor<8xf32>) attributes {comfyquant.entry = "named"} {
  return
}
// CHECK: func.func private @helper(%{{.*}}: tensor<8xf32>) -> tensor<8xf32>
func.func private @helper(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// expected-error @below {{must have one tensor result (y) or none}}
func.func @two(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  return %x, %x : tensor<8xf32>, tensor<8xf32>
}

// -----

// expected-error @below {{result must be a ranked tensor}}
func.func @scalar(%x: tensor<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %v = tensor.extract %x[%c0] : tensor<8xf32>
  return %v : f32
}
