//===- Passes.h - comfyquant GPU codegen passes -----------------*- C++ -*-===//
#ifndef COMFYQUANT_CODEGEN_GPU_PASSES_H
#define COMFYQUANT_CODEGEN_GPU_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::comfyquant {

#define GEN_PASS_DECL
#include "comfyquant/Codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "comfyquant/Codegen/GPU/Passes.h.inc"

/// Float max/min against a nonzero, non-NaN constant right operand as
/// LLVM's maxnum/minnum (comfyquant-gpu-lower-bounded-min-max).
void populateBoundedMinMaxPatterns(RewritePatternSet &patterns);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_PASSES_H
