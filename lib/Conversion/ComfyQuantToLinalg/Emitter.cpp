//===- Emitter.cpp - scalar and tensor building blocks --------------------===//
#include "Emitter.h"

#include "comfyquant/runtime/Numerics.h"

#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"

#include <cmath>

namespace rt = ::comfyquant::rt;

using namespace mlir;
using namespace mlir::comfyquant::detail;

//===----------------------------------------------------------------------===//
// Constants and conversions
//===----------------------------------------------------------------------===//

Value Emitter::f32(double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(static_cast<float>(v)));
}
Value Emitter::i32(int64_t v) { return intOf(b.getI32Type(), v); }
Value Emitter::i8(int64_t v) { return intOf(b.getI8Type(), v); }
Value Emitter::idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
Value Emitter::intOf(Type t, int64_t v) {
  return arith::ConstantOp::create(b, b.getIntegerAttr(t, v));
}

Value Emitter::toF32(Value v) {
  Type t = v.getType();
  if (t.isF32())
    return v;
  if (isa<FloatType>(t))
    return arith::ExtFOp::create(b, b.getF32Type(), v);
  return arith::SIToFPOp::create(b, b.getF32Type(), v);
}

Value Emitter::fromF32(Value v, Type t) {
  if (t.isF32())
    return v;
  return arith::TruncFOp::create(b, t, v);
}

Value Emitter::exactBF16(Value v) {
  Value bits = arith::BitcastOp::create(b, b.getI32Type(), v);
  Value high = arith::ShRUIOp::create(b, bits, i32(16));
  Value half = arith::TruncIOp::create(b, b.getI16Type(), high);
  return arith::BitcastOp::create(b, b.getBF16Type(), half);
}

Value Emitter::roundThrough(Value v, Type t) {
  if (t.isF32())
    return v;
  return arith::ExtFOp::create(b, b.getF32Type(), fromF32(v, t));
}

Value Emitter::clampF32(Value v, double lo, double hi) {
  Value hiC = f32(hi);
  Value loC = f32(lo);
  Value atLeastLo = arith::MaxNumFOp::create(b, loC, v);
  return arith::MinNumFOp::create(b, hiC, atLeastLo);
}

Value Emitter::add(Value a, Value c) {
  if (isa<FloatType>(a.getType()))
    return arith::AddFOp::create(b, a, c);
  return arith::AddIOp::create(b, a, c);
}
Value Emitter::sub(Value a, Value c) {
  if (isa<FloatType>(a.getType()))
    return arith::SubFOp::create(b, a, c);
  return arith::SubIOp::create(b, a, c);
}
Value Emitter::mul(Value a, Value c) {
  if (isa<FloatType>(a.getType()))
    return arith::MulFOp::create(b, a, c);
  return arith::MulIOp::create(b, a, c);
}
Value Emitter::select(Value cond, Value a, Value c) {
  return arith::SelectOp::create(b, cond, a, c);
}
Value Emitter::index(unsigned dim) { return linalg::IndexOp::create(b, dim); }

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

Value Emitter::decodeE4M3(Value byte) {
  // Through an IEEE half, exactly: the 4 exponent and 3 mantissa bits
  // placed under the half's (bias 15) give x · 2^-8 for normals and
  // subnormals alike (the half subnormal m · 2^-17 is x · 2^-8 too), so
  // f32(half) · 256 is x. One half->f32 conversion (vcvtph2ps), no
  // subnormal branch; only S.1111.111 (NaN) needs a select. The byte is
  // sign-extended so one shift by 7 puts its sign on the half's sign bit;
  // one mask clears the copy that lands on bit 14.
  Type i16 = b.getI16Type();
  Value s = arith::ExtSIOp::create(b, i16, byte);
  Value shifted = arith::ShLIOp::create(b, s, intOf(i16, 7));
  Value h = arith::AndIOp::create(b, shifted,
                                  intOf(i16, static_cast<int16_t>(0xBF80)));
  Value half = arith::BitcastOp::create(b, b.getF16Type(), h);
  Value f = arith::ExtFOp::create(b, b.getF32Type(), half);
  Value val = arith::MulFOp::create(b, f, f32(256.0));
  Value mag = arith::AndIOp::create(b, byte, intOf(byte.getType(), 0x7F));
  Value isNan = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, mag,
                                      intOf(byte.getType(), 0x7F));
  return select(isNan, f32(std::nan("")), val);
}

