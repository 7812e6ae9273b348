//===- Pipelines.h - comfyquant pass pipelines ------------------*- C++ -*-===//
//
// Pipelines are plain builder functions (one options struct each) so the opt
// tool, the compile driver and the tests run the same sequence of passes.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_PIPELINES_PIPELINES_H
#define COMFYQUANT_PIPELINES_PIPELINES_H

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/Dialect/ComfyQuant/IR/EnumChoice.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir::comfyquant {

/// Options of the decompose pipeline.
struct DecomposeOptions : public PassPipelineOptions<DecomposeOptions> {
  PassOptions::Option<ActivationType> activationType{
      *this, "activation-type",
      llvm::cl::desc("Activation (and output) element type of the functions"),
      llvm::cl::init(ActivationType::bf16),
      llvm::cl::values(clEnumValN(ActivationType::f32, "f32", "f32"),
                       clEnumValN(ActivationType::bf16, "bf16", "bf16"),
                       clEnumValN(ActivationType::f16, "f16", "f16"))};
};

/// Module ops to fused computation functions: comfyquant-decompose-modules,
/// then on every function comfyquant-fuse-rotate-quantize and
/// comfyquant-fuse-gemm-epilogue, then canonicalize. `pm` must run on a
/// builtin.module.
void buildComfyQuantDecomposePipeline(OpPassManager &pm,
                                      const DecomposeOptions &options);

/// Registers the named pipelines (`comfyquant-decompose-pipeline`).
void registerComfyQuantPipelines();

/// Options of the CPU codegen pipeline.
struct CPUCodegenOptions : public PassPipelineOptions<CPUCodegenOptions> {
  Option<std::string> variant{*this, "variant",
                              llvm::cl::desc("CPU variant (x86-64-v3, "
                                             "avx512-vnni, avx512-bf16, amx)"),
                              llvm::cl::init("x86-64-v3")};
  Option<EnumChoice<CpuMicroKernel>> ukernel{
      *this, "ukernel",
      llvm::cl::desc("Force a GEMM micro-kernel (empty: the strategy's)")};
  Option<std::string> tune{
      *this, "tune",
      llvm::cl::desc("CPU the kernels are tuned for: generic, host or an "
                     "LLVM x86 CPU name (empty: the pinned target's, else "
                     "generic)"),
      llvm::cl::init("")};
  Option<int64_t> mr{*this, "mr", llvm::cl::desc("Register tile rows"),
                     llvm::cl::init(0)};
  Option<int64_t> nr{*this, "nr", llvm::cl::desc("Register tile columns"),
                     llvm::cl::init(0)};
  Option<int64_t> mc{*this, "mc", llvm::cl::desc("M block"),
                     llvm::cl::init(0)};
  Option<int64_t> kc{*this, "kc",
                     llvm::cl::desc("K block of the outer form (0: all of K; "
                                    "-1: the strategy's)"),
                     llvm::cl::init(-1)};
  Option<int64_t> amxMinRows{
      *this, "amx-min-rows",
      llvm::cl::desc("Fewest rows of A a call runs the AMX kernels with "
                     "(fewer: the runtime takes another variant)"),
      llvm::cl::init(16)};
  Option<EnumChoice<CpuDecode>> decode{
      *this, "decode",
      llvm::cl::desc("Where B's decoder runs: panel, register or adaptive")};
  Option<EnumChoice<CpuGemmForm>> form{
      *this, "form",
      llvm::cl::desc("Accumulator layout of the vector GEMMs: inner or outer")};
  Option<EnumChoice<CpuRowKernel>> row{
      *this, "row",
      llvm::cl::desc("Micro-kernel of the vector GEMMs' one-row calls: "
                     "ukernel, f32-fma, bf16-dot or i8-planes")};
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

/// The CPU pipeline: upstream-dialect IR (func + linalg/tensor/arith/math on
/// tensors; optionally comfyquant computation ops first) -> strategy
/// attributes -> register-blocked vector GEMMs on tensors -> one-shot
/// bufferization -> LLVM dialect with packed entries. Added to `pm`
/// (anchored on builtin.module).
void buildComfyQuantCPUCodegenPipeline(OpPassManager &pm,
                                       const CPUCodegenOptions &options);

/// Registers the pipeline as `comfyquant-cpu-codegen` and the passes of
/// Codegen/Common/Passes.td and Codegen/CPU/Passes.td.
void registerComfyQuantCPUCodegen();

struct GPUKernelFormationOptions
    : public PassPipelineOptions<GPUKernelFormationOptions> {
  Option<EnumChoice<CpuRowKernel>> row{
      *this, "row",
      llvm::cl::desc("Micro-kernel of the vector GEMMs' one-row calls: "
                     "ukernel, f32-fma, bf16-dot or i8-planes")};
  Option<bool> lowerComfyQuant{
      *this, "lower-comfyquant",
      llvm::cl::desc("Run convert-comfyquant-to-linalg first"),
      llvm::cl::init(true)};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block of SIMT kernels"),
                            llvm::cl::init(256)};
  ListOption<std::string> archs{
      *this, "archs",
      llvm::cl::desc("CUDA archs the kernels will be lowered for (the "
                     "GEMM strategy depends on them); empty: any arch")};
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

/// One-shot bufferization as every back end's entries need it: function
/// boundaries included, y written in place (empty tensors eliminated into
/// the destination argument), identity layouts at the ABI.
void buildComfyQuantBufferizePipeline(OpPassManager &pm);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_PIPELINES_PIPELINES_H
