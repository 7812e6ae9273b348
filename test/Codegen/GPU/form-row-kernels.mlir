// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(comfyquant-gpu-form-row-kernels))' | FileCheck %s

// INT8 activation quantization: amax fill, amax, scale, quantizer. One
// launch of a block per row (128 threads: the widest nest has 128 points),
// barriers between the nests; the other nests stride their points over
// the threads. The amax is shared by the block as the same left fold
// regrouped: thread t folds the t-th contiguous chunk of k (thread 0 from
// the stored value, the others from their first element, with a flag),
// xor shuffles fold each warp in lane order (the lane whose bit is clear
// is the left operand), thread 0 folds the warps' results in warp order
// (a warp whose first chunk is empty is skipped) and stores.
// CHECK-LABEL: func.func @int8_rows
// CHECK-SAME:    (%[[X:.*]]: memref<?x128xf32>,
// CHECK:         %[[M:.*]] = memref.dim %[[X]], %c0
// CHECK:         %[[C128:.*]] = arith.constant 128 : index
// CHECK:         gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[M]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C128]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) workgroup(%[[SCRATCH:.*]] : memref<4xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for %{{.*}} = %[[TID:.*]] to %{{.*}} step %[[C128]] {
// CHECK:             memref.store %{{.*}}, %[[AMAX:.*]][%[[ROW:.*]]] : memref<?xf32>
// CHECK:           gpu.barrier
// CHECK:           %[[START:.*]] = memref.load %[[AMAX]][%[[ROW]]]
// CHECK:           %[[SPAN:.*]] = arith.subi %c128, %c0
// CHECK:           %[[POS:.*]] = arith.maxsi %[[SPAN]], %{{.*}}
// CHECK:           %[[TRIPS:.*]] = arith.ceildivui %[[POS]], %c1
// CHECK:           %[[CHUNK:.*]] = arith.ceildivui %[[TRIPS]], %[[C128]]
// CHECK:           %[[CSPAN:.*]] = arith.muli %[[CHUNK]], %c1
// CHECK:           %[[OFF:.*]] = arith.muli %[[TID]], %[[CSPAN]]
// CHECK:           %[[BEGIN:.*]] = arith.addi %c0, %[[OFF]]
// CHECK:           %[[NEXT:.*]] = arith.addi %[[BEGIN]], %[[CSPAN]]
// CHECK:           %[[END:.*]] = arith.minsi %[[NEXT]], %c128
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %{{.*}}
// CHECK:           %[[PART:.*]]:2 = scf.for %[[K:.*]] = %[[BEGIN]] to %[[END]] step %c1 iter_args(%[[ACC:.*]] = %[[START]], %[[OK:.*]] = %[[FIRST]]) -> (f32, i1) {
// CHECK:             %[[V:.*]] = memref.load %[[X]][%[[ROW]], %[[K]]]
// CHECK:             %[[A:.*]] = math.absf %[[V]]
// CHECK:             %[[NEW:.*]] = arith.maxnumf %[[ACC]], %[[A]]
// CHECK:             %[[PICK:.*]] = arith.select %[[OK]], %[[NEW]], %[[A]]
// CHECK:             scf.yield %[[PICK]], %true
// CHECK:           %[[VALID:.*]] = arith.extui %[[PART]]#1 : i1 to i32
// CHECK:           %[[LANE:.*]] = arith.index_castui %[[TID]] : index to i32
// CHECK:           %[[THEIRS:.*]], %{{.*}} = gpu.shuffle xor %[[PART]]#0, %c1_i32, %c32_i32 : f32
// CHECK:           %[[THEIROK:.*]], %{{.*}} = gpu.shuffle xor %[[VALID]], %{{.*}}, %{{.*}} : i32
// CHECK:           %[[BIT:.*]] = arith.andi %[[LANE]], %{{.*}} : i32
// CHECK:           %[[LEFT:.*]] = arith.cmpi eq, %[[BIT]], %{{.*}} : i32
// CHECK:           %[[L:.*]] = arith.select %[[LEFT]], %[[PART]]#0, %[[THEIRS]]
// CHECK:           %[[R:.*]] = arith.select %[[LEFT]], %[[THEIRS]], %[[PART]]#0
// CHECK:           arith.maxnumf %[[L]], %[[R]]
// CHECK-COUNT-8:   gpu.shuffle xor
// CHECK:           scf.if
// CHECK:             memref.store %{{.*}}, %[[SCRATCH]]
// CHECK:           gpu.barrier
// CHECK:           scf.if %[[FIRST]]
// CHECK:             scf.for
// CHECK:               %[[HAS:.*]] = arith.cmpi ult, %{{.*}}, %[[TRIPS]]
// CHECK:               %[[W:.*]] = memref.load %[[SCRATCH]]
// CHECK:               %[[F:.*]] = arith.maxnumf %{{.*}}, %[[W]]
// CHECK:               arith.select %[[HAS]], %[[F]]
// CHECK:             memref.store %{{.*}}, %[[AMAX]][%[[ROW]]]
// CHECK:           gpu.barrier
// CHECK:           scf.for %{{.*}} = %[[TID]] to %{{.*}} step %[[C128]] {
// CHECK:             arith.divf
// CHECK:           gpu.barrier
// CHECK:           scf.for %[[P:.*]] = %[[TID]] to %{{.*}} step %[[C128]] {
// CHECK:             %[[COL:.*]] = arith.addi %c0, %{{.*}}
// CHECK:             memref.load %[[X]][%[[ROW]], %[[COL]]]
// CHECK:             arith.fptosi
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.parallel
func.func @int8_rows(%x: memref<?x128xf32>, %q: memref<?x128xi8>,
                     %scale: memref<?x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.0 : f32
  %c127 = arith.constant 127.0 : f32
  %m = memref.dim %x, %c0 : memref<?x128xf32>
  %amax = memref.alloc(%m) : memref<?xf32>
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    memref.store %zero, %amax[%i] : memref<?xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %k = %c0 to %c128 step %c1 {
      %v = memref.load %x[%i, %k] : memref<?x128xf32>
      %a = memref.load %amax[%i] : memref<?xf32>
      %abs = math.absf %v : f32
      %n = arith.maxnumf %a, %abs : f32
      memref.store %n, %amax[%i] : memref<?xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c1) step (%c1, %c1) {
    %a = memref.load %amax[%i] : memref<?xf32>
    %s = arith.divf %a, %c127 : f32
    memref.store %s, %scale[%i, %j] : memref<?x1xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c128) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x128xf32>
    %s = memref.load %scale[%i, %c0] : memref<?x1xf32>
    %d = arith.divf %v, %s : f32
    %r = math.roundeven %d : f32
    %c = arith.fptosi %r : f32 to i8
    memref.store %c, %q[%i, %j] : memref<?x128xi8>
    scf.reduce
  }
  return
}