Value Emitter::decodeE5M2(Value byte) {
  // E5M2 is the top byte of an IEEE half.
  Value u = arith::ExtUIOp::create(b, b.getI16Type(), byte);
  Value h = arith::ShLIOp::create(b, u, intOf(b.getI16Type(), 8));
  Value f = arith::BitcastOp::create(b, b.getF16Type(), h);
  return arith::ExtFOp::create(b, b.getF32Type(), f);
}

Value Emitter::decodeE2M1(Value code) {
  // Through an IEEE half, exactly: exponent (2 bits) and mantissa (1 bit)
  // placed at the top of the half's fields give x · 2^-14 for every code
  // (0.5 is the half subnormal 2^-15), so f32(half) · 2^14 is x.
  Type i16 = b.getI16Type();
  Value u = arith::ExtUIOp::create(b, i16, code);
  Value magBits = arith::AndIOp::create(b, u, intOf(i16, 0x7));
  Value mag = arith::ShLIOp::create(b, magBits, intOf(i16, 9));
  Value signBit = arith::AndIOp::create(b, u, intOf(i16, 0x8));
  Value sign = arith::ShLIOp::create(b, signBit, intOf(i16, 12));
  Value h = arith::OrIOp::create(b, sign, mag);
  Value half = arith::BitcastOp::create(b, b.getF16Type(), h);
  Value f = arith::ExtFOp::create(b, b.getF32Type(), half);
  return arith::MulFOp::create(b, f, f32(16384.0));
}

Value Emitter::decodeE8M0(Value byte) {
  Value e = arith::ExtUIOp::create(b, b.getI32Type(), byte);
  Value bits = arith::ShLIOp::create(b, e, i32(23));
  Value isZero = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, e, i32(0));
  bits = select(isZero, i32(0x00400000), bits); // 2^-127 (subnormal)
  Value isNan = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, e, i32(255));
  bits = select(isNan, i32(0x7FC00000), bits);
  return arith::BitcastOp::create(b, b.getF32Type(), bits);
}

//===----------------------------------------------------------------------===//
// Encoders
//===----------------------------------------------------------------------===//

/// RNE of a positive finite f32 (bits `absBits`) to `mantBits` mantissa bits,
/// returned as (f32 exponent - biasDelta) << mantBits | mantissa.
Value Emitter::normalFloatCode(Value absBits, int mantBits, int biasDelta) {
  int drop = 23 - mantBits;
  Value kept = arith::ShRUIOp::create(b, absBits, i32(drop));
  Value lsb = arith::AndIOp::create(b, kept, i32(1));
  Value r = arith::AddIOp::create(
      b, arith::AddIOp::create(b, absBits, i32((1 << (drop - 1)) - 1)), lsb);
  r = arith::ShRUIOp::create(b, r, i32(drop));
  return arith::SubIOp::create(b, r, i32(biasDelta << mantBits));
}

static Value encodeFP8(Emitter &e, Value v, int mantBits, int biasDelta,
                       int minNormalExp, int subQuantumExp, int maxCode) {
  ImplicitLocOpBuilder &b = e.b;
  Value bits = arith::BitcastOp::create(b, b.getI32Type(), v);
  Value top = arith::ShRUIOp::create(b, bits, e.i32(24));
  Value sign = arith::AndIOp::create(b, top, e.i32(0x80));
  Value absBits = arith::AndIOp::create(b, bits, e.i32(0x7FFFFFFF));
  Value a = math::AbsFOp::create(b, v);
  // Below the smallest normal: multiples of the subnormal quantum, RNE.
  Value small = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, a,
                                      e.f32(std::ldexp(1.0, minNormalExp)));
  Value scaled =
      arith::MulFOp::create(b, a, e.f32(std::ldexp(1.0, -subQuantumExp)));
  Value subCode = arith::FPToUIOp::create(b, b.getI32Type(),
                                          math::RoundEvenOp::create(b, scaled));
  // The normal path is garbage for tiny inputs; select picks subCode.
  Value normCode = e.normalFloatCode(absBits, mantBits, biasDelta);
  Value code = e.select(small, subCode, normCode);
  code = arith::MinUIOp::create(b, code, e.i32(maxCode)); // satfinite
  code = arith::OrIOp::create(b, code, sign);
  Value isNan =
      arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, v, v);
  code = e.select(isNan, e.i32(0x7F), code);
  return arith::TruncIOp::create(b, b.getI8Type(), code);
}

