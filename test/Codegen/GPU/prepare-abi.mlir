// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --comfyquant-gpu-prepare-abi | FileCheck %s

// (x, w) -> y becomes (launcher, x, y, w, workspace): y written in place,
// everything else read-only, the entry recorded on the module.
// CHECK-LABEL: module attributes {comfyquant.entries = {linear = "linear_entry"}}
// CHECK:       func.func @linear(%[[L:.*]]: !llvm.ptr {comfyquant.launcher}, %[[X:.*]]: tensor<?x64xbf16> {bufferization.writable = false}, %[[Y:.*]]: memref<?x32xbf16> {comfyquant.output}, %[[W:.*]]: tensor<32x64xi8> {bufferization.writable = false}, %[[WS:.*]]: memref<?xi8> {comfyquant.workspace})
// CHECK-SAME:  llvm.emit_c_interface
// CHECK:         bufferization.materialize_in_destination %{{.*}} in restrict writable %[[Y]]
// CHECK-NEXT:    return{{$}}
func.func @linear(%x: tensor<?x64xbf16>, %w: tensor<32x64xi8>) -> tensor<?x32xbf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x64xbf16>
  %y = tensor.empty(%m) : tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// The entry symbol a driver chose is kept.
// CHECK-LABEL: module attributes {comfyquant.entries = {moe = "cq_7_f16_cuda"}}
// CHECK:       func.func @moe(%{{.*}}: !llvm.ptr {comfyquant.launcher}, %{{.*}}: tensor<?x8xf16> {bufferization.writable = false}, %{{.*}}: memref<?x4xf16> {comfyquant.output}, %{{.*}}: index, %{{.*}}: tensor<2x4x8xi8> {bufferization.writable = false}, %{{.*}}: memref<?xi8> {comfyquant.workspace})
func.func @moe(%x: tensor<?x8xf16>, %e: index, %w: tensor<2x4x8xi8>) -> tensor<?x4xf16> attributes {comfyquant.entry = "cq_7_f16_cuda"} {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x8xf16>
  %y = tensor.empty(%m) : tensor<?x4xf16>
  return %y : tensor<?x4xf16>
}

// -----

// expected-error @+1 {{a CUDA host entry needs x and one tensor result y}}
func.func @no_result(%x: tensor<?x8xf16>) {
  return
}
