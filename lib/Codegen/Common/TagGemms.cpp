//===- TagGemms.cpp - comfyquant.gemm_info on hand-written contractions ---===//
//
// The conversion tags the GEMMs it builds; IR from elsewhere is tagged here
// by matching the body once, so the back ends never match it themselves.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Codegen/Common/Passes.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTTAGGEMMS
#include "comfyquant/Codegen/Common/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

struct TagGemmsPass
    : mlir::comfyquant::impl::ComfyQuantTagGemmsBase<TagGemmsPass> {
  void runOnOperation() override {
    getOperation()->walk([&](linalg::GenericOp op) {
      if (op->hasAttr(ComfyQuantDialect::getGemmInfoAttrName()))
        return;
      if (std::optional<mlir::comfyquant::detail::GemmMatch> m =
              mlir::comfyquant::detail::matchGemm(op))
        op->setAttr(ComfyQuantDialect::getGemmInfoAttrName(),
                    mlir::comfyquant::detail::gemmInfo(op.getContext(), *m));
    });
  }
};

} // namespace