Value Emitter::encodeE4M3(Value v) {
  return encodeFP8(*this, v, /*mantBits=*/3, /*biasDelta=*/120,
                   /*minNormalExp=*/-6, /*subQuantumExp=*/-9, /*maxCode=*/0x7E);
}

Value Emitter::encodeE5M2(Value v) {
  return encodeFP8(*this, v, /*mantBits=*/2, /*biasDelta=*/112,
                   /*minNormalExp=*/-14, /*subQuantumExp=*/-16,
                   /*maxCode=*/0x7B);
}

Value Emitter::encodeE2M1(Value v) {
  Value bits = arith::BitcastOp::create(b, b.getI32Type(), v);
  Value neg = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, bits, i32(0));
  Value a = math::AbsFOp::create(b, v);
  // Midpoints between the magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6; a tie goes
  // to the even code (strict > after an even code, >= after an odd one).
  // Unordered predicates send NaN to code 7, as the reference does.
  struct Step {
    double mid;
    bool strict;
  };
  const Step steps[] = {{0.25, true}, {0.75, false}, {1.25, true},
                        {1.75, false}, {2.5, true},  {3.5, false},
                        {5.0, true}};
  Value code = i32(0);
  for (const Step &s : steps) {
    Value c = arith::CmpFOp::create(
        b, s.strict ? arith::CmpFPredicate::UGT : arith::CmpFPredicate::UGE, a,
        f32(s.mid));
    code = arith::AddIOp::create(b, code,
                                 arith::ExtUIOp::create(b, b.getI32Type(), c));
  }
  code = select(neg, arith::OrIOp::create(b, code, i32(8)), code);
  return arith::TruncIOp::create(b, b.getI8Type(), code);
}

Value Emitter::mxfp8Exponent(Value amax) {
  Value ratio = arith::DivFOp::create(b, amax, f32(rt::kE4M3Max));
  Value r = arith::MaxNumFOp::create(b, ratio,
                                     f32(std::ldexp(1.0, -rt::kE8M0Bias)));
  Value bits = arith::BitcastOp::create(b, b.getI32Type(), r);
  Value exp = arith::ShRUIOp::create(b, bits, i32(23));
  Value man = arith::AndIOp::create(b, bits, i32(0x7FFFFF));
  Value up = arith::ExtUIOp::create(
      b, b.getI32Type(),
      arith::CmpIOp::create(b, arith::CmpIPredicate::ne, man, i32(0)));
  Value e = arith::AddIOp::create(b, exp, up); // ceil(log2 r) + 127
  // r == 2^-127 exactly (a subnormal) is exponent 0.
  Value minimal =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, bits, i32(0x00400000));
  e = select(minimal, i32(0), e);
  e = arith::MaxSIOp::create(b, e, i32(0));
  e = arith::MinSIOp::create(b, e, i32(rt::kE8M0MaxCode));
  Value zero =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, amax, f32(0.0));
  e = select(zero, i32(0), e);
  return arith::TruncIOp::create(b, b.getI8Type(), e);
}

Value Emitter::swizzledOffset(Value r, Value c, int64_t cols) {
  const int64_t nCB = (cols + 3) / 4;
  auto divu = [&](Value x, int64_t d) {
    return arith::DivUIOp::create(b, x, idx(d)).getResult();
  };
  auto remu = [&](Value x, int64_t d) {
    return arith::RemUIOp::create(b, x, idx(d)).getResult();
  };
  // One op per statement: argument evaluation order is unspecified and the
  // IR must not depend on the host compiler.
  Value rowBlock = divu(r, 128);
  Value rowTiles = mul(rowBlock, idx(nCB));
  Value tile = add(rowTiles, divu(c, 4));
  Value off = mul(tile, idx(512));
  Value row32 = remu(r, 32);
  off = add(off, mul(row32, idx(16)));
  Value row128 = divu(remu(r, 128), 32);
  off = add(off, mul(row128, idx(4)));
  return add(off, remu(c, 4));
}

//===----------------------------------------------------------------------===//
// Tensor helpers
//===----------------------------------------------------------------------===//

SmallVector<OpFoldResult> mlir::comfyquant::detail::mixedSizes(OpBuilder &b,
                                                               Location loc,
                                                               Value v) {
  return tensor::getMixedSizes(b, loc, v);
}

Value mlir::comfyquant::detail::emptyTensor(OpBuilder &b, Location loc,
                                            ArrayRef<OpFoldResult> sizes,
                                            Type elt) {
  return tensor::EmptyOp::create(b, loc, sizes, elt);
}

