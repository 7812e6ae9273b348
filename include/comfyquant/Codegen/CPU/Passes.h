//===- Passes.h - comfyquant CPU codegen passes -----------------*- C++ -*-===//
#ifndef COMFYQUANT_CODEGEN_CPU_PASSES_H
#define COMFYQUANT_CODEGEN_CPU_PASSES_H

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Dialect/ComfyQuant/IR/EnumChoice.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::comfyquant {

#define GEN_PASS_DECL
#include "comfyquant/Codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "comfyquant/Codegen/CPU/Passes.h.inc"

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_CPU_PASSES_H
