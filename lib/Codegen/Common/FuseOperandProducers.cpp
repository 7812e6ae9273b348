//===- FuseOperandProducers.cpp - one elementwise producer per GEMM weight ===//
//
// NVFP4, for example, lowers to an op that unpacks nibbles into an N x K
// temporary and a second that decodes and scales it for the GEMM. The GEMM
// code generators evaluate the second per tile; fusing the first into it
// removes the temporary (written and read back in full on every call).
// Likewise a relayout read by element (NVFP4's swizzled block scales
// unswizzled into an N x K/16 temporary): its body, a function of the
// indices, is evaluated where the decoder reads the element.
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

/// A generic that reads nothing through its operands: each element is a
/// function of its indices (and of values from outside, e.g. a gather from
/// a stored tensor).
bool isIndexFunction(linalg::GenericOp op) {
  if (!isAllParallelOneResult(op) || op.getNumDpsInputs() != 0 ||
      !op.getIndexingMapsArray()[0].isIdentity())
    return false;
  Block &body = op.getRegion().front();
  return llvm::all_of(body.getArguments(),
                      [](BlockArgument a) { return a.use_empty(); }) &&
         llvm::all_of(body.without_terminator(), [](Operation &o) {
           return o.getNumRegions() == 0 && isPure(&o);
         });
}

/// Replaces each read of an index function's result in `consumer`'s body by
/// that function evaluated at the read's indices; erases index functions
/// left without users.
void inlineIndexFunctions(RewriterBase &rw, linalg::GenericOp consumer) {
  SmallVector<tensor::ExtractOp> reads;
  consumer.getRegion().walk([&](tensor::ExtractOp read) {
    if (isIndexFunction(read.getTensor().getDefiningOp<linalg::GenericOp>()))
      reads.push_back(read);
  });
  for (tensor::ExtractOp read : reads) {
    auto producer = read.getTensor().getDefiningOp<linalg::GenericOp>();
    Block &body = producer.getRegion().front();
    IRMapping map;
    rw.setInsertionPoint(read);
    for (Operation &o : body.without_terminator()) {
      if (auto index = dyn_cast<linalg::IndexOp>(&o)) {
        map.map(index.getResult(), read.getIndices()[index.getDim()]);
        continue;
      }
      rw.clone(o, map);
    }
    Value element = map.lookupOrDefault(body.getTerminator()->getOperand(0));
    rw.replaceOp(read, element);
    if (producer->use_empty())
      rw.eraseOp(producer);
  }
}

struct FuseOperandProducersPass
    : mlir::comfyquant::impl::ComfyQuantFuseOperandProducersBase<
          FuseOperandProducersPass> {
  void runOnOperation() override {
    // The first pass to read the GEMM tags checks each against its body.
    SmallVector<linalg::GenericOp> gemms;
    WalkResult checked = getOperation().walk([&](linalg::GenericOp op) {
      if (failed(mlir::comfyquant::detail::verifyGemmTag(op)))
        return WalkResult::interrupt();
      if (mlir::comfyquant::detail::taggedGemm(op))
        gemms.push_back(op);
      return WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return signalPassFailure();
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
      inlineIndexFunctions(rw, producer);
    }
  }
};

} // namespace
