//===- ComfyQuantToLinalg.cpp - comfyquant -> linalg on tensors -----------===//
//
// The pass and what its pattern sets share: one pattern per computation op
// (rotate, quantize, dequantize, unpack, unswizzle, lookup:
// ElementwiseToLinalg.cpp; qmatmul, qgemm, epilogue: GemmToLinalg.cpp) plus
// the weight -> function argument rewrite. Values whose element type has no
// arithmetic (f8*, f4*, ui8, i4) are carried in a storage type (signless
// integers, sub-byte values in an i8) and cross between lowered ops through
// unrealized casts that fold away (Lowering.h).
//===----------------------------------------------------------------------===//
#include "comfyquant/Conversion/Passes.h"

#include "Emitter.h"
#include "Lowering.h"

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/Numerics.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"

#include <type_traits>

namespace mlir::comfyquant {
#define GEN_PASS_DEF_CONVERTCOMFYQUANTTOLINALG
#include "comfyquant/Conversion/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;
using namespace mlir::comfyquant::lowering;
namespace rt = ::comfyquant::rt;

namespace {

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Tensor arguments of element types without arithmetic (f8*, f4*, ui8,
/// i4) take their storage type; the body sees them through a cast.
void storageTypedArguments(func::FuncOp func) {
  if (func.isExternal())
    return;
  Block &entry = func.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  SmallVector<Type> inputs;
  for (BlockArgument arg : entry.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (t && storageType(t) != t) {
      arg.setType(storageType(t));
      Value v = fromStorage(b, func.getLoc(), arg, t);
      arg.replaceAllUsesExcept(v, v.getDefiningOp());
    }
    inputs.push_back(arg.getType());
  }
  func.setFunctionType(
      FunctionType::get(func.getContext(), inputs,
                        func.getFunctionType().getResults()));
}

struct ConvertComfyQuantToLinalgPass
    : mlir::comfyquant::impl::ConvertComfyQuantToLinalgBase<ConvertComfyQuantToLinalgPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (failed(convertWeightsToArguments(func)))
        return signalPassFailure();
      storageTypedArguments(func);
    }
    RewritePatternSet patterns(&getContext());
    populateComfyQuantToLinalgPatterns(patterns, gemmOperands, rotatedQuantize);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    // Casts between storage and original types fold in pairs; one left over
    // means a comfyquant value reached an op this pass does not lower.
    WalkResult res = module.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<CheckpointOp, TensorOp, AttentionOp, LinearOp, EmbeddingOp,
              MoEOp>(op))
        return WalkResult::skip();
      if (op->getDialect() && isa<ComfyQuantDialect>(op->getDialect())) {
        op->emitOpError("was not lowered to linalg");
        return WalkResult::interrupt();
      }
      // A storage value may leave a function in its declared type.
      auto cast = dyn_cast<UnrealizedConversionCastOp>(op);
      if (cast && !llvm::all_of(cast->getUsers(), [](Operation *u) {
            return isa<func::ReturnOp>(u);
          })) {
        cast.emitOpError("storage-type cast left after lowering (a "
                         "comfyquant value has a consumer that was not "
                         "lowered)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (res.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mlir::comfyquant::populateComfyQuantToLinalgPatterns(
    RewritePatternSet &patterns, GemmOperands operands,
    RotatedQuantize rotated) {
  populateComfyQuantElementwiseToLinalgPatterns(patterns, rotated);
  populateComfyQuantGemmToLinalgPatterns(patterns, operands);
}

//===----------------------------------------------------------------------===//
// Weights -> function arguments
//===----------------------------------------------------------------------===//

LogicalResult mlir::comfyquant::convertWeightsToArguments(func::FuncOp func) {
  // The kernel takes more arguments than the module contract that
  // `comfyquant.module` verifies: keep the record under another name.
  if (Attribute info = func->getAttr(ComfyQuantDialect::getModuleAttrName())) {
    func->removeAttr(ComfyQuantDialect::getModuleAttrName());
    func->setAttr(ComfyQuantDialect::getLoweredModuleAttrName(), info);
  }
  SmallVector<WeightOp> weights;
  func.walk([&](WeightOp w) { weights.push_back(w); });
  if (weights.empty())
    return success();
  if (func.isExternal())
    return func.emitOpError("has weights but no body");
  MLIRContext *ctx = func.getContext();
  Builder b(ctx);
  SymbolTableCollection symbols;
  llvm::DenseMap<Attribute, BlockArgument> argOf;
  SmallVector<Attribute> manifest;
  if (auto existing = func->getAttrOfType<ArrayAttr>(ComfyQuantDialect::getWeightsAttrName()))
    manifest.append(existing.begin(), existing.end());
  for (WeightOp w : weights) {
    auto tensor = symbols.lookupNearestSymbolFrom<TensorOp>(w, w.getTensor());
    if (!tensor)
      return w.emitOpError("references ")
             << w.getTensor() << ", which is not a comfyquant.tensor";
    auto it = argOf.find(w.getTensorAttr());
    BlockArgument arg;
    if (it != argOf.end()) {
      arg = it->second;
    } else {
      RankedTensorType original = tensor.getTensorType();
      std::optional<rt::DType> dtype = getDType(original.getElementType());
      if (!dtype)
        return w.emitOpError("tensor element type has no safetensors dtype");
      SmallVector<NamedAttribute> attrs = {
          b.getNamedAttr("comfyquant.tensor", tensor.getSymNameAttr()),
          b.getNamedAttr("comfyquant.dtype",
                         b.getStringAttr(rt::dtypeName(*dtype))),
          b.getNamedAttr("comfyquant.offset", tensor.getOffsetAttr()),
          b.getNamedAttr("bufferization.writable", b.getBoolAttr(false))};
      if (tensor.getShardAttr())
        attrs.push_back(
            b.getNamedAttr("comfyquant.shard", tensor.getShardAttr()));
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(index, storageType(original),
                                     b.getDictionaryAttr(attrs), w.getLoc())))
        return failure();
      arg = func.getArgument(index);
      argOf[w.getTensorAttr()] = arg;
      SmallVector<NamedAttribute> entry = {
          b.getNamedAttr("tensor", tensor.getSymNameAttr()),
          b.getNamedAttr("dtype", b.getStringAttr(rt::dtypeName(*dtype))),
          b.getNamedAttr("offset", tensor.getOffsetAttr()),
          b.getNamedAttr("shape", b.getI64ArrayAttr(original.getShape())),
          b.getNamedAttr("arg", b.getI64IntegerAttr(index))};
      if (tensor.getShardAttr())
        entry.push_back(b.getNamedAttr("shard", tensor.getShardAttr()));
      manifest.push_back(b.getDictionaryAttr(entry));
    }
    OpBuilder ob(w);
    Value v = fromStorage(ob, w.getLoc(), arg, w.getResult().getType());
    w.getResult().replaceAllUsesWith(v);
    w.erase();
  }
  func->setAttr(ComfyQuantDialect::getWeightsAttrName(), b.getArrayAttr(manifest));
  return success();
}
