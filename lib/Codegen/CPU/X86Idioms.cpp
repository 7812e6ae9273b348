//===- X86Idioms.cpp - permutes, multishifts and rounding on x86 ----------===//
#include "ElementwiseIdioms.h"
#include "GemmConfig.h"

#include "comfyquant/Codegen/CPU/CPUCodegen.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Codegen/Common/ExtractLanes.h"
#include "comfyquant/Codegen/Common/LaneAffine.h"
#include "comfyquant/Codegen/Common/NibblePairs.h"
#include "comfyquant/Codegen/Common/SinkShuffles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <numeric>

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;

//===----------------------------------------------------------------------===//
// Small-table lookups -> register permutes
//===----------------------------------------------------------------------===//
//
// A gather of f32 from a table of at most 16 entries indexed by data (the
// W4A8 codebook level of each nibble) is two vpermps and a blend on AVX2
// (the table's halves in two registers, bit 3 of the index picks one), one
// vpermps on AVX-512. A vpgatherdd costs far more per lane.

/// The 16 f32 entries `lo` (AVX-512: all 16; AVX2: entries 0-7) and `hi`
/// (AVX2: entries 8-15) permuted by `idx` (i32 lanes < 16): one vpermps on
/// AVX-512, two and a blend on bit 3 of the index on AVX2.
Value mlir::comfyquant::detail::permute16(RewriterBase &rw, Location loc,
                                         Value lo, Value hi, Value idx,
                                         int64_t lanes) {
  auto f32s = VectorType::get({lanes}, rw.getF32Type());
  if (lanes == 16)
    return mlir::comfyquant::detail::intrinsicPlaceholder(
        rw, loc, "llvm.x86.avx512.permvar.sf.512", f32s, ValueRange{lo, idx});
  auto i32s = VectorType::get({lanes}, rw.getI32Type());
  Value eight = arith::ConstantOp::create(
      rw, loc, i32s, DenseElementsAttr::get(i32s, rw.getI32IntegerAttr(8)));
  Value zero = arith::ConstantOp::create(rw, loc, i32s, rw.getZeroAttr(i32s));
  Value pl = mlir::comfyquant::detail::intrinsicPlaceholder(
      rw, loc, "llvm.x86.avx2.permps", f32s, ValueRange{lo, idx});
  Value ph = mlir::comfyquant::detail::intrinsicPlaceholder(
      rw, loc, "llvm.x86.avx2.permps", f32s, ValueRange{hi, idx});
  Value upper =
      arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ne,
                            arith::AndIOp::create(rw, loc, idx, eight), zero);
  return arith::SelectOp::create(rw, loc, upper, ph, pl);
}

//===----------------------------------------------------------------------===//
// Rounding to integers -> vrndscaleps / vroundps
//===----------------------------------------------------------------------===//
//
// An activation quantizer rounds x / s to x's dtype before rounding to an
// integer: roundeven(extf(truncf(v))). LLVM's instcombine narrows that to a
// roundeven of the bf16 / f16 vector, which x86 has no instruction for, so
// the backend extracts, rounds and reinserts every lane. The x86 rounding
// intrinsics are opaque to that rewrite: one instruction per register.

/// `f` applied to the 1-D `v` one register of `width` lanes at a time,
/// giving a vector of type `result`: a shorter `v` is repeated to fill the
/// register and the low lanes of f's result kept; a longer one (a multiple
/// of `width`) is cut into registers whose results are reassembled.
/// `f(at, reg)` gets the register of lanes [at, at + width) and returns
/// `width` lanes.
Value mlir::comfyquant::detail::mapRegisters(
    RewriterBase &rw, Location loc, Value v, VectorType result, int64_t width,
    function_ref<Value(int64_t at, Value reg)> f) {
  const int64_t n = result.getNumElements();
  const int64_t step = std::min(n, width);
  SmallVector<int64_t> low(step), repeated;
  std::iota(low.begin(), low.end(), 0);
  for (int64_t i = 0; i < width; ++i)
    repeated.push_back(i % step);
  Value r = arith::ConstantOp::create(rw, loc, result, rw.getZeroAttr(result));
  for (int64_t at = 0; at < n; at += step) {
    Value reg = v;
    if (n > width)
      reg = vector::ExtractStridedSliceOp::create(
          rw, loc, v, ArrayRef<int64_t>{at}, ArrayRef<int64_t>{width},
          ArrayRef<int64_t>{1});
    else if (n < width)
      reg = vector::ShuffleOp::create(rw, loc, reg, reg, repeated);
    Value part = f(at, reg);
    if (n < width)
      part = vector::ShuffleOp::create(rw, loc, part, part, low);
    r = n <= width
            ? part
            : Value(vector::InsertStridedSliceOp::create(rw, loc, part, r,
                                                         ArrayRef<int64_t>{at},
                                                         ArrayRef<int64_t>{1}));
  }
  return r;
}

