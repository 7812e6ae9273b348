//===- VectorizeElementwise.cpp - vector tiles of elementwise generics ----===//
//
// The GEMM micro-kernels are vectorized by comfyquant-cpu-vectorize-gemm;
// everything around them (activation quantization, weight decoders run per
// N tile, epilogues) is elementwise and would otherwise lower to scalar
// loops. Each such op is tiled to [1, ..., 1, lanes] and handed to the
// upstream linalg vectorizer.
//===----------------------------------------------------------------------===//
#include "GemmConfig.h"
#include "comfyquant/Codegen/CPU/CPUCodegen.h"

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

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUVECTORIZEELEMENTWISE
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// Records on a function with a target which path its elementwise ops
/// took: `comfyquant.elementwise = "vector"`, or `"vector+scalar"` when
/// some tiles (short remainders, ops the vectorizer rejects) stay scalar
/// loops.
void recordElementwisePath(func::FuncOp func, int64_t scalarTiles) {
  if (!func->hasAttr("comfyquant.target"))
    return;
  func->setAttr("comfyquant.elementwise",
                StringAttr::get(func.getContext(),
                                scalarTiles ? "vector+scalar" : "vector"));
}

/// An AMX GEMM's elementwise consumer stays a linalg.generic: the AMX pass
/// computes it in the tile write-back after bufferization.
bool consumesAmxGemm(linalg::GenericOp op) {
  for (Value in : op.getDpsInputs())
    if (auto g = in.getDefiningOp<linalg::GenericOp>())
      if (std::optional<mlir::comfyquant::detail::GemmConfig> c =
              mlir::comfyquant::detail::readGemmConfig(g))
        if (c->isAmx())
          return true;
  return false;
}

