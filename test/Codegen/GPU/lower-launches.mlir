// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,convert-func-to-llvm,comfyquant-gpu-lower-launches,reconcile-unrealized-casts)' | FileCheck %s

// A launch becomes one call through launcher->launch: parameters expanded
// as NVVM expands them (memref<?x8xf32>: 2 pointers, offset, 2 sizes,
// 2 strides; index: i64), their addresses in an array, the kernel's index
// in comfyquant.kernels. The gpu.module is gone.
// CHECK-LABEL: llvm.func @host(
// CHECK-SAME:    %[[L:[^:]*]]: !llvm.ptr
// CHECK:         %[[PARAMS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-COUNT-8: llvm.getelementptr %[[PARAMS]][{{[0-7]}}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NOT:     llvm.getelementptr %[[PARAMS]][8]
// CHECK:         %[[LP:.*]] = llvm.load %[[L]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[SELF:.*]] = llvm.load %[[LP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[SLOT:.*]] = llvm.getelementptr %[[LP]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:         %[[FN:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[K:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK:         %[[N:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK:         llvm.call %[[FN]](%[[SELF]], %[[K]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PARAMS]], %[[N]]) : !llvm.ptr, (!llvm.ptr, i32, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr, i32) -> ()
// CHECK-NOT:   gpu.
module attributes {gpu.container_module} {
  func.func @host(%l: !llvm.ptr, %a: memref<?x8xf32>, %n: index) attributes {comfyquant.kernels = ["k0", "k1"]} {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @kernels::@k1 blocks in (%n, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<?x8xf32>, %n : index)
    return
  }
  gpu.module @kernels {
    gpu.func @k0() kernel { gpu.return }
    gpu.func @k1(%a: memref<?x8xf32>, %n: index) kernel { gpu.return }
  }
}

// -----

module attributes {gpu.container_module} {
  func.func @unknown(%l: !llvm.ptr, %n: index) attributes {comfyquant.kernels = ["k0"]} {
    %c1 = arith.constant 1 : index
    // expected-error @+1 {{kernel "k9" is not in comfyquant.kernels}}
    gpu.launch_func @kernels::@k9 blocks in (%n, %c1, %c1) threads in (%c1, %c1, %c1) args(%n : index)
    return
  }
  gpu.module @kernels {
    gpu.func @k9(%n: index) kernel { gpu.return }
  }
}
