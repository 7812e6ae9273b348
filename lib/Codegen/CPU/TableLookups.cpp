//===- TableLookups.cpp - table gathers as register permutes and shuffles -===//
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

namespace {

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

} // namespace

void mlir::comfyquant::detail::lowerTableLookups(func::FuncOp func,
                                                int64_t lanes,
                                                bool bytePermute,
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

