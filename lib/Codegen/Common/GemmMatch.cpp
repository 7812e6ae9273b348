//===- GemmMatch.cpp - matmul-like linalg.generic ops ---------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;

//===----------------------------------------------------------------------===//
// Evaluating a body value at every code
//===----------------------------------------------------------------------===//

llvm::SmallPtrSet<Operation *, 16>
mlir::comfyquant::detail::bodySlice(linalg::GenericOp op, Value v) {
  Block &body = op.getRegion().front();
  llvm::SmallPtrSet<Operation *, 16> slice;
  SmallVector<Value> work = {v};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != &body || !slice.insert(def).second)
      continue;
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return slice;
}

namespace {
/// extf of a NaN constant: a quiet NaN of the same sign (its payload
/// dropped; hardware conversions keep it, and a NaN is a NaN to every
/// caller here). arith.extf does not fold a signaling NaN (an
/// invalid-operation conversion), which FP8 / f16 NaN codes widen through.
struct ExtendNaN : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rw) const override {
    FloatAttr in;
    auto type = dyn_cast<FloatType>(op.getType());
    if (!type || !matchPattern(op.getIn(), m_Constant(&in)) ||
        !in.getValue().isNaN())
      return failure();
    APFloat nan =
        APFloat::getQNaN(type.getFloatSemantics(), in.getValue().isNegative());
    rw.replaceOpWithNewOp<arith::ConstantOp>(op, type,
                                             rw.getFloatAttr(type, nan));
    return success();
  }
};
} // namespace

Attribute mlir::comfyquant::detail::foldSliceAt(Block &body, Value x,
                                                TypedAttr xValue, Value v) {
  if (v == x ||
      (isa<BlockArgument>(v) && cast<BlockArgument>(v).getOwner() == &body))
    return {};
  // The ops of the body v depends on, not looking past x.
  llvm::SmallPtrSet<Operation *, 16> slice;
  SmallVector<Value> work = {v};
  while (!work.empty()) {
    Value w = work.pop_back_val();
    Operation *def = w.getDefiningOp();
    if (w == x || !def || def->getBlock() != &body || !slice.insert(def).second)
      continue;
    if (!isPure(def) || def->getNumRegions())
      return {};
    llvm::append_range(work, def->getOperands());
  }
  // The slice is cloned into a scratch function with x a constant and
  // folded there: folding the body itself could rewrite it.
  Location loc = v.getLoc();
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(loc);
  OpBuilder b = OpBuilder::atBlockEnd(scratch->getBody());
  auto fn = func::FuncOp::create(b, loc, "evaluate",
                                 b.getFunctionType({}, {v.getType()}));
  OpBuilder fb = OpBuilder::atBlockEnd(fn.addEntryBlock());
  IRMapping map;
  map.map(x, arith::ConstantOp::create(fb, loc, xValue).getResult());
  for (Operation &o : body.without_terminator()) {
    if (!slice.contains(&o))
      continue;
    for (Value operand : o.getOperands()) {
      if (map.contains(operand))
        continue;
      // Only constants captured from outside the body may remain.
      Operation *def = operand.getDefiningOp();
      if (!def || !matchPattern(operand, m_Constant()))
        return {};
      fb.clone(*def, map);
    }
    fb.clone(o, map);
  }
  func::ReturnOp::create(fb, loc, map.lookup(v));
  RewritePatternSet patterns(fn.getContext());
  patterns.add<ExtendNaN>(fn.getContext());
  (void)applyPatternsGreedily(fn, std::move(patterns));
  Attribute value;
  if (!matchPattern(fn.getBody().front().getTerminator()->getOperand(0),
                    m_Constant(&value)))
    return {};
  return value;
}

SmallVector<Attribute>
mlir::comfyquant::detail::evaluateAtEveryCode(linalg::GenericOp op, Value v,
                                              unsigned arg) {
  Block &body = op.getRegion().front();
  BlockArgument code = body.getArgument(arg);
  if (!code.getType().isSignlessInteger(8))
    return {};
  SmallVector<Attribute> values;
  OpBuilder b(op.getContext());
  for (unsigned c = 0; c < 256; ++c) {
    Attribute value = foldSliceAt(body, code, b.getI8IntegerAttr(c), v);
    if (!value)
      return {};
    values.push_back(value);
  }
  return values;
}

