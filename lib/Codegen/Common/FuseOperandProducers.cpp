//===- FuseOperandProducers.cpp - one elementwise producer per GEMM weight ===//
//
// NVFP4, for example, lowers to an op that unpacks nibbles into an N x K
// temporary and a second that decodes and scales it for the GEMM. The GEMM
// code generators evaluate the second per tile; fusing the first into it
// removes the temporary (written and read back in full on every call).
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTFUSEOPERANDPRODUCERS
#include "comfyquant/Codegen/Common/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;

namespace {

bool isAllParallelOneResult(linalg::GenericOp op) {
  return op && op.hasPureTensorSemantics() && op.getNumResults() == 1 &&
         op.getNumReductionLoops() == 0;
}

/// Fuses one producer of `consumer`'s inputs into it; the fused op, or null
/// when no input qualifies.
linalg::GenericOp fuseOneInput(RewriterBase &rw, linalg::GenericOp consumer) {
  for (OpOperand *in : consumer.getDpsInputOperands()) {
    auto producer = in->get().getDefiningOp<linalg::GenericOp>();
    // Another user would need the temporary anyway, and the producer's work
    // would be done twice.
    if (!isAllParallelOneResult(producer) || !in->get().hasOneUse() ||
        !linalg::areElementwiseOpsFusable(in))
      continue;
    FailureOr<linalg::ElementwiseOpFusionResult> fused =
        linalg::fuseElementwiseOps(rw, in);
    if (failed(fused))
      continue;
    for (auto [original, replacement] : fused->replacements)
      rw.replaceUsesWithIf(original, replacement, [&](OpOperand &use) {
        return use.getOwner() != fused->fusedOp;
      });
    rw.eraseOp(consumer);
    if (producer->use_empty())
      rw.eraseOp(producer);
    return cast<linalg::GenericOp>(fused->fusedOp);
  }
  return {};
}

struct FuseOperandProducersPass
    : mlir::comfyquant::impl::ComfyQuantFuseOperandProducersBase<
          FuseOperandProducersPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> gemms;
    getOperation().walk([&](linalg::GenericOp op) {
      if (mlir::comfyquant::detail::matchGemm(op))
        gemms.push_back(op);
    });
    IRRewriter rw(&getContext());
    for (linalg::GenericOp gemm : gemms) {
      auto producer = gemm.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>();
      if (!isAllParallelOneResult(producer))
        continue;
      rw.setInsertionPoint(producer);
      while (linalg::GenericOp fused = fuseOneInput(rw, producer)) {
        producer = fused;
        rw.setInsertionPoint(producer);
      }
    }
  }
};

} // namespace
