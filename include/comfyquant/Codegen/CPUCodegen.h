//===- CPUCodegen.h - CPU pipeline, variants, objects, linking --*- C++ -*-===//
//
// The CPU back end of comfyquant:
//   * buildComfyQuantCPUCodegenPipeline: upstream-dialect IR (func + linalg/
//     tensor/arith/math on tensors; optionally comfyquant computation ops
//     first) -> strategy attributes -> register-blocked vector GEMMs on
//     tensors -> one-shot bufferization -> LLVM dialect with packed entries;
//   * the CPU variants (name, LLVM cpu/features, what the runtime checks);
//   * LLVM IR translation and in-process object emission for a variant;
//   * linking objects into one shared library with ld.lld.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_CPUCODEGEN_H
#define COMFYQUANT_CODEGEN_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassOptions.h"

#include <string>
#include <vector>

namespace mlir {
class OpPassManager;
namespace comfyquant {

/// A CPU the artifact has kernels for.
struct CPUVariant {
  const char *name;      ///< manifest name: "x86-64-v3", "avx512-vnni", "amx"
  const char *shortName; ///< entry-symbol suffix: "v3", "vnni", "amx"
  const char *cpu;       ///< LLVM -mcpu
  const char *features;  ///< extra LLVM target features
  int vectorBits;        ///< widest vector the micro-kernels use
};

/// All variants, from the most portable to the most specific.
const std::vector<CPUVariant> &getCPUVariants();
/// nullptr for an unknown name.
const CPUVariant *lookupCPUVariant(llvm::StringRef name);

struct CPUCodegenOptions : public PassPipelineOptions<CPUCodegenOptions> {
  Option<std::string> variant{*this, "variant",
                              llvm::cl::desc("CPU variant (x86-64-v3, "
                                             "avx512-vnni, amx)"),
                              llvm::cl::init("x86-64-v3")};
  Option<std::string> ukernel{*this, "ukernel",
                              llvm::cl::desc("Force a GEMM micro-kernel"),
                              llvm::cl::init("")};
  Option<int64_t> mr{*this, "mr", llvm::cl::desc("Register tile rows"),
                     llvm::cl::init(0)};
  Option<int64_t> nr{*this, "nr", llvm::cl::desc("Register tile columns"),
                     llvm::cl::init(0)};
  Option<int64_t> mc{*this, "mc", llvm::cl::desc("M block"),
                     llvm::cl::init(0)};
  Option<bool> lowerComfyQuant{
      *this, "lower-comfyquant",
      llvm::cl::desc("Run convert-comfyquant-to-linalg first"),
      llvm::cl::init(true)};
  Option<bool> lowerToLLVM{
      *this, "lower-to-llvm",
      llvm::cl::desc("Bufferize and lower to the LLVM dialect (off: stop "
                     "after the vectorized GEMMs on tensors)"),
      llvm::cl::init(true)};
};

/// Adds the CPU pipeline to `pm` (anchored on builtin.module).
void buildComfyQuantCPUCodegenPipeline(OpPassManager &pm,
                                       const CPUCodegenOptions &options);

/// Registers the pipeline as `comfyquant-cpu-codegen` and the passes of
/// Codegen/Passes.td.
void registerComfyQuantCPUCodegen();

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

#endif // COMFYQUANT_CODEGEN_CPUCODEGEN_H
