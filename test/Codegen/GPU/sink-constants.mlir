// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-gpu-sink-constants))' | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-gpu-sink-constants),gpu-kernel-outlining)' | FileCheck %s --check-prefix=OUTLINED

// Constants of every type that a launch uses are cloned into its body; the
// outlined kernel then takes only the memref (a vector constant has no
// launch ABI, and index constants fold in the kernel).
// CHECK-LABEL: func.func @constants
// CHECK:         gpu.launch
// CHECK-DAG:       arith.constant dense<0> : vector<2x2xi32>
// CHECK-DAG:       arith.constant 7 : index
// CHECK-DAG:       arith.constant 1.500000e+00 : f32
// CHECK:           vector.extract
// OUTLINED-LABEL: func.func @constants
// OUTLINED:         gpu.launch_func @constants_kernel::@constants_kernel
// OUTLINED-SAME:      args(%arg0 : memref<?xf32>)
// OUTLINED:       gpu.func @constants_kernel(%arg0: memref<?xf32>) kernel
func.func @constants(%out: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %zero = arith.constant dense<0> : vector<2x2xi32>
  %f = arith.constant 1.5 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %e = vector.extract %zero[0, 1] : i32 from vector<2x2xi32>
    %v = arith.sitofp %e : i32 to f32
    %s = arith.addf %v, %f : f32
    memref.store %s, %out[%c7] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// Values that are not constants stay parameters.
// CHECK-LABEL: func.func @not_constant
// CHECK:         %[[N:.*]] = memref.dim
// CHECK:         gpu.launch
// CHECK-NOT:       memref.dim
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[N]]]
func.func @not_constant(%out: memref<?xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %out, %c0 : memref<?xindex>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %n, %out[%n] : memref<?xindex>
    gpu.terminator
  }
  return
}