bool isCandidate(linalg::GenericOp op) {
  if (consumesAmxGemm(op))
    return false;
  if (op->hasAttr("comfyquant.gemm") || !op.hasPureTensorSemantics() ||
      op.getNumLoops() == 0 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  return !ShapedType::isDynamic(ranges.back()) && ranges.back() >= 2;
}

/// Tile sizes [1, ..., 1, inner] (inner 0: the whole innermost extent).
SmallVector<OpFoldResult> tileSizes(Builder &b, unsigned loops, int64_t inner) {
  SmallVector<OpFoldResult> sizes(loops - 1, b.getIndexAttr(1));
  sizes.push_back(b.getIndexAttr(inner));
  return sizes;
}

/// Whether the vectorizer accepts a [1, ..., 1, width] tile of `op`: built
/// once on a scratch tile, so a rejected op is left untiled.
bool acceptsTile(RewriterBase &rw, linalg::GenericOp op, int64_t width) {
  OpBuilder::InsertionGuard g(rw);
  rw.setInsertionPoint(op);
  unsigned loops = op.getNumLoops();
  SmallVector<OpFoldResult> offsets(loops, rw.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes(loops, rw.getIndexAttr(1));
  sizes.back() = rw.getIndexAttr(width);
  FailureOr<TilingResult> tile =
      cast<TilingInterface>(op.getOperation())
          .getTiledImplementation(rw, offsets, sizes);
  if (failed(tile) || tile->tiledOps.size() != 1)
    return false;
  SmallVector<int64_t> vectorSizes(loops, 1);
  vectorSizes.back() = width;
  bool ok = succeeded(linalg::vectorizeOpPrecondition(
      tile->tiledOps.front(), vectorSizes, {}, /*vectorizeNDExtract=*/true));
  // Erase the scratch tile and the slices it was built from.
  SmallVector<Operation *> scratch(tile->generatedSlices.begin(),
                                   tile->generatedSlices.end());
  for (Operation *t : llvm::reverse(tile->tiledOps))
    rw.eraseOp(t);
  for (Operation *s : llvm::reverse(scratch))
    if (s->use_empty())
      rw.eraseOp(s);
  return ok;
}

/// Tiles `op` to [1, ..., 1, inner] and vectorizes every tile. A tile the
/// vectorizer rejects (e.g. a one-element remainder, which has no loop left
/// once unit dimensions are dropped) stays a scalar generic, lowered to loops
/// with the rest of linalg; `scalarTiles` counts them.
LogicalResult tileAndVectorize(RewriterBase &rw, TilingInterface op,
                               int64_t inner, int64_t width,
                               int64_t &scalarTiles) {
  auto linalgOp = cast<linalg::LinalgOp>(op.getOperation());
  unsigned loops = linalgOp.getNumLoops();
  scf::SCFTilingOptions options;
  options.setTileSizes(tileSizes(rw, loops, inner));
  rw.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(rw, op, options);
  if (failed(tiled))
    return failure();
  rw.replaceOp(op, tiled->replacements);
  for (Operation *t : tiled->tiledOps) {
    if (width < 2) {
      ++scalarTiles;
      continue;
    }
    // Drop the unit loops first: the tile becomes a 1-D generic (its
    // linalg.index values of outer loops are the tile offsets), vectorized
    // to plain vector<width x T>.
    rw.setInsertionPoint(t);
    SmallVector<int64_t> vectorSizes(loops, 1);
    vectorSizes.back() = width;
    if (auto generic = dyn_cast<linalg::GenericOp>(t)) {
      FailureOr<linalg::DropUnitDimsResult> dropped =
          linalg::dropUnitDims(rw, generic, linalg::ControlDropUnitDims());
      if (succeeded(dropped)) {
        rw.replaceOp(generic, dropped->replacements);
        t = dropped->resultOp.getOperation();
        vectorSizes.assign(
            cast<linalg::LinalgOp>(t).getNumLoops(), 1);
        if (vectorSizes.empty()) {
          ++scalarTiles;
          continue;
        }
        vectorSizes.back() = width;
      }
    }
    rw.setInsertionPoint(t);
    if (failed(linalg::vectorizeOpPrecondition(t, vectorSizes, {},
                                               /*vectorizeNDExtract=*/true))) {
      ++scalarTiles;
      continue;
    }
    FailureOr<linalg::VectorizationResult> v = linalg::vectorize(
        rw, t, vectorSizes, SmallVector<bool>(vectorSizes.size(), false),
        /*vectorizeNDExtract=*/true);
    if (failed(v)) {
      ++scalarTiles;
      continue;
    }
    if (t->getNumResults())
      rw.replaceOp(t, v->replacements);
    else
      rw.eraseOp(t);
  }
  return success();
}

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
Value permute16(RewriterBase &rw, Location loc, Value lo, Value hi, Value idx,
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
Value mapRegisters(RewriterBase &rw, Location loc, Value v, VectorType result,
                   int64_t width,
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

//===----------------------------------------------------------------------===//
// Scale-row lookups -> byte shuffles
//===----------------------------------------------------------------------===//
//
// A gather of i8 from a [rows, codes] table at `row · codes + code`, where
// the row is one value over each aligned 16 lanes (the scale byte of a K
// group) and the code is data: comfyquant-cpu-tabulate-decoders' W4A8 /
// W6A8 grid tables. Each 16 lanes load their row's 16-entry quarters and
// pshufb them by the code; with 64 codes, bits 4-5 of the code pick the
// quarter. A byte gather would be 16 scalar loads. With AVX512-VBMI a
// 64-code row is one vpermb of the whole row per run of lanes that shares
// it (W6A8 at M = 1: a load and a permute per 16 lanes instead of four
// quarter loads and inserts, four pshufb and three selects). The f32
// tables (NVFP4's E2M1 x E4M3) are permuted a register of lanes at a time.

constexpr int64_t kShuffleLanes = 16;

/// Whether every aligned run of `run` lanes of the 1-D vector `v` holds one
/// value.
bool uniformOverRuns(Value v, int64_t run, unsigned depth = 0) {
  auto type = dyn_cast<VectorType>(v.getType());
  if (!type || type.getRank() != 1 || depth > 12)
    return false;
  if (auto bc = v.getDefiningOp<vector::BroadcastOp>())
    return !isa<VectorType>(bc.getSourceType()) ||
           cast<VectorType>(bc.getSourceType()).getNumElements() == 1;
  DenseElementsAttr cst;
  if (matchPattern(v, m_Constant(&cst))) {
    if (cst.isSplat())
      return true;
    auto values = llvm::to_vector(cst.getValues<Attribute>());
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] != values[i - i % run])
        return false;
    return true;
  }
  if (auto shuffle = v.getDefiningOp<vector::ShuffleOp>()) {
    ArrayRef<int64_t> mask = shuffle.getMask();
    for (size_t i = 0; i < mask.size(); ++i)
      if (mask[i] != mask[i - i % run])
        return false;
    return true;
  }
  Operation *def = v.getDefiningOp();
  if (!def || !def->hasTrait<OpTrait::Elementwise>() || !isPure(def) ||
      def->getNumResults() != 1)
    return false;
  return llvm::all_of(def->getOperands(), [&](Value operand) {
    return uniformOverRuns(operand, run, depth + 1);
  });
}

/// The f32 lookups table[rows[i], columns[i]] of a [R, 16] table, `rows`
/// one value per register of `lanes`: the row's entries in one (AVX-512)
/// or two (AVX2, bit 3 of the column picks the half) registers, permuted.
Value permuteRows(RewriterBase &rw, Location loc, Value table, Value rows,
                  Value columns, VectorType result, int64_t lanes) {
  auto f32s = VectorType::get({lanes}, rw.getF32Type());
  Value index = arith::IndexCastOp::create(
      rw, loc, result.clone(rw.getI32Type()), columns);
  Value pad = arith::ConstantOp::create(rw, loc, rw.getF32FloatAttr(0.0f));
  return mapRegisters(
      rw, loc, index, result, lanes, [&](int64_t at, Value idx) -> Value {
        Value row = vector::ExtractOp::create(rw, loc, rows, at);
        auto entries = [&](int64_t from) -> Value {
          return vector::TransferReadOp::create(
              rw, loc, f32s, table,
              ValueRange{row, arith::ConstantIndexOp::create(rw, loc, from)},
              pad, ArrayRef<bool>{true});
        };
        // One op-creating call per statement: argument order is unspecified
        // and the IR must not depend on the host compiler.
        Value lo = entries(0);
        Value hi = lanes == 16 ? Value() : entries(8);
        return permute16(rw, loc, lo, hi, idx, lanes);
      });
}

/// The 16-bit lookups table[rows[i], columns[i]] of a [R, 16] table,
/// `rows` one value per 16 lanes: per 32 lanes, the two rows' entries in
/// one register (a load each) and one vpermw by the column, plus 16 in the
/// upper half's lanes.
Value permuteWordRows(RewriterBase &rw, Location loc, Value table, Value rows,
                      Value columns, VectorType result) {
  constexpr int64_t kWordLanes = 2 * kShuffleLanes;
  auto elt = cast<RankedTensorType>(table.getType()).getElementType();
  auto i16s = VectorType::get({kWordLanes}, rw.getI16Type());
  auto half = VectorType::get({kShuffleLanes}, elt);
  Value index = arith::IndexCastOp::create(
      rw, loc, result.clone(rw.getI16Type()), columns);
  SmallVector<int16_t> upper(kWordLanes, 0);
  std::fill(upper.begin() + kShuffleLanes, upper.end(), int16_t(16));
  Value offsets = arith::ConstantOp::create(
      rw, loc, i16s, DenseElementsAttr::get(i16s, ArrayRef<int16_t>(upper)));
  Value pad = arith::ConstantOp::create(rw, loc, rw.getZeroAttr(elt));
  const int64_t n = result.getNumElements();
  SmallVector<int64_t> concat(kWordLanes);
  std::iota(concat.begin(), concat.end(), 0);
  Value r = mapRegisters(
      rw, loc, index, result.clone(rw.getI16Type()), kWordLanes,
      [&](int64_t at, Value idx) -> Value {
        auto row = [&](int64_t lane) -> Value {
          Value which = vector::ExtractOp::create(rw, loc, rows, lane);
          return vector::TransferReadOp::create(
              rw, loc, half, table,
              ValueRange{which, arith::ConstantIndexOp::create(rw, loc, 0)},
              pad, ArrayRef<bool>{true});
        };
        Value lo = row(at);
        Value hi = at + kShuffleLanes < n ? row(at + kShuffleLanes) : lo;
        Value both = vector::ShuffleOp::create(rw, loc, lo, hi, concat);
        Value entries = vector::BitCastOp::create(rw, loc, i16s, both);
        Value shifted = arith::OrIOp::create(rw, loc, idx, offsets);
        return mlir::comfyquant::detail::intrinsicPlaceholder(
            rw, loc, "llvm.x86.avx512.permvar.hi.512", i16s,
            ValueRange{entries, shifted});
      });
  return vector::BitCastOp::create(rw, loc, result, r);
}

/// pshufb lookups of `code` (i8 lanes, each < 16 · tables) in chunks of
/// min(n, 16) lanes: `tables(at)` gives the 16-entry tables of the chunk at
/// lane `at`, and bits 4-5 of a code pick one (16 codes: the only one). An
/// 8-lane vector fills both halves of one shuffle and keeps the low one.
Value shuffleLookup(RewriterBase &rw, Location loc, Value code,
                    VectorType result,
                    function_ref<SmallVector<Value>(int64_t at)> tables) {
  auto bytes = VectorType::get({kShuffleLanes}, rw.getI8Type());
  Value four = arith::ConstantOp::create(
      rw, loc, bytes, DenseElementsAttr::get(bytes, rw.getI8IntegerAttr(4)));
  return mapRegisters(
      rw, loc, code, result, kShuffleLanes, [&](int64_t at, Value c) {
        SmallVector<Value> quarters = tables(at);
        Value part;
        Value quarter;
        for (auto [q, entries] : llvm::enumerate(quarters)) {
          Value looked = mlir::comfyquant::detail::intrinsicPlaceholder(
              rw, loc, "llvm.x86.ssse3.pshuf.b.128", bytes,
              ValueRange{entries, c});
          if (q == 0) {
            part = looked;
            continue;
          }
          if (!quarter)
            quarter = arith::ShRUIOp::create(rw, loc, c, four);
          Value qv = arith::ConstantOp::create(
              rw, loc, bytes,
              DenseElementsAttr::get(bytes, rw.getI8IntegerAttr(int64_t(q))));
          Value hit = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq,
                                            quarter, qv);
          part = arith::SelectOp::create(rw, loc, hit, looked, part);
        }
        return part;
      });
}

/// vpermb lookups of `code` (i8 lanes, each < 64) in 64-entry rows of the
/// i8 `table`, `rows` one value per aligned `run` lanes: 64 lanes at a
/// time, one permute per run, each merged into its lanes. Vectors under
/// 64 lanes are repeated to 64 and the low lanes kept.
Value permuteByteRows(RewriterBase &rw, Location loc, Value table, Value rows,
                      Value code, VectorType result, int64_t run) {
  constexpr int64_t kBlock = 64;
  const int64_t block = std::min(result.getNumElements(), kBlock);
  auto bytes = VectorType::get({kBlock}, rw.getI8Type());
  auto bits = VectorType::get({kBlock}, rw.getI1Type());
  Value pad = arith::ConstantOp::create(rw, loc, rw.getI8IntegerAttr(0));
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  return mapRegisters(rw, loc, code, result, kBlock, [&](int64_t at, Value c) {
    Value part;
    for (int64_t q = 0; q < block; q += run) {
      Value row = vector::ExtractOp::create(rw, loc, rows, at + q);
      Value entries = vector::TransferReadOp::create(
          rw, loc, bytes, table, ValueRange{row, zero}, pad,
          ArrayRef<bool>{true});
      Value looked = mlir::comfyquant::detail::intrinsicPlaceholder(
          rw, loc, "llvm.x86.avx512.permvar.qi.512", bytes,
          ValueRange{entries, c});
      if (!part) {
        part = looked;
        continue;
      }
      SmallVector<bool> mine(kBlock, false);
      for (int64_t i = q; i < q + run; ++i)
        mine[i] = true;
      Value lanesOfRun = arith::ConstantOp::create(
          rw, loc, bits, DenseElementsAttr::get(bits, ArrayRef<bool>(mine)));
      part = arith::SelectOp::create(rw, loc, lanesOfRun, looked, part);
    }
    return part;
  });
}

/// A read of a [256, codes] table (comfyquant-cpu-tabulate-decoders) at a
/// row that is one value per 16 lanes, as described above; other gathers
/// are left alone. `bytePermute`: the target has vpermb.
void lowerRowLookup(vector::GatherOp g, int64_t lanes, bool bytePermute) {
  IRRewriter rw(g.getContext());
  auto table = dyn_cast<RankedTensorType>(g.getBase().getType());
  VectorType result = g.getVectorType();
  if (!table || table.getRank() != 2 || !table.hasStaticShape() ||
      table.getDimSize(1) % kShuffleLanes ||
      table.getDimSize(1) > 4 * kShuffleLanes || result.getRank() != 1 ||
      !matchPattern(g.getMask(), m_One()) ||
      !llvm::all_of(g.getOffsets(), [](Value v) { return isZeroInteger(v); }))
    return;
  // i8: lanes per shuffle, 16, or 8 for an 8-lane vector (the low half
  // of one shuffle). f32 (16 codes only): one register of lanes per
  // permute.
  const bool bytes8 = table.getElementType().isInteger(8);
  const bool f32 = table.getElementType().isF32() &&
                   table.getDimSize(1) == kShuffleLanes &&
                   (lanes == 8 || lanes == 16);
  // 16-bit (a bf16 kernel's rows): AVX-512, rows uniform over 16 lanes.
  const int64_t n = result.getNumElements();
  // mapRegisters cuts registers of 32 lanes: n is at most one or whole ones.
  const bool words = table.getElementType().isIntOrFloat() &&
                     table.getElementType().getIntOrFloatBitWidth() == 16 &&
                     table.getDimSize(1) == kShuffleLanes && lanes == 16 &&
                     (n <= 2 * kShuffleLanes || n % (2 * kShuffleLanes) == 0);
  const int64_t chunk =
      f32 ? lanes : (words ? kShuffleLanes : std::min(n, kShuffleLanes));
  if ((!bytes8 && !f32 && !words) || chunk < 8 || n % chunk)
    return;
  const int64_t codes = table.getDimSize(1);
  auto add = g.getIndices().getDefiningOp<arith::AddIOp>();
  if (!add)
    return;
  Value rows, columns;
  for (int side = 0; side < 2 && !rows; ++side) {
    auto mul = add->getOperand(side).getDefiningOp<arith::MulIOp>();
    if (!mul)
      continue;
    for (int f = 0; f < 2 && !rows; ++f)
      if (mlir::comfyquant::detail::splatInteger(mul->getOperand(1 - f)) ==
              codes &&
          uniformOverRuns(mul->getOperand(f), chunk)) {
        rows = mul->getOperand(f);
        columns = add->getOperand(1 - side);
      }
  }
  if (!rows)
    return;
  rw.setInsertionPoint(g);
  Location loc = g.getLoc();
  if (f32) {
    rw.replaceOp(
        g, permuteRows(rw, loc, g.getBase(), rows, columns, result, lanes));
    return;
  }
  if (words) {
    rw.replaceOp(g,
                 permuteWordRows(rw, loc, g.getBase(), rows, columns, result));
    return;
  }
  // Columns are < codes <= 64 (the gather reads in bounds), so bit 7 of
  // each shuffle index is clear and pshufb uses its low four bits.
  Value code = arith::IndexCastOp::create(rw, loc, result.clone(rw.getI8Type()),
                                          columns);
  if (bytePermute && codes == 4 * kShuffleLanes &&
      n % std::min<int64_t>(n, 64) == 0) {
    // The longest run of lanes that shares a row: one permute per run.
    int64_t run = chunk;
    while (run * 2 <= std::min<int64_t>(n, 64) &&
           uniformOverRuns(rows, run * 2))
      run *= 2;
    rw.replaceOp(
        g, permuteByteRows(rw, loc, g.getBase(), rows, code, result, run));
    return;
  }
  auto bytes = VectorType::get({kShuffleLanes}, rw.getI8Type());
  Value pad = arith::ConstantOp::create(rw, loc, rw.getI8IntegerAttr(0));
  rw.replaceOp(g, shuffleLookup(rw, loc, code, result, [&](int64_t at) {
                 Value row = vector::ExtractOp::create(rw, loc, rows, at);
                 SmallVector<Value> quarters;
                 for (int64_t q = 0; q < codes / kShuffleLanes; ++q)
                   quarters.push_back(vector::TransferReadOp::create(
                       rw, loc, bytes, g.getBase(),
                       ValueRange{row, arith::ConstantIndexOp::create(
                                           rw, loc, q * kShuffleLanes)},
                       pad, ArrayRef<bool>{true}));
                 return quarters;
               }));
}

/// A gather of i8 from a table of at most 16 entries (a signed nibble's
/// int8 value) at `index` (an integer vector < 16): one pshufb per 16 lanes
/// (8-lane vectors use the low half of one).
void shuffleBytes(vector::GatherOp g, Value index) {
  VectorType result = g.getVectorType();
  const int64_t n = result.getNumElements();
  if (std::min<int64_t>(n, kShuffleLanes) < 8 ||
      n % std::min<int64_t>(n, kShuffleLanes))
    return;
  IRRewriter rw(g.getContext());
  rw.setInsertionPoint(g);
  Location loc = g.getLoc();
  auto bytes = VectorType::get({kShuffleLanes}, rw.getI8Type());
  auto size = cast<RankedTensorType>(g.getBase().getType()).getDimSize(0);
  Value pad = arith::ConstantOp::create(rw, loc, rw.getI8IntegerAttr(0));
  Value entries = vector::TransferReadOp::create(
      rw, loc, bytes, g.getBase(),
      ValueRange{arith::ConstantIndexOp::create(rw, loc, 0)}, pad,
      ArrayRef<bool>{size == kShuffleLanes});
  // Indices are < 16 (the gather reads in bounds): bit 7 clear.
  Value code = index;
  if (getElementTypeOrSelf(code.getType()).getIntOrFloatBitWidth() > 8)
    code = arith::TruncIOp::create(rw, loc, result.clone(rw.getI8Type()), code);
  rw.replaceOp(g, shuffleLookup(rw, loc, code, result, [&](int64_t) {
                 return SmallVector<Value>{entries};
               }));
}

/// Where the magnitudes of a sign-magnitude word table (entries 0-127) are
/// affine in the code, `(c << shift) + offset`, for every code in
/// [low, high] but at most 32 codes outside (a float format's subnormals
/// below, its inf / NaN codes above): those then map one to one into a
/// 32-entry table by their low five bits.
struct AffineWords {
  unsigned shift;
  uint16_t offset;
  unsigned low, high;
};

static std::optional<AffineWords> findAffineWords(ArrayRef<APInt> bits) {
  std::optional<AffineWords> best;
  for (unsigned shift = 0; shift < 16; ++shift) {
    auto offset = [&](unsigned c) {
      return static_cast<uint16_t>(bits[c].getZExtValue() - (c << shift));
    };
    // Every maximal run of codes with one offset.
    unsigned low = 0;
    for (unsigned c = 1; c <= 128; ++c) {
      if (c < 128 && offset(c) == offset(c - 1))
        continue;
      if (!best || c - 1 - low > best->high - best->low)
        best = AffineWords{shift, offset(low), low, c - 1};
      low = c;
    }
  }
  if (!best || 127 - (best->high - best->low) > 32)
    return std::nullopt;
  return best;
}

/// A gather of 16-bit values from a constant 256-entry table (a byte's
/// decode to bf16, comfyquant-cpu-vectorize-gemm) at `index` (i32 lanes
/// < 256), AVX-512 only: per 32 lanes, two vpermi2w (entries 0-63 and
/// 64-127, the table's quarters in pairs of registers) and a blend on
/// index bit 6; then, where entry c + 128 is entry c with the sign bit set
/// (a sign-magnitude code; a NaN may take either sign), bit 7 of the index
/// moved to bit 15, else two more vpermi2w and a blend on bit 7. With
/// `affine` (where a two-table word permute is slow: comfyquant-cpu-
/// select-strategy's tune), a sign-magnitude table whose magnitudes are
/// affine but for at most 32 codes (findAffineWords; FP8 codes' bf16) is
/// computed instead: a shift and an add, the exceptions from one vpermw.
void permuteWords(vector::GatherOp g, Value index, bool affine) {
  DenseElementsAttr entries;
  if (!matchPattern(g.getBase(), m_Constant(&entries)))
    return;
  auto words = cast<DenseElementsAttr>(
      entries.bitcast(IntegerType::get(g.getContext(), 16)));
  SmallVector<APInt> bits(words.getValues<APInt>());
  auto isNaN = [&](unsigned c) {
    return isa<FloatType>(entries.getElementType()) &&
           entries.getValues<APFloat>()[c].isNaN();
  };
  bool signMagnitude = true;
  for (unsigned c = 0; c < 128 && signMagnitude; ++c)
    signMagnitude =
        (isNaN(c) && isNaN(c + 128)) || bits[c + 128] == (bits[c] | 0x8000);
  IRRewriter rw(g.getContext());
  rw.setInsertionPoint(g);
  Location loc = g.getLoc();
  constexpr int64_t kWordLanes = 32;
  auto i16s = VectorType::get({kWordLanes}, rw.getI16Type());
  auto splat = [&](uint16_t v) -> Value {
    return arith::ConstantOp::create(
        rw, loc, i16s, DenseElementsAttr::get(i16s, rw.getI16IntegerAttr(v)));
  };
  std::optional<AffineWords> aw;
  if (affine && signMagnitude)
    aw = findAffineWords(bits);
  SmallVector<Value> quarters;
  for (unsigned q = 0; q < (aw ? 0u : signMagnitude ? 4u : 8u); ++q)
    quarters.push_back(arith::ConstantOp::create(
        rw, loc, i16s,
        DenseElementsAttr::get(
            i16s, ArrayRef<APInt>(bits).slice(q * kWordLanes, kWordLanes))));
  VectorType result = g.getVectorType();
  // A byte code is sign-extended: the permutes read its low six bits and
  // bit 15 is then its bit 7 (the sign to set); no zero extension needed.
  auto i16Codes = result.clone(rw.getI16Type());
  Value code;
  auto ext = index.getDefiningOp<arith::ExtUIOp>();
  const bool signExtended =
      ext && getElementTypeOrSelf(ext.getIn().getType()).isInteger(8);
  if (signExtended)
    code = arith::ExtSIOp::create(rw, loc, i16Codes, ext.getIn());
  else
    code = arith::TruncIOp::create(rw, loc, i16Codes, index);
  Value zero = splat(0);
  Value r = mapRegisters(
      rw, loc, code, i16Codes, kWordLanes, [&](int64_t, Value reg) {
        auto bitSet = [&](uint16_t bit) -> Value {
          return arith::CmpIOp::create(
              rw, loc, arith::CmpIPredicate::ne,
              arith::AndIOp::create(rw, loc, reg, splat(bit)), zero);
        };
        // Entries [64·h, 64·h + 64) at the index's low six bits.
        auto half = [&](unsigned h) -> Value {
          return mlir::comfyquant::detail::intrinsicPlaceholder(
              rw, loc, "llvm.x86.avx512.vpermi2var.hi.512", i16s,
              ValueRange{quarters[2 * h], reg, quarters[2 * h + 1]});
        };
        auto sign = [&]() -> Value {
          Value top =
              signExtended
                  ? reg
                  : Value(arith::ShLIOp::create(rw, loc, reg, splat(8)));
          return arith::AndIOp::create(rw, loc, top, splat(0x8000));
        };
        if (aw) {
          SmallVector<APInt> odd(kWordLanes, APInt(16, 0));
          for (unsigned c = 0; c < 128; ++c)
            if (c < aw->low || c > aw->high)
              odd[c & 31] = bits[c];
          Value oddTable = arith::ConstantOp::create(
              rw, loc, i16s, DenseElementsAttr::get(i16s, odd));
          // One op-creating call per statement: argument order is
          // unspecified and the IR must not depend on the host compiler.
          Value mag = arith::AndIOp::create(rw, loc, reg, splat(0x7F));
          Value scaled =
              aw->shift
                  ? Value(arith::ShLIOp::create(rw, loc, mag, splat(aw->shift)))
                  : mag;
          Value linear =
              arith::AddIOp::create(rw, loc, scaled, splat(aw->offset));
          Value fromLow =
              aw->low
                  ? Value(arith::SubIOp::create(rw, loc, mag, splat(aw->low)))
                  : mag;
          Value outside =
              arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ugt, fromLow,
                                    splat(aw->high - aw->low));
          Value exception = mlir::comfyquant::detail::intrinsicPlaceholder(
              rw, loc, "llvm.x86.avx512.permvar.hi.512", i16s,
              ValueRange{oddTable, mag});
          Value v =
              arith::SelectOp::create(rw, loc, outside, exception, linear);
          Value s = sign();
          return Value(arith::OrIOp::create(rw, loc, v, s));
        }
        // One op-creating call per statement: argument order is unspecified
        // and the IR must not depend on the host compiler.
        Value low = half(0);
        Value high = half(1);
        Value bit6 = bitSet(64);
        Value v = arith::SelectOp::create(rw, loc, bit6, high, low);
        if (signMagnitude) {
          Value s = sign();
          return Value(arith::OrIOp::create(rw, loc, v, s));
        }
        Value third = half(2);
        Value fourth = half(3);
        Value upper = arith::SelectOp::create(rw, loc, bit6, fourth, third);
        return Value(arith::SelectOp::create(rw, loc, bitSet(128), upper, v));
      });
  rw.replaceOp(g, vector::BitCastOp::create(rw, loc, result, r));
}

