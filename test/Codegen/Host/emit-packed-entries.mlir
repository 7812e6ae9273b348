// RUN: comfyquant-opt %s --split-input-file --comfyquant-emit-packed-entries --verify-diagnostics | FileCheck %s

// Each recorded function gets `void entry(void **args)`: args[i] is loaded
// as the i-th descriptor pointer, or loaded once more for a scalar (the MoE
// expert index). Everything else becomes internal; comfyquant.* attributes
// go, except the module's column_split, which lists the entries of
// functions that honour a column range.
// CHECK-LABEL: module attributes {comfyquant.column_split = ["moe_entry"]}
// CHECK: llvm.func internal @moe(
// CHECK: llvm.func internal @_mlir_ciface_moe(%{{.*}}: !llvm.ptr, %{{.*}}: i64)
// CHECK-NOT: comfyquant.tensor
// CHECK: llvm.func @moe_entry(%[[ARGS:.*]]: !llvm.ptr) {
// CHECK:   %[[S0:.*]] = llvm.getelementptr %[[ARGS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:   %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK:   %[[S1:.*]] = llvm.getelementptr %[[ARGS]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:   %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK:   %[[E:.*]] = llvm.load %[[P1]] : !llvm.ptr -> i64
// CHECK:   llvm.call @_mlir_ciface_moe(%[[P0]], %[[E]]) : (!llvm.ptr, i64) -> ()
// CHECK:   llvm.return
// CHECK-NOT: comfyquant.checkpoint
module attributes {comfyquant.entries = {moe = "moe_entry"}} {
  llvm.func @moe(%x: !llvm.ptr, %e: i64) attributes {comfyquant.column_range} {
    llvm.return
  }
  llvm.func @_mlir_ciface_moe(%x: !llvm.ptr {comfyquant.tensor = "w"}, %e: i64) attributes {comfyquant.column_range} {
    llvm.call @moe(%x, %e) : (!llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func @malloc(i64) -> !llvm.ptr
}

// -----

// expected-error @below {{no C interface function for 'linear' (was it lowered to the LLVM dialect?)}}
module attributes {comfyquant.entries = {linear = "linear_entry"}} {
  llvm.func @linear() {
    llvm.return
  }
}

// -----

// expected-error @below {{entry symbol 'taken' is already defined}}
module attributes {comfyquant.entries = {f = "taken"}} {
  llvm.func @_mlir_ciface_f() {
    llvm.return
  }
  llvm.func @taken() {
    llvm.return
  }
}

// -----

module attributes {comfyquant.entries = {f = "f_entry"}} {
  // expected-error @below {{argument 0 has no packed-entry representation: 'vector<4xf32>'}}
  llvm.func @_mlir_ciface_f(%v: vector<4xf32>) {
    llvm.return
  }
}

// -----

// The functions' CPU target becomes the module's, which object emission
// reads; it is the one comfyquant.* attribute kept besides column_split.
// CHECK-LABEL: module attributes {comfyquant.column_split = [], comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">}
// CHECK: llvm.func @f_entry
module attributes {comfyquant.entries = {f = "f_entry"}} {
  llvm.func @_mlir_ciface_f() attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
    llvm.return
  }
}

// -----

// Functions compiled for two variants have no one target.
module attributes {comfyquant.entries = {f = "f_entry", g = "g_entry"}} {
  llvm.func @_mlir_ciface_f() attributes {comfyquant.target = #comfyquant.target<cpu, "avx512-vnni">} {
    llvm.return
  }
  // expected-error @below {{its target #comfyquant.target<cpu, "amx"> differs from the module's #comfyquant.target<cpu, "avx512-vnni">}}
  llvm.func @_mlir_ciface_g() attributes {comfyquant.target = #comfyquant.target<cpu, "amx">} {
    llvm.return
  }
}
