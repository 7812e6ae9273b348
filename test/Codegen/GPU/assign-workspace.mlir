// RUN: comfyquant-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(comfyquant-gpu-assign-workspace))' | FileCheck %s

// Per-row buffers after the fixed ones, each start a multiple of 256 for
// any M: fixed 4 B -> 256; rows of 64 x f32 (256 B) and of 33 x i8 (-> 256).
// CHECK-LABEL: func.func @carve
// CHECK-SAME:    comfyquant.workspace_bytes = array<i64: 512, 256>
// CHECK:         %[[M:.*]] = memref.dim %arg1
// CHECK-NOT:     memref.alloc
// CHECK:         %[[O1:.*]] = arith.muli %[[M]], %[[Z:.*]] : index
// CHECK:         %[[S1:.*]] = arith.addi %[[O1]], %[[F1:.*]] : index
// CHECK:         memref.view %arg3[%[[S1]]][%[[M]]] : memref<?xi8> to memref<?x64xf32>
// CHECK:         memref.view %arg3[%{{.*}}][] : memref<?xi8> to memref<f32>
// CHECK:         %[[R:.*]] = arith.constant 256 : index
// CHECK:         %[[O2:.*]] = arith.muli %[[M]], %[[R]] : index
// CHECK:         %[[F2:.*]] = arith.constant 256 : index
// CHECK:         %[[S2:.*]] = arith.addi %[[O2]], %[[F2]] : index
// CHECK:         memref.view %arg3[%[[S2]]][%[[M]]] : memref<?xi8> to memref<?x33xi8>
// CHECK-NOT:     memref.dealloc
func.func @carve(%l: !llvm.ptr {comfyquant.launcher}, %x: memref<?x64xf32>, %y: memref<?x33xi8> {comfyquant.output}, %ws: memref<?xi8> {comfyquant.workspace}) {
  %c0 = arith.constant 0 : index
  %m = memref.dim %x, %c0 : memref<?x64xf32>
  %a = memref.alloc(%m) : memref<?x64xf32>
  %s = memref.alloc() : memref<f32>
  %b = memref.alloc(%m) : memref<?x33xi8>
  memref.copy %x, %a : memref<?x64xf32> to memref<?x64xf32>
  memref.copy %b, %y : memref<?x33xi8> to memref<?x33xi8>
  memref.dealloc %a : memref<?x64xf32>
  return
}

// -----

// Sizes that are not M cannot be carved by the M-linear rule.
func.func @not_rows(%l: !llvm.ptr {comfyquant.launcher}, %x: memref<?x64xf32>, %n: index, %ws: memref<?xi8> {comfyquant.workspace}) {
  // expected-error @+1 {{temporary whose dynamic size is not the row count of x}}
  %a = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

func.func @no_workspace(%x: memref<?x64xf32>) {
  // expected-error @-1 {{allocates temporaries but has no comfyquant.workspace argument}}
  %a = memref.alloc() : memref<4xf32>
  return
}