void lowerTableLookups(func::FuncOp func, int64_t lanes, bool bytePermute,
                       bool affineWords) {
  if (lanes != 8 && lanes != 16)
    return;
  IRRewriter rw(func.getContext());
  SmallVector<vector::GatherOp> gathers;
  func.walk([&](vector::GatherOp g) { gathers.push_back(g); });
  for (vector::GatherOp g : gathers) {
    auto table = dyn_cast<RankedTensorType>(g.getBase().getType());
    VectorType result = g.getVectorType();
    if (table && table.getRank() == 2) {
      lowerRowLookup(g, lanes, bytePermute);
      continue;
    }
    auto cast = g.getIndices().getDefiningOp<arith::IndexCastOp>();
    if (table && table.getRank() == 1 && table.hasStaticShape() &&
        table.getDimSize(0) <= 16 && table.getElementType().isInteger(8) &&
        cast && result.getRank() == 1 && matchPattern(g.getMask(), m_One()) &&
        isZeroInteger(g.getOffsets()[0])) {
      shuffleBytes(g, cast.getIn());
      continue;
    }
    // 32 lanes per register (mapRegisters): at most one or whole ones.
    if (table && table.getRank() == 1 && table.hasStaticShape() &&
        table.getDimSize(0) == 256 && table.getElementType().isIntOrFloat() &&
        table.getElementType().getIntOrFloatBitWidth() == 16 && lanes == 16 &&
        cast && result.getRank() == 1 &&
        (result.getNumElements() <= 32 || result.getNumElements() % 32 == 0) &&
        matchPattern(g.getMask(), m_One()) &&
        isZeroInteger(g.getOffsets()[0]) &&
        getElementTypeOrSelf(cast.getIn().getType()).isInteger(32)) {
      permuteWords(g, cast.getIn(), affineWords);
      continue;
    }
    if (!table || table.getRank() != 1 || !table.hasStaticShape() ||
        table.getDimSize(0) > 16 || !table.getElementType().isF32() ||
        result.getRank() != 1 || result.getNumElements() % lanes || !cast ||
        !matchPattern(g.getMask(), m_One()) ||
        !isZeroInteger(g.getOffsets()[0]))
      continue;
    auto idxType = dyn_cast<VectorType>(cast.getIn().getType());
    if (!idxType || !idxType.getElementType().isInteger(32))
      continue;
    // Indices of a gather are in bounds, so < 16 here; table entries past
    // its size are padding that no lane selects.
    rw.setInsertionPoint(g);
    Location loc = g.getLoc();
    auto f32s = VectorType::get({lanes}, rw.getF32Type());
    Value pad = arith::ConstantOp::create(rw, loc, rw.getF32FloatAttr(0.0f));
    auto half = [&](int64_t at) -> Value {
      bool inBounds = at + lanes <= table.getDimSize(0);
      return vector::TransferReadOp::create(
          rw, loc, f32s, g.getBase(),
          ValueRange{arith::ConstantIndexOp::create(rw, loc, at)}, pad,
          ArrayRef<bool>{inBounds});
    };
    Value lo = half(0), hi = lanes == 8 ? half(8) : Value();
    // One register of lanes at a time (a kv-vector of a GEMM step may span
    // several).
    Value r = arith::ConstantOp::create(rw, loc, result,
                                        rw.getZeroAttr(result));
    for (int64_t at = 0; at < result.getNumElements(); at += lanes) {
      Value idx = cast.getIn();
      if (result.getNumElements() != lanes)
        idx = vector::ExtractStridedSliceOp::create(
            rw, loc, idx, ArrayRef<int64_t>{at}, ArrayRef<int64_t>{lanes},
            ArrayRef<int64_t>{1});
      Value part = permute16(rw, loc, lo, hi, idx, lanes);
      r = result.getNumElements() == lanes
              ? part
              : Value(vector::InsertStridedSliceOp::create(
                    rw, loc, part, r, ArrayRef<int64_t>{at},
                    ArrayRef<int64_t>{1}));
    }
    rw.replaceOp(g, r);
  }
}

