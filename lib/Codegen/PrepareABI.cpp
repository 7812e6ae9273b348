//===- PrepareABI.cpp - destination-passing entry functions ---------------===//
#include "comfyquant/Codegen/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUPREPAREABI
#include "comfyquant/Codegen/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

struct PrepareABIPass
    : mlir::comfyquant::impl::ComfyQuantCPUPrepareABIBase<PrepareABIPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(&getContext());
    SmallVector<NamedAttribute> entries;
    if (auto existing =
            module->getAttrOfType<DictionaryAttr>("comfyquant.entries"))
      entries.append(existing.begin(), existing.end());
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.isPublic())
        continue;
      FunctionType type = func.getFunctionType();
      if (type.getNumResults() == 1) {
        auto result = dyn_cast<RankedTensorType>(type.getResult(0));
        if (!result) {
          func.emitOpError("result must be a ranked tensor");
          return signalPassFailure();
        }
        // y: memref at position 1, written in place.
        auto yType = MemRefType::get(result.getShape(), result.getElementType());
        unsigned yIndex = std::min(1u, func.getNumArguments());
        if (failed(func.insertArgument(
                yIndex, yType,
                b.getDictionaryAttr({b.getNamedAttr("comfyquant.output",
                                                    b.getUnitAttr())}),
                func.getLoc())))
          return signalPassFailure();
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
          return signalPassFailure();
        // Columns [begin, end) of y to compute: the runtime may split N
        // across threads. A kernel that cannot restrict itself to them
        // computes every column (comfyquant.column_range says which).
        for (StringRef name : {"comfyquant.column_begin",
                               "comfyquant.column_end"})
          if (failed(func.insertArgument(
                  func.getNumArguments(), b.getIndexType(),
                  b.getDictionaryAttr({b.getNamedAttr(name, b.getUnitAttr())}),
                  func.getLoc())))
            return signalPassFailure();
      } else if (type.getNumResults() != 0) {
        func.emitOpError("must have one tensor result (y) or none");
        return signalPassFailure();
      }
      // Only y is written.
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (isa<TensorType>(func.getArgument(i).getType()))
          func.setArgAttr(i, "bufferization.writable", b.getBoolAttr(false));
      func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                    b.getUnitAttr());
      StringAttr entry = func->getAttrOfType<StringAttr>("comfyquant.entry");
      if (!entry)
        entry = b.getStringAttr(func.getSymName() + "_entry");
      entries.push_back(b.getNamedAttr(func.getSymName(), entry));
    }
    module->setAttr("comfyquant.entries", b.getDictionaryAttr(entries));
  }
};

} // namespace
