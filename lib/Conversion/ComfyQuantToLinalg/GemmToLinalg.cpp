//===- GemmToLinalg.cpp - qmatmul, qgemm and epilogue -> linalg -----------===//
//
// The contraction in the back end's operand form (GemmOperands: decoded f32
// for the CPU micro-kernels, FP8 codes and exact f16 for tensor cores),
// block-scaled where the format has block scales, and the epilogue (row and
// column scales, bias, cast) fused into qgemm or on its own.
//===----------------------------------------------------------------------===//
#include "Emitter.h"
#include "Lowering.h"

#include "comfyquant/Conversion/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/Numerics.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "llvm/ADT/DenseMap.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;
using namespace mlir::comfyquant::lowering;
namespace rt = ::comfyquant::rt;

namespace {

//===----------------------------------------------------------------------===//
// qmatmul / epilogue / qgemm
//===----------------------------------------------------------------------===//

/// A float GEMM operand as f32 values, with its block scales applied when
/// given (x·s, exact in f32); f32/bf16/f16 operands without scales pass
/// through (the contraction widens them).
Value floatOperand(OpBuilder &b, Location loc, Value v, Value scales,
                   int64_t block, Type resultElt) {
  Type elt = elementOf(v);
  if (!scales && (elt.isF32() || elt.isBF16() || elt.isF16()))
    return v;
  Value s = toStorage(b, loc, v);
  Value sc = scales ? toStorage(b, loc, scales) : Value();
  Type scaleElt = scales ? elementOf(scales) : Type();
  auto decode = [elt](Emitter &e, Value x) -> Value {
    if (isa<Float8E4M3FNType>(elt))
      return e.decodeE4M3(x);
    if (isa<Float8E5M2Type>(elt))
      return e.decodeE5M2(x);
    if (isa<Float4E2M1FNType>(elt))
      return e.decodeE2M1(x);
    if (isa<Float8E8M0FNUType>(elt))
      return e.decodeE8M0(x);
    return e.toF32(x);
  };
  // A bf16 result is the high half of each value: exact for every value
  // bf16Exact or bf16InRange allows (see there for MXFP8 below bf16's
  // normal range), and a shift that the f32 kernels' widening undoes.
  auto narrow = [&](Emitter &e, Value x) -> Value {
    return resultElt.isBF16() ? e.exactBF16(x) : e.fromF32(x, resultElt);
  };
  return buildParallel(
      b, loc, s, b.getMultiDimIdentityMap(2),
      emptyTensor(b, loc, mixedSizes(b, loc, s), resultElt),
      [&](Emitter &e, ValueRange a) -> Value {
        Value x = decode(e, a[0]);
        if (!sc)
          return narrow(e, x);
        Value col = e.index(1);
        Value blk = arith::DivUIOp::create(e.b, col, e.idx(block));
        Value raw = tensor::ExtractOp::create(e.b, sc, ValueRange{e.index(0), blk});
        Value scale = isa<Float8E8M0FNUType>(scaleElt) ? e.decodeE8M0(raw)
                      : isa<Float8E4M3FNType>(scaleElt) ? e.decodeE4M3(raw)
                                                         : e.toF32(raw);
        return narrow(e, e.mul(x, scale));
      });
}

bool isFP8(Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); }

/// Tags a contraction this conversion built with what it computes, so the
/// back ends need not match its body again.
void tagGemm(linalg::GenericOp gemm, GemmKind kind, Type a, Type b,
             int64_t block = 0) {
  gemm->setAttr(ComfyQuantDialect::getGemmInfoAttrName(),
                GemmInfoAttr::get(gemm.getContext(), kind, a, b, block));
}

