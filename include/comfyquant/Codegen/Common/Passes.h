//===- Passes.h - target-neutral comfyquant codegen passes ------*- C++ -*-===//
#ifndef COMFYQUANT_CODEGEN_COMMON_PASSES_H
#define COMFYQUANT_CODEGEN_COMMON_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::comfyquant {

#define GEN_PASS_DECL
#include "comfyquant/Codegen/Common/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "comfyquant/Codegen/Common/Passes.h.inc"

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_COMMON_PASSES_H
