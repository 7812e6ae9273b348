//===- ComfyQuant.h - comfyquant dialect ------------------------*- C++ -*-===//
#ifndef COMFYQUANT_DIALECT_COMFYQUANT_IR_COMFYQUANT_H
#define COMFYQUANT_DIALECT_COMFYQUANT_IR_COMFYQUANT_H

#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/Targets.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantOpsDialect.h.inc"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantEnums.h.inc"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrs.h.inc"

#define GET_OP_CLASSES
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantOps.h.inc"

namespace mlir::comfyquant {

/// The MLIR element type of a safetensors dtype (U8 -> ui8, F8_E4M3 ->
/// f8E4M3FN, BOOL -> i1, ...).
Type getElementType(MLIRContext *ctx, ::comfyquant::rt::DType dtype);
/// The safetensors dtype of an MLIR element type, if it has one.
std::optional<::comfyquant::rt::DType> getDType(Type elementType);

/// The MLIR float type of an activation type.
FloatType getActivationElementType(MLIRContext *ctx, ActivationType type);

/// Registry format <-> dialect enum (same case order).
inline ::comfyquant::rt::Format toRegistry(FormatKind k) {
  return static_cast<::comfyquant::rt::Format>(static_cast<uint32_t>(k));
}
inline FormatKind fromRegistry(::comfyquant::rt::Format f) {
  return static_cast<FormatKind>(static_cast<uint32_t>(f));
}

/// Whether `k` multiplies i8 operands on vector registers (VNNI, emulated
/// VNNI, pmaddwd or widened multiply-adds), not on AMX tiles: the kernels
/// whose one-row calls may take nibble planes (row = i8_planes).
inline bool isVectorIntegerDot(CpuMicroKernel k) {
  return k == CpuMicroKernel::i8_vnni ||
         k == CpuMicroKernel::i8_vnni_emulated ||
         k == CpuMicroKernel::i8_pmaddwd || k == CpuMicroKernel::i8_generic;
}

/// Whether `tune` names a CPU to tune for: generic, host (the compiling
/// machine) or an LLVM x86-64 CPU name.
bool isCpuTuneName(llvm::StringRef tune);

/// The target a pass generates code for: the pass's option when set (a name
/// of the target table), else the `comfyquant.target` pinned on `op` (so
/// test IR can pin it), else `fallback`; a pinned target's `tune` is kept
/// when the name is the pinned one. Emits an error on `op` (prefixed
/// with `what`, e.g. the pass) and returns null for a pinned target of
/// another kind or a name the table does not hold.
TargetAttr resolveTarget(Operation *op, llvm::StringRef option,
                         TargetKind kind, llvm::StringRef fallback,
                         llvm::StringRef what = "");

} // namespace mlir::comfyquant

#endif
