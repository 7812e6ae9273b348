//===- GPUCodegenPipeline.cpp - the comfyquant CUDA pipelines -------------===//
#include "comfyquant/Codegen/Host/Passes.h"
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/Pipelines/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::comfyquant;

void mlir::comfyquant::buildComfyQuantGPUKernelFormationPipeline(
    OpPassManager &pm, const GPUKernelFormationOptions &options) {
  if (options.lowerComfyQuant) {
    ConvertComfyQuantToLinalgOptions lowering;
    lowering.gemmOperands = GemmOperands::Native;
    pm.addPass(createConvertComfyQuantToLinalg(lowering));
  }
  pm.addPass(createComfyQuantGPUPrepareABI());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Temporaries become workspace views, so no deallocation pipeline.
  buildComfyQuantBufferizePipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addPass(createCanonicalizerPass());

  // Tensor cores where a kernel family covers the GEMM (absorbing the
  // accumulator's fill and epilogue, before the workspace is laid out, so
  // an accumulator that never reaches memory takes no room in it);
  // everything else: one thread per output point, reductions in the thread.
  ComfyQuantGPUSelectStrategyOptions strategy;
  strategy.archs.assign(options.archs.begin(), options.archs.end());
  pm.addNestedPass<func::FuncOp>(createComfyQuantGPUSelectStrategy(strategy));
  pm.addNestedPass<func::FuncOp>(createComfyQuantGPUTensorCoreGemm());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  // The activation prologue (rotation, amax, scales, quantizer): one block
  // per row instead of a launch per nest.
  pm.addNestedPass<func::FuncOp>(createComfyQuantGPUFormRowKernels());
  pm.addNestedPass<func::FuncOp>(createComfyQuantGPUAssignWorkspace());
  ComfyQuantGPUDistributeLoopsOptions distribute;
  distribute.blockSize = options.blockSize;
  pm.addNestedPass<func::FuncOp>(createComfyQuantGPUDistributeLoops(distribute));
  pm.addNestedPass<func::FuncOp>(createComfyQuantGPUSinkConstants());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createComfyQuantGPUMergeKernelModules());
  pm.addPass(createCanonicalizerPass());
}

void mlir::comfyquant::buildComfyQuantGPUHostPipeline(OpPassManager &pm) {
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(arith::createArithExpandOpsPass());
  // Host code branches only around launches (split K's reduction).
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createComfyQuantGPULowerLaunches());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createComfyQuantEmitPackedEntries());
  pm.addPass(createCanonicalizerPass());
}

void mlir::comfyquant::buildComfyQuantGPUDevicePipeline(
    OpPassManager &pm, const GPUDeviceOptions &options) {
  const CUDAArch *arch = lookupCUDAArch(options.arch);
  GpuNVVMAttachTargetOptions target;
  // A family target is generated as its first member; the compiler
  // retargets the PTX (the tensor-core choices stay the family's own, from
  // comfyquant-gpu-lower-mma's chip).
  target.chip = arch && arch->lowerAs ? std::string(arch->lowerAs)
                                      : options.arch.getValue();
  target.features =
      "+ptx" + std::to_string(arch ? arch->ptxVersion : getCUDAArchs()[0].ptxVersion);
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  // The per-arch choice of instruction kernel formation leaves open.
  ComfyQuantGPULowerMmaOptions mma;
  mma.chip = options.arch;
  pm.addNestedPass<gpu::GPUModuleOp>(createComfyQuantGPULowerMma(mma));
  pm.addPass(createConvertNVGPUToNVVMPass());
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(memref::createExpandStridedMetadataPass());
  device.addPass(createLowerAffinePass());
  // Before arith-expand, which would make each clamp compares and selects.
  device.addPass(createComfyQuantGPULowerBoundedMinMax());
  device.addPass(arith::createArithExpandOpsPass());
  device.addPass(createSCFToControlFlowPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  // nvvm.inline_ptx (FP8 mma.sync) becomes llvm.inline_asm.
  device.addPass(createConvertNVVMToLLVMPass());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  device.addPass(createComfyQuantGPUExternalizeDynamicSharedMemory());
  if (options.serialize) {
    configureNVPTXBackend();
    GpuModuleToBinaryPassOptions binary;
    binary.compilationTarget = "isa";
    // convert-gpu-to-nvvm lowers math ops (absf, roundeven) to libdevice
    // calls; serialization links libdevice from the toolkit ptxas is in.
    binary.toolkitPath = findCUDAToolkit();
    pm.addPass(createGpuModuleToBinaryPass(binary));
  }
}

void mlir::comfyquant::registerComfyQuantGPUCodegen() {
  registerComfyQuantGPUPasses();
  PassPipelineRegistration<GPUKernelFormationOptions>(
      "comfyquant-gpu-form-kernels",
      "comfyquant CUDA kernel formation: (comfyquant ops ->) linalg on "
      "tensors -> host entries (workspace, launch geometry) + one gpu.module",
      buildComfyQuantGPUKernelFormationPipeline);
  PassPipelineRegistration<>(
      "comfyquant-gpu-lower-host",
      "comfyquant CUDA host entries -> LLVM dialect with packed entries and "
      "launches through cq_gpu_launcher",
      buildComfyQuantGPUHostPipeline);
  PassPipelineRegistration<GPUDeviceOptions>(
      "comfyquant-gpu-lower-device",
      "comfyquant gpu.modules -> NVVM for one arch -> gpu.binary with PTX",
      buildComfyQuantGPUDevicePipeline);
}
