//===- Passes.h - comfyquant host-code passes -------------------*- C++ -*-===//
#ifndef COMFYQUANT_CODEGEN_HOST_PASSES_H
#define COMFYQUANT_CODEGEN_HOST_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::comfyquant {

#define GEN_PASS_DECL
#include "comfyquant/Codegen/Host/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "comfyquant/Codegen/Host/Passes.h.inc"

/// The recording half of the packed-entry ABI, for each back end's
/// prepare-abi pass: runs `prepare` on every public function with a body,
/// marks it `llvm.emit_c_interface` and records its entry symbol
/// (`comfyquant.entry`, default `<name>_entry`) in the module's
/// `comfyquant.entries`, which comfyquant-emit-packed-entries reads.
LogicalResult
recordPackedEntries(ModuleOp module,
                    function_ref<LogicalResult(func::FuncOp)> prepare);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_HOST_PASSES_H