namespace {

/// vpmultishiftqb: each byte of the result is the 8 bits at bit offset
/// control[i] of its qword of `shuffle(x, zeros, dataMask)` (a mask index
/// past x reads a zero byte).
Value multishift(PatternRewriter &rw, Location loc, Value x,
                 ArrayRef<int64_t> dataMask, ArrayRef<int8_t> control) {
  auto srcType = cast<VectorType>(x.getType());
  auto i8s = VectorType::get({64}, rw.getI8Type());
  Value zero =
      arith::ConstantOp::create(rw, loc, srcType, rw.getZeroAttr(srcType));
  Value data = vector::ShuffleOp::create(rw, loc, x, zero, dataMask);
  Value ctrl = arith::ConstantOp::create(
      rw, loc, i8s, DenseElementsAttr::get(i8s, control));
  return mlir::comfyquant::detail::intrinsicPlaceholder(
      rw, loc, "llvm.x86.avx512.pmultishift.qb.512", i8s,
      ValueRange{ctrl, data});
}

/// A field of at most three bits taken from bytes a shuffle replicates,
/// `andi(shrui([extui] shuffle(x), shifts), mask)` on 64 lanes (W6A8's
/// 2-bit high plane: byte i/4 shifted by 2·(i%4)), as vpmultishiftqb:
/// each lane picks 8 bits at any bit offset of its qword, so one shuffle
/// puts the bytes a qword's lanes read into that qword and one multishift
/// replaces the byte replication, the widening and the variable shifts
/// (for bytes, LLVM shifts 16-bit halves: two unpacks, two shifts and a
/// pack). The bits above the field differ (the multishift reads on into
/// the next byte, the shift fills zeros); the mask drops them.
struct BitfieldsToMultishift : OpRewritePattern<arith::AndIOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::AndIOp op,
                                PatternRewriter &rw) const override {
    constexpr int64_t kLanes = 64;
    auto type = dyn_cast<VectorType>(op.getType());
    if (!type || type.getRank() != 1 || type.getNumElements() != kLanes)
      return failure();
    APInt mask;
    auto shr = op.getLhs().getDefiningOp<arith::ShRUIOp>();
    if (!shr || !matchPattern(op.getRhs(), m_ConstantInt(&mask)) ||
        !mask.isMask())
      return failure();
    const unsigned bits = mask.countr_one();
    // Nibbles (two fields per byte) keep NibblePairs' lowering: a shift, a
    // mask and an unpack cost less than the shuffle and the multishift
    // (measured: W4A8 and W4A4 at M = 1 lost 20-30% with it).
    if (bits >= 4)
      return failure();
    DenseIntElementsAttr shifts;
    if (!matchPattern(shr.getRhs(), m_Constant(&shifts)))
      return failure();
    Value bytes = shr.getLhs();
    auto ext = bytes.getDefiningOp<arith::ExtUIOp>();
    if (ext)
      bytes = ext.getIn();
    auto shuffle = bytes.getDefiningOp<vector::ShuffleOp>();
    if (!shuffle ||
        !shuffle.getResultVectorType().getElementType().isInteger(8))
      return failure();
    const int64_t srcLanes = shuffle.getV1VectorType().getNumElements();
    ArrayRef<int64_t> from = shuffle.getMask();
    SmallVector<int64_t> dataMask(kLanes, srcLanes), control(kLanes);
    auto shiftAt = shifts.getValues<APInt>();
    for (int64_t q = 0; q < kLanes / 8; ++q) {
      int64_t base = INT64_MAX, top = 0;
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t m = from[8 * q + j];
        // Only lanes of the first operand (a replicating shuffle reads one).
        if (m < 0 || m >= srcLanes)
          return failure();
        base = std::min(base, m);
        top = std::max(top, m);
      }
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t i = 8 * q + j;
        const uint64_t shift = shiftAt[i].getZExtValue();
        const int64_t offset = (from[i] - base) * 8 + int64_t(shift);
        // The field must lie inside its byte (else the shift's zeros would
        // be in it) and inside the qword.
        if (shift + bits > 8 || offset + bits > 64)
          return failure();
        control[i] = offset;
        // The bytes read, zeros after them (for two bytes per qword, one
        // vpmovzxwq).
        if (base + j <= top)
          dataMask[i] = base + j;
      }
    }
    Location loc = op.getLoc();
    auto i8s = VectorType::get({kLanes}, rw.getI8Type());
    SmallVector<int8_t> controlBytes(control.begin(), control.end());
    Value fields =
        multishift(rw, loc, shuffle.getV1(), dataMask, controlBytes);
    Value maskBytes = arith::ConstantOp::create(
        rw, loc, i8s,
        DenseElementsAttr::get(
            i8s, rw.getI8IntegerAttr(int8_t(mask.getZExtValue()))));
    Value r = arith::AndIOp::create(rw, loc, fields, maskBytes);
    if (type != i8s)
      r = arith::ExtUIOp::create(rw, loc, type, r);
    rw.replaceOp(op, r);
    return success();
  }
};