bool mlir::comfyquant::detail::decodesEveryCode(
    linalg::GenericOp op, Value v, unsigned arg,
    llvm::function_ref<APFloat(unsigned)> decode) {
  SmallVector<Attribute> values = evaluateAtEveryCode(op, v, arg);
  if (values.size() != 256)
    return false;
  for (unsigned code = 0; code < 256; ++code) {
    auto f = dyn_cast<FloatAttr>(values[code]);
    if (!f || !f.getType().isF32())
      return false;
    APFloat got = f.getValue(), expected = decode(code);
    if (expected.isNaN() ? !got.isNaN()
                         : got.bitcastToAPInt() != expected.bitcastToAPInt())
      return false;
  }
  return true;
}

APFloat mlir::comfyquant::detail::e2m1Value(unsigned code) {
  APFloat v(APFloat::Float4E2M1FN(), APInt(4, code & 0xF));
  bool lost;
  v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
  return v;
}

APFloat mlir::comfyquant::detail::e4m3Value(unsigned code) {
  APFloat v(APFloat::Float8E4M3FN(), APInt(8, code & 0xFF));
  bool lost;
  v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
  return v;
}

//===----------------------------------------------------------------------===//
// Matching
//===----------------------------------------------------------------------===//

namespace {
/// `v` is `arg` or a widening of it (extsi/extf, extf of an i8 -> f8
/// bitcast); returns the root.
Value stripExt(Value v) {
  if (auto e = v.getDefiningOp<arith::ExtSIOp>())
    return e.getIn();
  if (auto e = v.getDefiningOp<arith::ExtFOp>()) {
    if (auto c = e.getIn().getDefiningOp<arith::BitcastOp>())
      return c.getIn();
    return e.getIn();
  }
  return v;
}

/// The FP8 type `v` (an operand of the product) widens from through a
/// bitcast of i8 codes, or null.
Type fp8Of(Value v) {
  auto e = v.getDefiningOp<arith::ExtFOp>();
  auto c = e ? e.getIn().getDefiningOp<arith::BitcastOp>() : nullptr;
  if (!c || !c.getIn().getType().isSignlessInteger(8))
    return nullptr;
  Type t = c.getType();
  return isa<Float8E4M3FNType, Float8E5M2Type>(t) ? t : nullptr;
}

/// `inputs` inputs, one init, loops (parallel m, parallel n, reduction k),
/// on tensors (one result) or buffers.
bool hasContractionShape(linalg::GenericOp op, unsigned inputs) {
  if (op.getNumDpsInputs() != inputs || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 3 ||
      op.getNumResults() != (op.hasPureTensorSemantics() ? 1u : 0u))
    return false;
  auto iters = op.getIteratorTypesArray();
  return iters[0] == utils::IteratorType::parallel &&
         iters[1] == utils::IteratorType::parallel &&
         iters[2] == utils::IteratorType::reduction;
}

/// Whether `v`, a value of a block-scaled contraction's body, is computed
/// from the scale arguments (2 and 3) alone (and values defined outside).
bool dependsOnScalesOnly(Block &body, Value v) {
  SmallVector<Value> work = {v};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      if (arg.getOwner() == &body && arg.getArgNumber() != 2 &&
          arg.getArgNumber() != 3)
        return false;
      continue;
    }
    Operation *def = x.getDefiningOp();
    if (def->getBlock() != &body)
      continue;
    if (!isPure(def) || def->getNumRegions())
      return false;
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return true;
}

