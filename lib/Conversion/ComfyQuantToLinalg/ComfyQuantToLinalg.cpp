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
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/Numerics.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
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

/// The int8_row / int4_row scheme on x [rows, K]: scales [rows, 1] (f32)
/// and codes [rows, K] (i8).
std::pair<Value, Value> quantizeRows(OpBuilder &b, Location loc, Value x,
                                     bool int8, Type act) {
  MLIRContext *ctx = b.getContext();
  SmallVector<OpFoldResult> xSizes = mixedSizes(b, loc, x);
  SmallVector<OpFoldResult> rowSizes = {xSizes[0], b.getIndexAttr(1)};
  Value amax = rowAmax(b, loc, x);
  Value scales = buildParallel(
      b, loc, amax, mapOf(ctx, 2, {0}),
      emptyTensor(b, loc, rowSizes, b.getF32Type()),
      [&](Emitter &e, ValueRange a) -> Value {
        if (int8) { // s = max(amax / 127, 1e-30), f32
          Value s =
              arith::DivFOp::create(e.b, a[0], e.f32(rt::ActQuant::kInt8Max));
          return arith::MaxNumFOp::create(e.b, s,
                                          e.f32(rt::ActQuant::kInt8MinScale));
        }
        // a = max(amax, 1e-10) and s = a / 7, each in x's dtype.
        Value m =
            e.roundThrough(arith::MaxNumFOp::create(
                               e.b, a[0], e.f32(rt::ActQuant::kInt4MinAmax)),
                           act);
        return e.roundThrough(
            arith::DivFOp::create(e.b, m, e.f32(rt::ActQuant::kInt4Max)), act);
      });
  double lo = int8 ? rt::ActQuant::kInt8Min : -rt::ActQuant::kInt4Max;
  double hi = int8 ? rt::ActQuant::kInt8Max : rt::ActQuant::kInt4Max;
  Value codes =
      buildParallel(b, loc, ValueRange{x, scales},
                    {mapOf(ctx, 2, {0, 1}), mapOf(ctx, 2, {0, -1})},
                    emptyTensor(b, loc, xSizes, b.getI8Type()),
                    [&](Emitter &e, ValueRange a) -> Value {
                      // int8: the f32 scale rounded to x's dtype divides; int4:
                      // the scale is already in x's dtype.
                      Value s = int8 ? e.roundThrough(a[1], act) : a[1];
                      Value v = e.roundThrough(
                          arith::DivFOp::create(e.b, e.toF32(a[0]), s), act);
                      v = math::RoundEvenOp::create(e.b, v);
                      v = e.clampF32(v, lo, hi);
                      return arith::FPToSIOp::create(e.b, e.b.getI8Type(), v);
                    });
  return {codes, scales};
}

/// quantizeRows of the rotated x [M, K], one row per iteration of an
/// scf.for: the butterfly, the amax and the codes of a row work on a
/// [1, K] slice (f32 temporaries of one row), inserted into [M, K] codes
/// and [M, 1] scales.
std::pair<Value, Value> rotateAndQuantizeByRow(OpBuilder &b, Location loc,
                                               Value x, int64_t group,
                                               bool int8, Type act) {
  auto type = cast<RankedTensorType>(x.getType());
  const int64_t k = type.getShape()[1];
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, x);
  SmallVector<OpFoldResult> scaleSizes = {sizes[0], b.getIndexAttr(1)};
  Value codes = emptyTensor(b, loc, sizes, b.getI8Type());
  Value scales = emptyTensor(b, loc, scaleSizes, b.getF32Type());
  Value rows = getValueOrCreateConstantIndexOp(b, loc, sizes[0]);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, zero, rows, one, ValueRange{codes, scales},
      [&](OpBuilder &nb, Location l, Value m, ValueRange iter) {
        SmallVector<OpFoldResult> at = {m, nb.getIndexAttr(0)};
        SmallVector<OpFoldResult> unit = {nb.getIndexAttr(1),
                                          nb.getIndexAttr(1)};
        SmallVector<OpFoldResult> rowSize = {nb.getIndexAttr(1),
                                             nb.getIndexAttr(k)};
        auto rowType = RankedTensorType::get({1, k}, type.getElementType());
        Value row = tensor::ExtractSliceOp::create(nb, l, rowType, x, at,
                                                   rowSize, unit);
        Value rotated = buildButterfly(nb, l, row, group, act);
        auto [c, s] = quantizeRows(nb, l, rotated, int8, act);
        Value allCodes =
            tensor::InsertSliceOp::create(nb, l, c, iter[0], at, rowSize, unit);
        Value allScales =
            tensor::InsertSliceOp::create(nb, l, s, iter[1], at, unit, unit);
        scf::YieldOp::create(nb, l, ValueRange{allCodes, allScales});
      });
  return {loop.getResult(0), loop.getResult(1)};
}