/// Whether every decoded value of (codes, scales) is a bf16 wherever it
/// lies in bf16's normal range: FP8 codes times E8M0 block scales (MXFP8;
/// a power of two only moves the exponent). A value below that range
/// (|v| < 2^-126, only from a scale under 2^-117) keeps the high half of
/// its f32 bits, an error under 2^-133; vdpbf16ps reads such bf16 inputs
/// as zero anyway.
bool bf16InRange(Value codes, Value scales) {
  return scales && isFP8(elementOf(codes)) &&
         isa<Float8E8M0FNUType>(elementOf(scales));
}

/// Whether every decoded value of (codes, scales) is a normal bf16 (or
/// zero, infinity, NaN): FP8 codes alone, E2M1 codes alone or times E4M3
/// scales, or bf16 values.
bool bf16Exact(Value codes, Value scales) {
  Type c = elementOf(codes);
  if (!scales)
    return isFP8(c) || isa<Float4E2M1FNType>(c) || c.isBF16();
  return isa<Float4E2M1FNType>(c) && isa<Float8E4M3FNType>(elementOf(scales));
}

/// The block sizes a block-scaled contraction stays native for: one scale
/// per FP8 tensor-core MMA K step (MXFP8) or per 16 E2M1 codes (NVFP4, the
/// block of the FP4 block-scaled MMAs).
constexpr int64_t kFP8MmaBlock = 32;
constexpr int64_t kFP4ScaleBlock = 16;

/// extf(bitcast(code -> fp8)): an FP8 code widened to f32 inside a
/// contraction body.
Value widenFP8(Emitter &e, Value code, Type fp8) {
  Value f = arith::BitcastOp::create(e.b, fp8, code);
  return arith::ExtFOp::create(e.b, e.b.getF32Type(), f);
}

/// Whether (codes, scales) is an operand a native block-scaled contraction
/// reads: FP8 with E8M0 scales per 32, or E2M1 with E4M3 scales per 16.
bool nativeBlockScaled(Value codes, Value scales,
                       std::optional<int64_t> block) {
  if (!scales || !block)
    return false;
  Type c = elementOf(codes), s = elementOf(scales);
  if (isFP8(c))
    return isa<Float8E8M0FNUType>(s) && *block == kFP8MmaBlock;
  return isa<Float4E2M1FNType>(c) && isa<Float8E4M3FNType>(s) &&
         *block == kFP4ScaleBlock;
}

/// The native block-scaled contraction: inputs (A codes [M,K], B codes
/// [N,K], A scales [M,K/B], B scales [N,K/B]), body
/// out + (a·b)·(sa·sb) in f32, every factor decoded exactly (FP8 codes
/// widened through their type, E2M1 codes and the scales decoded), so a
/// tensor core can sum one block and rescale the partial sum, or take
/// the codes and scales as they are.
Value buildBlockScaledGemm(PatternRewriter &rw, Location loc, Value lhs,
                           Value rhs, Value lhsScales, Value rhsScales,
                           int64_t block) {
  MLIRContext *ctx = rw.getContext();
  Type lhsElt = elementOf(lhs), rhsElt = elementOf(rhs);
  Type scaleElt = elementOf(lhsScales);
  Value a = toStorage(rw, loc, lhs), b = toStorage(rw, loc, rhs);
  Value sa = toStorage(rw, loc, lhsScales), sb = toStorage(rw, loc, rhsScales);
  Emitter top(rw, loc);
  SmallVector<OpFoldResult> sizes = {mixedSizes(rw, loc, a)[0],
                                     mixedSizes(rw, loc, b)[0]};
  Value init = filledTensor(rw, loc, sizes, top.f32(0.0));
  AffineExpr m = getAffineDimExpr(0, ctx), n = getAffineDimExpr(1, ctx),
             k = getAffineDimExpr(2, ctx);
  SmallVector<AffineMap> maps = {
      AffineMap::get(3, 0, {m, k}, ctx), AffineMap::get(3, 0, {n, k}, ctx),
      AffineMap::get(3, 0, {m, k.floorDiv(block)}, ctx),
      AffineMap::get(3, 0, {n, k.floorDiv(block)}, ctx),
      AffineMap::get(3, 0, {m, n}, ctx)};
  SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                            utils::IteratorType::parallel,
                                            utils::IteratorType::reduction};
  auto code = [](Emitter &e, Value v, Type t) -> Value {
    return isFP8(t) ? widenFP8(e, v, t) : e.decodeE2M1(v);
  };
  auto scale = [&](Emitter &e, Value v) -> Value {
    return isa<Float8E8M0FNUType>(scaleElt) ? e.decodeE8M0(v) : e.decodeE4M3(v);
  };
  auto gemm = linalg::GenericOp::create(
      rw, loc, TypeRange{init.getType()}, ValueRange{a, b, sa, sb},
      ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Emitter e(nb, nl);
        Value x = code(e, args[0], lhsElt);
        Value y = code(e, args[1], rhsElt);
        Value product = arith::MulFOp::create(e.b, x, y);
        Value xs = scale(e, args[2]);
        Value ys = scale(e, args[3]);
        Value factor = arith::MulFOp::create(e.b, xs, ys);
        Value scaled = arith::MulFOp::create(e.b, product, factor);
        linalg::YieldOp::create(nb, nl,
                                arith::AddFOp::create(e.b, args[4], scaled)
                                    .getResult());
      });
  const bool fp8 = isFP8(lhsElt);
  Type fp4 = Float4E2M1FNType::get(ctx);
  tagGemm(gemm, fp8 ? GemmKind::F8F8F32 : GemmKind::F4F4F32,
          fp8 ? lhsElt : fp4, fp8 ? rhsElt : fp4, block);
  return gemm.getResult(0);
}

