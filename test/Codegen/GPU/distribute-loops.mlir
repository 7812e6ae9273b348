// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(comfyquant-gpu-distribute-loops{block-size=128}))' | FileCheck %s

// A 2-D parallel nest: ceildiv(M * 32, 128) blocks of 128 threads, the
// linear id split with the last dimension fastest; the reduction stays a
// loop in the thread.
// CHECK-LABEL: func.func @nest
// CHECK:         %[[M:.*]] = memref.dim %arg0
// CHECK:         %[[C128:.*]] = arith.constant 128 : index
// CHECK:         %[[T0:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:         %[[TOTAL:.*]] = arith.muli %[[T0]], %{{.*}} : index
// CHECK:         %[[GRID:.*]] = arith.ceildivui %[[TOTAL]], %[[C128]] : index
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C128]],
// CHECK:           %[[B:.*]] = arith.muli %[[BX]], %[[C128]]
// CHECK:           %[[ID:.*]] = arith.addi %[[B]], %[[TX]]
// CHECK:           %[[IN:.*]] = arith.cmpi ult, %[[ID]], %[[TOTAL]]
// CHECK:           scf.if %[[IN]] {
// CHECK:             %[[N:.*]] = arith.remui %[[ID]], %{{.*}}
// CHECK:             %[[ROW:.*]] = arith.divui %[[ID]], %{{.*}}
// CHECK:             scf.for
// CHECK:               memref.load %arg0[%{{.*}}, %{{.*}}]
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.parallel
func.func @nest(%a: memref<?x16xf32>, %b: memref<32x16xf32>, %c: memref<?x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %m = memref.dim %a, %c0 : memref<?x16xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c32) step (%c1, %c1) {
    %s = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %c0) -> index {
      %v = memref.load %a[%i, %k] : memref<?x16xf32>
      %w = memref.load %b[%j, %k] : memref<32x16xf32>
      %p = arith.mulf %v, %w : f32
      %o = memref.load %c[%i, %j] : memref<?x32xf32>
      %q = arith.addf %o, %p : f32
      memref.store %q, %c[%i, %j] : memref<?x32xf32>
      scf.yield %acc : index
    }
    scf.reduce
  }
  return
}

// -----

// A copy would be a host memcpy of device memory: it becomes a kernel. A
// loop without parallel dimensions runs in one thread; a scalar loaded from
// a weight is reloaded inside the kernel that uses it.
// CHECK-LABEL: func.func @others
// CHECK-NOT:     memref.copy
// CHECK:         gpu.launch
// CHECK:           memref.load %arg0
// CHECK:           memref.store %{{.*}}, %arg1
// CHECK:         %[[ONE:.*]] = arith.constant 1 : index
// CHECK:         gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]])
// CHECK:           %[[S:.*]] = memref.load %arg2[]
// CHECK:           scf.for
// CHECK:             arith.mulf %{{.*}}, %[[S]]
// CHECK:           gpu.terminator
// CHECK:         return
func.func @others(%a: memref<?x8xf32>, %b: memref<?x8xf32>, %s: memref<f32>, %acc: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  memref.copy %a, %b : memref<?x8xf32> to memref<?x8xf32>
  %scale = memref.load %s[] : memref<f32>
  scf.for %k = %c0 to %c8 step %c1 {
    %v = memref.load %b[%c0, %k] : memref<?x8xf32>
    %p = arith.mulf %v, %scale : f32
    memref.store %p, %acc[] : memref<f32>
  }
  return
}

// -----

// A launch formed earlier (a split-K GEMM's) reads a loaded scalar where
// its uses begin: in the branch that uses it, before the outermost loop
// around the uses, not at kernel entry (a split launch never reads it).
// CHECK-LABEL: func.func @scalar_in_branch
// CHECK:         gpu.launch
// CHECK-NOT:       memref.load %arg0[]
// CHECK:           scf.if
// CHECK:             memref.store %{{.*}}, %arg1
// CHECK:           } else {
// CHECK-NEXT:        %[[S:.*]] = memref.load %arg0[]
// CHECK-NEXT:        scf.for
// CHECK:               scf.if
// CHECK:                 arith.mulf %{{.*}}, %[[S]]
func.func @scalar_in_branch(%s: memref<f32>, %partials: memref<8xf32>, %y: memref<8xf32>,
                            %split: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %scale = memref.load %s[] : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = arith.constant 2.0 : f32
    scf.if %split {
      memref.store %v, %partials[%tx] : memref<8xf32>
    } else {
      scf.for %i = %c0 to %c8 step %c1 {
        %inside = arith.cmpi ult, %i, %sx : index
        scf.if %inside {
          %p = arith.mulf %v, %scale : f32
          memref.store %p, %y[%i] : memref<8xf32>
        }
      }
    }
    gpu.terminator
  }
  return
}

// -----

// A grid that depends on device memory cannot be computed on the host.
func.func @data_dependent(%n: memref<index>, %b: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %count = memref.load %n[] : memref<index>
  // expected-error @+1 {{a launch size depends on device memory}}
  scf.parallel (%i) = (%c0) to (%count) step (%c1) {
    %z = arith.constant 0.0 : f32
    memref.store %z, %b[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// A launch under a branch on sizes (split K's reduction) stays on the host,
// branch and all; a branch that stores to memory runs in a one-thread
// launch like any other op.
// CHECK-LABEL: func.func @conditional_launch
// CHECK:         %[[FEW:.*]] = arith.cmpi ult
// CHECK-NEXT:    scf.if %[[FEW]] {
// CHECK-NEXT:      gpu.launch
// CHECK:         gpu.launch
// CHECK:           scf.if
// CHECK:             memref.store
// CHECK:         return
func.func @conditional_launch(%x: memref<?x8xf32>, %flag: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %m = memref.dim %x, %c0 : memref<?x8xf32>
  %few = arith.cmpi ult, %m, %c16 : index
  scf.if %few {
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %m, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %v = arith.constant 1.0 : f32
      memref.store %v, %x[%bx, %c0] : memref<?x8xf32>
      gpu.terminator
    }
  }
  scf.if %flag {
    %v = arith.constant 2.0 : f32
    memref.store %v, %x[%c0, %c0] : memref<?x8xf32>
  }
  return
}
