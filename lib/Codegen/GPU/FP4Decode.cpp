//===- FP4Decode.cpp - exact f16 values of E2M1 codes and UE4M3 scales ----===//
#include "comfyquant/Codegen/GPU/FP4Decode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

Value mlir::comfyquant::decodeFP4Word(OpBuilder &b, Location loc, Value word,
                                      Value scale) {
  auto i32s = VectorType::get({8}, b.getI32Type());
  auto i16s = VectorType::get({8}, b.getI16Type());
  auto f16s = VectorType::get({8}, b.getF16Type());
  auto splat = [&](VectorType t, Attribute v) -> Value {
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(t, v));
  };
  SmallVector<int32_t> shifts;
  for (int32_t e = 0; e < 8; ++e)
    shifts.push_back(4 * e);
  Value words = vector::BroadcastOp::create(b, loc, i32s, word);
  Value shifted = arith::ShRUIOp::create(
      b, loc, words,
      arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(i32s, ArrayRef(shifts))));
  Value codes = arith::TruncIOp::create(b, loc, i16s, shifted);
  Value magnitude = arith::AndIOp::create(
      b, loc, codes, splat(i16s, b.getI16IntegerAttr(0x7)));
  Value placed = arith::ShLIOp::create(b, loc, magnitude,
                                       splat(i16s, b.getI16IntegerAttr(9)));
  Value sign = arith::AndIOp::create(b, loc, codes,
                                     splat(i16s, b.getI16IntegerAttr(0x8)));
  Value signHigh =
      arith::ShLIOp::create(b, loc, sign, splat(i16s, b.getI16IntegerAttr(12)));
  Value bits = arith::OrIOp::create(b, loc, signHigh, placed);
  Value small = arith::BitcastOp::create(b, loc, f16s, bits);
  Value scales = vector::BroadcastOp::create(b, loc, f16s, scale);
  Value scaled = arith::MulFOp::create(b, loc, small, scales);
  return arith::MulFOp::create(b, loc, scaled,
                               splat(f16s, b.getF16FloatAttr(16384.0f)));
}

Value mlir::comfyquant::ue4m3ToF16(OpBuilder &b, Location loc, Value byte) {
  Type i16 = b.getI16Type();
  auto c16 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, i16, v);
  };
  Value wide = arith::ExtUIOp::create(b, loc, i16, byte);
  Value magnitude = arith::AndIOp::create(b, loc, wide, c16(0x7F));
  Value placed = arith::ShLIOp::create(b, loc, magnitude, c16(7));
  Value small = arith::BitcastOp::create(b, loc, b.getF16Type(), placed);
  Value value = arith::MulFOp::create(
      b, loc, small,
      arith::ConstantOp::create(b, loc, b.getF16FloatAttr(256.0f)));
  Value isNaN = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      magnitude, c16(0x7F));
  Value nan = arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(b.getF16Type(), APFloat::getQNaN(APFloat::IEEEhalf())));
  return arith::SelectOp::create(b, loc, isNaN, nan, value);
}
