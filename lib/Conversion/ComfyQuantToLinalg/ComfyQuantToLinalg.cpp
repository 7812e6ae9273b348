//===- ComfyQuantToLinalg.cpp - comfyquant -> linalg on tensors -----------===//
//
// One pattern per computation op (rotate, quantize, dequantize, qmatmul,
// epilogue) plus the weight -> function argument rewrite. Values whose
// element type has no arithmetic (f8*, f4*, ui8, i4) are carried in a
// storage type (signless integers, sub-byte values in an i8) and cross
// between lowered ops through unrealized casts that fold away.
//===----------------------------------------------------------------------===//
#include "comfyquant/Conversion/Passes.h"

#include "Emitter.h"

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_CONVERTCOMFYQUANTTOLINALG
#include "comfyquant/Conversion/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;
namespace rt = ::comfyquant::rt;

//===----------------------------------------------------------------------===//
// Storage types
//===----------------------------------------------------------------------===//

Type mlir::comfyquant::getStorageElementType(Type t) {
  if (t.isF32() || t.isF16() || t.isBF16() || t.isF64())
    return t;
  unsigned width = t.getIntOrFloatBitWidth();
  if (t.isSignlessInteger() && width >= 8)
    return t;
  return IntegerType::get(t.getContext(), std::max(8u, width));
}

namespace {

RankedTensorType storageType(Type t) {
  auto tt = cast<RankedTensorType>(t);
  return tt.clone(getStorageElementType(tt.getElementType()));
}

/// `v` in its storage type: looks through the cast a lowered producer left.
Value toStorage(OpBuilder &b, Location loc, Value v) {
  RankedTensorType st = storageType(v.getType());
  if (st == v.getType())
    return v;
  if (auto cast = v.getDefiningOp<UnrealizedConversionCastOp>())
    if (cast->getNumOperands() == 1 && cast.getOperand(0).getType() == st)
      return cast.getOperand(0);
  return UnrealizedConversionCastOp::create(b, loc, TypeRange{st}, v)
      .getResult(0);
}

/// A storage-typed value as a value of the op's original result type.
Value fromStorage(OpBuilder &b, Location loc, Value v, Type original) {
  if (v.getType() == original)
    return v;
  return UnrealizedConversionCastOp::create(b, loc, TypeRange{original}, v)
      .getResult(0);
}

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

bool isOneElement(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.hasStaticShape() && t.getNumElements() == 1;
}

/// Maps from the iteration space of `loops` dims to dims `dims` (-1: the
/// constant 0).
AffineMap mapOf(MLIRContext *ctx, unsigned loops, ArrayRef<int> dims) {
  SmallVector<AffineExpr> exprs;
  for (int d : dims)
    exprs.push_back(d < 0 ? getAffineConstantExpr(0, ctx)
                          : getAffineDimExpr(d, ctx));
  return AffineMap::get(loops, 0, exprs, ctx);
}

//===----------------------------------------------------------------------===//
// rotate
//===----------------------------------------------------------------------===//

struct RotateLowering : OpRewritePattern<RotateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RotateOp op,
                                PatternRewriter &rw) const override {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    if (ShapedType::isDynamic(type.getShape().back()))
      return rw.notifyMatchFailure(op, "rotated dimension must be static");
    Value r = buildButterfly(rw, op.getLoc(), op.getInput(),
                             op.getRotation().getGroup(), type.getElementType());
    rw.replaceOp(op, r);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// quantize
//===----------------------------------------------------------------------===//

/// amax over the last dimension: [.., K] -> [..] f32 (NaN ignored, like
/// std::max in the reference).
Value rowAmax(OpBuilder &b, Location loc, Value x) {
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, x);
  sizes.pop_back();
  Emitter e(b, loc);
  Value init = filledTensor(b, loc, sizes, e.f32(0.0));
  return buildInnerReduction(b, loc, x, init, [](Emitter &e, ValueRange a) {
    Value v = math::AbsFOp::create(e.b, e.toF32(a[0]));
    return arith::MaxNumFOp::create(e.b, a[1], v).getResult();
  });
}

