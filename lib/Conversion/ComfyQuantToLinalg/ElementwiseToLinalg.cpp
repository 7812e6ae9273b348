//===- ElementwiseToLinalg.cpp - element-wise comfyquant ops -> linalg ----===//
//
// rotate, quantize (amax, scales, codes; rotated rows), and the weight
// decoders of dequantize, unpack, unswizzle and lookup, each one
// linalg.generic on tensors indexed exactly as the reference path
// (runtime/src/Reference.cpp) reads the stored weight.
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

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;
using namespace mlir::comfyquant::lowering;
namespace rt = ::comfyquant::rt;

namespace {

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

} // namespace

void mlir::comfyquant::populateComfyQuantElementwiseToLinalgPatterns(
    RewritePatternSet &patterns, RotatedQuantize rotated) {
  patterns.add<QuantizeLowering>(patterns.getContext(), rotated);
  patterns.add<RotateLowering, DequantizeLowering, UnpackLowering,
               UnswizzleLowering, LookupLowering,
               StorageCastThrough<tensor::ExtractSliceOp>,
               StorageCastThrough<tensor::CastOp>,
               StorageCastThrough<tensor::CollapseShapeOp>,
               StorageCastThrough<tensor::ExpandShapeOp>>(
      patterns.getContext());
  populateEpilogueToLinalgPatterns(patterns);
}

