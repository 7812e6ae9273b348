//===- Pipelines.cpp - comfyquant pass pipelines --------------------------===//
#include "comfyquant/Pipelines/Pipelines.h"

#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::comfyquant;

void mlir::comfyquant::buildComfyQuantDecomposePipeline(
    OpPassManager &pm, const DecomposeOptions &options) {
  ComfyQuantDecomposeModulesOptions decompose;
  decompose.activationType = options.activationType;
  pm.addPass(createComfyQuantDecomposeModules(decompose));
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createComfyQuantFuseRotateQuantize());
  fn.addPass(createComfyQuantFuseGemmEpilogue());
  pm.addPass(createCanonicalizerPass());
}

void mlir::comfyquant::buildComfyQuantBufferizePipeline(OpPassManager &pm) {
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  pm.addPass(bufferization::createEmptyTensorToAllocTensorPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.unknownTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
}

void mlir::comfyquant::registerComfyQuantPipelines() {
  PassPipelineRegistration<DecomposeOptions>(
      "comfyquant-decompose-pipeline",
      "Decompose comfyquant module ops into functions of fused computation "
      "ops (decompose, fuse rotate+quantize, fuse gemm+epilogue, "
      "canonicalize)",
      buildComfyQuantDecomposePipeline);
}