/// x [M, K] padded with zeros to [M, Kp] and viewed as [M, Kp/B, B].
Value blocked(OpBuilder &b, Location loc, Value x, int64_t block) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t k = type.getShape()[1];
  int64_t kp = (k + block - 1) / block * block;
  Value padded = x;
  if (kp != k) {
    auto padType = RankedTensorType::get({type.getShape()[0], kp},
                                         type.getElementType());
    Value zero = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(type.getElementType()));
    SmallVector<Value> dyn;
    if (type.isDynamicDim(0))
      dyn.push_back(tensor::DimOp::create(b, loc, x, 0));
    padded = tensor::createPadHighOp(padType, x, zero, /*nofold=*/false, loc,
                                     b, dyn);
  }
  auto expType = RankedTensorType::get({type.getShape()[0], kp / block, block},
                                       type.getElementType());
  return tensor::ExpandShapeOp::create(b, loc, expType, padded,
                                       ArrayRef<ReassociationIndices>{{0}, {1, 2}});
}

/// [M, Kb, B] -> [M, K] (collapse, then drop the padding).
Value unblocked(OpBuilder &b, Location loc, Value codes, int64_t k) {
  Value flat = tensor::CollapseShapeOp::create(
      b, loc, codes, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  auto type = cast<RankedTensorType>(flat.getType());
  if (type.getShape()[1] == k)
    return flat;
  SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, flat);
  sizes[1] = b.getIndexAttr(k);
  SmallVector<OpFoldResult> strides = {b.getIndexAttr(1), b.getIndexAttr(1)};
  return tensor::ExtractSliceOp::create(b, loc, flat, offsets, sizes, strides);
}