/// A nibble pair select (NibblePairs.h) into sixteen 32-bit lanes (NVFP4's
/// E2M1 codes at M = 1, the indices of a vpermps table lookup) with
/// vpmultishiftqb: each packed byte zero-extended into a qword (one
/// vpmovzxbq), one multishift takes the even lane's nibble into the low
/// byte of the qword's first dword and the odd lane's into its second, the
/// other bytes from the qword's zeros; a mask keeps the nibble. Three ops
/// where the 16-bit pair form and its widening to dwords take six. Also
/// into 32 lanes (wordNibbles).
struct NibblePairsToMultishift : OpRewritePattern<arith::SelectOp> {
  /// 32 lanes (a bf16 kernel's codes): each pair of packed bytes into a
  /// qword (one vpmovzxwq), one multishift takes the four nibbles into
  /// the low bytes of its four words (the high bytes from the qword's
  /// zeros), a mask keeps the nibble, widened to `type`.
  static Value wordNibbles(PatternRewriter &rw, Location loc, Value x,
                           int64_t srcLanes, bool lowFirst, VectorType type) {
    SmallVector<int64_t> dataMask(64, srcLanes);
    SmallVector<int8_t> control(64, 16);
    for (int64_t q = 0; q < 8; ++q) {
      dataMask[8 * q] = 2 * q;
      dataMask[8 * q + 1] = 2 * q + 1;
      for (int64_t b = 0; b < 2; ++b) {
        control[8 * q + 4 * b] = 8 * b + (lowFirst ? 0 : 4);
        control[8 * q + 4 * b + 2] = 8 * b + (lowFirst ? 4 : 0);
      }
    }
    Value fields = multishift(rw, loc, x, dataMask, control);
    auto words = VectorType::get({32}, rw.getI16Type());
    Value nibbles = vector::BitCastOp::create(rw, loc, words, fields);
    Value fifteen = arith::ConstantOp::create(
        rw, loc, words,
        DenseElementsAttr::get(words, rw.getI16IntegerAttr(15)));
    Value masked = arith::AndIOp::create(rw, loc, nibbles, fifteen);
    return arith::ExtUIOp::create(rw, loc, type, masked);
  }

