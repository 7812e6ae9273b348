//===- NibblePlanes.cpp - B's decoder one nibble plane at a time ---------===//
#include "NibblePlanes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <optional>

using namespace mlir;

namespace {

/// The K index's use `op` as (divisor, isRemainder): an unsigned division
/// or remainder by a constant; none for any other use.
std::optional<std::pair<int64_t, bool>> kUse(Operation *op, Value k) {
  if (!isa<arith::DivUIOp, arith::RemUIOp>(op) || op->getOperand(0) != k)
    return std::nullopt;
  APInt d;
  if (!matchPattern(op->getOperand(1), m_ConstantInt(&d)) || d.isZero() ||
      d.getBitWidth() > 64)
    return std::nullopt;
  return std::make_pair(static_cast<int64_t>(d.getZExtValue()),
                        isa<arith::RemUIOp>(op));
}

/// The constant i8 table `v` reads (a tensor.extract of a constant
/// 1-D tensor), if it is one.
DenseIntElementsAttr constantTableRead(Value v) {
  auto read = v.getDefiningOp<tensor::ExtractOp>();
  DenseIntElementsAttr table;
  if (!read || read.getIndices().size() != 1 ||
      !matchPattern(read.getTensor(), m_Constant(&table)) ||
      !table.getElementType().isInteger(8))
    return {};
  return table;
}

/// `v` + `bias` in i8 (modulo 256), built at `b`: a constant table read
/// reads the biased table, and becomes an xor of its index where that is
/// what the biased table holds.
Value addBias(OpBuilder &b, Location loc, Value v, int64_t bias) {
  if (bias == 0)
    return v;
  DenseIntElementsAttr table = constantTableRead(v);
  if (!table) {
    Value c = arith::ConstantOp::create(
        b, loc, b.getIntegerAttr(b.getI8Type(), static_cast<int8_t>(bias)));
    return arith::AddIOp::create(b, loc, v, c);
  }
  auto read = v.getDefiningOp<tensor::ExtractOp>();
  SmallVector<APInt> biased;
  for (const APInt &e : table.getValues<APInt>())
    biased.push_back(e + APInt(8, static_cast<uint64_t>(bias) & 0xFF));
  bool xorOfIndex = biased.size() <= 256;
  for (size_t i = 0; xorOfIndex && i < biased.size(); ++i)
    xorOfIndex = biased[i].getZExtValue() ==
                 ((i ^ biased[0].getZExtValue()) & 0xFF);
  Value index = read.getIndices()[0];
  if (xorOfIndex) {
    Value byte = arith::IndexCastUIOp::create(b, loc, b.getI8Type(), index);
    Value c = arith::ConstantOp::create(
        b, loc, b.getIntegerAttr(b.getI8Type(), biased[0].getZExtValue()));
    return arith::XOrIOp::create(b, loc, byte, c);
  }
  auto attr = DenseIntElementsAttr::get(table.getType(), biased);
  Value folded = arith::ConstantOp::create(b, loc, attr);
  return tensor::ExtractOp::create(b, loc, folded, ValueRange{index});
}

} // namespace

int64_t mlir::comfyquant::detail::nibblePlaneBias(linalg::GenericOp producer) {
  Value yielded = producer.getBody()->getTerminator()->getOperand(0);
  DenseIntElementsAttr table = constantTableRead(yielded);
  if (!table || table.empty())
    return 128;
  int64_t least = 127;
  for (const APInt &e : table.getValues<APInt>())
    least = std::min<int64_t>(least, e.getSExtValue());
  return -least;
}

bool mlir::comfyquant::detail::decodesNibblePlanes(linalg::GenericOp producer,
                                                   int64_t kv) {
  if (!producer || producer.getNumDpsInputs() != 0 ||
      producer.getNumResults() != 1 || producer.getNumLoops() != 2 ||
      producer.getNumReductionLoops() != 0 || kv <= 0 ||
      !producer.getIndexingMapsArray()[0].isIdentity())
    return false;
  Block *body = producer.getBody();
  bool halves = false;
  for (Operation &op : body->without_terminator()) {
    auto index = dyn_cast<linalg::IndexOp>(op);
    if (!index || index.getDim() != 1)
      continue;
    for (Operation *user : index->getUsers()) {
      std::optional<std::pair<int64_t, bool>> use =
          kUse(user, index.getResult());
      if (!use || user->getBlock() != body)
        return false;
      auto [d, remainder] = *use;
      if (remainder ? d != 2 : d != 2 && d % (2 * kv) != 0)
        return false;
      halves |= !remainder && d == 2;
    }
  }
  return halves;
}

Value mlir::comfyquant::detail::nibblePlane(OpBuilder &b, Location loc,
                                            linalg::GenericOp producer,
                                            Value n, Value half,
                                            int64_t parity, int64_t width,
                                            int64_t bias) {
  Type elt = producer.getResultTypes()[0];
  elt = cast<RankedTensorType>(elt).getElementType();
  Value init =
      tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{1, width}, elt);
  AffineMap identity = b.getMultiDimIdentityMap(2);
  SmallVector<utils::IteratorType> parallel(2, utils::IteratorType::parallel);
  auto plane = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{}, ValueRange{init},
      ArrayRef<AffineMap>{identity}, parallel,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Block *body = producer.getBody();
        IRMapping map;
        map.map(body->getArgument(0), args[0]);
        Value i = linalg::IndexOp::create(nb, l, 1);
        Value halfK = arith::AddIOp::create(nb, l, half, i);
        for (Operation &op : body->without_terminator()) {
          if (auto index = dyn_cast<linalg::IndexOp>(op)) {
            if (index.getDim() == 0)
              map.map(index.getResult(), n);
            continue;
          }
          std::optional<std::pair<int64_t, bool>> use;
          for (Value operand : op.getOperands())
            if (auto index = operand.getDefiningOp<linalg::IndexOp>();
                index && index.getDim() == 1 &&
                index->getBlock() == body)
              use = kUse(&op, operand);
          if (use) {
            auto [d, remainder] = *use;
            Value v;
            if (remainder)
              v = arith::ConstantIndexOp::create(nb, l, parity);
            else if (d == 2)
              v = halfK;
            else
              v = arith::DivUIOp::create(
                  nb, l, halfK, arith::ConstantIndexOp::create(nb, l, d / 2));
            map.map(op.getResult(0), v);
            continue;
          }
          nb.clone(op, map);
        }
        Value yielded =
            map.lookupOrDefault(body->getTerminator()->getOperand(0));
        linalg::YieldOp::create(nb, l, addBias(nb, l, yielded, bias));
      });
  return plane.getResult(0);
}