struct QuantizeLowering : OpRewritePattern<QuantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    auto xType = cast<RankedTensorType>(x.getType());
    Type act = xType.getElementType();
    MLIRContext *ctx = rw.getContext();
    Emitter top(rw, loc);
    SmallVector<OpFoldResult> xSizes = mixedSizes(rw, loc, x);
    SmallVector<OpFoldResult> rowSizes = {xSizes[0], rw.getIndexAttr(1)};
    Value codes, scales;
    switch (op.getScheme().getScheme()) {
    case ActScheme::int8_row:
    case ActScheme::int4_row: {
      bool int8 = op.getScheme().getScheme() == ActScheme::int8_row;
      Value amax = rowAmax(rw, loc, x);
      scales = buildParallel(
          rw, loc, amax, mapOf(ctx, 2, {0}),
          emptyTensor(rw, loc, rowSizes, rw.getF32Type()),
          [&](Emitter &e, ValueRange a) -> Value {
            if (int8) // s = max(amax / 127, 1e-30), f32
              return arith::MaxNumFOp::create(
                  e.b, arith::DivFOp::create(e.b, a[0], e.f32(127.0)),
                  e.f32(1e-30));
            // a = max(amax, 1e-10) and s = a / 7, each in x's dtype.
            Value m = e.roundThrough(
                arith::MaxNumFOp::create(e.b, a[0], e.f32(1e-10)), act);
            return e.roundThrough(arith::DivFOp::create(e.b, m, e.f32(7.0)),
                                  act);
          });
      double lo = int8 ? -128.0 : -7.0, hi = int8 ? 127.0 : 7.0;
      codes = buildParallel(
          rw, loc, ValueRange{x, scales},
          {mapOf(ctx, 2, {0, 1}), mapOf(ctx, 2, {0, -1})},
          emptyTensor(rw, loc, xSizes, rw.getI8Type()),
          [&](Emitter &e, ValueRange a) -> Value {
            // int8: the f32 scale rounded to x's dtype divides; int4: the
            // scale is already in x's dtype.
            Value s = int8 ? e.roundThrough(a[1], act) : a[1];
            Value v = e.roundThrough(
                arith::DivFOp::create(e.b, e.toF32(a[0]), s), act);
            v = math::RoundEvenOp::create(e.b, v);
            v = arith::MinNumFOp::create(
                e.b, e.f32(hi), arith::MaxNumFOp::create(e.b, e.f32(lo), v));
            return arith::FPToSIOp::create(e.b, e.b.getI8Type(), v);
          });
      break;
    }
    case ActScheme::fp8_static: {
      Type codeType = op.getScheme().getType();
      bool e4m3 = isa<Float8E4M3FNType>(codeType);
      if (!e4m3 && !isa<Float8E5M2Type>(codeType))
        return rw.notifyMatchFailure(op, "fp8 codes must be e4m3fn or e5m2");
      double maxv = e4m3 ? 448.0 : 57344.0;
      Value s = op.getStaticScale() ? extractScalar(rw, loc, op.getStaticScale())
                                    : top.f32(1.0);
      Value recip =
          top.roundThrough(arith::DivFOp::create(rw, loc, top.f32(1.0), s), act);
      codes = buildParallel(
          rw, loc, x, mapOf(ctx, 2, {0, 1}),
          emptyTensor(rw, loc, xSizes, rw.getI8Type()),
          [&](Emitter &e, ValueRange a) -> Value {
            Value v = e.roundThrough(e.mul(e.toF32(a[0]), recip), act);
            v = arith::MinNumFOp::create(
                e.b, e.f32(maxv), arith::MaxNumFOp::create(e.b, e.f32(-maxv), v));
            return e4m3 ? e.encodeE4M3(v) : e.encodeE5M2(v);
          });
      scales = tensor::FromElementsOp::create(
          rw, loc, op.getScales().getType(), ValueRange{s});
      break;
    }
    case ActScheme::mxfp8_block:
    case ActScheme::nvfp4_block: {
      if (xType.isDynamicDim(1))
        return rw.notifyMatchFailure(op, "K must be static");
      bool mx = op.getScheme().getScheme() == ActScheme::mxfp8_block;
      int64_t block = mx ? 32 : 16;
      int64_t k = xType.getShape()[1];
      Value xb = blocked(rw, loc, x, block);
      Value amax = rowAmax(rw, loc, xb); // [M, Kb]
      SmallVector<OpFoldResult> bSizes = mixedSizes(rw, loc, amax);
      Value g;
      if (!mx) {
        // Global scale: input_scale, else amax(|x|)/2688 in x's dtype.
        if (op.getStaticScale()) {
          g = extractScalar(rw, loc, op.getStaticScale());
        } else {
          Value all = buildInnerReduction(
              rw, loc, amax, filledTensor(rw, loc, {xSizes[0]}, top.f32(0.0)),
              [](Emitter &e, ValueRange a) -> Value {
                return arith::MaxNumFOp::create(e.b, a[1], a[0]);
              });
          all = buildInnerReduction(
              rw, loc, all,
              filledTensor(rw, loc, ArrayRef<OpFoldResult>{}, top.f32(0.0)),
              [](Emitter &e, ValueRange a) -> Value {
                return arith::MaxNumFOp::create(e.b, a[1], a[0]);
              });
          g = top.roundThrough(
              arith::DivFOp::create(rw, loc, extractScalar(rw, loc, all),
                                    top.f32(2688.0)),
              act);
        }
      }
      // One scale byte per block: the E8M0 exponent, or the E4M3 d8.
      scales = buildParallel(
          rw, loc, amax, mapOf(ctx, 2, {0, 1}),
          emptyTensor(rw, loc, bSizes, rw.getI8Type()),
          [&](Emitter &e, ValueRange a) -> Value {
            if (mx)
              return e.mxfp8Exponent(a[0]);
            Value gz = arith::CmpFOp::create(e.b, arith::CmpFPredicate::OEQ, g,
                                             e.f32(0.0));
            Value d = arith::DivFOp::create(
                e.b, arith::DivFOp::create(e.b, a[0], e.f32(6.0)), g);
            d = e.select(gz, e.f32(0.0), d);
            return e.encodeE4M3(arith::MinNumFOp::create(e.b, d, e.f32(448.0)));
          });
      Value blockedCodes = buildParallel(
          rw, loc, ValueRange{xb, amax, scales},
          {mapOf(ctx, 3, {0, 1, 2}), mapOf(ctx, 3, {0, 1}),
           mapOf(ctx, 3, {0, 1})},
          emptyTensor(rw, loc, mixedSizes(rw, loc, xb), rw.getI8Type()),
          [&](Emitter &e, ValueRange a) -> Value {
            Value v = e.toF32(a[0]);
            if (mx) {
              Value scale = e.decodeE8M0(a[2]);
              Value zero = arith::CmpFOp::create(e.b, arith::CmpFPredicate::OEQ,
                                                 a[1], e.f32(0.0));
              Value q = e.select(zero, e.f32(0.0),
                                 arith::DivFOp::create(e.b, v, scale));
              q = arith::MinNumFOp::create(
                  e.b, e.f32(448.0),
                  arith::MaxNumFOp::create(e.b, e.f32(-448.0), q));
              return e.encodeE4M3(q);
            }
            Value t = e.mul(g, e.decodeE4M3(a[2]));
            Value zero = arith::CmpFOp::create(e.b, arith::CmpFPredicate::OEQ, t,
                                               e.f32(0.0));
            Value q =
                e.select(zero, e.f32(0.0), arith::DivFOp::create(e.b, v, t));
            q = arith::MinNumFOp::create(
                e.b, e.f32(6.0), arith::MaxNumFOp::create(e.b, e.f32(-6.0), q));
            return e.encodeE2M1(q);
          });
      codes = unblocked(rw, loc, blockedCodes, k);
      break;
    }
    }
    Value c = fromStorage(rw, loc, codes, op.getCodes().getType());
    Value s = fromStorage(rw, loc, scales, op.getScales().getType());
    if (c.getType() != op.getCodes().getType())
      c = tensor::CastOp::create(rw, loc, op.getCodes().getType(), c);
    if (s.getType() != op.getScales().getType())
      s = tensor::CastOp::create(rw, loc, op.getScales().getType(), s);
    rw.replaceOp(op, {c, s});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// dequantize
