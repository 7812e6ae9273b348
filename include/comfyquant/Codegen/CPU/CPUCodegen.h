//===- CPUCodegen.h - CPU variants, objects, linking ------------*- C++ -*-===//
//
// The CPU back end of comfyquant (its pass pipeline,
// buildComfyQuantCPUCodegenPipeline, is in Pipelines/Pipelines.h):
//   * the CPU variants (name, LLVM cpu/features, what the runtime checks);
//   * LLVM IR translation and in-process object emission for a variant;
//   * linking objects into one shared library with ld.lld.
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

/// Whether `tune` names a CPU the kernels can be tuned for (--cpu-tune, the
/// passes' `tune`): generic, host or an LLVM x86-64 CPU name.
bool isCpuTuneName(llvm::StringRef tune);

/// Translates an LLVM-dialect module to LLVM IR, optimizes it at O3 for the
/// variant and returns the object file bytes (and, when asked, the
/// optimized LLVM IR and the assembly). Returns false with `error` set.
bool emitCPUObject(ModuleOp module, const CPUVariant &variant,
                   std::string &object, std::string &error,
                   std::string *assembly = nullptr,
                   std::string *llvmIR = nullptr);

/// Links object files into a shared library with ld.lld (ld.lld-22 on
/// PATH, else /usr/lib/llvm-22/bin/ld.lld). Returns false with `error` set.
bool linkSharedLibrary(const std::vector<std::string> &objectPaths,
                       const std::string &outputPath, std::string &error);

/// Loads a linked library the way the runtime will (dlopen, RTLD_NOW) and
/// resolves every entry symbol, then unloads it. Returns false with `error`
/// naming the first failure; a library that fails here must not be published.
bool verifySharedLibrary(const std::string &path,
                         const std::vector<std::string> &entries,
                         std::string &error);

} // namespace comfyquant
} // namespace mlir

#endif // COMFYQUANT_CODEGEN_CPU_CPUCODEGEN_H
