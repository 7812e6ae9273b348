//===- ScaleTile.cpp - reading the staged block-scale tiles ---------------===//
#include "comfyquant/Codegen/GPU/ScaleTile.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

Value mlir::comfyquant::loadScaleWord(OpBuilder &b, Location loc, Value tile,
                                      Value row, bool fp4) {
  if (!fp4) {
    Value code = memref::LoadOp::create(b, loc, tile, ValueRange{row});
    return arith::ExtUIOp::create(b, loc, b.getI32Type(), code);
  }
  Value four = arith::ConstantIndexOp::create(b, loc, 4);
  Value first = arith::MulIOp::create(b, loc, row, four);
  Value bytes = vector::LoadOp::create(
      b, loc, VectorType::get({4}, b.getI8Type()), tile, ValueRange{first});
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), bytes);
  return vector::ExtractOp::create(b, loc, word, 0);
}
