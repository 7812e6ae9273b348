//===- Pipelines.h - comfyquant pass pipelines ------------------*- C++ -*-===//
//
// Pipelines are plain builder functions (one options struct each) so the opt
// tool, the compile driver and the tests run the same sequence of passes.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_PIPELINES_PIPELINES_H
#define COMFYQUANT_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir::comfyquant {

/// Options of the decompose pipeline.
struct DecomposeOptions : public PassPipelineOptions<DecomposeOptions> {
  PassOptions::Option<std::string> activationType{
      *this, "activation-type",
      llvm::cl::desc("Activation (and output) element type of the functions: "
                     "f32, bf16 or f16"),
      llvm::cl::init("bf16")};
};

/// Module ops to fused computation functions: comfyquant-decompose-modules,
/// then on every function comfyquant-fuse-rotate-quantize and
/// comfyquant-fuse-gemm-epilogue, then canonicalize. `pm` must run on a
/// builtin.module.
void buildComfyQuantDecomposePipeline(OpPassManager &pm,
                                      const DecomposeOptions &options);

/// Registers the named pipelines (`comfyquant-decompose-pipeline`).
void registerComfyQuantPipelines();

} // namespace mlir::comfyquant

#endif // COMFYQUANT_PIPELINES_PIPELINES_H