/// The GEMM as a linalg.generic contraction C[m,n] += A[m,k]·B[n,k]: i8·i8
/// in i32 (exact), else f32 (operands decoded first).
FailureOr<Value> buildGemm(PatternRewriter &rw, Operation *op, Value lhs,
                           Value rhs, Value lhsScales, Value rhsScales,
                           std::optional<int64_t> block, Type accType,
                           GemmOperands operands) {
  Location loc = op->getLoc();
  MLIRContext *ctx = rw.getContext();
  bool ints = accType.isSignlessInteger(32);
  // Native FP8: the contraction reads the codes and widens them itself.
  Type lhsFP8, rhsFP8;
  if (!ints && operands == GemmOperands::Native && !lhsScales &&
      !rhsScales && isFP8(elementOf(lhs)) && isFP8(elementOf(rhs))) {
    lhsFP8 = elementOf(lhs);
    rhsFP8 = elementOf(rhs);
  }
  // Native MXFP8 (FP8 codes, E8M0 scales per 32) and NVFP4 (E2M1 codes,
  // E4M3 scales per 16): the contraction reads the codes and the scales,
  // C[m,n] += (a·b)·(sa[m,k/B]·sb[n,k/B]).
  if (!ints && operands == GemmOperands::Native &&
      nativeBlockScaled(lhs, lhsScales, block) &&
      nativeBlockScaled(rhs, rhsScales, block) &&
      elementOf(lhsScales) == elementOf(rhsScales) &&
      isFP8(elementOf(lhs)) == isFP8(elementOf(rhs)))
    return buildBlockScaledGemm(rw, loc, lhs, rhs, lhsScales, rhsScales,
                                *block);
  Value a, b;
  if (lhsFP8) {
    a = toStorage(rw, loc, lhs);
    b = toStorage(rw, loc, rhs);
  } else if (ints) {
    a = toStorage(rw, loc, lhs);
    b = toStorage(rw, loc, rhs);
    if (!elementOf(a).isSignlessInteger(8) || !elementOf(b).isSignlessInteger(8))
      return rw.notifyMatchFailure(op, "integer operands must be stored as i8");
  } else {
    if (static_cast<bool>(lhsScales) != static_cast<bool>(rhsScales) ||
        (lhsScales && !block))
      return rw.notifyMatchFailure(op, "block scales need both sides and B");
    // bf16 where both sides' values are bf16s: FP8 codes or E2M1 x E4M3
    // (at most 6 significant bits, exponents inside bf16's normal range)
    // and FP8 x E8M0 (MXFP8: 4 significant bits, exponents anywhere; see
    // bf16InRange for values below bf16's normal range). A bf16 dot
    // product then multiplies them exactly, and a decoded panel takes
    // half the memory of f32. f32 otherwise.
    auto bf16Values = [](Value codes, Value scales) {
      return bf16Exact(codes, scales) || bf16InRange(codes, scales);
    };
    Type decoded = bf16Values(lhs, lhsScales) && bf16Values(rhs, rhsScales)
                       ? Type(rw.getBF16Type())
                       : Type(rw.getF32Type());
    a = floatOperand(rw, loc, lhs, lhsScales, block.value_or(0), decoded);
    b = floatOperand(rw, loc, rhs, rhsScales, block.value_or(0), decoded);
  }
  Emitter top(rw, loc);
  SmallVector<OpFoldResult> sizes = {mixedSizes(rw, loc, a)[0],
                                     mixedSizes(rw, loc, b)[0]};
  Value init = filledTensor(rw, loc, sizes, ints ? top.i32(0) : top.f32(0.0));
  SmallVector<AffineMap> maps = {mapOf(ctx, 3, {0, 2}), mapOf(ctx, 3, {1, 2}),
                                 mapOf(ctx, 3, {0, 1})};
  SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                            utils::IteratorType::parallel,
                                            utils::IteratorType::reduction};
  auto gemm = linalg::GenericOp::create(
      rw, loc, TypeRange{init.getType()}, ValueRange{a, b}, ValueRange{init},
      maps, iters, [&](OpBuilder &nb, Location nl, ValueRange args) {
        Emitter e(nb, nl);
        Value p;
        if (ints) {
          Value x = arith::ExtSIOp::create(e.b, e.b.getI32Type(), args[0]);
          Value y = arith::ExtSIOp::create(e.b, e.b.getI32Type(), args[1]);
          p = arith::AddIOp::create(e.b, args[2],
                                    arith::MulIOp::create(e.b, x, y));
        } else if (lhsFP8) {
          Value x = widenFP8(e, args[0], lhsFP8);
          Value y = widenFP8(e, args[1], rhsFP8);
          p = arith::AddFOp::create(e.b, args[2],
                                    arith::MulFOp::create(e.b, x, y));
        } else {
          Value x = e.toF32(args[0]);
          Value y = e.toF32(args[1]);
          p = arith::AddFOp::create(e.b, args[2],
                                    arith::MulFOp::create(e.b, x, y));
        }
        linalg::YieldOp::create(nb, nl, p);
      });
  if (ints)
    tagGemm(gemm, GemmKind::I8I8I32, elementOf(a), elementOf(b));
  else if (lhsFP8)
    tagGemm(gemm, GemmKind::F8F8F32, lhsFP8, rhsFP8);
  else
    tagGemm(gemm, GemmKind::FloatF32, elementOf(a), elementOf(b));
  return gemm.getResult(0);
}

} // namespace