/// A read of a whole tensor just written whole (through a unit-dim
/// expand_shape, as dropped unit dims leave it) is the written vector: the
/// per-vector decoder of a one-row GEMM then stays in registers.
void forwardWholeTensorWrites(func::FuncOp func) {
  IRRewriter rw(func.getContext());
  SmallVector<vector::TransferReadOp> reads;
  func.walk([&](vector::TransferReadOp r) { reads.push_back(r); });
  for (vector::TransferReadOp read : reads) {
    Value src = read.getBase();
    if (auto expand = src.getDefiningOp<tensor::ExpandShapeOp>())
      src = expand.getSrc();
    auto write = src.getDefiningOp<vector::TransferWriteOp>();
    if (!write || !write.getPermutationMap().isMinorIdentity() ||
        !read.getPermutationMap().isMinorIdentity() ||
        write.hasOutOfBoundsDim() || read.getMask() || write.getMask())
      continue;
    auto written = dyn_cast<RankedTensorType>(write.getResult().getType());
    if (!written || !written.hasStaticShape() ||
        written.getNumElements() != write.getVectorType().getNumElements() ||
        read.getVectorType().getNumElements() != written.getNumElements() ||
        read.getVectorType().getElementType() != written.getElementType() ||
        !llvm::all_of(read.getIndices(),
                      [](Value v) { return isZeroInteger(v); }) ||
        !llvm::all_of(write.getIndices(),
                      [](Value v) { return isZeroInteger(v); }))
      continue;
    rw.setInsertionPoint(read);
    Value v = write.getVector();
    if (v.getType() != read.getVectorType())
      v = vector::ShapeCastOp::create(rw, read.getLoc(), read.getVectorType(),
                                      v);
    rw.replaceOp(read, v);
  }
}