//===----------------------------------------------------------------------===//

struct DequantizeLowering : OpRewritePattern<DequantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto result = cast<RankedTensorType>(op.getResult().getType());
    const bool bank = result.getRank() == 3;
    const int64_t E = bank ? result.getShape()[0] : 1;
    const int64_t N = result.getShape()[bank ? 1 : 0];
    const int64_t K = result.getShape()[bank ? 2 : 1];
    const FormatKind kind = op.getFormat().getKind();
    const int64_t G = op.getFormat().getGroup();

    // Operands by role, flattened to 1-D storage.
    llvm::StringMap<Value> flat;
    llvm::StringMap<Type> original;
    auto addRole = [&](StringRef role, Value v) {
      original[role] = elementOf(v);
      flat[role] = flatten(rw, loc, toStorage(rw, loc, v));
    };
    addRole("weight", op.getWeight());
    for (auto [role, v] : llvm::zip(op.getRoles(), op.getSide()))
      addRole(cast<StringAttr>(role).getValue(), v);
    auto has = [&](StringRef r) { return flat.count(r) != 0; };
    auto numel = [&](StringRef r) {
      return cast<RankedTensorType>(flat[r].getType()).getShape()[0];
    };
    auto wType = cast<RankedTensorType>(op.getWeight().getType());
    const int64_t rowBytes = wType.getRank() ? wType.getShape().back() : 1;
    const int64_t Ns = wType.getNumElements() / rowBytes / E;

    // Value of a scale element: 1-byte scales are E4M3 (E8M0 for mxfp8).
    auto scaleAt = [&](Emitter &e, StringRef role, Value i) -> Value {
      Value v = tensor::ExtractOp::create(e.b, flat[role], ValueRange{i});
      if (original[role].getIntOrFloatBitWidth() == 8 &&
          !original[role].isSignlessInteger(8))
        return kind == FormatKind::mxfp8 ? e.decodeE8M0(v) : e.decodeE4M3(v);
      return e.toF32(v);
    };
    // A per-tensor / per-expert scalar ([] or [1] shared, [E] per expert).
    auto expertScalar = [&](Emitter &e, StringRef role, Value ex) -> Value {
      if (!has(role))
        return e.f32(1.0);
      return scaleAt(e, role, numel(role) == 1 ? e.idx(0) : ex);
    };
    auto nibble = [&](Emitter &e, Value byte, Value col, bool highFirst) {
      Value u = arith::ExtUIOp::create(e.b, e.b.getI32Type(), byte);
      Value even = arith::CmpIOp::create(
          e.b, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(e.b, col, e.idx(2)), e.idx(0));
      Value hi = arith::AndIOp::create(
          e.b, arith::ShRUIOp::create(e.b, u, e.i32(4)), e.i32(0xF));
      Value lo = arith::AndIOp::create(e.b, u, e.i32(0xF));
      return highFirst ? e.select(even, hi, lo) : e.select(even, lo, hi);
    };

    bool rotate = static_cast<bool>(op.getRotationAttr());
    Type valueType = rotate ? rw.getF32Type() : result.getElementType();
    SmallVector<OpFoldResult> sizes;
    for (int64_t d : result.getShape())
      sizes.push_back(rw.getIndexAttr(d));
    Value init = emptyTensor(rw, loc, sizes, valueType);
    Value vals = buildParallel(
        rw, loc, ValueRange{}, {}, init, [&](Emitter &e, ValueRange) -> Value {
          Value ex = bank ? e.index(0) : e.idx(0);
          Value n = e.index(bank ? 1 : 0);
          Value k = e.index(bank ? 2 : 1);
          Value rowBase =
              e.mul(e.add(e.mul(ex, e.idx(Ns)), n), e.idx(rowBytes));
          Value globalRow = e.add(e.mul(ex, e.idx(N)), n);
          auto weightByte = [&](Value col) -> Value {
            return tensor::ExtractOp::create(e.b, flat["weight"],
                                             ValueRange{e.add(rowBase, col)});
          };
          Value v;
          switch (kind) {
          case FormatKind::float8_e4m3fn:
          case FormatKind::float8_e5m2: {
            Value q = weightByte(k);
            Value d = kind == FormatKind::float8_e4m3fn ? e.decodeE4M3(q)
                                                         : e.decodeE5M2(q);
            v = e.mul(d, expertScalar(e, "weight_scale", ex));
            break;
          }
          case FormatKind::int8_tensorwise: {
            Value q = e.toF32(weightByte(k));
            Value s;
            if (!has("weight_scale"))
              s = e.f32(1.0);
            else if (numel("weight_scale") == E * N && N > 1)
              s = scaleAt(e, "weight_scale", globalRow);
            else
              s = expertScalar(e, "weight_scale", ex);
            v = e.mul(q, s);
            break;
          }
          case FormatKind::convrot_w4a4: {
            Value byte = weightByte(arith::DivUIOp::create(e.b, k, e.idx(2)));
            Value nib = nibble(e, byte, k, /*highFirst=*/false);
            Value sv = e.select(
                arith::CmpIOp::create(e.b, arith::CmpIPredicate::uge, nib,
                                      e.i32(8)),
                arith::SubIOp::create(e.b, nib, e.i32(16)), nib);
            v = e.mul(e.toF32(sv), scaleAt(e, "weight_scale", globalRow));
            break;
          }
          case FormatKind::asym_w4a8_int8:
          case FormatKind::w6a8_int8: {
            Value byte = weightByte(arith::DivUIOp::create(e.b, k, e.idx(2)));
            Value lo = nibble(e, byte, k, /*highFirst=*/false);
            Value level;
            if (kind == FormatKind::w6a8_int8) {
              Value hiByte = weightByte(e.add(
                  e.idx(K / 2), arith::DivUIOp::create(e.b, k, e.idx(4))));
              Value shift = arith::IndexCastOp::create(
                  e.b, e.b.getI32Type(),
                  e.mul(arith::RemUIOp::create(e.b, k, e.idx(4)), e.idx(2)));
              Value hi = arith::AndIOp::create(
                  e.b,
                  arith::ShRUIOp::create(
                      e.b, arith::ExtUIOp::create(e.b, e.b.getI32Type(), hiByte),
                      shift),
                  e.i32(3));
              Value code = arith::OrIOp::create(
                  e.b, lo, arith::ShLIOp::create(e.b, hi, e.i32(4)));
              level = e.sub(e.toF32(code), e.f32(32.0));
            } else if (has("weight_codebook")) {
              level = e.toF32(tensor::ExtractOp::create(
                  e.b, flat["weight_codebook"],
                  ValueRange{arith::IndexCastOp::create(e.b, e.b.getIndexType(),
                                                        lo)}));
            } else {
              level = e.sub(e.toF32(lo), e.f32(8.0));
            }
            const int64_t groups = K / G;
            Value rel = scaleAt(
                e, "weight_s_rel",
                e.add(e.mul(globalRow, e.idx(groups)),
                      arith::DivUIOp::create(e.b, k, e.idx(G))));
            // g8 = clamp(RNE(level * s_rel), -127, 127) (one f32 multiply).
            Value g8 = math::RoundEvenOp::create(e.b, e.mul(level, rel));
            g8 = arith::MinNumFOp::create(
                e.b, e.f32(127.0),
                arith::MaxNumFOp::create(e.b, e.f32(-127.0), g8));
            v = e.mul(g8, scaleAt(e, "weight_s_channel", globalRow));
            break;
          }
          case FormatKind::nvfp4:
          case FormatKind::mxfp8: {
            bool nv = kind == FormatKind::nvfp4;
            const int64_t blk = nv ? 16 : 32;
            const int64_t cols = (K + blk - 1) / blk;
            const int64_t count =
                (Ns + 127) / 128 * 128 * ((cols + 3) / 4 * 4);
            Value off = e.add(
                e.mul(ex, e.idx(count)),
                e.swizzledOffset(n, arith::DivUIOp::create(e.b, k, e.idx(blk)),
                                 cols));
            Value bs = scaleAt(e, "weight_scale", off);
            if (nv) {
              Value byte = weightByte(arith::DivUIOp::create(e.b, k, e.idx(2)));
              Value code = nibble(e, byte, k, /*highFirst=*/true);
              Value s2 = expertScalar(e, "weight_scale_2", ex);
              v = e.mul(e.decodeE2M1(code), e.mul(bs, s2));
            } else {
              v = e.mul(e.decodeE4M3(weightByte(k)), bs);
            }
            break;
          }
          }
          return e.fromF32(v, valueType);
        });
    if (rotate)
      vals = buildButterfly(rw, loc, vals, op.getRotationAttr().getGroup(),
                            result.getElementType());
    rw.replaceOp(op, vals);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// qmatmul
