//===- Passes.td - comfyquant host-code passes --------------*- tablegen -*-===//
//
// The packed-entry ABI every artifact's host code has: the CPU back end's
// kernels and the CUDA back end's host entries are both called as
// `void entry(void **args)`.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_HOST_PASSES_TD
#define COMFYQUANT_CODEGEN_HOST_PASSES_TD

include "mlir/Pass/PassBase.td"

def ComfyQuantEmitPackedEntries
    : Pass<"comfyquant-emit-packed-entries", "::mlir::ModuleOp"> {
  let summary = "Emit `void entry(void **args)` wrappers (LLVM dialect)";
  let description = [{
    Runs after lowering to the LLVM dialect. For every function recorded in
    `comfyquant.entries` (by each back end's prepare-abi pass through
    `recordPackedEntries`), emits an external `llvm.func @entry(!llvm.ptr)`
    whose i-th pointer argument points to the memref descriptor of the i-th
    function argument (or, for a scalar argument such as the MoE expert
    index, to the scalar), calls `_mlir_ciface_<func>`, and gives every
    other function internal linkage. Erases the remaining comfyquant ops
    (the checkpoint description) and drops `comfyquant.*` attributes so the
    module translates to LLVM IR, except two module attributes:
    `comfyquant.column_split`, the entry symbols whose function carries
    `comfyquant.column_range` (for the manifest; the driver removes it), and
    `comfyquant.target`, the functions' common `#comfyquant.target<cpu, ...>`
    (object emission compiles for it; functions with different targets are
    an error).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // COMFYQUANT_CODEGEN_HOST_PASSES_TD