/// y = T((f32(acc)·row)·col + f32(bias)).
Value mlir::comfyquant::lowering::buildEpilogue(PatternRewriter &rw,
                                               Location loc, Value acc,
                                               Value rowScale, Value colScale,
                                               Value bias, Type resultElt) {
  MLIRContext *ctx = rw.getContext();
  SmallVector<Value> inputs = {acc};
  SmallVector<AffineMap> maps = {mapOf(ctx, 2, {0, 1})};
  struct Operand {
    Value scalar;
    int input = -1;
    bool present() const { return scalar || input >= 0; }
  };
  auto add = [&](Value v, bool row) -> Operand {
    Operand o;
    if (!v)
      return o;
    if (isOneElement(v)) {
      o.scalar = extractScalar(rw, loc, v);
      return o;
    }
    auto t = cast<RankedTensorType>(v.getType());
    o.input = inputs.size();
    inputs.push_back(v);
    if (row)
      maps.push_back(mapOf(ctx, 2, {0, -1})); // [M, 1]
    else if (t.getRank() == 1)
      maps.push_back(mapOf(ctx, 2, {1})); // [N]
    else
      maps.push_back(mapOf(ctx, 2, {1, -1})); // [N, 1]
    return o;
  };
  Operand rs = add(rowScale, /*row=*/true);
  Operand cs = add(colScale, /*row=*/false);
  Operand bs = add(bias, /*row=*/false);
  Value init = emptyTensor(rw, loc, mixedSizes(rw, loc, acc), resultElt);
  return buildParallel(
      rw, loc, inputs, maps, init, [&](Emitter &e, ValueRange a) -> Value {
        auto get = [&](const Operand &o) {
          return o.scalar ? o.scalar : a[o.input];
        };
        Value v = e.toF32(a[0]);
        if (rs.present())
          v = e.mul(v, e.toF32(get(rs)));
        if (cs.present())
          v = e.mul(v, e.toF32(get(cs)));
        if (bs.present())
          v = e.add(v, e.toF32(get(bs)));
        return e.fromF32(v, resultElt);
      });
}

