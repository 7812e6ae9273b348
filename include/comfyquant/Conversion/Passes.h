//===- Passes.h - comfyquant conversion passes ------------------*- C++ -*-===//
#ifndef COMFYQUANT_CONVERSION_PASSES_H
#define COMFYQUANT_CONVERSION_PASSES_H

#include "comfyquant/Conversion/ComfyQuantToLinalg/ComfyQuantToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::comfyquant {

#define GEN_PASS_DECL
#include "comfyquant/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "comfyquant/Conversion/Passes.h.inc"

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CONVERSION_PASSES_H