/// The block-scaled FP8 and FP4 forms (see matchGemm).
std::optional<GemmMatch> matchBlockScaledGemm(linalg::GenericOp op) {
  if (!hasContractionShape(op, 4))
    return std::nullopt;
  MLIRContext *ctx = op.getContext();
  AffineExpr m = getAffineDimExpr(0, ctx), n = getAffineDimExpr(1, ctx),
             k = getAffineDimExpr(2, ctx);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto is = [&](AffineMap map, AffineExpr a, AffineExpr b) {
    return map == AffineMap::get(3, 0, {a, b}, ctx);
  };
  if (!is(maps[0], m, k) || !is(maps[1], n, k) || !is(maps[4], m, n))
    return std::nullopt;
  auto blockOf = [&](AffineMap map, AffineExpr row) -> int64_t {
    if (map.getNumResults() != 2 || map.getResult(0) != row)
      return 0;
    auto div = dyn_cast<AffineBinaryOpExpr>(map.getResult(1));
    if (!div || div.getKind() != AffineExprKind::FloorDiv || div.getLHS() != k)
      return 0;
    auto c = dyn_cast<AffineConstantExpr>(div.getRHS());
    return c ? c.getValue() : 0;
  };
  int64_t block = blockOf(maps[2], m);
  if (block <= 0 || blockOf(maps[3], n) != block)
    return std::nullopt;
  auto aType = dyn_cast<ShapedType>(op.getDpsInputs()[0].getType());
  auto bType = dyn_cast<ShapedType>(op.getDpsInputs()[1].getType());
  auto cType = dyn_cast<ShapedType>(op.getDpsInits()[0].getType());
  if (!aType || !bType || !cType || !aType.hasRank() || !cType.hasRank() ||
      !bType.hasStaticShape() || aType.isDynamicDim(1) ||
      cType.isDynamicDim(1) || !cType.getElementType().isF32())
    return std::nullopt;
  // out + (dec(a) * dec(b)) * s, s from the two scales only.
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  Value out = body.getArgument(4);
  Value scaled = add.getLhs() == out ? add.getRhs() : add.getLhs();
  if (add.getLhs() != out && add.getRhs() != out)
    return std::nullopt;
  auto outer = scaled.getDefiningOp<arith::MulFOp>();
  if (!outer)
    return std::nullopt;
  for (auto [productSide, scaleSide] :
       {std::pair{outer.getLhs(), outer.getRhs()},
        std::pair{outer.getRhs(), outer.getLhs()}}) {
    auto product = productSide.getDefiningOp<arith::MulFOp>();
    if (!product)
      continue;
    GemmMatch::Kind kind = GemmMatch::Kind::F8F8F32;
    Type x = fp8Of(product.getLhs()), y = fp8Of(product.getRhs());
    if (x && y) {
      if (stripExt(product.getLhs()) != body.getArgument(0) ||
          stripExt(product.getRhs()) != body.getArgument(1))
        continue;
    } else if (!x && !y &&
               decodesEveryCode(op, product.getLhs(), 0, e2m1Value) &&
               decodesEveryCode(op, product.getRhs(), 1, e2m1Value)) {
      // E2M1 codes (NVFP4), one per byte, decoded by the body.
      kind = GemmMatch::Kind::F4F4F32;
      x = y = Float4E2M1FNType::get(ctx);
    } else {
      continue;
    }
    // The scale must not depend on the codes or the accumulator.
    bool fromScales = dependsOnScalesOnly(body, scaleSide);
    if (!fromScales)
      continue;
    GemmMatch g;
    g.kind = kind;
    g.aElt = x;
    g.bElt = y;
    g.n = bType.getShape()[0];
    g.k = bType.getShape()[1];
    g.block = block;
    g.blockScale = scaleSide;
    return g;
  }
  return std::nullopt;
}
} // namespace

std::optional<GemmMatch> mlir::comfyquant::detail::matchGemm(
    linalg::GenericOp op) {
  if (op.getNumDpsInputs() == 4)
    return matchBlockScaledGemm(op);
  if (!hasContractionShape(op, 2))
    return std::nullopt;
  MLIRContext *ctx = op.getContext();
  auto map = [&](unsigned a, unsigned b) {
    return AffineMap::get(3, 0,
                          {getAffineDimExpr(a, ctx), getAffineDimExpr(b, ctx)},
                          ctx);
  };
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (maps[0] != map(0, 2) || maps[1] != map(1, 2) || maps[2] != map(0, 1))
    return std::nullopt;
  // Tensors (CPU strategy) or buffers (GPU kernels), ranked.
  auto aType = dyn_cast<ShapedType>(op.getDpsInputs()[0].getType());
  auto bType = dyn_cast<ShapedType>(op.getDpsInputs()[1].getType());
  auto cType = dyn_cast<ShapedType>(op.getDpsInits()[0].getType());
  if (!aType || !bType || !cType || !aType.hasRank() || !cType.hasRank() ||
      !bType.hasStaticShape() ||
      aType.isDynamicDim(1) || cType.isDynamicDim(1))
    return std::nullopt;
  // Body: yield(out + mul(ext(a), ext(b))) in either operand order.
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Value sum = yield.getValues()[0];
  Operation *addOp = sum.getDefiningOp();
  if (!addOp || !isa<arith::AddIOp, arith::AddFOp>(addOp))
    return std::nullopt;
  Value out = body.getArgument(2), mul;
  if (addOp->getOperand(0) == out)
    mul = addOp->getOperand(1);
  else if (addOp->getOperand(1) == out)
    mul = addOp->getOperand(0);
  else
    return std::nullopt;
  Operation *mulOp = mul.getDefiningOp();
  if (!mulOp || !isa<arith::MulIOp, arith::MulFOp>(mulOp))
    return std::nullopt;
  Value x = stripExt(mulOp->getOperand(0)), y = stripExt(mulOp->getOperand(1));
  Value a = body.getArgument(0), b = body.getArgument(1);
  if (!((x == a && y == b) || (x == b && y == a)))
    return std::nullopt;
  // Only ext/bitcast/mul/add in the body.
  for (Operation &o : body.without_terminator())
    if (!isa<arith::ExtSIOp, arith::ExtFOp, arith::BitcastOp, arith::MulIOp,
             arith::MulFOp, arith::AddIOp, arith::AddFOp>(o))
      return std::nullopt;
  GemmMatch m;
  m.aElt = aType.getElementType();
  m.bElt = bType.getElementType();
  m.n = bType.getShape()[0];
  m.k = bType.getShape()[1];
  Type c = cType.getElementType();
  auto isAct = [](Type t) { return t.isF32() || t.isBF16() || t.isF16(); };
  if (m.aElt.isSignlessInteger(8) && m.bElt.isSignlessInteger(8) &&
      c.isSignlessInteger(32) && isa<arith::AddIOp>(addOp) &&
      isa<arith::MulIOp>(mulOp)) {
    // Both operands must be sign-extended.
    if (!mulOp->getOperand(0).getDefiningOp<arith::ExtSIOp>() ||
        !mulOp->getOperand(1).getDefiningOp<arith::ExtSIOp>())
      return std::nullopt;
    m.kind = GemmMatch::Kind::I8I8I32;
    return m;
  }
  // FP8 codes: both products' operands widen from i8 through FP8.
  Type xFP8 = fp8Of(mulOp->getOperand(0)), yFP8 = fp8Of(mulOp->getOperand(1));
  if (xFP8 || yFP8) {
    if (!xFP8 || !yFP8 || !c.isF32() || !isa<arith::AddFOp>(addOp) ||
        !isa<arith::MulFOp>(mulOp))
      return std::nullopt;
    m.kind = GemmMatch::Kind::F8F8F32;
    bool aFirst = x == a;
    m.aElt = aFirst ? xFP8 : yFP8;
    m.bElt = aFirst ? yFP8 : xFP8;
    return m;
  }
  if (isAct(m.aElt) && isAct(m.bElt) && c.isF32() && isa<arith::AddFOp>(addOp)) {
    m.kind = GemmMatch::Kind::FloatF32;
    return m;
  }
  return std::nullopt;
}