//===----------------------------------------------------------------------===//

/// Elementwise decode of exotic float codes (f8*, f4*) to f32; f32/bf16/f16
/// pass through (the contraction widens them).
Value decodeOperand(OpBuilder &b, Location loc, Value v) {
  Type elt = elementOf(v);
  if (elt.isF32() || elt.isBF16() || elt.isF16())
    return v;
  Value s = toStorage(b, loc, v);
  return buildParallel(
      b, loc, s, b.getMultiDimIdentityMap(2),
      emptyTensor(b, loc, mixedSizes(b, loc, s), b.getF32Type()),
      [&](Emitter &e, ValueRange a) -> Value {
        if (isa<Float8E4M3FNType>(elt))
          return e.decodeE4M3(a[0]);
        if (isa<Float8E5M2Type>(elt))
          return e.decodeE5M2(a[0]);
        if (isa<Float4E2M1FNType>(elt))
          return e.decodeE2M1(a[0]);
        if (isa<Float8E8M0FNUType>(elt))
          return e.decodeE8M0(a[0]);
        return e.toF32(a[0]);
      });
}

struct QMatmulLowering : OpRewritePattern<QMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(QMatmulOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rw.getContext();
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    bool ints = resType.getElementType().isSignlessInteger(32);
    Value a, b;
    if (ints) {
      a = toStorage(rw, loc, op.getLhs());
      b = toStorage(rw, loc, op.getRhs());
      if (!elementOf(a).isSignlessInteger(8) ||
          !elementOf(b).isSignlessInteger(8))
        return rw.notifyMatchFailure(op, "integer operands must be stored as i8");
    } else {
      a = decodeOperand(rw, loc, op.getLhs());
      b = decodeOperand(rw, loc, op.getRhs());
    }
    Emitter top(rw, loc);
    SmallVector<OpFoldResult> sizes = {mixedSizes(rw, loc, a)[0],
                                       mixedSizes(rw, loc, b)[0]};
    Value zero = ints ? top.i32(0) : top.f32(0.0);
    Value init = filledTensor(rw, loc, sizes, zero);
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
          } else {
            p = arith::AddFOp::create(
                e.b, args[2],
                arith::MulFOp::create(e.b, e.toF32(args[0]), e.toF32(args[1])));
          }
          linalg::YieldOp::create(nb, nl, p);
        });
    Value r = gemm.getResult(0);
    if (r.getType() != resType)
      r = tensor::CastOp::create(rw, loc, resType, r);
    rw.replaceOp(op, r);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// epilogue
