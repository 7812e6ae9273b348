//===- GPUCodegen.h - CUDA pipelines, archs, PTX and cubins -----*- C++ -*-===//
//
// The CUDA back end of comfyquant:
//   * kernel formation: upstream-dialect IR on tensors -> host entries that
//     compute launch geometry + one gpu.module of kernels;
//   * the host half: LLVM dialect with packed entries (x86, in cuda/host.so),
//     launches through the runtime's cq_gpu_launcher;
//   * the device half, per arch: NVVM -> PTX (-> cubin with ptxas).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_GPUCODEGEN_H
#define COMFYQUANT_CODEGEN_GPU_GPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassOptions.h"

#include <functional>

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class OpPassManager;
class PassManager;
namespace comfyquant {

/// An NVIDIA architecture the artifact has kernels for.
struct CUDAArch {
  const char *name;       ///< "sm_90a": manifest name and ptxas -arch
  int computeCapability;  ///< 90 (major * 10 + minor)
  int ptxVersion;         ///< 84 for PTX ISA 8.4
  bool archSpecific;      ///< "a" arch: PTX runs only on this capability
};

/// Every supported arch, oldest first.
const std::vector<CUDAArch> &getCUDAArchs();
/// nullptr for an unknown name.
const CUDAArch *lookupCUDAArch(llvm::StringRef name);

struct GPUKernelFormationOptions
    : public PassPipelineOptions<GPUKernelFormationOptions> {
  Option<bool> lowerComfyQuant{
      *this, "lower-comfyquant",
      llvm::cl::desc("Run convert-comfyquant-to-linalg first"),
      llvm::cl::init(true)};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block of SIMT kernels"),
                            llvm::cl::init(256)};
};

struct GPUDeviceOptions : public PassPipelineOptions<GPUDeviceOptions> {
  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("CUDA arch (sm_80 ... sm_120a)"),
                           llvm::cl::init("sm_90a")};
  Option<bool> serialize{*this, "serialize",
                         llvm::cl::desc("End with gpu-module-to-binary "
                                        "(PTX text in a gpu.binary)"),
                         llvm::cl::init(true)};
};

/// Tensors -> host entries with gpu.launch_func + one gpu.module of kernels.
void buildComfyQuantGPUKernelFormationPipeline(
    OpPassManager &pm, const GPUKernelFormationOptions &options);
/// Host entries -> LLVM dialect with packed entries; drops the gpu.modules.
void buildComfyQuantGPUHostPipeline(OpPassManager &pm);
/// gpu.modules -> NVVM for `options.arch` (-> gpu.binary with PTX text).
void buildComfyQuantGPUDevicePipeline(OpPassManager &pm,
                                      const GPUDeviceOptions &options);

/// Registers the pipelines (`comfyquant-gpu-form-kernels`,
/// `comfyquant-gpu-lower-host`, `comfyquant-gpu-lower-device`) and the
/// passes of Codegen/GPU/Passes.td.
void registerComfyQuantGPUCodegen();
/// The LLVM IR translations the device pipeline serializes with.
void registerComfyQuantGPUTranslations(DialectRegistry &registry);

/// Lowers a module holding gpu.modules for `arch` and returns the PTX of
/// the one named `gpuModule`. Returns false with `error` set.
bool emitPTX(ModuleOp deviceModule, llvm::StringRef gpuModule,
             const CUDAArch &arch, std::string &ptx, std::string &error);

/// ptxas from COMFYQUANT_PTXAS, PATH, $CUDA_HOME/bin or /usr/local/cuda/bin;
/// "" when there is none.
std::string findPtxas();

/// Assembles `ptxPath` into `cubinPath` for `arch` with ptxas. On failure
/// `error` holds ptxas's messages and the command that reproduces them.
/// `usage` receives ptxas's resource report (-v).
bool assembleCubin(const std::string &ptxas, const std::string &ptxPath,
                   const CUDAArch &arch, const std::string &cubinPath,
                   std::string &error, std::string *usage = nullptr);

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

} // namespace comfyquant
} // namespace mlir

#endif // COMFYQUANT_CODEGEN_GPU_GPUCODEGEN_H