struct QuantizeLowering : OpRewritePattern<QuantizeOp> {
  QuantizeLowering(MLIRContext *ctx, RotatedQuantize rotated)
      : OpRewritePattern(ctx), rotated(rotated) {}
  RotatedQuantize rotated;

  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    auto xType = cast<RankedTensorType>(x.getType());
    Type act = xType.getElementType();
    MLIRContext *ctx = rw.getContext();
    Emitter top(rw, loc);
    // Fused rotation: the butterfly, rounded to T, then the same scheme
    // (row by row for a row-wise scheme when asked for).
    RotationAttr rot = op.getRotationAttr();
    ActScheme scheme = op.getScheme().getScheme();
    const bool byRow =
        rot && rotated == RotatedQuantize::Rows && xType.getRank() == 2 &&
        (scheme == ActScheme::int8_row || scheme == ActScheme::int4_row);
    if (rot) {
      if (xType.isDynamicDim(1))
        return rw.notifyMatchFailure(op, "rotated dimension must be static");
      if (!byRow)
        x = buildButterfly(rw, loc, x, rot.getGroup(), act);
    }
    Value g; // nvfp4 global scale
    SmallVector<OpFoldResult> xSizes = mixedSizes(rw, loc, x);
    Value codes, scales;
    switch (op.getScheme().getScheme()) {
    case ActScheme::int8_row:
    case ActScheme::int4_row: {
      bool int8 = op.getScheme().getScheme() == ActScheme::int8_row;
      std::tie(codes, scales) =
          byRow ? rotateAndQuantizeByRow(rw, loc, x, rot.getGroup(), int8, act)
                : quantizeRows(rw, loc, x, int8, act);
      break;
    }
    case ActScheme::fp8_static: {
      Type codeType = op.getScheme().getType();
      bool e4m3 = isa<Float8E4M3FNType>(codeType);
      if (!e4m3 && !isa<Float8E5M2Type>(codeType))
        return rw.notifyMatchFailure(op, "fp8 codes must be e4m3fn or e5m2");
      double maxv = e4m3 ? rt::kE4M3Max : rt::kE5M2Max;
      Value s = op.getStaticScale() ? extractScalar(rw, loc, op.getStaticScale())
                                    : top.f32(1.0);
      Value recip =
          top.roundThrough(arith::DivFOp::create(rw, loc, top.f32(1.0), s), act);
      codes = buildParallel(
          rw, loc, x, mapOf(ctx, 2, {0, 1}),
          emptyTensor(rw, loc, xSizes, rw.getI8Type()),
          [&](Emitter &e, ValueRange a) -> Value {
            Value v = e.roundThrough(e.mul(e.toF32(a[0]), recip), act);
            v = e.clampF32(v, -maxv, maxv);
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
      int64_t block =
          rt::formatInfo(mx ? rt::Format::MXFP8 : rt::Format::NVFP4).blockSize;
      int64_t k = xType.getShape()[1];
      Value xb = blocked(rw, loc, x, block);
      Value amax = rowAmax(rw, loc, xb); // [M, Kb]
      SmallVector<OpFoldResult> bSizes = mixedSizes(rw, loc, amax);
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
          Value allMax = extractScalar(rw, loc, all);
          Value divisor = top.f32(rt::ActQuant::kNvfp4GlobalDivisor);
          g = top.roundThrough(
              arith::DivFOp::create(rw, loc, allMax, divisor), act);
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
                e.b, arith::DivFOp::create(e.b, a[0], e.f32(rt::kE2M1Max)), g);
            d = e.select(gz, e.f32(0.0), d);
            return e.encodeE4M3(
                arith::MinNumFOp::create(e.b, d, e.f32(rt::kE4M3Max)));
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
              Value zeroF = e.f32(0.0);
              Value q = e.select(zero, zeroF,
                                 arith::DivFOp::create(e.b, v, scale));
              q = e.clampF32(q, -rt::kE4M3Max, rt::kE4M3Max);
              return e.encodeE4M3(q);
            }
            Value t = e.mul(g, e.decodeE4M3(a[2]));
            Value zero = arith::CmpFOp::create(e.b, arith::CmpFPredicate::OEQ, t,
                                               e.f32(0.0));
            Value zeroF = e.f32(0.0);
            Value q = e.select(zero, zeroF, arith::DivFOp::create(e.b, v, t));
            q = e.clampF32(q, -6.0, 6.0);
            return e.encodeE2M1(q);
          });
      codes = unblocked(rw, loc, blockedCodes, k);
      break;
    }
    }
    auto finish = [&](Value v, Type original) {
      RankedTensorType st = storageType(original);
      if (v.getType() != st)
        v = tensor::CastOp::create(rw, loc, st, v);
      return fromStorage(rw, loc, v, original);
    };
    SmallVector<Value> results = {finish(codes, op.getCodes().getType()),
                                  finish(scales, op.getScales().getType())};
    if (Value gs = op.getGlobalScale()) {
      if (!g)
        return rw.notifyMatchFailure(op, "global scale of a non-nvfp4 scheme");
      results.push_back(tensor::FromElementsOp::create(rw, loc, gs.getType(),
                                                       ValueRange{g}));
    }
    rw.replaceOp(op, results);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Weight decoding (dequantize, unpack, lookup)
