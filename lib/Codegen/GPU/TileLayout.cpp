//===- TileLayout.cpp - tensor-core tiles in workgroup memory -------------===//
#include "comfyquant/Codegen/GPU/TileLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

Value mlir::comfyquant::tileByteAddress(OpBuilder &b, Location loc, Value tile,
                                        Value offsetWords) {
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, tile);
  if (!offsetWords)
    return base;
  Value four = arith::ConstantIndexOp::create(b, loc, 4);
  Value bytes = arith::MulIOp::create(b, loc, offsetWords, four);
  return arith::AddIOp::create(b, loc, base, bytes);
}

Value mlir::comfyquant::tileSharedAddress(OpBuilder &b, Location loc,
                                          Value tile, Value offsetWords) {
  Value index = tileByteAddress(b, loc, tile, offsetWords);
  return arith::IndexCastUIOp::create(b, loc, b.getI32Type(), index);
}

Value mlir::comfyquant::tileDescriptor(OpBuilder &b, Location loc, Value tile,
                                       Value offsetWords, int64_t fixedBits) {
  auto i64 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
  };
  Value index = tileByteAddress(b, loc, tile, offsetWords);
  Value address = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
  Value field = arith::AndIOp::create(b, loc, address, i64(0x3FFFF));
  Value start = arith::ShRUIOp::create(b, loc, field, i64(4));
  constexpr int64_t kLeadingByteOffset = 128, kStrideByteOffset = 256;
  constexpr int64_t kOffsets =
      (kLeadingByteOffset >> 4) << 16 | (kStrideByteOffset >> 4) << 32;
  return arith::OrIOp::create(b, loc, start, i64(kOffsets | fixedBits));
}
