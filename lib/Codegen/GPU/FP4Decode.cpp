//===- FP4Decode.cpp - exact f16 values of E2M1 codes and UE4M3 scales ----===//
#include "comfyquant/Codegen/GPU/FP4Decode.h"
#include "comfyquant/Codegen/GPU/BytePermute.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;

Value mlir::comfyquant::decodeFP4Word(OpBuilder &b, Location loc, Value word,
                                      Value scale) {
  Type i32 = b.getI32Type();
  auto c = [&](uint32_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, i32, static_cast<int32_t>(v));
  };
  // Every E2M1 value is an f16 whose low byte is zero: its high byte is
  // looked up by the code's magnitude m (0, 0.5, 1, 1.5, 2, 3, 4, 6 are
  // 0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46) in an 8-byte table,
  // four codes at once (their nibbles are the permute's selector), and
  // the sign bits select 0x00 or 0x80 the same way.
  Value tableLo = c(0x3E3C3800), tableHi = c(0x46444240);
  Value signs = c(0x8000), zero = c(0);
  SmallVector<Value> pairs;
  for (int64_t half = 0; half < 2; ++half) {
    Value codes = half ? arith::ShRUIOp::create(b, loc, word, c(16)).getResult()
                       : word;
    Value magnitudes = arith::AndIOp::create(b, loc, codes, c(0x7777));
    Value highBytes = permuteBytes(b, loc, tableLo, tableHi, magnitudes);
    Value signBits = arith::ShRUIOp::create(b, loc, codes, c(3));
    Value signSelector = arith::AndIOp::create(b, loc, signBits, c(0x1111));
    Value signBytes = permuteBytes(b, loc, signs, zero, signSelector);
    Value bytes = arith::OrIOp::create(b, loc, highBytes, signBytes);
    // Bytes [0, v0, 0, v1] and [0, v2, 0, v3]: two f16 pairs.
    pairs.push_back(permuteBytes(b, loc, bytes, zero, c(0x1404)));
    pairs.push_back(permuteBytes(b, loc, bytes, zero, c(0x3424)));
  }
  Value packed = vector::FromElementsOp::create(
      b, loc, VectorType::get({4}, i32), pairs);
  auto f16s = VectorType::get({8}, b.getF16Type());
  Value values = vector::BitCastOp::create(b, loc, f16s, packed);
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

Value mlir::comfyquant::packE2M1Word(OpBuilder &b, Location loc,
                                     ArrayRef<Value> codes) {
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i32, v).getResult();
  };
  Value word = c32(0);
  for (auto [e, code] : llvm::enumerate(codes)) {
    Value wide = arith::ExtUIOp::create(b, loc, i32, code);
    Value nibble = arith::AndIOp::create(b, loc, wide, c32(0xF));
    Value placed = arith::ShLIOp::create(b, loc, nibble, c32(4 * e));
    word = arith::OrIOp::create(b, loc, word, placed);
  }
  return word;
}
