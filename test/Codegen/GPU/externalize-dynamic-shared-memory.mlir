// RUN: comfyquant-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm,comfyquant-gpu-externalize-dynamic-shared-memory))' | FileCheck %s
// RUN: comfyquant-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm))' | FileCheck %s --check-prefix=UPSTREAM
// RUN: comfyquant-opt %s --comfyquant-gpu-lower-device=arch=sm_90a | FileCheck %s --check-prefix=PTX

// Upstream lowers dynamic shared memory to an internal zero-length array,
// which NVPTX prints as a 1-byte static variable; external linkage makes it
// the launch's dynamic shared memory.
// UPSTREAM: llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK:    llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// PTX:      .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// Static shared memory is left alone.
// CHECK:    llvm.mlir.global private @__shared_memory__() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<4 x f32>
module attributes {gpu.container_module} {
  gpu.module @kernels {
    memref.global "private" @__shared_memory__ : memref<4xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    gpu.func @k(%out: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %v = memref.load %smem[%c0] : memref<?xi8, #gpu.address_space<workgroup>>
      %f = arith.uitofp %v : i8 to f32
      %s = memref.get_global @__shared_memory__ : memref<4xf32, #gpu.address_space<workgroup>>
      memref.store %f, %s[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
      %w = memref.load %s[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%c0] : memref<4xf32>
      gpu.return
    }
  }
}
