//===- Backend.h - one target back end of the compile driver ----*- C++ -*-===//
//
// The driver (Driver.h) imports and decomposes the checkpoint once per
// activation dtype; each back end then
//   1. lowers the decomposed functions to linalg in the GEMM operand form its
//      pipelines take (lowerToLinalg),
//   2. compiles the distinct kernels the driver found into files below the
//      artifact directory, or prints them (compile),
//   3. states what it built in the manifest (addSection, addEntries).
// A new back end implements this interface and is created in
// createBackends (Driver.cpp); nothing else in the driver changes.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_COMPILER_BACKEND_H
#define COMFYQUANT_COMPILER_BACKEND_H

#include "comfyquant/Compiler/CompileOptions.h"
#include "comfyquant/Compiler/KernelResourceReport.h"
#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/runtime/Manifest.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::comfyquant {

/// One distinct kernel as a back end receives it.
struct BackendKernel {
  int index = 0;      ///< the driver's kernel number (in entry names)
  std::string dtype;  ///< activation dtype
  std::string owner;  ///< the first module that uses it
  /// Kernels sorted by (ownerRank, dtype) follow the modules' order, the
  /// order in which CPU objects are linked.
  int ownerRank = 0;
  std::string text;   ///< this back end's lowering (printForWorker)
};

/// What a back end tells the driver while it compiles (thread-safe).
struct BackendProgress {
  /// `count` jobs of kernel `index` will run.
  std::function<void(int index, int count)> planned;
  /// One job of kernel `index` finished after `seconds`.
  std::function<void(int index, double seconds)> finished;
};

class Backend {
public:
  virtual ~Backend();

  /// The target's name: "cpu" or "cuda".
  virtual llvm::StringRef name() const = 0;

  /// The conversion's options for this back end's kernels: its GEMM operand
  /// form and rotated-quantize form.
  virtual ConvertComfyQuantToLinalgOptions linalgOptions() const = 0;

  /// Lowers every function of `decomposed` (comfyquant computation ops) to
  /// linalg in this back end's GEMM operand form (linalgOptions).
  bool lowerToLinalg(ModuleOp decomposed, const PassManagerSetup &pm,
                     const std::string &dtype, std::string &error) const;

  /// Compiles `kernels` (in index order) into files below `dir` (EmitKind::Artifact) or
  /// prints the form the options ask for. `ctx` holds every dialect the
  /// pipelines use.
  virtual bool compile(MLIRContext &ctx, llvm::ArrayRef<BackendKernel> kernels,
                       const std::string &dir, const BackendProgress &progress,
                       std::string &error) = 0;

  /// Its backend section of the manifest.
  virtual void addSection(::comfyquant::rt::Manifest &manifest) const = 0;
  /// The entries of kernel `index` for `dtype` in one module's record.
  virtual void addEntries(::comfyquant::rt::ManifestModule &module,
                          const std::string &dtype, int index) const = 0;
  /// The entry symbols of kernel `index` (CPU: variant -> symbol), for the
  /// summary.
  virtual std::map<std::string, std::string> entriesOf(int index) const = 0;
  /// Files written below the artifact directory, relative to it.
  virtual std::vector<std::string> files() const = 0;
  /// Entry symbols in its shared libraries.
  virtual size_t entryCount() const = 0;
  /// What the assembler reported of each device kernel (none for the CPU).
  virtual std::vector<KernelResourceReport> kernelResources() const {
    return {};
  }
};

/// The CPU back end: every kernel for every variant in `options`, linked
/// into kernels.so.
std::unique_ptr<Backend> createCPUBackend(const CompileOptions &options);
/// The CUDA back end: host entries in cuda/host.so and one image per arch.
std::unique_ptr<Backend> createCUDABackend(const CompileOptions &options);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_COMPILER_BACKEND_H