//===----------------------------------------------------------------------===//

/// Element-wise access to a stored weight and its side tensors, each viewed
/// as a flat 1-D storage tensor and indexed exactly as the reference does
/// (runtime/src/Reference.cpp): row r of expert e starts at byte
/// (e·Ns + r)·rowBytes; scales by global row e·N + r.
class WeightDecoder {
public:
  WeightDecoder(OpBuilder &b, Location loc, Value weight, ValueRange side,
                ArrayAttr roles, FormatAttr format, int64_t experts,
                int64_t n, int64_t k)
      : kind(format.getKind()), G(format.getGroup()), E(experts), N(n),
        K(k) {
    add(b, loc, "weight", weight);
    for (auto [role, v] : llvm::zip(roles, side))
      add(b, loc, cast<StringAttr>(role).getValue(), v);
    auto wType = cast<RankedTensorType>(weight.getType());
    rowBytes = wType.getRank() ? wType.getShape().back() : 1;
    Ns = wType.getNumElements() / rowBytes / E;
  }

  bool has(StringRef r) const { return flat.count(r) != 0; }

  /// The exact GEMM operand of the quantized forward (f32; Reference.cpp
  /// weightOperandRows): decoded FP8 codes, e2m1·block scale, int8 codes,
  /// signed nibbles, the W4A8/W6A8 int8 grid.
  Value operand(Emitter &e, Value ex, Value n, Value k) {
    Value rowBase = rowBaseOf(e, ex, n);
    Value globalRow = e.add(e.mul(ex, e.idx(N)), n);
    switch (kind) {
    case FormatKind::float8_e4m3fn:
      return e.decodeE4M3(byteAt(e, rowBase, k));
    case FormatKind::float8_e5m2:
      return e.decodeE5M2(byteAt(e, rowBase, k));
    case FormatKind::int8_tensorwise:
      return e.toF32(byteAt(e, rowBase, k));
    case FormatKind::convrot_w4a4:
    case FormatKind::asym_w4a8_int8:
    case FormatKind::w6a8_int8:
      return e.toF32(code(e, rowBase, globalRow, k));
    case FormatKind::nvfp4: {
      Value level = e.decodeE2M1(code(e, rowBase, globalRow, k));
      return e.mul(level, blockScale(e, ex, n, k));
    }
    case FormatKind::mxfp8: {
      Value level = e.decodeE4M3(byteAt(e, rowBase, k));
      return e.mul(level, blockScale(e, ex, n, k));
    }
    }
    llvm_unreachable("format");
  }