namespace {

std::optional<int64_t> blockOf(std::optional<uint64_t> b) {
  if (!b)
    return std::nullopt;
  return static_cast<int64_t>(*b);
}

/// The contraction of a quantized matmul or GEMM (they share operands,
/// block scales and block) into `accType`, in the back end's operand form.
template <typename OpT>
FailureOr<Value> contraction(PatternRewriter &rw, OpT op, Type accType,
                             GemmOperands operands) {
  return buildGemm(rw, op, op.getLhs(), op.getRhs(), op.getLhsBlockScales(),
                   op.getRhsBlockScales(), blockOf(op.getBlock()), accType,
                   operands);
}

/// comfyquant.qmatmul, and comfyquant.qgemm = qmatmul + epilogue.
template <typename OpT>
struct GemmLowering : OpRewritePattern<OpT> {
  GemmLowering(MLIRContext *ctx, GemmOperands operands)
      : OpRewritePattern<OpT>(ctx), operands(operands) {}
  GemmOperands operands;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rw) const override {
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    constexpr bool fused = std::is_same_v<OpT, QGemmOp>;
    Type accType = resType.getElementType();
    if constexpr (fused)
      accType = op.getAccumulatorType();
    FailureOr<Value> acc = contraction(rw, op, accType, operands);
    if (failed(acc))
      return failure();
    Value y = *acc;
    if constexpr (fused)
      y = buildEpilogue(rw, op.getLoc(), y, op.getRowScale(),
                        op.getColScale(), op.getBias(),
                        resType.getElementType());
    rw.replaceOp(op, castTo(rw, op.getLoc(), y, resType));
    return success();
  }
};
using QMatmulLowering = GemmLowering<QMatmulOp>;
using QGemmLowering = GemmLowering<QGemmOp>;

struct EpilogueLowering : OpRewritePattern<EpilogueOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EpilogueOp op,
                                PatternRewriter &rw) const override {
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    Value y = buildEpilogue(rw, op.getLoc(), op.getAcc(), op.getRowScale(),
                            op.getColScale(), op.getBias(),
                            resType.getElementType());
    rw.replaceOp(op, castTo(rw, op.getLoc(), y, resType));
    return success();
  }
};

} // namespace

void mlir::comfyquant::lowering::populateEpilogueToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<EpilogueLowering>(patterns.getContext());
}

void mlir::comfyquant::populateComfyQuantGemmToLinalgPatterns(
    RewritePatternSet &patterns, GemmOperands operands) {
  patterns.add<QMatmulLowering, QGemmLowering>(patterns.getContext(),
                                               operands);
}