struct VectorizeElementwisePass
    : mlir::comfyquant::impl::ComfyQuantCPUVectorizeElementwiseBase<
          VectorizeElementwisePass> {
  using Base::Base;

  /// The tuning of `tune`, resolved once per pass instance (`host` asks
  /// LLVM for this machine's name); none for a name it does not know, which
  /// runOnOperation reports.
  std::optional<mlir::comfyquant::detail::CpuTuning> tuning;

  LogicalResult initialize(MLIRContext *) override {
    if (mlir::comfyquant::isCpuTuneName(tune))
      tuning = mlir::comfyquant::detail::cpuTuning(tune);
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    int64_t width = mlir::comfyquant::detail::targetLanes(func, lanes);
    if (width < 2)
      return;
    SmallVector<linalg::GenericOp> ops;
    func.walk([&](linalg::GenericOp op) {
      if (isCandidate(op))
        ops.push_back(op);
    });
    IRRewriter rw(&getContext());
    int64_t scalarTiles = 0;
    for (linalg::GenericOp op : ops) {
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      const int64_t extent = ranges.back();
      // A single short row (a GEMM's per-step decode of one kv-vector) is
      // one vector, however many registers it spans: its consumer reads it
      // whole, so it can be forwarded in registers.
      const bool oneRow = llvm::all_of(ArrayRef<int64_t>(ranges).drop_back(),
                                       [](int64_t r) { return r == 1; });
      const int64_t body =
          oneRow && extent <= 4 * width ? extent : std::min(extent, width);
      if (!acceptsTile(rw, op, body))
        continue;
      const unsigned dim = op.getNumLoops() - 1;
      const int64_t main = extent - extent % width;
      auto tilingOp = cast<TilingInterface>(op.getOperation());
      LogicalResult r = success();
      if (body == extent || main == extent) {
        r = tileAndVectorize(rw, tilingOp, body == extent ? 0 : width, body,
                             scalarTiles);
      } else {
        // Full vectors, then one static tile of the remainder.
        rw.setInsertionPoint(op);
        auto [head, tail] =
            linalg::splitOp(rw, tilingOp, dim, rw.getIndexAttr(main));
        if (head)
          r = tileAndVectorize(rw, head, width, width, scalarTiles);
        if (succeeded(r) && tail)
          r = tileAndVectorize(rw, tail, 0, extent - main, scalarTiles);
      }
      if (failed(r)) {
        func.emitError("comfyquant-cpu-vectorize-elementwise: could not "
                       "tile a linalg.generic");
        return signalPassFailure();
      }
    }
    recordElementwisePath(func, scalarTiles);
    mlir::comfyquant::detail::foldLaneAffineIndices(func);
    const ::comfyquant::rt::CpuVariantInfo *variant =
        mlir::comfyquant::detail::targetVariant(func);
    if (!tuning) {
      (void)mlir::comfyquant::detail::lookupCpuTuning(func, tune);
      return signalPassFailure();
    }
    lowerTableLookups(func, width,
                      width == 16 && variant && variant->bytePermute,
                      tuning->slowTwoTableWordPermute);
    // Canonical form (one-iteration tile loops and full-size slices gone),
    // with work on uniform values (a block scale, a per-row scale) done once
    // in scalars and broadcast rather than in every lane, and on a block's
    // value once per block rather than in each of its lanes; then vectors
    // written and read back whole are forwarded.
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    for (Dialect *d : ctx->getLoadedDialects())
      d->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : ctx->getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, ctx);
    vector::populateSinkVectorOpsPatterns(patterns);
    populateSinkReplicatingShufflePatterns(patterns);
    populateExtractLanePatterns(patterns);
    populateNibblePairPatterns(patterns);
    patterns.add<RoundEvenToX86Round>(ctx, width);
    if (width == 16 && variant && variant->bytePermute)
      patterns.add<BitfieldsToMultishift, NibblePairsToMultishift>(ctx);
    // Like the canonicalizer: not converging within the iteration limit is
    // not an error (the IR is valid either way).
    (void)applyPatternsGreedily(func, std::move(patterns));
    forwardWholeTensorWrites(func);
  }
};

} // namespace