  /// The dequantized f32 value before un-rotation (Reference.cpp
  /// dequantizeRows): operand · row scale; nvfp4 e2m1 · (bs · s2).
  Value dequantized(Emitter &e, Value ex, Value n, Value k) {
    Value globalRow = e.add(e.mul(ex, e.idx(N)), n);
    if (kind == FormatKind::nvfp4) {
      Value rowBase = rowBaseOf(e, ex, n);
      Value s2 = expertScalar(e, "weight_scale_2", ex);
      Value level = e.decodeE2M1(code(e, rowBase, globalRow, k));
      return e.mul(level, e.mul(blockScale(e, ex, n, k), s2));
    }
    Value v = operand(e, ex, n, k);
    switch (kind) {
    case FormatKind::float8_e4m3fn:
    case FormatKind::float8_e5m2:
      return e.mul(v, expertScalar(e, "weight_scale", ex));
    case FormatKind::mxfp8:
      return v;
    case FormatKind::int8_tensorwise: {
      if (!has("weight_scale"))
        return v;
      if (numel("weight_scale") == E * N && N > 1)
        return e.mul(v, scaleAt(e, "weight_scale", globalRow));
      return e.mul(v, expertScalar(e, "weight_scale", ex));
    }
    case FormatKind::convrot_w4a4:
      return e.mul(v, scaleAt(e, "weight_scale", globalRow));
    case FormatKind::asym_w4a8_int8:
    case FormatKind::w6a8_int8:
      return e.mul(v, scaleAt(e, "weight_s_channel", globalRow));
    default:
      llvm_unreachable("format");
    }
  }

  /// The integer (or E2M1) code an unpack produces, as i8: E2M1 code 0..15
  /// (nvfp4), a sign-extended nibble (convrot_w4a4), the int8 grid g8.
  Value code(Emitter &e, Value rowBase, Value globalRow, Value k) {
    Value half = arith::DivUIOp::create(e.b, k, e.idx(2));
    switch (kind) {
    case FormatKind::nvfp4:
      return trunc8(e, nibble(e, byteAt(e, rowBase, half), k));
    case FormatKind::convrot_w4a4: {
      Value nib = nibble(e, byteAt(e, rowBase, half), k);
      Value negative =
          arith::CmpIOp::create(e.b, arith::CmpIPredicate::uge, nib, e.i32(8));
      Value wrapped = arith::SubIOp::create(e.b, nib, e.i32(16));
      Value sv = e.select(negative, wrapped, nib);
      return trunc8(e, sv);
    }
    case FormatKind::asym_w4a8_int8:
    case FormatKind::w6a8_int8: {
      Value lo = nibble(e, byteAt(e, rowBase, half), k);
      Value level;
      if (kind == FormatKind::w6a8_int8) {
        Value hiStart = e.idx(K / 2);
        Value quad = arith::DivUIOp::create(e.b, k, e.idx(4));
        Value hiByte = byteAt(e, rowBase, e.add(hiStart, quad));
        Value pair = arith::RemUIOp::create(e.b, k, e.idx(4));
        Value shift = arith::IndexCastOp::create(e.b, e.b.getI32Type(),
                                                 e.mul(pair, e.idx(2)));
        Value shifted = arith::ShRUIOp::create(
            e.b, arith::ExtUIOp::create(e.b, e.b.getI32Type(), hiByte), shift);
        Value hi = arith::AndIOp::create(e.b, shifted, e.i32(3));
        Value c = arith::OrIOp::create(e.b, lo,
                                       arith::ShLIOp::create(e.b, hi, e.i32(4)));
        Value cF = e.toF32(c);
        level = e.sub(cF, e.f32(32.0));
      } else if (has("weight_codebook")) {
        level = e.toF32(tensor::ExtractOp::create(
            e.b, flat["weight_codebook"],
            ValueRange{arith::IndexCastOp::create(e.b, e.b.getIndexType(), lo)}));
      } else {
        Value loF = e.toF32(lo);
        level = e.sub(loF, e.f32(8.0));
      }
      Value rowGroups = e.mul(globalRow, e.idx(K / G));
      Value group = arith::DivUIOp::create(e.b, k, e.idx(G));
      Value rel = scaleAt(e, "weight_s_rel", e.add(rowGroups, group));
      // g8 = clamp(RNE(level · s_rel), -127, 127), one f32 multiply.
      Value g8 = math::RoundEvenOp::create(e.b, e.mul(level, rel));
      g8 = e.clampF32(g8, -rt::ActQuant::kGridMax, rt::ActQuant::kGridMax);
      return arith::FPToSIOp::create(e.b, e.b.getI8Type(), g8);
    }
    default:
      llvm_unreachable("only packed formats have codes");
    }
  }

private:
  const rt::FormatInfo &info() const { return rt::formatInfo(toRegistry(kind)); }
  FormatKind kind;
  int64_t G, E, N, K, rowBytes = 1, Ns = 1;
  llvm::StringMap<Value> flat;
  llvm::StringMap<Type> original;

