//===- HostCodegen.h - x86 objects, shared libraries, load checks -*- C++ -*-===//
//
// What every back end does with code that runs on the host: the CPU back
// end's kernels and the CUDA back end's host entries (launchers) are both
// LLVM-dialect modules that become x86 objects, are linked into one shared
// library with ld.lld and are load-checked before an artifact is published.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_HOST_HOSTCODEGEN_H
#define COMFYQUANT_CODEGEN_HOST_HOSTCODEGEN_H

#include "comfyquant/runtime/Targets.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::comfyquant {

/// Translates an LLVM-dialect module to LLVM IR, optimizes it at O3 for the
/// x86 variant the module's `comfyquant.target` names (its -mcpu and
/// features; the attribute is consumed) and returns the object file bytes
/// (and, when asked, the optimized LLVM IR and the assembly). Returns false
/// with `error` set, also for a module without a CPU target.
bool emitHostObject(ModuleOp module, std::string &object, std::string &error,
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

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_HOST_HOSTCODEGEN_H
