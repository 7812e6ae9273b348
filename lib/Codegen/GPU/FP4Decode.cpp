//===- FP4Decode.cpp - exact f16 values of E2M1 codes and UE4M3 scales ----===//
#include "comfyquant/Codegen/GPU/FP4Decode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;

Value mlir::comfyquant::decodeFP4Word(OpBuilder &b, Location loc, Value word,
                                      Value scale) {
  auto i32s = VectorType::get({8}, b.getI32Type());
  auto i16s = VectorType::get({8}, b.getI16Type());
  auto f16s = VectorType::get({8}, b.getF16Type());
  auto splat = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(i16s, b.getI16IntegerAttr(v)));
  };
  SmallVector<int32_t> shifts;
  for (int32_t e = 0; e < 8; ++e)
    shifts.push_back(4 * e);
  Value words = vector::BroadcastOp::create(b, loc, i32s, word);
  Value shiftBy = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(i32s, ArrayRef(shifts)));
  Value shifted = arith::ShRUIOp::create(b, loc, words, shiftBy);
  Value codes = arith::TruncIOp::create(b, loc, i16s, shifted);
  // Magnitude m (bits 0-2): 0, 0.5, then 2^(m/2 - 1) * (1 + (m % 2) / 2),
  // whose f16 bits are (m << 9) + 0x3800 for m >= 2.
  Value magnitude = arith::AndIOp::create(b, loc, codes, splat(0x7));
  Value placed = arith::ShLIOp::create(b, loc, magnitude, splat(9));
  Value normal = arith::AddIOp::create(b, loc, placed, splat(0x3800));
  Value isHalf = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       magnitude, splat(1));
  Value withHalf =
      arith::SelectOp::create(b, loc, isHalf, splat(0x3800), normal);
  Value isZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       magnitude, splat(0));
  Value unsignedBits =
      arith::SelectOp::create(b, loc, isZero, splat(0), withHalf);
  Value signBit = arith::AndIOp::create(b, loc, codes, splat(0x8));
  Value sign = arith::ShLIOp::create(b, loc, signBit, splat(12));
  Value bits = arith::OrIOp::create(b, loc, sign, unsignedBits);
  Value values = arith::BitcastOp::create(b, loc, f16s, bits);
  Value scales = vector::BroadcastOp::create(b, loc, f16s, scale);
  return arith::MulFOp::create(b, loc, values, scales);
}

Value mlir::comfyquant::ue4m3ToF16(OpBuilder &b, Location loc, Value byte) {
  Type i16 = b.getI16Type(), f16 = b.getF16Type();
  auto c16 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, i16, v);
  };
  Value wide = arith::ExtUIOp::create(b, loc, i16, byte);
  Value magnitude = arith::AndIOp::create(b, loc, wide, c16(0x7F));
  // Normal (exponent e >= 1): f16 exponent e - 7 + 15, the mantissa below
  // it, i.e. the 7 bits shifted by 7 plus 8 << 10.
  Value placed = arith::ShLIOp::create(b, loc, magnitude, c16(7));
  Value normalBits = arith::AddIOp::create(b, loc, placed, c16(0x2000));
  Value normal = arith::BitcastOp::create(b, loc, f16, normalBits);
  // Subnormal (e = 0): m * 2^-9, a normal f16.
  Value mantissa = arith::AndIOp::create(b, loc, magnitude, c16(0x7));
  Value count = arith::UIToFPOp::create(b, loc, f16, mantissa);
  Value quantum = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(f16, std::ldexp(1.0, -9)));
  Value subnormal = arith::MulFOp::create(b, loc, count, quantum);
  Value isSubnormal = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                            magnitude, c16(0x8));
  Value value = arith::SelectOp::create(b, loc, isSubnormal, subnormal, normal);
  Value isNaN = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      magnitude, c16(0x7F));
  Value nan = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(f16, APFloat::getQNaN(APFloat::IEEEhalf())));
  return arith::SelectOp::create(b, loc, isNaN, nan, value);
}