  void add(OpBuilder &b, Location loc, StringRef role, Value v) {
    original[role] = elementOf(v);
    flat[role] = flatten(b, loc, toStorage(b, loc, v));
  }
  int64_t numel(StringRef r) {
    return cast<RankedTensorType>(flat[r].getType()).getShape()[0];
  }
  /// The first storage byte of row n of expert ex.
  Value rowBaseOf(Emitter &e, Value ex, Value n) {
    Value expertRow = e.add(e.mul(ex, e.idx(Ns)), n);
    return e.mul(expertRow, e.idx(rowBytes));
  }
  Value byteAt(Emitter &e, Value rowBase, Value col) {
    return tensor::ExtractOp::create(e.b, flat["weight"],
                                     ValueRange{e.add(rowBase, col)});
  }
  static Value trunc8(Emitter &e, Value v) {
    return arith::TruncIOp::create(e.b, e.b.getI8Type(), v);
  }
  /// A scale element: 1-byte float scales are E4M3 (E8M0 for mxfp8).
  Value scaleAt(Emitter &e, StringRef role, Value i) {
    Value v = tensor::ExtractOp::create(e.b, flat[role], ValueRange{i});
    Type t = original[role];
    if (t.getIntOrFloatBitWidth() == 8 && !t.isSignlessInteger(8))
      return kind == FormatKind::mxfp8 || isa<Float8E8M0FNUType>(t)
                 ? e.decodeE8M0(v)
                 : e.decodeE4M3(v);
    return e.toF32(v);
  }
  /// [] / [1] shared, [E] per expert.
  Value expertScalar(Emitter &e, StringRef role, Value ex) {
    if (!has(role))
      return e.f32(1.0);
    return scaleAt(e, role, numel(role) == 1 ? e.idx(0) : ex);
  }
  /// The 4-bit code of column `col`; which nibble holds the even column is
  /// the registry's (nvfp4 high first, the integer formats low first).
  Value nibble(Emitter &e, Value byte, Value col) {
    const bool highFirst = info().nibbles == rt::NibbleOrder::HighFirst;
    Value u = arith::ExtUIOp::create(e.b, e.b.getI32Type(), byte);
    Value parity = arith::RemUIOp::create(e.b, col, e.idx(2));
    Value even = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, parity,
                                       e.idx(0));
    Value high = arith::ShRUIOp::create(e.b, u, e.i32(4));
    Value hi = arith::AndIOp::create(e.b, high, e.i32(0xF));
    Value lo = arith::AndIOp::create(e.b, u, e.i32(0xF));
    return highFirst ? e.select(even, hi, lo) : e.select(even, lo, hi);
  }
  /// The swizzled block scale of (n, k).
  Value blockScale(Emitter &e, Value ex, Value n, Value k) {
    const int64_t blk = info().blockSize;
    const int64_t cols = (K + blk - 1) / blk;
    const int64_t count =
        static_cast<int64_t>(rt::swizzledScaleCount(Ns, cols));
    Value expertBase = e.mul(ex, e.idx(count));
    Value kBlock = arith::DivUIOp::create(e.b, k, e.idx(blk));
    Value off = e.add(expertBase, e.swizzledOffset(n, kBlock, cols));
    return scaleAt(e, "weight_scale", off);
  }
};

