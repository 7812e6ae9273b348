//===- AssignWorkspace.cpp - temporaries as views of the workspace --------===//
//
// Host entries of a CUDA artifact never allocate: the runtime passes one
// device buffer of `per_row * M + fixed` bytes and every temporary is a
// view of it at an offset that is 256-byte aligned for any M.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/HostCode.h"
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUASSIGNWORKSPACE
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

constexpr int64_t kAlignment = 256;

/// The argument carrying `marker`, or null.
BlockArgument markedArgument(func::FuncOp func, StringRef marker) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, marker))
      return func.getArgument(i);
  return nullptr;
}

struct AssignWorkspacePass
    : mlir::comfyquant::impl::ComfyQuantGPUAssignWorkspaceBase<
          AssignWorkspacePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<memref::AllocOp> allocs;
    func.walk([&](memref::AllocOp a) { allocs.push_back(a); });
    BlockArgument workspace = markedArgument(func, "comfyquant.workspace");
    if (!workspace) {
      if (allocs.empty())
        return;
      func.emitOpError("allocates temporaries but has no "
                       "comfyquant.workspace argument");
      return signalPassFailure();
    }
    // Rows of the activation: dim 0 of the first argument after the
    // launcher (x, or the indices of an embedding).
    BlockArgument x = activationArgument(func);
    Block &entry = func.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    Location loc = func.getLoc();
    Value rows = memref::DimOp::create(b, loc, x, 0);
    // Check every size before any alloc is replaced: value bounds see
    // through allocs and views of x, not through memref.view.
    for (memref::AllocOp alloc : allocs)
      for (Value size : alloc.getDynamicSizes()) {
        FailureOr<bool> equal = ValueBoundsConstraintSet::areEqual(
            ValueBoundsConstraintSet::Variable(size),
            ValueBoundsConstraintSet::Variable(x, 0));
        if (failed(equal) || !*equal) {
          alloc.emitOpError("temporary whose dynamic size is not the row "
                            "count of x");
          return signalPassFailure();
        }
      }
    int64_t perRow = 0, fixed = 0;
    for (memref::AllocOp alloc : allocs) {
      if (alloc->getBlock() != &entry) {
        alloc.emitOpError("temporary allocated inside a loop; the CUDA back "
                          "end needs every temporary at the top of the entry");
        return signalPassFailure();
      }
      MemRefType type = alloc.getType();
      if (!type.getLayout().isIdentity() || type.getMemorySpace()) {
        alloc.emitOpError("temporary must have the identity layout in the "
                          "default memory space");
        return signalPassFailure();
      }
      int64_t elements = 1;
      for (int64_t d : type.getShape())
        if (!ShapedType::isDynamic(d))
          elements *= d;
      int64_t bits = type.getElementTypeBitWidth();
      int64_t bytes = llvm::divideCeil(elements * bits, 8);
      ValueRange dynamic = alloc.getDynamicSizes();
      if (dynamic.size() > 1) {
        alloc.emitOpError("temporary with more than one dynamic size");
        return signalPassFailure();
      }
      // Fixed-size buffers sit at the start, per-row buffers after all of
      // them (shifted below, once the fixed total is known).
      OpBuilder ab(alloc);
      Value offset =
          dynamic.empty()
              ? arith::ConstantIndexOp::create(ab, alloc.getLoc(), fixed)
                    .getResult()
              : arith::MulIOp::create(
                    ab, alloc.getLoc(), rows,
                    arith::ConstantIndexOp::create(ab, alloc.getLoc(), perRow))
                    .getResult();
      SmallVector<Value> sizes;
      if (!dynamic.empty())
        sizes.push_back(rows);
      auto view = memref::ViewOp::create(ab, alloc.getLoc(), type, workspace,
                                         offset, sizes);
      if (dynamic.empty())
        fixed += llvm::alignTo(bytes, kAlignment);
      else
        perRow += llvm::alignTo(bytes, kAlignment);
      for (OpOperand &use : llvm::make_early_inc_range(alloc->getUses()))
        if (isa<memref::DeallocOp>(use.getOwner()))
          use.getOwner()->erase();
      alloc.replaceAllUsesWith(view.getResult());
      alloc.erase();
    }
    // Per-row views start after every fixed-size buffer.
    if (fixed != 0)
      func.walk([&](memref::ViewOp view) {
        if (view.getSource() != workspace || view.getSizes().empty())
          return;
        OpBuilder vb(view);
        Value shifted = arith::AddIOp::create(
            vb, view.getLoc(), view.getByteShift(),
            arith::ConstantIndexOp::create(vb, view.getLoc(), fixed));
        view.getByteShiftMutable().assign(shifted);
      });
    func->setAttr(ComfyQuantDialect::getWorkspaceBytesAttrName(),
                  b.getDenseI64ArrayAttr({perRow, fixed}));
  }
};

} // namespace
