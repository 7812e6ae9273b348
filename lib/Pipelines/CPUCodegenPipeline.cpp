//===- CPUCodegenPipeline.cpp - the comfyquant CPU codegen pipeline -------===//
#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Codegen/Common/Passes.h"
#include "comfyquant/Codegen/Host/Passes.h"
#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/Pipelines/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::comfyquant;

void mlir::comfyquant::buildComfyQuantCPUCodegenPipeline(
    OpPassManager &pm, const CPUCodegenOptions &options) {
  if (options.lowerComfyQuant) {
    // Rotated activations quantized row by row: their f32 butterfly stays
    // in L1 instead of passing over [M, K] f32 temporaries.
    ConvertComfyQuantToLinalgOptions lowering;
    lowering.rotatedQuantize = RotatedQuantize::Rows;
    pm.addPass(createConvertComfyQuantToLinalg(lowering));
  }
  pm.addPass(createComfyQuantCPUPrepareABI());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createComfyQuantFuseOperandProducers());
  pm.addNestedPass<func::FuncOp>(createComfyQuantCPUTabulateDecoders());

  // Strategy, then register-blocked vector GEMMs on tensors.
  ComfyQuantCPUSelectStrategyOptions strategy;
  strategy.variant = options.variant;
  strategy.ukernel = options.ukernel;
  strategy.tune = options.tune;
  strategy.mr = options.mr;
  strategy.nr = options.nr;
  strategy.mc = options.mc;
  strategy.kc = options.kc;
  strategy.decode = options.decode;
  strategy.form = options.form;
  strategy.row = options.row;
  strategy.amxMinRows = options.amxMinRows;
  pm.addPass(createComfyQuantCPUSelectStrategy(strategy));
  pm.addNestedPass<func::FuncOp>(createComfyQuantCPUVectorizeGemm());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Row amax folds as vector folds; then everything else around the GEMMs
  // (quantizers, per-tile decoders, epilogues), once dead full-size
  // producers are gone.
  pm.addNestedPass<func::FuncOp>(createComfyQuantCPUVectorizeReductions());
  // The tuning reaches it through each function's #comfyquant.target.
  pm.addNestedPass<func::FuncOp>(createComfyQuantCPUVectorizeElementwise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Integer decode arithmetic in the narrowest lanes its value range allows
  // (a 6-bit code unpacked in bytes rather than i32 lanes: four times the
  // lanes per instruction).
  arith::ArithIntRangeNarrowingOptions narrowing;
  narrowing.bitwidthsSupported = {8, 16};
  pm.addNestedPass<func::FuncOp>(
      arith::createArithIntRangeNarrowing(narrowing));
  pm.addPass(createCanonicalizerPass());
  if (!options.lowerToLLVM)
    return;

  // Bufferize: y is written in place (empty-tensor elimination into the
  // destination argument), arguments keep the identity layout of the ABI.
  buildComfyQuantBufferizePipeline(pm);
  // Buffers of a loop body whose size the loop does not change (the f32 row
  // of a rotated row quantizer, one per butterfly stage) allocated once,
  // not by a malloc and free per row.
  pm.addNestedPass<func::FuncOp>(bufferization::createBufferLoopHoistingPass());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addNestedPass<func::FuncOp>(createComfyQuantCPUCheckColumnRange());
  pm.addNestedPass<func::FuncOp>(createComfyQuantCPUAmxGemm());
  pm.addPass(createComfyQuantMaterializeIntrinsics());
  pm.addPass(createCanonicalizerPass());
  // After the column-range check, which must still see copies into y.
  pm.addNestedPass<func::FuncOp>(createComfyQuantLowerStridedCopies());

  // Lower to the LLVM dialect.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addNestedPass<func::FuncOp>(createComfyQuantFlattenCollapsedViews());
  pm.addPass(memref::createFoldMemRefAliasOpsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertVectorToSCFPass(
      VectorTransferToSCFOptions().enableFullUnroll(true)));
  pm.addPass(createSCFToControlFlowPass());
  // bf16 conversions as integer ops, except where the variant converts
  // natively (AVX512-BF16: vcvtneps2bf16; LLVM calls a runtime helper for
  // fptrunc to bfloat elsewhere).
  arith::ArithExpandOpsPassOptions expand;
  const CPUVariant *variant = lookupCPUVariant(options.variant);
  expand.includeBf16 = !(variant && variant->bf16Dot);
  pm.addPass(arith::createArithExpandOpsPass(expand));
  ConvertVectorToLLVMPassOptions vec;
  vec.reassociateFPReductions = true;
  // The only transposes are the AMX write-back's 16 x 16 i32 tiles: the
  // unpack/shuffle network of 64 two-source shuffles, not 256 element moves.
  vec.vectorTransposeLowering = vector::VectorTransposeLowering::Shuffle16x16;
  pm.addPass(createConvertVectorToLLVMPass(vec));
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  // cf and amx together: AMX tiles carried across loop iterations.
  pm.addPass(createComfyQuantCPUConvertCFAndAMXToLLVM());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createComfyQuantEmitPackedEntries());
  pm.addPass(createCanonicalizerPass());
}

void mlir::comfyquant::registerComfyQuantCPUCodegen() {
  registerComfyQuantCodegenCommonPasses();
  registerComfyQuantCodegenCPUPasses();
  registerComfyQuantCodegenHostPasses();
  PassPipelineRegistration<CPUCodegenOptions>(
      "comfyquant-cpu-codegen",
      "comfyquant CPU pipeline: (comfyquant ops ->) linalg on tensors -> "
      "strategy -> vector GEMMs -> bufferization -> LLVM dialect with packed "
      "entries",
      buildComfyQuantCPUCodegenPipeline);
}
