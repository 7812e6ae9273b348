//===- LowerStridedCopies.cpp - non-contiguous memref.copy as linalg.copy -===//
#include "comfyquant/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTLOWERSTRIDEDCOPIES
#include "comfyquant/Codegen/Common/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;

namespace {

/// The condition under which memref-to-LLVM lowers a copy to llvm.memcpy.
bool isContiguous(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && (memref.getLayout().isIdentity() ||
                    memref::isStaticShapeAndContiguousRowMajor(memref));
}

struct LowerStridedCopiesPass
    : mlir::comfyquant::impl::ComfyQuantLowerStridedCopiesBase<
          LowerStridedCopiesPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      if (!isContiguous(copy.getSource().getType()) ||
          !isContiguous(copy.getTarget().getType()))
        copies.push_back(copy);
    });
    IRRewriter rw(&getContext());
    for (memref::CopyOp copy : copies) {
      rw.setInsertionPoint(copy);
      linalg::CopyOp::create(rw, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      rw.eraseOp(copy);
    }
  }
};

} // namespace