Value mlir::comfyquant::detail::filledTensor(OpBuilder &b, Location loc,
                                             ArrayRef<OpFoldResult> sizes,
                                             Value scalar) {
  Value e = emptyTensor(b, loc, sizes, scalar.getType());
  return linalg::FillOp::create(b, loc, ValueRange{scalar}, ValueRange{e})
      .getResult(0);
}

Value mlir::comfyquant::detail::buildParallel(OpBuilder &b, Location loc,
                                              ValueRange inputs,
                                              ArrayRef<AffineMap> inputMaps,
                                              Value init, BodyFn body) {
  auto type = cast<RankedTensorType>(init.getType());
  unsigned rank = type.getRank();
  SmallVector<AffineMap> maps(inputMaps.begin(), inputMaps.end());
  maps.push_back(b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{type}, inputs, ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Emitter e(nb, nl);
        Value r = body(e, args);
        linalg::YieldOp::create(nb, nl, r);
      });
  return op.getResult(0);
}

Value mlir::comfyquant::detail::buildInnerReduction(OpBuilder &b, Location loc,
                                                    Value input, Value init,
                                                    BodyFn body) {
  auto inType = cast<RankedTensorType>(input.getType());
  unsigned rank = inType.getRank();
  MLIRContext *ctx = b.getContext();
  AffineMap inMap = b.getMultiDimIdentityMap(rank);
  SmallVector<AffineExpr> outExprs;
  for (unsigned i = 0; i + 1 < rank; ++i)
    outExprs.push_back(getAffineDimExpr(i, ctx));
  AffineMap outMap = AffineMap::get(rank, 0, outExprs, ctx);
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  iters.back() = utils::IteratorType::reduction;
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{input}, ValueRange{init},
      ArrayRef<AffineMap>{inMap, outMap}, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Emitter e(nb, nl);
        linalg::YieldOp::create(nb, nl, body(e, args));
      });
  return op.getResult(0);
}

Value mlir::comfyquant::detail::extractScalar(OpBuilder &b, Location loc,
                                              Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<Value> zeros(type.getRank(),
                           arith::ConstantIndexOp::create(b, loc, 0));
  return tensor::ExtractOp::create(b, loc, t, zeros);
}

Value mlir::comfyquant::detail::flatten(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  if (type.getRank() == 1)
    return t;
  if (type.getRank() == 0)
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({1}, type.getElementType()), t,
        ArrayRef<ReassociationIndices>{});
  ReassociationIndices all;
  for (int64_t i = 0; i < type.getRank(); ++i)
    all.push_back(i);
  return tensor::CollapseShapeOp::create(b, loc, t,
                                         ArrayRef<ReassociationIndices>{all});
}

/// Butterfly stages with a stride below this read their inputs by index
/// (see buildButterfly): every CPU vector of f32 has at least 8 lanes, so
/// strides 1 and 4 would otherwise vectorize along 1 or 4 elements.
static constexpr int64_t kGatheredStageStride = 16;

