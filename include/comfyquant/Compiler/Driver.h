//===- Driver.h - checkpoint -> artifact, as a library call -----*- C++ -*-===//
//
// compileCheckpoint is comfyquant-compile without its command line: it
// resolves and imports the checkpoint, decomposes the selected modules per
// activation dtype, lets every back end lower them to its operand form,
// plans the distinct kernels (one key per kernel, fixed printing flags),
// runs the back ends and publishes the artifact (kernels, images,
// manifest.json) atomically. Errors are returned, never printed or thrown.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_COMPILER_DRIVER_H
#define COMFYQUANT_COMPILER_DRIVER_H

#include "comfyquant/Compiler/CompileOptions.h"
#include "comfyquant/Compiler/KernelResourceReport.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlir::comfyquant {

/// One compiled module, as the summary reports it.
struct CompiledModule {
  std::string name, kind, format;
  int64_t outFeatures = 0, inFeatures = 0;
  /// dtype -> CPU variant -> entry symbol.
  std::map<std::string, std::map<std::string, std::string>> cpuEntries;
  double seconds = 0; ///< its share of decomposition plus its codegen jobs
};

struct CompileResult {
  std::string artifact; ///< absolute path of the published directory
  std::map<std::string, uint64_t> files; ///< relative path -> bytes
  size_t entries = 0; ///< entry symbols in kernels.so and cuda/host.so
  std::vector<CompiledModule> modules; ///< in checkpoint order
  /// Every assembled CUDA kernel, by arch then kernel name (empty without
  /// a cuda target or without ptxas).
  std::vector<KernelResourceReport> cudaKernels;
};

/// Compiles `options.checkpoint` as `options` says. Returns false with
/// `error` set (a message naming the file, module and rule).
bool compileCheckpoint(const CompileOptions &options, CompileResult &result,
                       std::string &error);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_COMPILER_DRIVER_H
