//===- CPUCodegen.h - CPU variants and tuning names ------------*- C++ -*-===//
//
// The CPU back end of comfyquant (its pass pipeline,
// buildComfyQuantCPUCodegenPipeline, is in Pipelines/Pipelines.h):
//   * the CPU variants (name, LLVM cpu/features, what the runtime checks);
// Object emission, linking and the load check, which the CUDA back end's
// host entries use too, are in Codegen/Host/HostCodegen.h.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_CPU_CPUCODEGEN_H
#define COMFYQUANT_CODEGEN_CPU_CPUCODEGEN_H

#include "comfyquant/runtime/Targets.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir {
namespace comfyquant {

/// A CPU kernel variant: the runtime's table (comfyquant/runtime/Targets.h)
/// is the one list the compiler, the runtime and lit read.
using CPUVariant = ::comfyquant::rt::CpuVariantInfo;

/// All variants, from the most portable to the most specific.
const std::vector<CPUVariant> &getCPUVariants();
/// nullptr for an unknown name.
const CPUVariant *lookupCPUVariant(llvm::StringRef name);

} // namespace comfyquant
} // namespace mlir

#endif // COMFYQUANT_CODEGEN_CPU_CPUCODEGEN_H
