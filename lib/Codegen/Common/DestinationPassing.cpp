//===- DestinationPassing.cpp - y as a destination argument ---------------===//
#include "comfyquant/Codegen/Common/DestinationPassing.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

FailureOr<bool>
mlir::comfyquant::detail::makeDestinationPassing(func::FuncOp func) {
  Builder b(func.getContext());
  FunctionType type = func.getFunctionType();
  bool addedY = false;
  if (type.getNumResults() == 1) {
    auto result = dyn_cast<RankedTensorType>(type.getResult(0));
    if (!result)
      return func.emitOpError("result must be a ranked tensor");
    // y: memref at position 1, written in place.
    auto yType = MemRefType::get(result.getShape(), result.getElementType());
    unsigned yIndex = std::min(1u, func.getNumArguments());
    if (failed(func.insertArgument(
            yIndex, yType,
            b.getDictionaryAttr(
                {b.getNamedAttr("comfyquant.output", b.getUnitAttr())}),
            func.getLoc())))
      return failure();
    Value y = func.getArgument(yIndex);
    SmallVector<func::ReturnOp> returns;
    func.walk([&](func::ReturnOp r) { returns.push_back(r); });
    for (func::ReturnOp r : returns) {
      OpBuilder ob(r);
      auto m = bufferization::MaterializeInDestinationOp::create(
          ob, r.getLoc(), TypeRange{}, r.getOperand(0), y);
      m.setRestrict(true);
      m.setWritable(true);
      func::ReturnOp::create(ob, r.getLoc());
      r.erase();
    }
    if (failed(func.eraseResult(0)))
      return failure();
    addedY = true;
  } else if (type.getNumResults() != 0) {
    return func.emitOpError("must have one tensor result (y) or none");
  }
  // Only y is written.
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (isa<TensorType>(func.getArgument(i).getType()))
      func.setArgAttr(i, "bufferization.writable", b.getBoolAttr(false));
  return addedY;
}
