// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-bounded-min-max))' | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(comfyquant-gpu-lower-bounded-min-max,arith-expand))' | FileCheck %s --check-prefix=EXPAND

// A clamp to nonzero constants (a quantizer's or weight decoder's [-127,
// 127]) becomes maxnum/minnum, which arith-expand leaves alone: PTX
// max.f32/min.f32 give what the compares and selects would.
// CHECK-LABEL: gpu.func @clamp
// CHECK:         %[[LO:.*]] = llvm.intr.maxnum(%arg0, %{{.*}}) : (f32, f32) -> f32
// CHECK:         llvm.intr.minnum(%[[LO]], %{{.*}}) : (f32, f32) -> f32
// CHECK-NOT:     arith.maxnumf
// CHECK-NOT:     arith.minnumf
// EXPAND-LABEL: gpu.func @clamp
// EXPAND-NOT:     arith.cmpf
// EXPAND-NOT:     arith.select
gpu.module @m {
  gpu.func @clamp(%x: f32, %out: memref<f32>) kernel {
    %lo = arith.constant -1.270000e+02 : f32
    %hi = arith.constant 1.270000e+02 : f32
    %0 = arith.maxnumf %x, %lo : f32
    %1 = arith.minnumf %0, %hi : f32
    memref.store %1, %out[] : memref<f32>
    gpu.return
  }
}

// -----

// Not with zero (the sign of a tie would be the native op's choice) or
// without a constant: those are expanded as before. A constant on the left
// is moved right (the ops commute) and lowered.
// CHECK-LABEL: gpu.func @unbounded
// CHECK:         arith.maxnumf %arg0, %{{.*}}
// CHECK:         llvm.intr.maxnum(%arg0, %{{.*}})
// CHECK:         arith.minnumf %arg0, %arg1
// EXPAND-LABEL: gpu.func @unbounded
// EXPAND:         arith.cmpf
// EXPAND:         arith.select
gpu.module @m {
  gpu.func @unbounded(%x: f32, %y: f32, %out: memref<3xf32>) kernel {
    %zero = arith.constant 0.000000e+00 : f32
    %one = arith.constant 1.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %0 = arith.maxnumf %x, %zero : f32
    %1 = arith.maxnumf %one, %x : f32
    %2 = arith.minnumf %x, %y : f32
    memref.store %0, %out[%c0] : memref<3xf32>
    memref.store %1, %out[%c1] : memref<3xf32>
    memref.store %2, %out[%c2] : memref<3xf32>
    gpu.return
  }
}
