// RUN: comfyquant-opt %s --split-input-file --comfyquant-flatten-collapsed-views | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --comfyquant-flatten-collapsed-views --fold-memref-alias-ops | FileCheck %s --check-prefix=FOLD

// A 1-D view of a contiguous [4, 8] buffer: a reinterpret cast of the same
// bytes, so a load keeps its linear index instead of being folded into
// [i / 8, i % 8] on the buffer.
// CHECK-LABEL: func.func @flat_scale_read
// CHECK:         %[[V:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [32], strides: [1] : memref<4x8xi8> to memref<32xi8>
// CHECK:         memref.load %[[V]][%arg1] : memref<32xi8>
// CHECK-NOT:     memref.collapse_shape
// FOLD-LABEL: func.func @flat_scale_read
// FOLD-NOT:      affine.delinearize_index
// FOLD-NOT:      arith.divui
// FOLD:          memref.load %{{.*}}[%arg1] : memref<32xi8>
func.func @flat_scale_read(%m: memref<4x8xi8>, %i: index) -> i8 {
  %flat = memref.collapse_shape %m [[0, 1]] : memref<4x8xi8> into memref<32xi8>
  %v = memref.load %flat[%i] : memref<32xi8>
  return %v : i8
}

// -----

// Left alone: a view with an offset, a
// dynamic extent and a collapse that keeps two dimensions.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: memref.collapse_shape
// CHECK-NOT:     memref.reinterpret_cast
func.func @kept(%s: memref<4x8xi8, strided<[8, 1], offset: 2>>, %d: memref<?x8xi8>, %t: memref<2x4x8xi8>, %i: index) -> (i8, i8, i8) {
  %a = memref.collapse_shape %s [[0, 1]] : memref<4x8xi8, strided<[8, 1], offset: 2>> into memref<32xi8, strided<[1], offset: 2>>
  %b = memref.collapse_shape %d [[0, 1]] : memref<?x8xi8> into memref<?xi8>
  %c = memref.collapse_shape %t [[0, 1], [2]] : memref<2x4x8xi8> into memref<8x8xi8>
  %x = memref.load %a[%i] : memref<32xi8, strided<[1], offset: 2>>
  %y = memref.load %b[%i] : memref<?xi8>
  %z = memref.load %c[%i, %i] : memref<8x8xi8>
  return %x, %y, %z : i8, i8, i8
}