bool unrotates(FormatKind k) {
  return k == FormatKind::int8_tensorwise || k == FormatKind::convrot_w4a4 ||
         k == FormatKind::asym_w4a8_int8 || k == FormatKind::w6a8_int8;
}

struct DequantizeLowering : OpRewritePattern<DequantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto result = cast<RankedTensorType>(op.getResult().getType());
    const bool bank = result.getRank() == 3;
    const int64_t E = bank ? result.getShape()[0] : 1;
    WeightDecoder dec(rw, loc, op.getWeight(), op.getSide(), op.getRoles(),
                      op.getFormat(), E, result.getShape()[bank ? 1 : 0],
                      result.getShape()[bank ? 2 : 1]);
    RotationAttr rot = op.getRotationAttr();
    if (!unrotates(op.getFormat().getKind()))
      rot = {};
    Type valueType = rot ? rw.getF32Type() : result.getElementType();
    SmallVector<OpFoldResult> sizes;
    for (int64_t d : result.getShape())
      sizes.push_back(rw.getIndexAttr(d));
    Value vals = buildParallel(
        rw, loc, ValueRange{}, {}, emptyTensor(rw, loc, sizes, valueType),
        [&](Emitter &e, ValueRange) -> Value {
          Value ex = bank ? e.index(0) : e.idx(0);
          Value n = e.index(bank ? 1 : 0);
          Value k = e.index(bank ? 2 : 1);
          Value v = dec.dequantized(e, ex, n, k);
          return e.fromF32(v, valueType);
        });
    if (rot)
      vals = buildButterfly(rw, loc, vals, rot.getGroup(),
                            result.getElementType());
    rw.replaceOp(op, vals);
    return success();
  }
};

struct UnpackLowering : OpRewritePattern<UnpackOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UnpackOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto result = cast<RankedTensorType>(op.getResult().getType());
    const int64_t N = result.getShape()[0], K = result.getShape()[1];
    WeightDecoder dec(rw, loc, op.getWeight(), op.getSide(), op.getRoles(),
                      op.getFormat(), 1, N, K);
    SmallVector<OpFoldResult> sizes = {rw.getIndexAttr(N), rw.getIndexAttr(K)};
    Value codes = buildParallel(
        rw, loc, ValueRange{}, {}, emptyTensor(rw, loc, sizes, rw.getI8Type()),
        [&](Emitter &e, ValueRange) -> Value {
          Value n = e.index(0), k = e.index(1);
          Value rowBase = e.mul(n, e.idx(rowBytesOf(op)));
          return dec.code(e, rowBase, n, k);
        });
    rw.replaceOp(op, fromStorage(rw, loc, codes, result));
    return success();
  }
  static int64_t rowBytesOf(UnpackOp op) {
    auto t = cast<RankedTensorType>(op.getWeight().getType());
    return t.getShape().back();
  }
};

struct UnswizzleLowering : OpRewritePattern<UnswizzleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UnswizzleOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto result = cast<RankedTensorType>(op.getResult().getType());
    const int64_t cols = result.getShape()[1];
    Value in = flatten(rw, loc, toStorage(rw, loc, op.getInput()));
    SmallVector<OpFoldResult> sizes = {rw.getIndexAttr(result.getShape()[0]),
                                       rw.getIndexAttr(cols)};
    Value out = buildParallel(
        rw, loc, ValueRange{}, {}, emptyTensor(rw, loc, sizes, rw.getI8Type()),
        [&](Emitter &e, ValueRange) -> Value {
          Value r = e.index(0);
          Value c = e.index(1);
          Value off = e.swizzledOffset(r, c, cols);
          return tensor::ExtractOp::create(e.b, in, ValueRange{off});
        });
    rw.replaceOp(op, fromStorage(rw, loc, out, result));
    return success();
  }
};

