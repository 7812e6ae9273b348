//===- GPUCodegen.h - CUDA pipelines, archs, PTX and cubins -----*- C++ -*-===//
//
// What the CUDA back end knows of its targets: the archs (PTX version,
// whether PTX is arch-specific), the LLVM IR translations the NVVM
// serialization needs, and ptxas. The pipelines are in Pipelines.h, the
// artifact driver in Compiler/CUDABackend.h.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_GPUCODEGEN_H
#define COMFYQUANT_CODEGEN_GPU_GPUCODEGEN_H

#include "comfyquant/runtime/Targets.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
namespace comfyquant {

/// An NVIDIA architecture the artifact has kernels for: the runtime's table
/// (comfyquant/runtime/Targets.h).
using CUDAArch = ::comfyquant::rt::CudaArchInfo;

/// Every supported arch, oldest first.
const std::vector<CUDAArch> &getCUDAArchs();
/// nullptr for an unknown name.
const CUDAArch *lookupCUDAArch(llvm::StringRef name);

/// The LLVM IR translations the device pipeline serializes with.
void registerComfyQuantGPUTranslations(DialectRegistry &registry);

/// The CUDA toolkit directory (holding nvvm/libdevice) of the ptxas
/// findPtxas() finds; "" when there is none.
std::string findCUDAToolkit();

/// ptxas from COMFYQUANT_PTXAS, PATH, $CUDA_HOME/bin or /usr/local/cuda/bin;
/// "" when there is none.
std::string findPtxas();

/// Assembles `ptxPath` into `cubinPath` for `arch` with ptxas. On failure
/// `error` holds ptxas's messages and the command that reproduces them.
/// `usage` receives ptxas's resource report (-v).
bool assembleCubin(const std::string &ptxas, const std::string &ptxPath,
                   const CUDAArch &arch, const std::string &cubinPath,
                   std::string &error, std::string *usage = nullptr);

} // namespace comfyquant
} // namespace mlir

#endif // COMFYQUANT_CODEGEN_GPU_GPUCODEGEN_H
