// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-cpu-lower-strided-copies))' | FileCheck %s
// RUN: comfyquant-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comfyquant-cpu-lower-strided-copies),func.func(convert-linalg-to-loops),expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-scf-to-cf,convert-cf-to-llvm,convert-arith-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)' | FileCheck %s --check-prefix=LLVM

// A column slice of a row-major buffer is strided: its copy becomes a
// linalg.copy (loops), never a call to memrefCopy.
// CHECK-LABEL: func.func @strided_source
// CHECK-NOT:     memref.copy
// CHECK:         linalg.copy ins(%{{.*}} : memref<4x3xf32, strided<[17, 1], offset: 14>>) outs(%{{.*}} : memref<4x3xf32>)
// LLVM-LABEL: llvm.func @strided_source
// LLVM-NOT:     memrefCopy
// LLVM-NOT:     llvm.call
func.func @strided_source(%a: memref<4x17xf32>, %b: memref<4x3xf32>) {
  %t = memref.subview %a[0, 14] [4, 3] [1, 1] : memref<4x17xf32> to memref<4x3xf32, strided<[17, 1], offset: 14>>
  memref.copy %t, %b : memref<4x3xf32, strided<[17, 1], offset: 14>> to memref<4x3xf32>
  return
}

// -----

// Contiguous on both sides: stays memref.copy (llvm.memcpy).
// CHECK-LABEL: func.func @contiguous
// CHECK:         memref.copy
// CHECK-NOT:     linalg.copy
// LLVM-LABEL: llvm.func @contiguous
// LLVM:         "llvm.intr.memcpy"
// LLVM-NOT:     memrefCopy
func.func @contiguous(%a: memref<4x17xf32>, %b: memref<4x17xf32>) {
  memref.copy %a, %b : memref<4x17xf32> to memref<4x17xf32>
  return
}

// -----

// A strided destination (a tile of a padded buffer) is lowered too.
// CHECK-LABEL: func.func @strided_target
// CHECK:         linalg.copy ins(%{{.*}} : memref<2x5xi8>) outs(%{{.*}} : memref<2x5xi8, strided<[16, 1], offset: ?>>)
func.func @strided_target(%a: memref<2x5xi8>, %b: memref<8x16xi8>, %i: index) {
  %t = memref.subview %b[%i, 0] [2, 5] [1, 1] : memref<8x16xi8> to memref<2x5xi8, strided<[16, 1], offset: ?>>
  memref.copy %a, %t : memref<2x5xi8> to memref<2x5xi8, strided<[16, 1], offset: ?>>
  return
}