// -----

// Views that keep dim 0 (reshapes of the row, subviews at row offset 0)
// are row-local; a butterfly stage reads four of them and writes a fifth.
// A float sum is not shared (its rounding depends on the order): thread 0
// of the block runs it as written.
// CHECK-LABEL: func.func @views_and_sums
// CHECK:         gpu.launch
// CHECK-NOT:       workgroup
// CHECK:           memref.load %{{.*}} : memref<?x8x1xf32, strided<[32, 4, 1], offset: 3>>
// CHECK:           gpu.barrier
// CHECK:           scf.for %{{.*}} = %{{.*}} to %c1{{(_[0-9]+)?}} step %c32{{(_[0-9]+)?}} {
// CHECK:             scf.for
// CHECK:               arith.addf
// CHECK-NOT:       gpu.shuffle
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.parallel
func.func @views_and_sums(%x: memref<?x32xf32>, %sum: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %m = memref.dim %x, %c0 : memref<?x32xf32>
  %e = memref.expand_shape %x [[0], [1, 2, 3]] output_shape [%m, 8, 4, 1] : memref<?x32xf32> into memref<?x8x4x1xf32>
  %v0 = memref.subview %e[0, 0, 0, 0] [%m, 8, 1, 1] [1, 1, 1, 1] : memref<?x8x4x1xf32> to memref<?x8x1xf32, strided<[32, 4, 1]>>
  %v3 = memref.subview %e[0, 0, 3, 0] [%m, 8, 1, 1] [1, 1, 1, 1] : memref<?x8x4x1xf32> to memref<?x8x1xf32, strided<[32, 4, 1], offset: 3>>
  %t = memref.alloc(%m) : memref<?x8x4x1xf32>
  scf.parallel (%i, %a, %b, %c) = (%c0, %c0, %c0, %c0) to (%m, %c8, %c1, %c1) step (%c1, %c1, %c1, %c1) {
    %p = memref.load %v0[%i, %a, %c] : memref<?x8x1xf32, strided<[32, 4, 1]>>
    %q = memref.load %v3[%i, %a, %c] : memref<?x8x1xf32, strided<[32, 4, 1], offset: 3>>
    %s = arith.addf %p, %q : f32
    memref.store %s, %t[%i, %a, %b, %c] : memref<?x8x4x1xf32>
    scf.reduce
  }
  %tc = memref.collapse_shape %t [[0], [1, 2, 3]] : memref<?x8x4x1xf32> into memref<?x32xf32>
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %k = %c0 to %c32 step %c1 {
      %v = memref.load %tc[%i, %k] : memref<?x32xf32>
      %a = memref.load %sum[%i] : memref<?xf32>
      %n = arith.addf %a, %v : f32
      memref.store %n, %sum[%i] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A nest that writes a buffer at another index than its row (here one
// scalar for the whole tensor) cannot join a run: the nests before it
// form their kernel, it and the nest after it are left to the SIMT
// mapping. A lone nest without a shared reduction is left alone too.
// CHECK-LABEL: func.func @breaks
// CHECK:         gpu.launch
// CHECK:           gpu.barrier
// CHECK:           gpu.terminator
// CHECK:         scf.parallel
// CHECK:           memref.store %{{.*}}, %{{.*}}[] : memref<f32>
// CHECK:         scf.parallel
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func @breaks(%x: memref<?x16xf32>, %y: memref<?x16xf32>, %g: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %m = memref.dim %x, %c0 : memref<?x16xf32>
  %t = memref.alloc(%m) : memref<?x16xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x16xf32>
    %n = arith.negf %v : f32
    memref.store %n, %t[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %t[%i, %j] : memref<?x16xf32>
    %n = arith.negf %v : f32
    memref.store %n, %t[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %v = memref.load %t[%i, %c0] : memref<?x16xf32>
    memref.store %v, %g[] : memref<f32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %t[%i, %j] : memref<?x16xf32>
    memref.store %v, %y[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  return
}

// -----

// A nest that reads a written buffer at a row it does not own (the next
// row), or a host load between two nests of what the run writes, keeps
// them apart; a nest whose first dimension is not the rows of x (the
// weight's N) is no candidate.
// CHECK-LABEL: func.func @apart
// CHECK-NOT:     gpu.launch
// CHECK-COUNT-5: scf.parallel
// CHECK-NOT:     gpu.launch
func.func @apart(%x: memref<?x16xf32>, %y: memref<?x16xf32>, %w: memref<32x16xf32>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %m = memref.dim %x, %c0 : memref<?x16xf32>
  %t = memref.alloc(%m) : memref<?x16xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x16xf32>
    memref.store %v, %t[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %n = arith.addi %i, %c1 : index
    %v = memref.load %t[%n, %j] : memref<?x16xf32>
    memref.store %v, %y[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  %sv = memref.load %y[%c0, %c0] : memref<?x16xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %y[%i, %j] : memref<?x16xf32>
    %p = arith.mulf %v, %sv : f32
    memref.store %p, %y[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  scf.parallel (%n, %k) = (%c0, %c0) to (%c32, %c16) step (%c1, %c1) {
    %v = memref.load %w[%n, %k] : memref<32x16xf32>
    memref.store %v, %w[%n, %k] : memref<32x16xf32>
    scf.reduce
  }
  scf.parallel (%n, %k) = (%c0, %c0) to (%c32, %c16) step (%c1, %c1) {
    %v = memref.load %w[%n, %k] : memref<32x16xf32>
    memref.store %v, %w[%n, %k] : memref<32x16xf32>
    scf.reduce
  }
  return
}

// -----

// Integer sums are shared (modulo 2^32 they are associative); the
// regrouped adds drop the loop's overflow flags, which the new grouping
// could violate. A lone nest with a shared reduction forms a kernel.
// CHECK-LABEL: func.func @int_sum
// CHECK:         gpu.launch
// CHECK:           scf.for {{.*}} -> (i32, i1)
// CHECK:             arith.addi %{{.*}}, %{{.*}} : i32
// CHECK-NOT:       overflow
// CHECK-COUNT-10:  gpu.shuffle xor
// CHECK-NOT:       overflow
func.func @int_sum(%x: memref<?x64xi32>, %sum: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %m = memref.dim %x, %c0 : memref<?x64xi32>
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %k = %c0 to %c64 step %c1 {
      %v = memref.load %x[%i, %k] : memref<?x64xi32>
      %a = memref.load %sum[%i] : memref<?xi32>
      %n = arith.addi %a, %v overflow<nsw> : i32
      memref.store %n, %sum[%i] : memref<?xi32>
    }
    scf.reduce
  }
  return
}

// -----

// A reduction over the rows themselves (a per-tensor amax) runs in one
// block that shares it, instead of one thread: 1024 threads, as the trip
// count is dynamic.
// CHECK-LABEL: func.func @whole
// CHECK-SAME:    (%[[X:.*]]: memref<?xf32>, %[[G:.*]]: memref<f32>)
// CHECK:         memref.dim
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[C1024:.*]] = arith.constant 1024 : index
// CHECK-NEXT:    gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) threads(%[[TID:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C1024]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) workgroup(%{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>)
// CHECK:           %[[START:.*]] = memref.load %[[G]][]
// CHECK:           scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[START]], %{{.*}} = %{{.*}}) -> (f32, i1) {
// CHECK:             %[[V:.*]] = memref.load %[[X]][%[[I]]]
// CHECK:             arith.maxnumf %[[ACC]], %[[V]]
// CHECK-COUNT-10:  gpu.shuffle xor
// CHECK:           memref.store %{{.*}}, %[[G]][]
// CHECK:           gpu.terminator
// CHECK-NEXT:    }
// CHECK-NEXT:    return
func.func @whole(%x: memref<?xf32>, %g: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.dim %x, %c0 : memref<?xf32>
  scf.for %i = %c0 to %m step %c1 {
    %v = memref.load %x[%i] : memref<?xf32>
    %a = memref.load %g[] : memref<f32>
    %n = arith.maxnumf %a, %v : f32
    memref.store %n, %g[] : memref<f32>
  }
  return
}

// -----

// A host load between nests of a buffer the run does not write (a
// per-tensor input scale) does not split the run: the load moves into the
// kernel.
// CHECK-LABEL: func.func @scale_between
// CHECK:         gpu.launch
// CHECK:           gpu.barrier
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.parallel
func.func @scale_between(%x: memref<?x16xf32>, %y: memref<?x16xi8>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %m = memref.dim %x, %c0 : memref<?x16xf32>
  %t = memref.alloc(%m) : memref<?x16xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x16xf32>
    %a = math.absf %v : f32
    memref.store %a, %t[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  %sv = memref.load %s[] : memref<f32>
  %one = arith.constant 1.0 : f32
  %r = arith.divf %one, %sv : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %t[%i, %j] : memref<?x16xf32>
    %p = arith.mulf %v, %r : f32
    %q = arith.fptosi %p : f32 to i8
    memref.store %q, %y[%i, %j] : memref<?x16xi8>
    scf.reduce
  }
  return
}

// -----

// A buffer of unknown origin (a transpose: row i of the view is column i
// of the buffer) keeps a nest out of row kernels; so does a host load, used
// by the run, of a buffer the run writes (every block would load it at the
// kernel's start while block 0 writes it).
// CHECK-LABEL: func.func @unknown_origin
// CHECK-NOT:     gpu.launch
// CHECK-LABEL: func.func @load_before
// CHECK-NOT:     gpu.launch
func.func @unknown_origin(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.dim %x, %c0 : memref<?x?xf32>
  %t = memref.alloc(%m, %m) : memref<?x?xf32>
  %tt = memref.transpose %t (i, j) -> (j, i) : memref<?x?xf32> to memref<?x?xf32, affine_map<(d0, d1)[s0] -> (d1 * s0 + d0)>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %m) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x?xf32>
    memref.store %v, %tt[%i, %j] : memref<?x?xf32, affine_map<(d0, d1)[s0] -> (d1 * s0 + d0)>>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %m) step (%c1, %c1) {
    %v = memref.load %t[%i, %j] : memref<?x?xf32>
    memref.store %v, %x[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  return
}
func.func @load_before(%x: memref<?x16xf32>, %y: memref<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %m = memref.dim %x, %c0 : memref<?x16xf32>
  %s = memref.load %y[%c0, %c0] : memref<?x16xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x16xf32>
    memref.store %v, %y[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %c16) step (%c1, %c1) {
    %v = memref.load %y[%i, %j] : memref<?x16xf32>
    %p = arith.mulf %v, %s : f32
    memref.store %p, %x[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  return
}
