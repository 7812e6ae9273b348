//===- TabulateDecoders.cpp - decoders of small codes as table lookups ----===//
//
// A 4-bit code has 16 values, so any f32 computed from it alone is one of
// 16 constants: a lookup in a register (vpermps) instead of the masks,
// shifts, conversions and scale of a decode, per element. An int8 computed
// from a code and a scale byte (the W4A8 / W6A8 grid) is one of 256 x 16
// (or x 64) values: a table built once per call, read one scale row at a
// time by byte shuffles.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Codegen/Common/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"

#include <optional>

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUTABULATEDECODERS
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;

namespace {

constexpr uint64_t kCodes = 16;
/// A scale byte's decode (E8M0: a shift, a bitcast and the selects of code
/// 0 and 255) is worth a 256-entry table only from this many ops: the read
/// is a byte load and a scalar load, where the decode was a chain of scalar
/// ops and mask moves per vector.
constexpr unsigned kMinByteTableOps = 4;

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
  if (auto shl = dyn_cast<arith::ShLIOp>(def)) {
    APInt s;
    std::optional<uint64_t> in = bound(shl.getLhs());
    if (!in || !matchPattern(shl.getRhs(), m_ConstantInt(&s)) || s.uge(width) ||
        llvm::countl_zero(*in) < int(s.getZExtValue()))
      return std::nullopt;
    uint64_t r = *in << s.getZExtValue();
    return r <= all ? std::optional<uint64_t>(r) : std::nullopt;
  }
  if (auto orOp = dyn_cast<arith::OrIOp>(def)) {
    // Every set bit of either side lies below the larger bound's top bit.
    std::optional<uint64_t> l = bound(orOp.getLhs()), r = bound(orOp.getRhs());
    if (!l || !r)
      return std::nullopt;
    uint64_t top = std::max(*l, *r);
    return top == 0 ? 0 : ~0ull >> llvm::countl_zero(top);
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

/// Replaces every f32 function of `code` alone (a chain of two ops or more;
/// with `codes` = 256, of kMinByteTableOps or more) by a lookup in a
/// `codes`-entry constant table.
void tabulate(OpBuilder &b, Block &body, Value code, uint64_t codes = kCodes) {
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
    const unsigned minDepth = codes == kCodes ? 2 : kMinByteTableOps;
    for (Value r : op.getResults())
      if ((r.getType().isF32() ||
           (r.getType().isInteger(8) && codes == kCodes)) &&
          depth[r] >= minDepth &&
          llvm::any_of(r.getUsers(), [&](Operation *user) {
            return !derived.contains(user);
          }))
        outputs.push_back(r);
  }
  for (Value out : outputs) {
    SmallVector<Attribute> table;
    for (uint64_t c = 0; c < codes; ++c) {
      Attribute value = mlir::comfyquant::detail::foldSliceAt(
          body, code,
          b.getIntegerAttr(code.getType(),
                           APInt(code.getType().getIntOrFloatBitWidth(), c)),
          out);
      if (!isa_and_nonnull<FloatAttr, IntegerAttr>(value) ||
          cast<TypedAttr>(value).getType() != out.getType())
        break;
      table.push_back(value);
    }
    if (table.size() != codes)
      continue;
    b.setInsertionPointAfterValue(out);
    Location loc = out.getLoc();
    auto type = RankedTensorType::get({int64_t(codes)}, out.getType());
    Value constants = arith::ConstantOp::create(
        b, loc, type, DenseElementsAttr::get(type, table));
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

//===----------------------------------------------------------------------===//
// Int8 functions of a code and a scale byte -> runtime tables
//===----------------------------------------------------------------------===//

/// Codes of up to six bits (W6A8) index a table row; a row is read as
/// kRowLanes-byte shuffles (pshufb), so it must not change within such a
/// run of lanes along the vectorized (innermost) loop.
constexpr uint64_t kMaxRowCodes = 64;
constexpr int64_t kRowLanes = 16;
/// Fewer ops than this between the inputs and the result: not worth a
/// table.
constexpr unsigned kMinTabulatedOps = 4;

bool definedOutside(Value v, Block &body) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() != &body;
  return v.getDefiningOp()->getBlock() != &body;
}

/// Whether `v`, in the body of `op`, is the same for every aligned run of
/// kRowLanes iterations of the innermost loop: it reads that loop's index
/// only through a division by a multiple of kRowLanes (a group of K).
bool constantOverRuns(linalg::GenericOp op, Value v, unsigned depth = 0) {
  Block &body = op.getRegion().front();
  if (definedOutside(v, body) || matchPattern(v, m_Constant()))
    return true;
  if (depth > 16 || isa<BlockArgument>(v))
    return false;
  Operation *def = v.getDefiningOp();
  const unsigned inner = op.getNumLoops() - 1;
  if (auto index = dyn_cast<linalg::IndexOp>(def))
    return index.getDim() != inner;
  if (auto div = dyn_cast<arith::DivUIOp>(def)) {
    APInt d;
    auto index = div.getLhs().getDefiningOp<linalg::IndexOp>();
    if (index && index.getDim() == inner &&
        matchPattern(div.getRhs(), m_ConstantInt(&d)) &&
        d.getZExtValue() % kRowLanes == 0 && !d.isZero())
      return true;
  }
  if (!isFoldableScalar(def) && !isa<tensor::ExtractOp>(def))
    return false;
  return llvm::all_of(def->getOperands(), [&](Value operand) {
    return constantOverRuns(op, operand, depth + 1);
  });
}

/// The ops of `body` computed from `code` and `byte` (and constants, and
/// tensors and values from outside the body), in body order, with which of
/// the two each reaches (bit 0: code, bit 1: byte); none when one of the
/// two is computed from the other (each must index the table on its own).
std::optional<llvm::MapVector<Operation *, unsigned>>
pairSlice(Block &body, Value code, Value byte) {
  llvm::DenseMap<Value, unsigned> reach;
  reach[code] = 1;
  reach[byte] = 2;
  llvm::MapVector<Operation *, unsigned> slice;
  for (Operation &o : body.without_terminator()) {
    if (!isFoldableScalar(&o) && !isa<tensor::ExtractOp>(&o))
      continue;
    auto extract = dyn_cast<tensor::ExtractOp>(&o);
    if (extract && !definedOutside(extract.getTensor(), body) &&
        !matchPattern(extract.getTensor(), m_Constant()))
      continue;
    unsigned r = 0;
    bool alone = true;
    for (Value operand : o.getOperands()) {
      if (auto it = reach.find(operand); it != reach.end())
        r |= it->second;
      else if (!definedOutside(operand, body) &&
               !matchPattern(operand, m_Constant()))
        alone = false;
    }
    // The table evaluates every byte, including ones the data never holds:
    // a read indexed by the byte could leave its tensor. Reads indexed by
    // the code (a codebook) see only codes within its bound.
    if (extract && (r & 2))
      continue;
    if (o.getNumResults() == 1 &&
        (o.getResult(0) == code || o.getResult(0) == byte)) {
      if (r)
        return std::nullopt;
      continue;
    }
    if (!r || !alone || o.getNumResults() != 1)
      continue;
    slice.insert({&o, r});
    reach[o.getResult(0)] = r;
  }
  return slice;
}

/// Replaces the int8 results computed from one code and one scale byte by
/// reads of a [256, codes] table that a linalg.generic before `op` computes
/// with the same ops, once per call.
void tabulatePairs(OpBuilder &b, linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  SmallVector<Value> codes, bytes;
  for (Operation &o : body.without_terminator()) {
    if (o.getNumResults() != 1 || matchPattern(o.getResult(0), m_Constant()))
      continue;
    Value r = o.getResult(0);
    if (std::optional<uint64_t> bound = unsignedBound(r);
        bound && *bound < kMaxRowCodes)
      codes.push_back(r);
    if (isa<tensor::ExtractOp>(o) && r.getType().isInteger(8) &&
        constantOverRuns(op, r))
      bytes.push_back(r);
  }
  for (Value byte : bytes) {
    for (Value code : codes) {
      if (byte.getParentBlock() != &body || code.getParentBlock() != &body)
        continue;
      std::optional<llvm::MapVector<Operation *, unsigned>> found =
          pairSlice(body, code, byte);
      if (!found)
        continue;
      llvm::MapVector<Operation *, unsigned> &slice = *found;
      // The last value of both that a lookup can return: an int8 (a grid
      // value, read by byte shuffles) or, for 16 codes, an f32 (a scaled
      // level, read by register permutes). Ops after it stay and read the
      // lookup.
      const int64_t rowCodes =
          llvm::alignTo(*unsignedBound(code) + 1, uint64_t(kRowLanes));
      Value out;
      for (auto [o, r] : slice) {
        Value v = o->getResult(0);
        if (r == 3 && (v.getType().isInteger(8) ||
                       (v.getType().isF32() && rowCodes == kRowLanes)))
          out = v;
      }
      if (!out || slice.size() < kMinTabulatedOps)
        continue;
      Location loc = op.getLoc();
      b.setInsertionPoint(op);
      Type elt = out.getType();
      auto type = RankedTensorType::get({256, rowCodes}, elt);
      Value empty = tensor::EmptyOp::create(b, loc, type.getShape(), elt);
      AffineMap id = b.getMultiDimIdentityMap(2);
      SmallVector<utils::IteratorType> parallel(2,
                                                utils::IteratorType::parallel);
      auto table = linalg::GenericOp::create(
          b, loc, TypeRange{type}, ValueRange{}, ValueRange{empty},
          ArrayRef<AffineMap>{id}, parallel,
          [&](OpBuilder &nb, Location l, ValueRange) {
            IRMapping map;
            Value row = linalg::IndexOp::create(nb, l, 0);
            Value column = linalg::IndexOp::create(nb, l, 1);
            // Columns past the code's bound (padding to 16) are never
            // read; they repeat the last code so that a codebook read
            // stays in bounds.
            const uint64_t bound = *unsignedBound(code);
            if (uint64_t(rowCodes) > bound + 1)
              column = arith::MinUIOp::create(
                  nb, l, column, arith::ConstantIndexOp::create(nb, l, bound));
            map.map(byte,
                    arith::IndexCastOp::create(nb, l, nb.getI8Type(), row));
            map.map(code,
                    arith::IndexCastOp::create(nb, l, code.getType(), column));
            for (auto [o, r] : slice) {
              // Constants of the body travel with the ops that use them.
              for (Value operand : o->getOperands())
                if (!map.contains(operand) && !definedOutside(operand, body))
                  if (Operation *c = operand.getDefiningOp())
                    nb.clone(*c, map);
              nb.clone(*o, map);
            }
            linalg::YieldOp::create(nb, l, map.lookup(out));
          });
      b.setInsertionPointAfterValue(out);
      Location outLoc = out.getLoc();
      Value row =
          arith::IndexCastUIOp::create(b, outLoc, b.getIndexType(), byte);
      Value column =
          arith::IndexCastUIOp::create(b, outLoc, b.getIndexType(), code);
      Value lookup = tensor::ExtractOp::create(b, outLoc, table.getResult(0),
                                               ValueRange{row, column});
      out.replaceAllUsesWith(lookup);
      return;
    }
  }
}

struct TabulateDecodersPass
    : mlir::comfyquant::impl::ComfyQuantCPUTabulateDecodersBase<
          TabulateDecodersPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) { generics.push_back(op); });
    for (linalg::GenericOp op : generics) {
      // A GEMM's body is matched as it is (its decode is part of the
      // pattern); only elementwise ops are rewritten.
      if (op.getNumReductionLoops() != 0 || !op.hasPureTensorSemantics())
        continue;
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
      tabulatePairs(b, op);
      // A scale byte's own decode (MXFP8's E8M0) left by the pair tables:
      // one value per 16 lanes, so its lookup is a scalar load.
      SmallVector<Value> bytes;
      for (Operation &o : body.without_terminator())
        if (auto extract = dyn_cast<tensor::ExtractOp>(o);
            extract && extract.getType().isInteger(8) &&
            constantOverRuns(op, extract.getResult()))
          bytes.push_back(extract.getResult());
      for (Value byte : bytes)
        tabulate(b, body, byte, 256);
    }
  }
};

} // namespace