struct LookupLowering : OpRewritePattern<LookupOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LookupOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rw.getContext();
    auto result = cast<RankedTensorType>(op.getResult().getType());
    auto weight = cast<RankedTensorType>(op.getWeight().getType());
    const int64_t V = weight.getShape()[0], D = result.getShape()[1];
    WeightDecoder dec(rw, loc, op.getWeight(), op.getSide(), op.getRoles(),
                      op.getFormat(), 1, V, D);
    RotationAttr rot = op.getRotationAttr();
    if (!unrotates(op.getFormat().getKind()))
      rot = {};
    Type valueType = rot ? rw.getF32Type() : result.getElementType();
    Value idx = op.getIndices();
    SmallVector<OpFoldResult> sizes = {mixedSizes(rw, loc, idx)[0],
                                       rw.getIndexAttr(D)};
    Value vals = buildParallel(
        rw, loc, idx, mapOf(ctx, 2, {0}), emptyTensor(rw, loc, sizes, valueType),
        [&](Emitter &e, ValueRange a) -> Value {
          // Clamp so a bad index never reads outside the table (the
          // runtime rejects such indices before calling).
          Value row = arith::IndexCastOp::create(e.b, e.b.getIndexType(), a[0]);
          Value first = e.idx(0);
          row = arith::MaxSIOp::create(
              e.b, first, arith::MinSIOp::create(e.b, row, e.idx(V - 1)));
          Value ex = e.idx(0);
          Value v = dec.dequantized(e, ex, row, e.index(1));
          return e.fromF32(v, valueType);
        });
    if (rot)
      vals = buildButterfly(rw, loc, vals, rot.getGroup(),
                            result.getElementType());
    if (vals.getType() != result)
      vals = tensor::CastOp::create(rw, loc, result, vals);
    rw.replaceOp(op, vals);
    return success();
  }
};

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
  return gemm.getResult(0);
}

