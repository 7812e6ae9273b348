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

#include <map>
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

/// Whether the arch's FP8 GEMM steps add into the accumulators without a
/// promotion: not sm_90a (each wgmma step's product is added to f32
/// accumulators; at 256 columns product and accumulators leave ptxas too
/// few registers). sm_80/86 multiply f16 tiles decoded once per block in
/// workgroup memory, like every other arch multiplies the codes. FP8 read
/// as stored takes 128 x 256 only where this holds for every arch.
bool accumulatesFp8Steps(const CUDAArch &arch);

/// Whether the arch multiplies E2M1 codes with block scales in one MMA
/// (sm_120a's block-scaled mma.sync, tcgen05).
bool hasFP4Mma(const CUDAArch &arch);

/// Whether comfyquant-gpu-select-strategy chooses the same GEMM configs for
/// both archs: the arch facts it reads, accumulatesFp8Steps and whether an
/// FP8 MMA and an FP4 MMA exist (without one, FP8 or NVFP4 operands are
/// widened to f16 once per call from decode_rows on), are the same. The CUDA back end forms kernels
/// once per group of such archs.
bool formsKernelsAlike(const CUDAArch &a, const CUDAArch &b);

/// The LLVM IR translations the device pipeline serializes with.
void registerComfyQuantGPUTranslations(DialectRegistry &registry);

/// Sets the NVPTX back end's options the kernels are tuned for, once per
/// process, unless the command line set them: no f32x2 registers
/// (`nvptx-no-f32x2`). On sm_100 and later NVPTX otherwise holds every pair
/// of 32-bit accumulator lanes in a 64-bit register and packs and unpacks
/// them around each MMA: 1700 extra movs and a spill in a 128 x 256
/// integer GEMM on sm_120a, none without.
void configureNVPTXBackend();

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

/// What ptxas -v reports of one kernel.
struct KernelResources {
  int64_t registers = 0, spillStoreBytes = 0, spillLoadBytes = 0;
  int64_t sharedBytes = 0; ///< static shared memory
};

/// ptxas -v's report, per entry function.
std::map<std::string, KernelResources>
parsePtxasReport(llvm::StringRef report);

/// The block size each entry of `ptx` was formed with, as the PTX records
/// it (.maxntid / .reqntid, from the launch's known block size): entry ->
/// threads. An entry without one is absent.
std::map<std::string, int64_t> recordedBlockSizes(llvm::StringRef ptx);

/// Checks every assembled kernel against its recorded block size and the
/// arch's limits: a block size is recorded and within maxThreadsPerBlock,
/// and its registers (allocated per warp in units of 256) fit the block's
/// register file. Spills are reported (KernelResources), not refused.
/// Returns false with `error` naming the kernel.
bool checkKernelResources(const std::map<std::string, KernelResources> &used,
                          const std::map<std::string, int64_t> &blockSizes,
                          const CUDAArch &arch, std::string &error);

} // namespace comfyquant
} // namespace mlir

#endif // COMFYQUANT_CODEGEN_GPU_GPUCODEGEN_H