//===----------------------------------------------------------------------===//

struct EpilogueLowering : OpRewritePattern<EpilogueOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(EpilogueOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rw.getContext();
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    Value acc = op.getAcc();
    SmallVector<Value> inputs = {acc};
    SmallVector<AffineMap> maps = {mapOf(ctx, 2, {0, 1})};
    // Scale operands: one element -> a scalar captured by the body;
    // otherwise an input with its broadcasting map.
    struct Operand {
      Value scalar;
      int input = -1;
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
        maps.push_back(mapOf(ctx, 2, {0, -1}));           // [M, 1]
      else if (t.getRank() == 1)
        maps.push_back(mapOf(ctx, 2, {1}));               // [N]
      else
        maps.push_back(mapOf(ctx, 2, {1, -1}));           // [N, 1]
      return o;
    };
    Operand rs = add(op.getRowScale(), /*row=*/true);
    Operand cs = add(op.getColScale(), /*row=*/false);
    Operand bias = add(op.getBias(), /*row=*/false);
    Value init = emptyTensor(rw, loc, mixedSizes(rw, loc, acc),
                             resType.getElementType());
    Value r = buildParallel(
        rw, loc, inputs, maps, init, [&](Emitter &e, ValueRange a) -> Value {
          auto get = [&](const Operand &o) {
            return o.scalar ? o.scalar : a[o.input];
          };
          Value v = e.toF32(a[0]);
          if (rs.scalar || rs.input >= 0)
            v = e.mul(v, e.toF32(get(rs)));
          if (cs.scalar || cs.input >= 0)
            v = e.mul(v, e.toF32(get(cs)));
          if (bias.scalar || bias.input >= 0)
            v = e.add(v, e.toF32(get(bias)));
          return e.fromF32(v, resType.getElementType());
        });
    if (r.getType() != resType)
      r = tensor::CastOp::create(rw, loc, resType, r);
    rw.replaceOp(op, r);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct ConvertComfyQuantToLinalgPass
    : impl::ConvertComfyQuantToLinalgBase<ConvertComfyQuantToLinalgPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(convertWeightsToArguments(func)))
        return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateComfyQuantToLinalgPatterns(patterns);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    // Casts between storage and original types fold in pairs; one left over
    // means a comfyquant value reached an op this pass does not lower.
    WalkResult res = module.walk([&](Operation *op) {
      if (isa<CheckpointOp, TensorOp, AttentionOp, LinearOp, EmbeddingOp,
              MoEOp>(op))
        return WalkResult::skip();
      if (op->getDialect() && isa<ComfyQuantDialect>(op->getDialect())) {
        op->emitOpError("was not lowered to linalg");
        return WalkResult::interrupt();
      }
      if (auto cast = dyn_cast<UnrealizedConversionCastOp>(op)) {
        cast.emitOpError("storage-type cast left after lowering (a "
                         "comfyquant value has a consumer that was not "
                         "lowered)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (res.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mlir::comfyquant::populateComfyQuantToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<RotateLowering, QuantizeLowering, DequantizeLowering,
               QMatmulLowering, EpilogueLowering>(patterns.getContext());
}

//===----------------------------------------------------------------------===//
// Weights -> function arguments
//===----------------------------------------------------------------------===//

LogicalResult mlir::comfyquant::convertWeightsToArguments(func::FuncOp func) {
  SmallVector<WeightOp> weights;
  func.walk([&](WeightOp w) { weights.push_back(w); });
  if (weights.empty())
    return success();
  if (func.isExternal())
    return func.emitOpError("has weights but no body");
  MLIRContext *ctx = func.getContext();
  Builder b(ctx);
  SymbolTableCollection symbols;
  llvm::DenseMap<Attribute, BlockArgument> argOf;
  SmallVector<Attribute> manifest;
  if (auto existing = func->getAttrOfType<ArrayAttr>("comfyquant.weights"))
    manifest.append(existing.begin(), existing.end());
  for (WeightOp w : weights) {
    auto tensor = symbols.lookupNearestSymbolFrom<TensorOp>(w, w.getTensor());
    if (!tensor)
      return w.emitOpError("references ")
             << w.getTensor() << ", which is not a comfyquant.tensor";
    auto it = argOf.find(w.getTensorAttr());
    BlockArgument arg;
    if (it != argOf.end()) {
      arg = it->second;
    } else {
      RankedTensorType original = tensor.getTensorType();
      std::optional<rt::DType> dtype = getDType(original.getElementType());
      if (!dtype)
        return w.emitOpError("tensor element type has no safetensors dtype");
      SmallVector<NamedAttribute> attrs = {
          b.getNamedAttr("comfyquant.tensor", tensor.getSymNameAttr()),
          b.getNamedAttr("comfyquant.dtype",
                         b.getStringAttr(rt::dtypeName(*dtype))),
          b.getNamedAttr("comfyquant.offset", tensor.getOffsetAttr()),
          b.getNamedAttr("bufferization.writable", b.getBoolAttr(false))};
      if (tensor.getShardAttr())
        attrs.push_back(
            b.getNamedAttr("comfyquant.shard", tensor.getShardAttr()));
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(index, storageType(original),
                                     b.getDictionaryAttr(attrs), w.getLoc())))
        return failure();
      arg = func.getArgument(index);
      argOf[w.getTensorAttr()] = arg;
      SmallVector<NamedAttribute> entry = {
          b.getNamedAttr("tensor", tensor.getSymNameAttr()),
          b.getNamedAttr("dtype", b.getStringAttr(rt::dtypeName(*dtype))),
          b.getNamedAttr("offset", tensor.getOffsetAttr()),
          b.getNamedAttr("shape", b.getI64ArrayAttr(original.getShape())),
          b.getNamedAttr("arg", b.getI64IntegerAttr(index))};
      if (tensor.getShardAttr())
        entry.push_back(b.getNamedAttr("shard", tensor.getShardAttr()));
      manifest.push_back(b.getDictionaryAttr(entry));
    }
    OpBuilder ob(w);
    Value v = fromStorage(ob, w.getLoc(), arg, w.getResult().getType());
    w.getResult().replaceAllUsesWith(v);
    w.erase();
  }
  func->setAttr("comfyquant.weights", b.getArrayAttr(manifest));
  return success();
}
