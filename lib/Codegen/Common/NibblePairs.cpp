//===- NibblePairs.cpp - packed nibbles to byte pairs in 16-bit lanes -----===//
//
// A packed 4-bit operand (NVFP4 E2M1 codes, signed int4, W4A8 levels) is
// read as bytes, each holding the nibbles of two adjacent K elements. The
// lane-affine load of `flat[k / 2]` repeats every byte into two lanes and
// the nibble select keeps the low or the high half per lane. On x86 the
// repetition crosses 128-bit lanes (a lane shuffle plus a byte shuffle) and
// the select is a blend; widening each byte to a 16-bit lane instead puts
// both nibbles of byte j in lane j, and two bit operations move them to the
// two bytes of that lane in K order.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/NibblePairs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace {

/// Whether `v` is a splat integer constant equal to `value`.
bool isSplat(Value v, int64_t value) {
  APInt splat;
  return matchPattern(v, m_ConstantInt(&splat)) &&
         splat.getSExtValue() == value;
}

/// `v` without a zero extension.
Value narrowed(Value v) {
  if (auto ext = v.getDefiningOp<arith::ExtUIOp>())
    return ext.getIn();
  return v;
}

/// s for `s & 15`.
Value lowNibbleOf(Value v) {
  auto mask = v.getDefiningOp<arith::AndIOp>();
  if (!mask || !isSplat(mask.getRhs(), 15))
    return {};
  return mask.getLhs();
}

/// s for `(s >> 4) & 15` or `s >> 4` (s is a byte, or one zero-extended:
/// the caller checks, so a shift by four leaves a nibble).
Value highNibbleOf(Value v) {
  if (auto mask = v.getDefiningOp<arith::AndIOp>()) {
    if (!isSplat(mask.getRhs(), 15))
      return {};
    v = mask.getLhs();
  }
  auto shift = v.getDefiningOp<arith::ShRUIOp>();
  if (!shift || !isSplat(shift.getRhs(), 4))
    return {};
  return shift.getLhs();
}

/// x for `shuffle(x, x, [0, 0, 1, 1, ...])` of an i8 vector.
Value repeatedBytes(Value s) {
  auto shuffle = s.getDefiningOp<vector::ShuffleOp>();
  if (!shuffle || shuffle.getV1() != shuffle.getV2())
    return {};
  auto in = cast<VectorType>(shuffle.getV1().getType());
  if (in.getRank() != 1 || !in.getElementType().isInteger(8))
    return {};
  ArrayRef<int64_t> mask = shuffle.getMask();
  if (static_cast<int64_t>(mask.size()) != 2 * in.getNumElements())
    return {};
  for (auto [i, m] : llvm::enumerate(mask))
    if (m != static_cast<int64_t>(i) / 2)
      return {};
  return shuffle.getV1();
}

} // namespace

std::optional<mlir::comfyquant::NibblePair>
mlir::comfyquant::matchNibblePair(arith::SelectOp sel) {
  auto type = dyn_cast<VectorType>(sel.getType());
  if (!type || type.getRank() != 1 || type.isScalable() ||
      !isa<IntegerType>(type.getElementType()))
    return std::nullopt;
  DenseElementsAttr cond;
  if (!matchPattern(sel.getCondition(), m_Constant(&cond)))
    return std::nullopt;
  SmallVector<bool> lanes(cond.getValues<bool>());
  const int64_t n = lanes.size();
  if (n < 2 || n % 2 != 0)
    return std::nullopt;
  for (int64_t i = 0; i < n; ++i)
    if (lanes[i] != (lanes[0] == (i % 2 == 0)))
      return std::nullopt;
  // The values of the even (first) and odd (second) lanes of each pair.
  Value even = narrowed(lanes[0] ? sel.getTrueValue() : sel.getFalseValue());
  Value odd = narrowed(lanes[0] ? sel.getFalseValue() : sel.getTrueValue());
  if (even.getType() != odd.getType())
    return std::nullopt;
  bool lowFirst;
  Value s;
  if (Value a = lowNibbleOf(even); a && a == highNibbleOf(odd)) {
    lowFirst = true;
    s = a;
  } else if (Value b = highNibbleOf(even); b && b == lowNibbleOf(odd)) {
    lowFirst = false;
    s = b;
  } else {
    return std::nullopt;
  }
  // The nibbles may be taken from the repeated bytes or from their zero
  // extension.
  Value x = repeatedBytes(narrowed(s));
  if (!x)
    return std::nullopt;
  return NibblePair{x, lowFirst};
}

namespace {

struct NibblePairsToWords : OpRewritePattern<arith::SelectOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::SelectOp sel,
                                PatternRewriter &rw) const override {
    std::optional<mlir::comfyquant::NibblePair> pair =
        mlir::comfyquant::matchNibblePair(sel);
    if (!pair)
      return failure();
    auto type = cast<VectorType>(sel.getType());
    const int64_t n = type.getNumElements();
    Value x = pair->bytes;
    const bool lowFirst = pair->lowFirst;

    Location loc = sel.getLoc();
    auto bytes = cast<VectorType>(x.getType());
    auto words = VectorType::get({bytes.getNumElements()}, rw.getI16Type());
    auto splat = [&](int64_t v) -> Value {
      return arith::ConstantOp::create(
          rw, loc, words,
          DenseElementsAttr::get(words, rw.getIntegerAttr(rw.getI16Type(), v)));
    };
    Value w = arith::ExtUIOp::create(rw, loc, words, x);
    Value nibbles;
    if (lowFirst) {
      Value four = splat(4);
      Value up = arith::ShLIOp::create(rw, loc, w, four);
      nibbles = arith::OrIOp::create(rw, loc, w, up);
    } else {
      Value four = splat(4);
      Value eight = splat(8);
      Value down = arith::ShRUIOp::create(rw, loc, w, four);
      Value up = arith::ShLIOp::create(rw, loc, w, eight);
      nibbles = arith::OrIOp::create(rw, loc, down, up);
    }
    Value mask = splat(0x0F0F);
    nibbles = arith::AndIOp::create(rw, loc, nibbles, mask);
    auto byteType = VectorType::get({n}, rw.getI8Type());
    Value result = vector::BitCastOp::create(rw, loc, byteType, nibbles);
    if (type.getElementType() != rw.getI8Type())
      result = arith::ExtUIOp::create(rw, loc, type, result);
    rw.replaceOp(sel, result);
    return success();
  }
};

} // namespace

void mlir::comfyquant::populateNibblePairPatterns(RewritePatternSet &patterns) {
  patterns.add<NibblePairsToWords>(patterns.getContext());
}
