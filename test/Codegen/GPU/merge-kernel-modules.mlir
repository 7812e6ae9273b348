// RUN: comfyquant-opt %s --split-input-file --gpu-kernel-outlining --comfyquant-gpu-merge-kernel-modules | FileCheck %s

// Outlined kernels land in one gpu.module, named after the entry symbol
// (characters PTX does not allow become '_') and the launch order, which
// the host function records.
// CHECK-LABEL: module attributes {comfyquant.entries = {blocks.0.fn = "blocks.0.fn_entry"}, gpu.container_module}
// CHECK:       func.func @blocks.0.fn
// CHECK-SAME:    comfyquant.kernels = ["blocks_0_fn_entry_k0", "blocks_0_fn_entry_k1"]
// CHECK:         gpu.launch_func @comfyquant_kernels::@blocks_0_fn_entry_k0
// CHECK:         gpu.launch_func @comfyquant_kernels::@blocks_0_fn_entry_k1
// CHECK:       gpu.module @comfyquant_kernels
// CHECK:         gpu.func @blocks_0_fn_entry_k0
// CHECK:         gpu.func @blocks_0_fn_entry_k1
// CHECK-NOT:   gpu.module
module attributes {comfyquant.entries = {"blocks.0.fn" = "blocks.0.fn_entry"}} {
  func.func @blocks.0.fn(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %z = arith.constant 0.0 : f32
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      memref.store %z, %a[%tx] : memref<4xf32>
      gpu.terminator
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      memref.store %z, %a[%bx] : memref<4xf32>
      gpu.terminator
    }
    return
  }
}

// -----

// A kernel outlined as decode_operand (a GEMM operand decoded once per
// call) keeps that role in its name: _decode after the launch index.
// CHECK-LABEL: module attributes {comfyquant.entries = {fn = "fn_entry"}, gpu.container_module}
// CHECK:       func.func @fn
// CHECK-SAME:    comfyquant.kernels = ["fn_entry_k0_decode", "fn_entry_k1"]
// CHECK:       gpu.module @comfyquant_kernels
// CHECK:         gpu.func @fn_entry_k0_decode
// CHECK:         gpu.func @fn_entry_k1
module attributes {comfyquant.entries = {"fn" = "fn_entry"}} {
  func.func @fn(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %z = arith.constant 0.0 : f32
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) function(@decode_operand) {
      memref.store %z, %a[%tx] : memref<4xf32>
      gpu.terminator
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      memref.store %z, %a[%bx] : memref<4xf32>
      gpu.terminator
    }
    return
  }
}