Value mlir::comfyquant::detail::buildButterfly(OpBuilder &b, Location loc,
                                               Value x, int64_t group,
                                               Type outElt) {
  auto type = cast<RankedTensorType>(x.getType());
  const int64_t rank = type.getRank();
  const int64_t k = type.getShape().back();
  int stages = 0;
  for (int64_t g = group; g > 1; g /= 4)
    ++stages;
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  Value cur = x;
  int64_t stride = 1;
  // y[d] = 0.5 * (((h(d,0) x0 + h(d,1) x1) + h(d,2) x2) + h(d,3) x3)
  // with h(d, c) = -1 iff d + c == 3 (H4 of the regular Hadamard).
  auto combine = [](Emitter &e, ValueRange x, Value d, Type outType) {
    Value sum;
    for (int c = 0; c < 4; ++c) {
      Value v = e.toF32(x[c]);
      Value flip =
          arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, d, e.idx(3 - c));
      Value neg = arith::NegFOp::create(e.b, v);
      Value term = e.select(flip, neg, v);
      sum = c == 0 ? term : e.add(sum, term);
    }
    Value half = e.f32(0.5);
    return e.fromF32(e.mul(half, sum), outType);
  };
  for (int t = 0; t < stages; ++t, stride *= 4) {
    auto curType = cast<RankedTensorType>(cur.getType());
    Type outType = t + 1 == stages ? outElt : f32;
    if (stride < kGatheredStageStride) {
      // Strides below a vector's width: one generic over the unreshaped
      // tensor whose element k reads its four inputs at
      // (k / 4s) * 4s + c * s + k % s. Within a vector tile these indices
      // are a tile-uniform base plus per-lane constants, so each input is
      // one contiguous load and a lane shuffle (an in-register transpose)
      // rather than a loop over the stride of 1 or 4 elements.
      // The shuffles work on f32: 16-bit float vectors of the odd widths a
      // tail tile reads (e.g. 13 lanes) are beyond the x86 back end.
      Value src = cur;
      SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, cur);
      if (curType.getElementType() != f32) {
        Value wide = emptyTensor(b, loc, sizes, f32);
        AffineMap id = b.getMultiDimIdentityMap(rank);
        src = buildParallel(
            b, loc, ValueRange{cur}, ArrayRef<AffineMap>{id}, wide,
            [](Emitter &e, ValueRange args) { return e.toF32(args[0]); });
      }
      Value init = emptyTensor(b, loc, sizes, outType);
      cur = buildParallel(
          b, loc, ValueRange{}, ArrayRef<AffineMap>{}, init,
          [&](Emitter &e, ValueRange) {
            SmallVector<Value> at;
            for (int64_t i = 0; i + 1 < rank; ++i)
              at.push_back(e.index(i));
            Value k = e.index(rank - 1);
            Value block = e.idx(4 * stride);
            Value blockIndex = arith::DivUIOp::create(e.b, k, block);
            Value blockStart = e.mul(blockIndex, block);
            Value inBlock = arith::RemUIOp::create(e.b, k, block);
            Value s = e.idx(stride);
            Value d = arith::DivUIOp::create(e.b, inBlock, s);
            Value lane = arith::RemUIOp::create(e.b, k, s);
            Value first = e.add(blockStart, lane);
            SmallVector<Value> x;
            for (int c = 0; c < 4; ++c) {
              Value offset = e.idx(c * stride);
              at.push_back(e.add(first, offset));
              x.push_back(tensor::ExtractOp::create(e.b, src, at));
              at.pop_back();
            }
            return combine(e, x, d, outType);
          });
      continue;
    }
    // [..., K] -> [..., K/(4s), 4, s]: the digit of this stage is its own
    // dimension (rank) and the four butterfly inputs are constant indices.
    SmallVector<int64_t> shape(curType.getShape().drop_back());
    shape.append({k / (4 * stride), 4, stride});
    SmallVector<ReassociationIndices> reassoc;
    for (int64_t i = 0; i + 1 < rank; ++i)
      reassoc.push_back({i});
    reassoc.push_back({rank - 1, rank, rank + 1});
    auto expandedType = RankedTensorType::get(shape, curType.getElementType());
    Value expanded =
        tensor::ExpandShapeOp::create(b, loc, expandedType, cur, reassoc);
    const unsigned loops = rank + 2;
    // The four butterfly inputs as slices [..., K/(4s), s] of the digit
    // (rank-reduced), read with projected-permutation maps so the stage
    // vectorizes along s.
    SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, expanded);
    SmallVector<OpFoldResult> strides(loops, b.getIndexAttr(1));
    SmallVector<int64_t> sliceShape(shape);
    sliceShape.erase(sliceShape.begin() + rank);
    sizes[rank] = b.getIndexAttr(1);
    SmallVector<Value> inputs;
    for (int c = 0; c < 4; ++c) {
      SmallVector<OpFoldResult> offsets(loops, b.getIndexAttr(0));
      offsets[rank] = b.getIndexAttr(c);
      inputs.push_back(tensor::ExtractSliceOp::create(
          b, loc,
          RankedTensorType::get(sliceShape, expandedType.getElementType()),
          expanded, offsets, sizes, strides));
    }
    SmallVector<AffineExpr> sliceExprs;
    for (unsigned d = 0; d < loops; ++d)
      if (d != static_cast<unsigned>(rank))
        sliceExprs.push_back(getAffineDimExpr(d, ctx));
    SmallVector<AffineMap> inMaps(4, AffineMap::get(loops, 0, sliceExprs, ctx));
    Value init = emptyTensor(b, loc, mixedSizes(b, loc, expanded), outType);
    Value stage = buildParallel(
        b, loc, inputs, inMaps, init, [&](Emitter &e, ValueRange args) {
          Value d = e.index(rank);
          return combine(e, args.take_front(4), d, outType);
        });
    cur = tensor::CollapseShapeOp::create(b, loc, stage, reassoc);
  }
  return cur;
}
