//===- BytePermute.cpp - PTX prmt.b32 in the decoders ---------------------===//
#include "comfyquant/Codegen/GPU/BytePermute.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

uint32_t mlir::comfyquant::permuteBytes(uint32_t lo, uint32_t hi,
                                        uint32_t selector) {
  uint64_t pool = uint64_t(hi) << 32 | lo;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t nibble = (selector >> (4 * i)) & 0xF;
    uint32_t byte = (pool >> (8 * (nibble & 7))) & 0xFF;
    if (nibble & 8)
      byte = byte & 0x80 ? 0xFF : 0x00;
    out |= byte << (8 * i);
  }
  return out;
}

Value mlir::comfyquant::permuteBytes(OpBuilder &b, Location loc, Value lo,
                                     Value hi, Value selector) {
  return NVVM::PermuteOp::create(b, loc, b.getI32Type(), lo, hi, selector,
                                 NVVM::PermuteMode::DEFAULT);
}

namespace {

struct FoldConstantPermute : OpRewritePattern<NVVM::PermuteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NVVM::PermuteOp op,
                                PatternRewriter &rewriter) const override {
    APInt lo, hi(32, 0), selector;
    if (op.getMode() != NVVM::PermuteMode::DEFAULT ||
        !matchPattern(op.getLo(), m_ConstantInt(&lo)) ||
        (op.getHi() && !matchPattern(op.getHi(), m_ConstantInt(&hi))) ||
        !matchPattern(op.getSelector(), m_ConstantInt(&selector)))
      return failure();
    uint32_t value = mlir::comfyquant::permuteBytes(
        static_cast<uint32_t>(lo.getZExtValue()),
        static_cast<uint32_t>(hi.getZExtValue()),
        static_cast<uint32_t>(selector.getZExtValue()));
    rewriter.replaceOpWithNewOp<arith::ConstantIntOp>(
        op, op.getType(), static_cast<int32_t>(value));
    return success();
  }
};

/// A bitcast of a constant vector: the elements' bits laid end to end,
/// the first element lowest, and cut at the result's element width.
struct FoldConstantBitCast : OpRewritePattern<vector::BitCastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::BitCastOp op,
                                PatternRewriter &rewriter) const override {
    DenseElementsAttr source;
    if (!matchPattern(op.getSource(), m_Constant(&source)))
      return failure();
    VectorType type = op.getResultVectorType();
    Type elt = type.getElementType();
    unsigned width = elt.getIntOrFloatBitWidth();
    unsigned sourceWidth =
        source.getElementType().getIntOrFloatBitWidth();
    APInt all(sourceWidth * source.getNumElements(), 0);
    unsigned at = 0;
    for (Attribute a : source.getValues<Attribute>()) {
      APInt bits = isa<FloatAttr>(a)
                       ? cast<FloatAttr>(a).getValue().bitcastToAPInt()
                       : cast<IntegerAttr>(a).getValue();
      all.insertBits(bits, at);
      at += sourceWidth;
    }
    SmallVector<Attribute> values;
    for (int64_t i = 0; i < type.getNumElements(); ++i) {
      APInt bits = all.extractBits(width, i * width);
      if (auto f = dyn_cast<FloatType>(elt))
        values.push_back(
            rewriter.getFloatAttr(f, APFloat(f.getFloatSemantics(), bits)));
      else
        values.push_back(rewriter.getIntegerAttr(elt, bits));
    }
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, DenseElementsAttr::get(type, values));
    return success();
  }
};

} // namespace

void mlir::comfyquant::populateDecoderFoldPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FoldConstantPermute, FoldConstantBitCast>(
      patterns.getContext());
}
