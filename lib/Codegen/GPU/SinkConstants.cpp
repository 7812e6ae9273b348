//===- SinkConstants.cpp - constants into gpu.launch bodies ---------------===//
#include "comfyquant/Codegen/GPU/Passes.h"

#include "mlir/Dialect/GPU/Utils/GPUUtils.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUSINKCONSTANTS
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

struct SinkConstantsPass
    : mlir::comfyquant::impl::ComfyQuantGPUSinkConstantsBase<
          SinkConstantsPass> {
  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp launch : launches)
      if (failed(sinkOperationsIntoLaunchOp(launch, [](Operation *op) {
            return op->hasTrait<OpTrait::ConstantLike>();
          })))
        return signalPassFailure();
  }
};

} // namespace
