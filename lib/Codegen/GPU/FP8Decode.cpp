//===- FP8Decode.cpp - exact f16 values of FP8 codes ----------------------===//
#include "comfyquant/Codegen/GPU/FP8Decode.h"
#include "comfyquant/Codegen/GPU/BytePermute.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

Value mlir::comfyquant::decodeFP8Word(OpBuilder &b, Location loc, Value word,
                                      Type fp8) {
  Type i32 = b.getI32Type();
  auto c = [&](uint32_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, i32, static_cast<int32_t>(v));
  };
  auto f16s = VectorType::get({4}, b.getF16Type());
  auto pairsOf = [&](Value lo, Value hi, const uint32_t (&selectors)[2]) {
    SmallVector<Value> pairs;
    for (uint32_t selector : selectors)
      pairs.push_back(permuteBytes(b, loc, lo, hi, c(selector)));
    Value packed = vector::FromElementsOp::create(
        b, loc, VectorType::get({2}, i32), pairs);
    return vector::BitCastOp::create(b, loc, f16s, packed).getResult();
  };
  if (isa<Float8E5M2Type>(fp8)) {
    // Bytes [0, x0, 0, x1] and [0, x2, 0, x3]; bytes 4..7 are zero's.
    Value zero = c(0);
    return pairsOf(zero, word, {0x5040, 0x7060});
  }
  Value magnitudes = arith::AndIOp::create(b, loc, word, c(0x7F7F7F7F));
  Value bumped = arith::AddIOp::create(b, loc, magnitudes, c(0x01010101));
  Value nanFlags = arith::AndIOp::create(b, loc, bumped, c(0x80808080u));
  Value flagged = arith::OrIOp::create(b, loc, magnitudes, nanFlags);
  // High bytes: sign | NaN flag >> 1 | magnitude >> 1 (the shift's bit
  // from the next byte masked off).
  Value signs = arith::AndIOp::create(b, loc, word, c(0x80808080u));
  Value halved = arith::ShRUIOp::create(b, loc, flagged, c(1));
  Value halvedBytes = arith::AndIOp::create(b, loc, halved, c(0x7F7F7F7F));
  Value high = arith::OrIOp::create(b, loc, signs, halvedBytes);
  // Low bytes: the magnitude's last bit at bit 7.
  Value shifted = arith::ShLIOp::create(b, loc, magnitudes, c(7));
  Value low = arith::AndIOp::create(b, loc, shifted, c(0x80808080u));
  // Pairs [low0, high0, low1, high1] and [low2, high2, low3, high3].
  Value values = pairsOf(low, high, {0x5140, 0x7362});
  Value rebias = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f16s, b.getF16FloatAttr(256.0f)));
  return arith::MulFOp::create(b, loc, values, rebias);
}
