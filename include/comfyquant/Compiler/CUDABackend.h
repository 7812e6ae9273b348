//===- CUDABackend.h - the CUDA half of an artifact -------------*- C++ -*-===//
//
// Compiles kernel functions (linalg on tensors) into host entries linked
// into cuda/host.so and one image per arch (PTX, and a cubin when ptxas is
// available), with what the manifest records of each entry.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_COMPILER_CUDABACKEND_H
#define COMFYQUANT_COMPILER_CUDABACKEND_H

#include "comfyquant/Codegen/GPU/GPUCodegen.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::comfyquant {

/// Lowers a module holding gpu.modules for `arch` and returns the PTX of
/// the one named `gpuModule`. Returns false with `error` set.
bool emitPTX(ModuleOp deviceModule, llvm::StringRef gpuModule,
             const CUDAArch &arch, std::string &ptx, std::string &error);

/// One kernel function (linalg on tensors, weights as arguments) to compile
/// into a CUDA host entry named `entry`.
struct CUDAKernelSource {
  std::string entry;
  std::string moduleText; ///< a module holding exactly that func.func
};

/// What the manifest needs of a compiled host entry.
struct CUDAEntryResult {
  std::string entry;
  std::vector<std::string> kernels; ///< launch order = kernel index
  /// How many of `kernels` are identical to a kernel of an earlier entry,
  /// whose name they carry (one copy in each image).
  int sharedKernels = 0;
  int64_t workspacePerRow = 0, workspaceFixed = 0;
};

/// The files of one arch, relative to the artifact directory.
struct CUDAImageResult {
  std::string arch, ptx, cubin; ///< cubin "" without ptxas
  int ptxVersion = 0;
};

struct CUDACompileOptions {
  std::vector<const CUDAArch *> archs;
  /// Artifact directory being built: cuda/host.so, cuda/<arch>.ptx and
  /// cuda/<arch>.cubin go below it. Unused when printing.
  std::string dir;
  /// "" builds the files; "mlir" prints the formed kernels, "ptx" the PTX.
  std::string print;
  std::string ptxas; ///< "" skips cubins
  unsigned jobs = 1; ///< parallel device compilations (one per arch)
  /// Applies the tool's --mlir-* options to each pass manager.
  std::function<LogicalResult(PassManager &)> configure;
  /// Called after each entry is formed (progress).
  std::function<void(const CUDAEntryResult &, double seconds)> formed;
};

/// Compiles `sources` into the CUDA half of an artifact: host entries
/// (x86, linked into cuda/host.so and load-checked), one PTX per arch and,
/// with ptxas, one cubin per arch whose resource use fits the launches.
/// Returns false with `error` set.
bool compileCUDA(MLIRContext &ctx, llvm::ArrayRef<CUDAKernelSource> sources,
                 const CUDACompileOptions &options,
                 std::vector<CUDAEntryResult> &entries,
                 std::vector<CUDAImageResult> &images, std::string &error,
                 llvm::raw_ostream &out);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_COMPILER_CUDABACKEND_H
