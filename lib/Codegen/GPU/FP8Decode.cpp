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
  Value zero = c(0);
  // Bytes [0, x0, 0, x1] (selector 0x1404) and [0, x2, 0, x3] (0x3424);
  // bytes 4..7 of the pool are the zero operand's.
  const uint32_t selectors[2] = {0x1404, 0x3424};
  bool e4m3 = !isa<Float8E5M2Type>(fp8);
  Value nanBytes;
  if (e4m3) {
    Value magnitudes = arith::AndIOp::create(b, loc, word, c(0x7F7F7F7F));
    Value bumped = arith::AddIOp::create(b, loc, magnitudes, c(0x01010101));
    Value nanTops = arith::AndIOp::create(b, loc, bumped, c(0x80808080u));
    Value low = arith::ShRUIOp::create(b, loc, nanTops, c(6));
    nanBytes = arith::SubIOp::create(b, loc, nanTops, low);
  }
  SmallVector<Value> pairs;
  for (uint32_t selector : selectors) {
    Value h = permuteBytes(b, loc, word, zero, c(selector));
    if (e4m3) {
      Value shifted = arith::ShRUIOp::create(b, loc, h, c(1));
      Value magnitude = arith::AndIOp::create(b, loc, shifted, c(0x3F803F80));
      Value sign = arith::AndIOp::create(b, loc, h, c(0x80008000u));
      Value bits = arith::OrIOp::create(b, loc, sign, magnitude);
      Value nan = permuteBytes(b, loc, nanBytes, zero, c(selector));
      h = arith::OrIOp::create(b, loc, bits, nan);
    }
    pairs.push_back(h);
  }
  Value packed =
      vector::FromElementsOp::create(b, loc, VectorType::get({2}, i32), pairs);
  auto f16s = VectorType::get({4}, b.getF16Type());
  Value values = vector::BitCastOp::create(b, loc, f16s, packed);
  if (!e4m3)
    return values;
  Value rebias = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f16s, b.getF16FloatAttr(256.0f)));
  return arith::MulFOp::create(b, loc, values, rebias);
}