  NibblePairsToMultishift(MLIRContext *ctx)
      : OpRewritePattern(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(arith::SelectOp sel,
                                PatternRewriter &rw) const override {
    auto type = dyn_cast<VectorType>(sel.getType());
    if (!type || type.getRank() != 1 ||
        (type.getNumElements() != 16 && type.getNumElements() != 32) ||
        !type.getElementType().isInteger(32))
      return failure();
    std::optional<NibblePair> pair = matchNibblePair(sel);
    if (!pair)
      return failure();
    Location loc = sel.getLoc();
    Value x = pair->bytes;
    const int64_t srcLanes = cast<VectorType>(x.getType()).getNumElements();
    if (type.getNumElements() == 32) {
      rw.replaceOp(sel,
                   wordNibbles(rw, loc, x, srcLanes, pair->lowFirst, type));
      return success();
    }
    // Qword q: byte q of x, then zeros.
    SmallVector<int64_t> dataMask(64, srcLanes);
    for (int64_t q = 0; q < 8; ++q)
      dataMask[8 * q] = q;
    // Dword 2q's low byte: bit 0 (low nibble) or 4 (high) of the byte;
    // dword 2q + 1's the other; every other byte: bits 8-15, zeros.
    SmallVector<int8_t> control(64, 8);
    for (int64_t q = 0; q < 8; ++q) {
      control[8 * q] = pair->lowFirst ? 0 : 4;
      control[8 * q + 4] = pair->lowFirst ? 4 : 0;
    }
    Value fields = multishift(rw, loc, x, dataMask, control);
    Value dwords = vector::BitCastOp::create(rw, loc, type, fields);
    Value fifteen = arith::ConstantOp::create(
        rw, loc, type,
        DenseElementsAttr::get(type, rw.getIntegerAttr(rw.getI32Type(), 15)));
    rw.replaceOpWithNewOp<arith::AndIOp>(sel, dwords, fifteen);
    return success();
  }
};

/// math.roundeven of a 1-D f32 vector, in registers of `lanes` or, where
/// the length is not a multiple of that (a row's remainder), of 8 or 4
/// lanes: one vrndscaleps (16 lanes), vroundps ymm (8) or xmm (4) each,
/// immediate 8 (round to nearest even, no precision exception).
struct RoundEvenToX86Round : OpRewritePattern<math::RoundEvenOp> {
  RoundEvenToX86Round(MLIRContext *ctx, int64_t lanes)
      : OpRewritePattern(ctx), lanes(lanes) {}

  LogicalResult matchAndRewrite(math::RoundEvenOp op,
                                PatternRewriter &rw) const override {
    auto type = dyn_cast<VectorType>(op.getType());
    if ((lanes != 8 && lanes != 16) || !type || type.getRank() != 1 ||
        type.isScalable() || !type.getElementType().isF32())
      return failure();
    const int64_t n = type.getNumElements();
    int64_t chunk = lanes;
    while (chunk >= 4 && n % chunk)
      chunk /= 2;
    if (chunk < 4)
      return failure();
    Location loc = op.getLoc();
    auto reg = VectorType::get({chunk}, rw.getF32Type());
    Value nearest = arith::ConstantOp::create(rw, loc, rw.getI32IntegerAttr(8));
    Value r = mapRegisters(
        rw, loc, op.getOperand(), type, chunk, [&](int64_t, Value v) -> Value {
          if (chunk == 16) {
            // (src, imm, passthru, mask, rounding): all lanes, the current
            // rounding mode for the exception bits (4).
            Value all =
                arith::ConstantOp::create(rw, loc, rw.getI16IntegerAttr(-1));
            Value current =
                arith::ConstantOp::create(rw, loc, rw.getI32IntegerAttr(4));
            return mlir::comfyquant::detail::intrinsicPlaceholder(
                rw, loc, "llvm.x86.avx512.mask.rndscale.ps.512", reg,
                ValueRange{v, nearest, v, all, current});
          }
          return mlir::comfyquant::detail::intrinsicPlaceholder(
              rw, loc,
              chunk == 8 ? "llvm.x86.avx.round.ps.256"
                         : "llvm.x86.sse41.round.ps",
              reg, ValueRange{v, nearest});
        });
    rw.replaceOp(op, r);
    return success();
  }

  int64_t lanes;
};

} // namespace

void mlir::comfyquant::detail::populateX86RoundPatterns(
    RewritePatternSet &patterns, int64_t width) {
  patterns.add<RoundEvenToX86Round>(patterns.getContext(), width);
}

void mlir::comfyquant::detail::populateMultishiftPatterns(
    RewritePatternSet &patterns) {
  patterns.add<BitfieldsToMultishift, NibblePairsToMultishift>(
      patterns.getContext());
}
