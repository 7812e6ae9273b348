//===- PrepareABI.cpp - packed-entry functions of the CPU artifact --------===//
#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Codegen/Common/DestinationPassing.h"
#include "comfyquant/Codegen/Host/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUPREPAREABI
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

struct PrepareABIPass
    : mlir::comfyquant::impl::ComfyQuantCPUPrepareABIBase<PrepareABIPass> {
  void runOnOperation() override {
    Builder b(&getContext());
    auto prepare = [&](func::FuncOp func) -> LogicalResult {
      FailureOr<bool> addedY =
          mlir::comfyquant::detail::makeDestinationPassing(func);
      if (failed(addedY))
        return failure();
      // Columns [begin, end) of y to compute: the runtime may split N
      // across threads. A kernel that cannot restrict itself to them
      // computes every column (comfyquant.column_range says which).
      if (*addedY)
        for (StringRef name : {"comfyquant.column_begin",
                               "comfyquant.column_end"})
          if (failed(func.insertArgument(
                  func.getNumArguments(), b.getIndexType(),
                  b.getDictionaryAttr({b.getNamedAttr(name, b.getUnitAttr())}),
                  func.getLoc())))
            return failure();
      return success();
    };
    if (failed(recordPackedEntries(getOperation(), prepare)))
      signalPassFailure();
  }
};

} // namespace
