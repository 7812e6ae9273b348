//===- TabulateDecoders.cpp - f32 functions of nibbles as table lookups ---===//
//
// A 4-bit code has 16 values, so any f32 computed from it alone is one of
// 16 constants: a lookup in a register (vpermps) instead of the masks,
// shifts, conversions and scale of a decode, per element.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Codegen/Common/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUTABULATEDECODERS
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;

namespace {

constexpr uint64_t kCodes = 16;

/// An upper bound of `v`, an unsigned integer of at most 64 bits, from the
/// ops that define it (the range analysis a nibble needs: masks, shifts,
/// extensions, truncations and selects); none when nothing is known.
std::optional<uint64_t> unsignedBound(Value v, unsigned depth = 0) {
  auto type = dyn_cast<IntegerType>(v.getType());
  if (!type || type.getWidth() > 64 || depth > 8)
    return std::nullopt;
  const unsigned width = type.getWidth();
  const uint64_t all = width == 64 ? ~0ull : (1ull << width) - 1;
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return c.getZExtValue();
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto bound = [&](Value w) { return unsignedBound(w, depth + 1); };
  if (auto andOp = dyn_cast<arith::AndIOp>(def)) {
    std::optional<uint64_t> l = bound(andOp.getLhs()),
                            r = bound(andOp.getRhs());
    if (l && r)
      return std::min(*l, *r);
    return l ? l : r;
  }
  if (auto shr = dyn_cast<arith::ShRUIOp>(def)) {
    APInt s;
    if (!matchPattern(shr.getRhs(), m_ConstantInt(&s)) || s.uge(width))
      return std::nullopt;
    return bound(shr.getLhs()).value_or(all) >> s.getZExtValue();
  }
  if (auto ext = dyn_cast<arith::ExtUIOp>(def)) {
    auto inType = cast<IntegerType>(ext.getIn().getType());
    uint64_t inAll = (1ull << inType.getWidth()) - 1;
    return bound(ext.getIn()).value_or(inAll);
  }
  if (auto trunc = dyn_cast<arith::TruncIOp>(def)) {
    std::optional<uint64_t> in = bound(trunc.getIn());
    if (in && *in <= all)
      return in;
    return all;
  }
  if (auto rem = dyn_cast<arith::RemUIOp>(def)) {
    APInt d;
    if (matchPattern(rem.getRhs(), m_ConstantInt(&d)) && !d.isZero() &&
        d.getActiveBits() <= 64)
      return d.getZExtValue() - 1;
    return std::nullopt;
  }
  if (auto select = dyn_cast<arith::SelectOp>(def)) {
    std::optional<uint64_t> t = bound(select.getTrueValue()),
                            f = bound(select.getFalseValue());
    if (t && f)
      return std::max(*t, *f);
    return std::nullopt;
  }
  return std::nullopt;
}

bool isCode(Value v) {
  std::optional<uint64_t> b = unsignedBound(v);
  return b && *b < kCodes;
}

/// Scalar arithmetic that folds at constants (what a decode is made of).
bool isFoldableScalar(Operation *op) {
  return isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) &&
         isPure(op) && op->getNumRegions() == 0 &&
         llvm::none_of(op->getResultTypes(),
                       [](Type t) { return isa<ShapedType>(t); });
}

/// Replaces every f32 function of `code` alone (a chain of two ops or more)
/// by a lookup in a 16-entry constant table.
void tabulate(OpBuilder &b, Block &body, Value code) {
  // The ops computed from `code` and constants alone, in body order.
  llvm::SmallPtrSet<Operation *, 16> derived;
  llvm::DenseMap<Value, unsigned> depth;
  depth[code] = 0;
  for (Operation &op : body.without_terminator()) {
    if (!isFoldableScalar(&op) || op.getNumOperands() == 0)
      continue;
    unsigned d = 0;
    bool reaches = false, alone = true;
    for (Value operand : op.getOperands()) {
      if (auto it = depth.find(operand); it != depth.end()) {
        reaches = true;
        d = std::max(d, it->second + 1);
      } else if (!matchPattern(operand, m_Constant())) {
        alone = false;
      }
    }
    if (!reaches || !alone)
      continue;
    derived.insert(&op);
    for (Value r : op.getResults())
      depth[r] = d;
  }
  // Its f32 results read by anything else.
  SmallVector<Value> outputs;
  for (Operation &op : body.without_terminator()) {
    if (!derived.contains(&op))
      continue;
    for (Value r : op.getResults())
      if (r.getType().isF32() && depth[r] >= 2 &&
          llvm::any_of(r.getUsers(), [&](Operation *user) {
            return !derived.contains(user);
          }))
        outputs.push_back(r);
  }
  for (Value out : outputs) {
    SmallVector<float> table;
    for (uint64_t c = 0; c < kCodes; ++c) {
      auto value =
          dyn_cast_or_null<FloatAttr>(mlir::comfyquant::detail::foldSliceAt(
              body, code, b.getIntegerAttr(code.getType(), c), out));
      if (!value)
        break;
      table.push_back(value.getValue().convertToFloat());
    }
    if (table.size() != kCodes)
      continue;
    b.setInsertionPointAfterValue(out);
    Location loc = out.getLoc();
    auto type = RankedTensorType::get({int64_t(kCodes)}, b.getF32Type());
    Value constants = arith::ConstantOp::create(
        b, loc, type, DenseElementsAttr::get(type, ArrayRef<float>(table)));
    // An i32 index, the form the table lowering permutes by.
    Value index32 = code;
    unsigned width = code.getType().getIntOrFloatBitWidth();
    if (width < 32)
      index32 = arith::ExtUIOp::create(b, loc, b.getI32Type(), code);
    else if (width > 32)
      index32 = arith::TruncIOp::create(b, loc, b.getI32Type(), code);
    Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), index32);
    Value lookup = tensor::ExtractOp::create(b, loc, constants, index);
    out.replaceUsesWithIf(lookup, [&](OpOperand &use) {
      return !derived.contains(use.getOwner());
    });
  }
}

struct TabulateDecodersPass
    : mlir::comfyquant::impl::ComfyQuantCPUTabulateDecodersBase<
          TabulateDecodersPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    getOperation().walk([&](linalg::GenericOp op) {
      // A GEMM's body is matched as it is (its decode is part of the
      // pattern); only elementwise ops are rewritten.
      if (op.getNumReductionLoops() != 0 || !op.hasPureTensorSemantics())
        return;
      Block &body = op.getRegion().front();
      SmallVector<Value> codes;
      for (BlockArgument arg : body.getArguments())
        if (isCode(arg))
          codes.push_back(arg);
      for (Operation &o : body.without_terminator())
        for (Value r : o.getResults())
          if (isCode(r) && !matchPattern(r, m_Constant()))
            codes.push_back(r);
      // The first code of a chain (e.g. the nibble before its widening)
      // takes the longest chain; the later ones then find nothing left.
      for (Value code : codes)
        tabulate(b, body, code);
    });
  }
};

} // namespace