/// y = T((f32(acc)·row)·col + f32(bias)).
Value buildEpilogue(PatternRewriter &rw, Location loc, Value acc, Value rowScale,
                    Value colScale, Value bias, Type resultElt) {
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

Value castTo(PatternRewriter &rw, Location loc, Value v, Type t) {
  return v.getType() == t ? v : tensor::CastOp::create(rw, loc, t, v);
}

std::optional<int64_t> blockOf(std::optional<uint64_t> b) {
  if (!b)
    return std::nullopt;
  return static_cast<int64_t>(*b);
}

struct QMatmulLowering : OpRewritePattern<QMatmulOp> {
  QMatmulLowering(MLIRContext *ctx, GemmOperands operands)
      : OpRewritePattern(ctx), operands(operands) {}
  GemmOperands operands;
  LogicalResult matchAndRewrite(QMatmulOp op,
                                PatternRewriter &rw) const override {
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    FailureOr<Value> acc =
        buildGemm(rw, op, op.getLhs(), op.getRhs(), op.getLhsBlockScales(),
                  op.getRhsBlockScales(), blockOf(op.getBlock()),
                  resType.getElementType(), operands);
    if (failed(acc))
      return failure();
    rw.replaceOp(op, castTo(rw, op.getLoc(), *acc, resType));
    return success();
  }
};

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

struct QGemmLowering : OpRewritePattern<QGemmOp> {
  QGemmLowering(MLIRContext *ctx, GemmOperands operands)
      : OpRewritePattern(ctx), operands(operands) {}
  GemmOperands operands;
  LogicalResult matchAndRewrite(QGemmOp op,
                                PatternRewriter &rw) const override {
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    FailureOr<Value> acc =
        buildGemm(rw, op, op.getLhs(), op.getRhs(), op.getLhsBlockScales(),
                  op.getRhsBlockScales(), blockOf(op.getBlock()),
                  op.getAccumulatorType(), operands);
    if (failed(acc))
      return failure();
    Value y = buildEpilogue(rw, op.getLoc(), *acc, op.getRowScale(),
                            op.getColScale(), op.getBias(),
                            resType.getElementType());
    rw.replaceOp(op, castTo(rw, op.getLoc(), y, resType));
    return success();
  }
};

/// Moves a storage -> original cast below a shape-only tensor op, so the
/// op works on the storage type: extract_slice(cast(x)) -> cast(extract_
/// slice(x)) (same for tensor.cast, collapse_shape, expand_shape).
template <typename OpT>
struct StorageCastThrough : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rw) const override {
    Value src = op->getOperand(0);
    auto cast = src.getDefiningOp<UnrealizedConversionCastOp>();
    if (!cast || cast->getNumOperands() != 1)
      return failure();
    Value storage = cast.getOperand(0);
    auto st = dyn_cast<RankedTensorType>(storage.getType());
    auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!st || !rt || st != storageType(src.getType()) ||
        st.getElementType() == rt.getElementType())
      return failure();
    Operation *clone = rw.clone(*op);
    clone->setOperand(0, storage);
    clone->getResult(0).setType(rt.clone(st.getElementType()));
    rw.replaceOp(op, fromStorage(rw, op.getLoc(), clone->getResult(0), rt));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Tensor arguments of element types without arithmetic (f8*, f4*, ui8,
/// i4) take their storage type; the body sees them through a cast.
void storageTypedArguments(func::FuncOp func) {
  if (func.isExternal())
    return;
  Block &entry = func.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  SmallVector<Type> inputs;
  for (BlockArgument arg : entry.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (t && storageType(t) != t) {
      arg.setType(storageType(t));
      Value v = fromStorage(b, func.getLoc(), arg, t);
      arg.replaceAllUsesExcept(v, v.getDefiningOp());
    }
    inputs.push_back(arg.getType());
  }
  func.setFunctionType(
      FunctionType::get(func.getContext(), inputs,
                        func.getFunctionType().getResults()));
}

struct ConvertComfyQuantToLinalgPass
    : mlir::comfyquant::impl::ConvertComfyQuantToLinalgBase<ConvertComfyQuantToLinalgPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (failed(convertWeightsToArguments(func)))
        return signalPassFailure();
      storageTypedArguments(func);
    }
    RewritePatternSet patterns(&getContext());
    populateComfyQuantToLinalgPatterns(patterns, gemmOperands, rotatedQuantize);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    // Casts between storage and original types fold in pairs; one left over
    // means a comfyquant value reached an op this pass does not lower.
    WalkResult res = module.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<CheckpointOp, TensorOp, AttentionOp, LinearOp, EmbeddingOp,
              MoEOp>(op))
        return WalkResult::skip();
      if (op->getDialect() && isa<ComfyQuantDialect>(op->getDialect())) {
        op->emitOpError("was not lowered to linalg");
        return WalkResult::interrupt();
      }
      // A storage value may leave a function in its declared type.
      auto cast = dyn_cast<UnrealizedConversionCastOp>(op);
      if (cast && !llvm::all_of(cast->getUsers(), [](Operation *u) {
            return isa<func::ReturnOp>(u);
          })) {
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

void mlir::comfyquant::populateComfyQuantElementwiseToLinalgPatterns(
    RewritePatternSet &patterns, RotatedQuantize rotated) {
  patterns.add<QuantizeLowering>(patterns.getContext(), rotated);
  patterns.add<RotateLowering, DequantizeLowering, UnpackLowering,
               UnswizzleLowering, LookupLowering, EpilogueLowering,
               StorageCastThrough<tensor::ExtractSliceOp>,
               StorageCastThrough<tensor::CastOp>,
               StorageCastThrough<tensor::CollapseShapeOp>,
               StorageCastThrough<tensor::ExpandShapeOp>>(
      patterns.getContext());
}

void mlir::comfyquant::populateComfyQuantGemmToLinalgPatterns(
    RewritePatternSet &patterns, GemmOperands operands) {
  patterns.add<QMatmulLowering, QGemmLowering>(patterns.getContext(),
                                               operands);
}

void mlir::comfyquant::populateComfyQuantToLinalgPatterns(
    RewritePatternSet &patterns, GemmOperands operands,
    RotatedQuantize rotated) {
  populateComfyQuantElementwiseToLinalgPatterns(patterns, rotated);
  populateComfyQuantGemmToLinalgPatterns(patterns, operands);
}

//===----------------------------------------------------------------------===//
// Weights -> function arguments
//===----------------------------------------------------------------------===//

LogicalResult mlir::comfyquant::convertWeightsToArguments(func::FuncOp func) {
  // The kernel takes more arguments than the module contract that
  // `comfyquant.module` verifies: keep the record under another name.
  if (Attribute info = func->getAttr(ComfyQuantDialect::getModuleAttrName())) {
    func->removeAttr(ComfyQuantDialect::getModuleAttrName());
    func->setAttr("comfyquant.lowered_module", info);
  }
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