std::optional<GemmMatch> mlir::comfyquant::detail::taggedGemm(
    linalg::GenericOp op) {
  auto info = op->getAttrOfType<GemmInfoAttr>(
      ComfyQuantDialect::getGemmInfoAttrName());
  if (!info)
    return std::nullopt;
  auto bType = dyn_cast<ShapedType>(op.getDpsInputs()[1].getType());
  if (!bType || !bType.hasStaticShape() || bType.getRank() != 2)
    return std::nullopt;
  GemmMatch g;
  g.kind = info.getKind();
  g.aElt = info.getAType();
  g.bElt = info.getBType();
  g.n = bType.getShape()[0];
  g.k = bType.getShape()[1];
  g.block = info.getBlock();
  if (g.block) {
    // yield(out + product * scale): the factor computed from the scales.
    Block &body = op.getRegion().front();
    Value sum = cast<linalg::YieldOp>(body.getTerminator()).getValues()[0];
    auto add = sum.getDefiningOp<arith::AddFOp>();
    Value out = body.getArgument(4);
    auto outer = add ? (add.getLhs() == out ? add.getRhs() : add.getLhs())
                           .getDefiningOp<arith::MulFOp>()
                     : arith::MulFOp();
    if (!outer)
      return std::nullopt;
    for (Value side : {outer.getRhs(), outer.getLhs()})
      if (dependsOnScalesOnly(body, side)) {
        g.blockScale = side;
        break;
      }
    if (!g.blockScale)
      return std::nullopt;
  }
  return g;
}

GemmInfoAttr mlir::comfyquant::detail::gemmInfo(MLIRContext *ctx,
                                                const GemmMatch &m) {
  return GemmInfoAttr::get(ctx, m.kind, m.aElt, m.bElt, m.block);
}

LogicalResult mlir::comfyquant::detail::verifyGemmTag(linalg::GenericOp op) {
  auto info = op->getAttrOfType<GemmInfoAttr>(
      ComfyQuantDialect::getGemmInfoAttrName());
  if (!info)
    return success();
  std::optional<GemmMatch> m = matchGemm(op);
  if (!m)
    return op.emitOpError("is tagged ")
           << info << " but its body is not a GEMM of that form";
  GemmInfoAttr found = gemmInfo(op.getContext(), *m);
  if (found != info)
    return op.emitOpError("is tagged ")
           << info << " but its body computes " << found;
  std::optional<GemmMatch> t = taggedGemm(op);
  if (!t || t->blockScale != m->blockScale)
    return op.emitOpError("is tagged ")
           << info << " but its block scale is not found from the tag";
  return success();
}
