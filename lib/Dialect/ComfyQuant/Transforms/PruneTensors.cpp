//===- PruneTensors.cpp - drop unreferenced checkpoint tensors ------------===//
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTPRUNETENSORS
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {
struct PruneTensorsPass
    : mlir::comfyquant::impl::ComfyQuantPruneTensorsBase<PruneTensorsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbolTables;
    // Every tensor reached by a nested symbol reference anywhere in the
    // module (module op bindings, weight ops).
    llvm::DenseSet<Operation *> used;
    module.walk([&](Operation *op) {
      for (NamedAttribute attr : op->getAttrs())
        attr.getValue().walk([&](SymbolRefAttr ref) {
          if (Operation *target =
                  symbolTables.lookupNearestSymbolFrom(op, ref))
            used.insert(target);
        });
    });
    SmallVector<TensorOp> dead;
    module.walk([&](TensorOp t) {
      if (!used.contains(t))
        dead.push_back(t);
    });
    for (TensorOp t : dead)
      t.erase();
  }
};
} // namespace
