//===- TensorCoreGemm.cpp - GEMMs on tensor cores, one tile per block -----===//
//
// Every tensor-core GEMM kernel has one shape on every arch: a block of one
// or two warpgroups (128 threads each) owns a 64 x 128, 128 x 128 or 128 x
// 256 tile of C, each warpgroup 64 rows by every column; each K step of 32 bytes, the
// block copies its A (rows x 32 bytes) and B (columns x 32 bytes) slices
// to workgroup memory, zero outside the operands, and issues one
// comfyquant.warpgroup_mma, which comfyquant-gpu-lower-mma makes wgmma on
// sm_90a, tcgen05 on sm_100a and mma.sync elsewhere. The host launch is
// then the same for every arch.
//
// Thread `tid` copies the 4-byte word `tid % 8` of rows `tid / 8 + Ti / 8`
// (T threads) of both tiles (coalesced: 8 threads per row of 32 bytes), or
// 16-byte chunks (2 per row); rows, columns and K beyond the operands read
// zeros, so every shape is computed (integer accumulation is exact from a
// zero start: K below 2^17 cannot reach the s32 saturation).
//
// When C is a temporary, its zero fill before the GEMM becomes zero
// registers, and its elementwise consumer (scales, bias, cast) is evaluated
// in registers where each accumulator element is stored, writing the
// consumer's output instead. With both, the fill, the GEMM and the epilogue
// are one kernel and C is left unused (no workspace).
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Codegen/GPU/FP4Decode.h"
#include "comfyquant/Codegen/GPU/FP8Decode.h"
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Codegen/GPU/SignedNibbles.h"
#include "comfyquant/Codegen/GPU/ThreadIndex.h"
#include "comfyquant/Codegen/GPU/TileLayout.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUSELECTSTRATEGY
#define GEN_PASS_DEF_COMFYQUANTGPUTENSORCOREGEMM
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::gpu_codegen;

namespace {

using mlir::comfyquant::detail::baseBuffer;
using mlir::comfyquant::detail::bodySlice;
using mlir::comfyquant::detail::GemmMatch;

/// 32-bit words per row of a K step.
constexpr int64_t kRowWords = WarpgroupMmaOp::kStepBytes / 4;
/// 16-byte chunks per row of a K step.
constexpr int64_t kRowChunks = WarpgroupMmaOp::kStepBytes / 16;

/// A block's tile of C: warpgroups stacked along M (64 rows each, every
/// warp 16 rows by all the columns), `cols` columns.
struct TileShape {
  int64_t warpgroups;
  int64_t cols;
  int64_t threads() const { return kWarpgroupSize * warpgroups; }
  int64_t rows() const { return WarpgroupMmaOp::kRows * warpgroups; }
  /// Accumulator fragments (8 columns each) per thread.
  int64_t fragments() const { return cols / 8; }
  /// Rows one pass of the block's threads copies, word by word.
  int64_t rowsPerPass() const { return threads() / kRowWords; }
  /// Rows one pass of 16-byte copies covers.
  int64_t wideRowsPerPass() const { return threads() / kRowChunks; }
};

/// One warpgroup, 64 x 128: every kind.
constexpr TileShape kNarrowTile{1, 128};
/// Two warpgroups, 128 x 256 (the tile of CUTLASS's fastest sm_80 GEMMs:
/// half the operand bytes per MAC of 64 x 128), for the kinds read as
/// stored with nothing per step but the MMA (see twoWarpgroupsFit).
constexpr TileShape kWideTile{2, 256};
/// Two warpgroups, 128 x 128, for FP8 read as stored: on sm_90a each
/// step's wgmma product is added to the f32 accumulators (see
/// comfyquant-gpu-lower-mma), and at 256 columns product and accumulators
/// need more registers than a thread has (ptxas spills 0.4 to 1.1 KB).
constexpr TileShape kTallTile{2, 128};
/// The largest table a fused decoder reads that is staged in workgroup
/// memory (a 16-entry f32 codebook is 64 bytes).
constexpr int64_t kMaxStagedTableBytes = 1024;

struct Builder {
  OpBuilder &b;
  Location loc;
  /// Operands read through the elementwise op that fills them.
  const llvm::DenseMap<Value, linalg::GenericOp> *producers = nullptr;
  /// The workgroup copies of the small tables those ops look up.
  const IRMapping *stagedTables = nullptr;
  Value idx(int64_t v) { return indexConstant(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value add(Value x, int64_t y) { return y ? add(x, idx(y)) : x; }
  Value mul(Value x, int64_t y) {
    return arith::MulIOp::create(b, loc, x, idx(y));
  }
  Value lt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value min(Value x, Value y) { return arith::MinUIOp::create(b, loc, x, y); }

  /// mem[row, col] with both indices clamped into [rows) x [cols), so no
  /// lane ever reads out of bounds (the value of a row or column outside is
  /// never stored).
  Value loadClamped(Value mem, Value row, Value col, Value rows, Value cols) {
    Value one = idx(1);
    Value r = min(row, arith::SubIOp::create(b, loc, rows, one));
    Value c = min(col, arith::SubIOp::create(b, loc, cols, one));
    if (linalg::GenericOp producer =
            producers ? producers->lookup(mem) : linalg::GenericOp())
      return mlir::comfyquant::detail::emitProducerAt(b, loc, producer, r, c,
                                                      stagedTables);
    return memref::LoadOp::create(b, loc, mem, ValueRange{r, c});
  }

  /// loadClamped within the buffer's own sizes.
  Value loadClamped(Value mem, Value row, Value col) {
    Value rows = b.createOrFold<memref::DimOp>(loc, mem, 0);
    Value cols = b.createOrFold<memref::DimOp>(loc, mem, 1);
    return loadClamped(mem, row, col, rows, cols);
  }

  /// mem[row, col], or `zero` outside [rows) x [cols) (a clamped load).
  Value loadOrZero(Value mem, Value row, Value col, Value rows, Value cols,
                   Value zero) {
    // One op per statement: argument evaluation order would make the IR
    // depend on the host compiler.
    Value rowInside = lt(row, rows);
    Value colInside = lt(col, cols);
    Value inside = arith::AndIOp::create(b, loc, rowInside, colInside);
    Value v = loadClamped(mem, row, col, rows, cols);
    return arith::SelectOp::create(b, loc, inside, v, zero);
  }

  /// loadOrZero behind a branch: no load at all outside (a value read once
  /// per word or per scale, where the rows of A past a decode-sized M
  /// would otherwise each load a clamped copy of the last row's).
  Value loadIfInside(Value mem, Value row, Value col, Value rows, Value cols,
                     Value zero) {
    Value rowInside = lt(row, rows);
    Value colInside = lt(col, cols);
    Value inside = arith::AndIOp::create(b, loc, rowInside, colInside);
    auto choice = scf::IfOp::create(b, loc, TypeRange{zero.getType()}, inside,
                                    /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(choice.thenBlock());
    scf::YieldOp::create(b, loc, loadClamped(mem, row, col, rows, cols));
    b.setInsertionPointToStart(choice.elseBlock());
    scf::YieldOp::create(b, loc, zero);
    return choice.getResult(0);
  }
};

/// The instruction shape and operand form of one kind of GEMM.
struct Family {
  GemmMatch match;
  Type load;       ///< element type read from the operands
  int64_t perReg;  ///< elements per 32-bit register
  Type acc;        ///< accumulator element type
  GpuMmaKind kind; ///< recorded in the function's comfyquant.gemms
  /// Block-scaled FP8 whose scale factor is UE8M0(row) * UE8M0(column),
  /// or FP4 with E4M3(row) * E4M3(column): the raw scales reach
  /// comfyquant.warpgroup_mma (a block-scaled MMA where the arch has one)
  /// instead of being applied here.
  bool stagedScales = false;
  bool fp4() const { return match.kind == GemmMatch::Kind::F4F4F32; }
  /// Scale bytes per tile row and K step.
  int64_t scalesPerRow() const { return fp4() ? tileK() / match.block : 1; }
  /// Elements of one K step (32 bytes).
  int64_t tileK() const { return kRowWords * perReg; }
  /// The operand types comfyquant.warpgroup_mma is told.
  Type mmaA() const {
    return match.kind == GemmMatch::Kind::I8I8I32 ||
                   match.kind == GemmMatch::Kind::FloatF32
               ? load
               : match.aElt;
  }
  Type mmaB() const {
    return match.kind == GemmMatch::Kind::I8I8I32 ||
                   match.kind == GemmMatch::Kind::FloatF32
               ? load
               : match.bElt;
  }
};

/// The f32 value of a UE8M0 byte: 2^(code - 127), NaN for 0xFF.
APFloat ue8m0Value(unsigned code) {
  if (code == 255)
    return APFloat::getQNaN(APFloat::IEEEsingle());
  return APFloat(std::ldexp(1.0f, static_cast<int>(code) - 127));
}

/// Whether the block scale of `m` is decode(scale_a) * decode(scale_b),
/// both scales bytes (they are staged as bytes and the hardware reads
/// bytes).
bool isScaleProduct(linalg::GenericOp op, const GemmMatch &m,
                    llvm::function_ref<APFloat(unsigned)> decode) {
  Block &body = op.getRegion().front();
  if (!body.getArgument(2).getType().isInteger(8) ||
      !body.getArgument(3).getType().isInteger(8))
    return false;
  auto mul = m.blockScale.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  auto pair = [&](Value x, Value y) {
    return mlir::comfyquant::detail::decodesEveryCode(op, x, 2, decode) &&
           mlir::comfyquant::detail::decodesEveryCode(op, y, 3, decode);
  };
  return pair(mul.getLhs(), mul.getRhs()) || pair(mul.getRhs(), mul.getLhs());
}

/// The family covering `m` on buffers, if any.
std::optional<Family> familyOf(const GemmMatch &m, linalg::GenericOp op) {
  MLIRContext *ctx = op.getContext();
  Type i8 = IntegerType::get(ctx, 8), i32 = IntegerType::get(ctx, 32);
  Type f32 = Float32Type::get(ctx);
  switch (m.kind) {
  case GemmMatch::Kind::I8I8I32:
    return Family{m, i8, 4, i32, GpuMmaKind::s8};
  case GemmMatch::Kind::F8F8F32: {
    if (!m.block)
      return Family{m, i8, 4, f32, GpuMmaKind::fp8};
    if (m.block == WarpgroupMmaOp::kStepBytes &&
        isScaleProduct(op, m, ue8m0Value))
      return Family{m, i8, 4, f32, GpuMmaKind::fp8_ue8m0_scaled, true};
    return Family{m, i8, 4, f32, GpuMmaKind::fp8_block_scaled};
  }
  case GemmMatch::Kind::F4F4F32: {
    // Eight E2M1 codes per register, a scale block of 16 codes, four
    // blocks per K step: the scales reach the MMA as they are.
    if (m.block != WarpgroupMmaOp::kFP4Block ||
        !isScaleProduct(op, m, mlir::comfyquant::detail::e4m3Value))
      return std::nullopt;
    return Family{m, i8, 8, f32, GpuMmaKind::fp4_ue4m3_scaled, true};
  }
  case GemmMatch::Kind::FloatF32: {
    // f16 and bf16 operands as stored (their products are exact in f32);
    // f32 ones are not rounded (SIMT).
    auto stored = [&](unsigned i) {
      return cast<ShapedType>(op.getDpsInputs()[i].getType()).getElementType();
    };
    Type t = stored(0);
    if (t != stored(1) || !(t.isF16() || t.isBF16()))
      return std::nullopt;
    return Family{m, t, 2, f32, t.isF16() ? GpuMmaKind::f16 : GpuMmaKind::bf16};
  }
  }
  return std::nullopt;
}

/// The body's block-scale factor of `op` for one pair of raw scales: the
/// ops it depends on, cloned at `b` with the scale arguments replaced.
Value blockScaleAt(OpBuilder &b, linalg::GenericOp op, const Family &family,
                   Value rowScale, Value colScale) {
  Block &body = op.getRegion().front();
  llvm::SmallPtrSet<Operation *, 16> slice =
      bodySlice(op, family.match.blockScale);
  IRMapping map;
  map.map(body.getArgument(2), rowScale);
  map.map(body.getArgument(3), colScale);
  for (Operation &o : body.without_terminator())
    if (slice.contains(&o))
      b.clone(o, map);
  return map.lookup(family.match.blockScale);
}

/// What the GEMM kernel absorbs around `op`: the zero fill of its
/// accumulator and its elementwise epilogue, each optional.
struct Fusion {
  linalg::FillOp zeroFill;
  linalg::GenericOp epilogue;
  unsigned accOperand = 0;
};

/// Whether any op strictly between `from` and `to` (same block) may touch
/// memory.
bool memoryOpsBetween(Operation *from, Operation *to) {
  for (Operation *o = from->getNextNode(); o && o != to; o = o->getNextNode())
    if (!isMemoryEffectFree(o))
      return true;
  return false;
}

/// Whether `o` can move above the GEMM that writes `c`: it at most reads
/// memory other than `c` and allocates its own results.
bool movableAboveGemm(Operation *o, Value c) {
  if (isMemoryEffectFree(o))
    return true;
  auto iface = dyn_cast<MemoryEffectOpInterface>(o);
  if (!iface || o->getNumRegions())
    return false;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  return llvm::all_of(effects, [&](const MemoryEffects::EffectInstance &e) {
    Value v = e.getValue();
    if (isa<MemoryEffects::Allocate>(e.getEffect()))
      return v && v.getDefiningOp() == o;
    return isa<MemoryEffects::Read>(e.getEffect()) && v && v != c;
  });
}

/// The fill and epilogue `op` can absorb. C must be a temporary (an alloc)
/// used by nothing else, so that skipping its stores is unobservable.
Fusion fusionFor(linalg::GenericOp op) {
  Fusion fusion;
  Value c = op.getDpsInitOperand(0)->get();
  if (!c.getDefiningOp<memref::AllocOp>())
    return fusion;
  linalg::FillOp fill;
  linalg::GenericOp epi;
  for (Operation *user : c.getUsers()) {
    if (user == op)
      continue;
    if (user->getBlock() != op->getBlock())
      return fusion;
    if (auto f = dyn_cast<linalg::FillOp>(user);
        f && !fill && f.getOutputs()[0] == c && f->isBeforeInBlock(op))
      fill = f;
    else if (auto g = dyn_cast<linalg::GenericOp>(user);
             g && !epi && op->isBeforeInBlock(g))
      epi = g;
    else
      return fusion;
  }
  if (fill &&
      (matchPattern(fill.getInputs()[0], m_Zero()) ||
       matchPattern(fill.getInputs()[0], m_PosZeroFloat())) &&
      !memoryOpsBetween(fill, op))
    fusion.zeroFill = fill;
  if (!epi || !epi.hasPureBufferSemantics())
    return fusion;
  // What lies between the GEMM and its consumer (a weight scale's load,
  // say) must be able to move above the GEMM, which writes only C.
  for (Operation *o = op->getNextNode(); o != epi; o = o->getNextNode())
    if (!movableAboveGemm(o, c))
      return fusion;
  std::optional<unsigned> acc =
      mlir::comfyquant::detail::epilogueAccOperand(epi, c);
  if (!acc)
    return fusion;
  // The kernel writes the epilogue's output while other blocks still read
  // the GEMM's operands: they must be other buffers.
  // (An operand read through its producer reads what the producer reads.)
  Value out = baseBuffer(epi.getDpsInitOperand(0)->get());
  for (Value in : op.getDpsInputs()) {
    if (baseBuffer(in) == out)
      return fusion;
    if (linalg::GenericOp producer =
            mlir::comfyquant::detail::operandProducer(in, op))
      if (llvm::is_contained(mlir::comfyquant::detail::producerReads(producer),
                             out))
        return fusion;
  }
  fusion.epilogue = epi;
  fusion.accOperand = *acc;
  return fusion;
}

/// The tensor-core family of a top-level GEMM on buffers, if one covers it.
std::optional<Family> tensorCoreFamily(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics())
    return std::nullopt;
  std::optional<GemmMatch> m = mlir::comfyquant::detail::taggedGemm(op);
  if (!m)
    return std::nullopt;
  std::optional<Family> f = familyOf(*m, op);
  // A scale block must be one K step (one rescale per MMA), or be staged
  // (FP4: four per step).
  if (f && (!m->block || m->block == f->tileK() || f->stagedScales))
    return f;
  return std::nullopt;
}

/// The config the kernel builder implements for `kind` with `shape` (any
/// split).
GpuGemmAttr builtConfig(MLIRContext *ctx, GpuMmaKind kind,
                        TileShape shape = kNarrowTile, int64_t splitK = 1,
                        int64_t stages = 1, int64_t decodeRows = 0) {
  return GpuGemmAttr::get(ctx, kind, {shape.rows(), shape.cols},
                          {16, shape.cols}, WarpgroupMmaOp::kStepBytes, stages,
                          splitK, decodeRows);
}

/// The tile shape a built config names, if it names one.
std::optional<TileShape> shapeOf(GpuGemmAttr config) {
  for (TileShape shape : {kNarrowTile, kWideTile, kTallTile})
    if (config == builtConfig(config.getContext(), config.getKind(), shape,
                              config.getSplitK(), config.getStages(),
                              config.getDecodeRows()))
      return shape;
  return std::nullopt;
}

/// The byte address of `from`'s first element (its aligned pointer plus
/// its offset), as an index.
Value firstElementAddress(OpBuilder &b, Location loc, Value from) {
  Builder h{b, loc};
  auto type = cast<MemRefType>(from.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  (void)type.getStridesAndOffset(strides, offset);
  Value first = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, from);
  if (!ShapedType::isDynamic(offset) && !offset)
    return first;
  Value elements =
      ShapedType::isDynamic(offset)
          ? memref::ExtractStridedMetadataOp::create(b, loc, from).getOffset()
          : h.idx(offset);
  Value offsetBytes = h.mul(elements, type.getElementTypeBitWidth() / 8);
  return h.add(first, offsetBytes);
}

/// Whether `from`'s first element is `bytes`-aligned (an i1).
Value firstElementAligned(OpBuilder &b, Location loc, Value from,
                          int64_t bytes) {
  Builder h{b, loc};
  Value low = arith::RemUIOp::create(b, loc, firstElementAddress(b, loc, from),
                                     h.idx(bytes));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, low,
                               h.idx(0));
}

/// Whether GEMM input `index` of `op` may be loaded `bytes` (4 or 16) at
/// a time, statically (the alignment of its first element is checked at
/// run time): read as stored (no fused producer), not FP4 packing, K a
/// multiple of `bytes`, rows of unit stride a multiple of `bytes` apart.
bool wholeLoads(linalg::GenericOp op, const Family &f, unsigned index,
                int64_t bytes) {
  Value from = op.getDpsInputs()[index];
  auto aType = cast<ShapedType>(op.getDpsInputs()[0].getType());
  if (f.fp4() || aType.getRank() != 2 || aType.isDynamicDim(1) ||
      aType.getDimSize(1) % (bytes / 4 * f.perReg) ||
      mlir::comfyquant::detail::operandProducer(from, op))
    return false;
  auto type = dyn_cast<MemRefType>(from.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return type && type.getRank() == 2 &&
         succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides[1] == 1 && !ShapedType::isDynamic(strides[0]) &&
         (strides[0] * type.getElementTypeBitWidth() / 8) % bytes == 0;
}

/// Whether GEMM input `index` may be copied in 16-byte chunks.
bool chunkableOperand(linalg::GenericOp op, const Family &f, unsigned index) {
  return wholeLoads(op, f, index, 16);
}

/// Two shared-memory stages fed by cp.async when both operands are
/// chunkable, else one stage fed from registers.
int64_t stagesFor(linalg::GenericOp op, const Family &f) {
  return chunkableOperand(op, f, 0) && chunkableOperand(op, f, 1) ? 2 : 1;
}

/// Whether a tile of two warpgroups and `cols` columns applies: two
/// cp.async stages (operands read as stored, no decode in the copies), no
/// scales per K step (staged or applied to partial sums: one warpgroup),
/// and N not statically below `cols`.
bool twoWarpgroupsFit(linalg::GenericOp op, const Family &f, int64_t stages,
                      int64_t cols) {
  auto bType = cast<ShapedType>(op.getDpsInputs()[1].getType());
  return stages == 2 && !f.stagedScales && !f.match.block &&
         (bType.isDynamicDim(0) || bType.getDimSize(0) >= cols);
}

/// The tile of C: two warpgroups where they fit, else one. Two warpgroups
/// are 128 x 256, but 128 x 128 for per-tensor FP8 unless every arch adds
/// its FP8 steps into the accumulators (`fp8Accumulated`): sm_90a
/// promotes each wgmma step's product (WarpgroupMmaOp::promotesProducts),
/// and at 256 columns that spills.
TileShape tileFor(linalg::GenericOp op, const Family &f, int64_t stages,
                  bool fp8Accumulated) {
  // Per-tensor FP8: the GEMMs sm_90a promotes.
  bool fp8 = WarpgroupMmaOp::promotesProducts(f.mmaA(),
                                              f.stagedScales || f.match.block);
  TileShape two = fp8 && !fp8Accumulated ? kTallTile : kWideTile;
  return twoWarpgroupsFit(op, f, stages, two.cols) ? two : kNarrowTile;
}

/// The blocks a decode-sized M splits K over: enough that the tiles of N
/// times the splits reach `fillCtas`, at least two K steps per split, at
/// most GpuGemmAttr::kMaxSplitK; 1 when N or K is dynamic.
int64_t splitKFor(linalg::GenericOp op, const Family &f, TileShape shape,
                  int64_t fillCtas) {
  auto aType = cast<ShapedType>(op.getDpsInputs()[0].getType());
  auto bType = cast<ShapedType>(op.getDpsInputs()[1].getType());
  if (aType.isDynamicDim(1) || bType.isDynamicDim(0) ||
      aType.getDimSize(1) == 0 || bType.getDimSize(0) == 0 || fillCtas < 2)
    return 1;
  int64_t tilesN = llvm::divideCeilSigned(bType.getDimSize(0), shape.cols);
  int64_t steps = llvm::divideCeilSigned(aType.getDimSize(1), f.tileK());
  int64_t splits = std::min<int64_t>({llvm::divideCeilSigned(fillCtas, tilesN), steps / 2,
                             GpuGemmAttr::kMaxSplitK});
  return std::max<int64_t>(splits, 1);
}

/// What a GEMM decodes once per call instead of once per tile of C
/// (GpuGemmAttr's decode_rows): B's fused producer of the integer operand
/// (W4A4, W4A8, W6A8) into that operand; both FP8 operands, read as
/// stored, widened to f16 for an f16 GEMM (where no FP8 MMA exists: the
/// kernel otherwise widens A once per column tile and B once per row
/// tile); or both NVFP4 operands times their block scales, f16 for an f16
/// GEMM (where no FP4 MMA exists; E2M1 times E4M3 is exact in f16).
enum class Predecode { None, Producer, FP8ToF16, FP4ToF16 };

/// Whether the NVFP4 GEMM `op` (codes one per i8, E4M3 block scales of 16
/// as i8) can be widened once per call: every operand a 2-D memref, B and
/// its scales static, K a multiple of 16 (whole blocks of 16 codes).
bool fp4Widenable(linalg::GenericOp op) {
  auto b = dyn_cast<MemRefType>(op.getDpsInputs()[1].getType());
  if (!b || !b.hasStaticShape() || b.getRank() != 2 || b.getDimSize(1) % 16)
    return false;
  for (unsigned i = 0; i < 4; ++i) {
    auto type = dyn_cast<MemRefType>(op.getDpsInputs()[i].getType());
    if (!type || type.getRank() != 2 || !type.getElementType().isInteger(8) ||
        (i % 2 && !type.hasStaticShape()))
      return false;
  }
  return true;
}

/// The Predecode `op` allows: its fill and epilogue fuse, B is a static
/// N x K and A is read as stored in 16-byte chunks; then B's producer of
/// the integer operand's type whose decoded K is chunkable as A is, or
/// plain FP8 with B read as stored in 16-byte chunks too.
Predecode predecodeFor(linalg::GenericOp op, const Family &f) {
  Value bOperand = op.getDpsInputs()[1];
  auto bType = dyn_cast<MemRefType>(bOperand.getType());
  Fusion fusion = fusionFor(op);
  if (f.kind == GpuMmaKind::fp4_ue4m3_scaled)
    return fusion.zeroFill && fusion.epilogue && fp4Widenable(op)
               ? Predecode::FP4ToF16
               : Predecode::None;
  if (!fusion.zeroFill || !fusion.epilogue || f.match.block || !bType ||
      !bType.hasStaticShape() || bType.getRank() != 2 ||
      !chunkableOperand(op, f, 0))
    return Predecode::None;
  if (mlir::comfyquant::detail::operandProducer(bOperand, op))
    return isa<IntegerType>(f.load) && bType.getElementType() == f.load &&
                   bType.getDimSize(1) % (4 * f.perReg) == 0
               ? Predecode::Producer
               : Predecode::None;
  return f.kind == GpuMmaKind::fp8 && chunkableOperand(op, f, 1)
             ? Predecode::FP8ToF16
             : Predecode::None;
}

/// The rows of A from which `op` decodes once per call (GpuGemmAttr's
/// decode_rows), or 0: from two row tiles of the fused kernel on, which
/// decodes every weight twice or more. FP8 only where `fp8AsF16` (no arch
/// has an FP8 MMA), NVFP4 only where `fp4AsF16` (none has an FP4 MMA).
int64_t decodeRowsFor(linalg::GenericOp op, const Family &f, TileShape shape,
                      bool fp8AsF16, bool fp4AsF16) {
  Predecode form = predecodeFor(op, f);
  if (form == Predecode::None || (form == Predecode::FP8ToF16 && !fp8AsF16) ||
      (form == Predecode::FP4ToF16 && !fp4AsF16))
    return 0;
  return std::max<int64_t>(2 * shape.rows(), GpuGemmAttr::kSplitRows + 1);
}

struct SelectStrategyPass
    : mlir::comfyquant::impl::ComfyQuantGPUSelectStrategyBase<
          SelectStrategyPass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    // Without archs, any arch: sm_80 and sm_90a among them.
    bool fp8Accumulated = !archs.empty();
    bool fp8AsF16 = !archs.empty(), fp4AsF16 = !archs.empty();
    for (const std::string &name : archs) {
      const CUDAArch *arch = lookupCUDAArch(name);
      if (!arch) {
        func.emitOpError("archs: unknown CUDA arch '") << name << "'";
        return signalPassFailure();
      }
      fp8Accumulated &= accumulatesFp8Steps(*arch);
      fp8AsF16 &= !arch->fp8Mma;
      fp4AsF16 &= !hasFP4Mma(*arch);
    }
    for (auto op : func.getBody().front().getOps<linalg::GenericOp>()) {
      if (op->hasAttr(ComfyQuantDialect::getGemmAttrName()))
        continue;
      if (std::optional<Family> f = tensorCoreFamily(op)) {
        int64_t stages = stagesFor(op, *f);
        TileShape shape = tileFor(op, *f, stages, fp8Accumulated);
        op->setAttr(ComfyQuantDialect::getGemmAttrName(),
                    builtConfig(&getContext(), f->kind, shape,
                                splitKFor(op, *f, shape, fillCtas), stages,
                                decodeRowsFor(op, *f, shape, fp8AsF16,
                                              fp4AsF16)));
      }
    }
  }
};

/// A load of an operand's producer whose value is the same for `lanes`
/// consecutive words of a row (a per-group scale, its K index k / D with D
/// a multiple of the word): the first of those lanes loads it and shuffles
/// it to the others, so it is read once per group and row rather than once
/// per word. Only where words are read through the producer whole
/// (wholeWordElements: K a static multiple of the word).
struct SharedLoad {
  memref::LoadOp load;
  int64_t lanes;
};

/// Small read-only tables that `producers` look up per element (W4A8's
/// 16-entry codebook): copied into workgroup memory of `launch` by its
/// `threads` threads (`tid` each) before anything reads them, each global
/// table mapped to its copy in `copies`. Read from global memory, each
/// decoded code would cost a 4-byte load and a 64-bit address.
void stageProducerTables(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                         ArrayRef<linalg::GenericOp> producers, Value tid,
                         int64_t threads, IRMapping &copies) {
  Builder h{b, loc};
  llvm::SetVector<Value> tables;
  for (linalg::GenericOp producer : producers)
    producer.getRegion().walk([&](memref::LoadOp load) {
      Value table = load.getMemRef();
      auto type = dyn_cast<MemRefType>(table.getType());
      if (producer.getRegion().isAncestor(table.getParentRegion()) ||
          !type || type.getRank() != 1 || !type.hasStaticShape() ||
          !type.getLayout().isIdentity() ||
          !type.getElementType().isIntOrFloat())
        return;
      unsigned bits = type.getElementType().getIntOrFloatBitWidth();
      if (bits < 8 || bits > 32 ||
          type.getNumElements() * bits / 8 > kMaxStagedTableBytes)
        return;
      tables.insert(table);
    });
  if (tables.empty())
    return;
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(),
                                              gpu::AddressSpace::Workgroup);
  for (Value table : tables) {
    auto type = cast<MemRefType>(table.getType());
    Value copy = launch.addWorkgroupAttribution(
        MemRefType::get(type.getShape(), type.getElementType(),
                        MemRefLayoutAttrInterface(), workgroup),
        loc);
    int64_t count = type.getNumElements();
    for (int64_t i = 0; i < count; i += threads) {
      Value at = h.add(tid, i);
      OpBuilder::InsertionGuard guard(b);
      if (i + threads > count) {
        auto inside = scf::IfOp::create(b, loc, h.lt(at, h.idx(count)), false);
        b.setInsertionPoint(inside.thenBlock()->getTerminator());
      }
      Value v = memref::LoadOp::create(b, loc, table, ValueRange{at});
      memref::StoreOp::create(b, loc, v, copy, ValueRange{at});
    }
    copies.map(table, copy);
  }
  gpu::BarrierOp::create(b, loc);
}

/// Builds one tensor-core GEMM kernel in place of a linalg GEMM on
/// buffers: the launch, each thread's place in it, the accumulators' first
/// values, the copies of A and B (word fetch and pack, fused decoders,
/// scale staging), the K loop around WarpgroupMmaOp, and the write-back
/// through the fused epilogue. Ops are created one per statement, in a
/// fixed order, so the IR does not depend on the host compiler.
class TensorCoreKernelBuilder {
public:
  TensorCoreKernelBuilder(linalg::GenericOp op, const Family &family,
                          TileShape shape, int64_t splitK, int64_t stages,
                          Value enabled = Value())
      : op(op), family(family), shape(shape), splitK(splitK),
        enabled(enabled), asyncCopies(stages == 2),
        fusion(fusionFor(op)), b(op), loc(op.getLoc()), h{b, loc, &producers} {
  }

  void build() {
    // The consumer's operands must be defined where the kernel starts.
    if (fusion.epilogue)
      while (op->getNextNode() != fusion.epilogue.getOperation())
        op->getNextNode()->moveBefore(op);
    b.setInsertionPoint(op);
    // Temporary operands an elementwise op fills (decoded weights, their
    // unswizzled scales) are read through that op, from what it reads.
    for (Value in : op.getDpsInputs())
      if (linalg::GenericOp producer =
              mlir::comfyquant::detail::operandProducer(in, op))
        producers[in] = producer;
    a = op.getDpsInputOperand(0)->get();
    bm = op.getDpsInputOperand(1)->get();
    scalesA = family.match.block ? op.getDpsInputOperand(2)->get() : Value();
    scalesB = family.match.block ? op.getDpsInputOperand(3)->get() : Value();
    c = op.getDpsInitOperand(0)->get();
    if (splitK > 1 && cast<ShapedType>(bm.getType()).isDynamicDim(0))
      splitK = 1;
    if (splitK > 1) {
      // The partial sums of every split, at most kSplitRows rows each: a
      // fixed-size temporary (a view of the workspace, like every one).
      auto func = op->getParentOfType<func::FuncOp>();
      OpBuilder entry = OpBuilder::atBlockBegin(&func.getBody().front());
      partials = memref::AllocOp::create(
          entry, loc,
          MemRefType::get({splitK, GpuGemmAttr::kSplitRows,
                           cast<ShapedType>(bm.getType()).getDimSize(0)},
                          family.acc));
    }
    createLaunch();
    placeThread();
    stageTables();
    accType = VectorType::get({shape.fragments(), 2, 2}, family.acc);
    Value init = initialAccumulators();
    // The copies, as two halves: `fetch` loads the words of one K step
    // into registers, `store` writes them into a tile. The loop stores the
    // words fetched one step earlier, then fetches the next step's before
    // the MMA, so the global loads are in flight while it runs.
    wordType = VectorType::get({p}, family.load);
    i32 = b.getI32Type();
    wideA = chunkAligned(a);
    wideB = chunkAligned(bm);
    alignedA = wideA ? Value() : wordAligned(a);
    alignedB = wideB ? Value() : wordAligned(bm);
    findSignedNibbles();
    findSharedLoads();
    Value result = kLoop(init);
    if (accShift) {
      // Each signed-nibble operand was multiplied by 16 (see
      // signedNibbleWord): the sums are exact multiples.
      Value shift = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(
                      accType, b.getIntegerAttr(family.acc, accShift)));
      result = arith::ShRSIOp::create(b, loc, result, shift);
    }
    writeBack(result);
    if (splitK > 1)
      reduceSplits();
    eraseReplaced();
  }

private:
  linalg::GenericOp op;
  const Family &family;
  /// The config's tile of C.
  TileShape shape;
  /// The config's split_k (1: one block per tile at every M).
  int64_t splitK;
  /// An i1 on the host: whether this kernel runs (its grid is empty
  /// otherwise; see predecodedCopy). Null: always.
  Value enabled;
  /// The config's two stages: cp.async copies when both operands are
  /// 16-byte aligned at run time (see kLoop).
  bool asyncCopies;
  Fusion fusion;
  OpBuilder b;
  Location loc;
  llvm::DenseMap<Value, linalg::GenericOp> producers;
  Builder h;
  /// The GEMM's operands and their sizes.
  Value a, bm, scalesA, scalesB, c, rows, depth, cols;
  gpu::LaunchOp launch;
  Value tileA, tileB, scaleTileA, scaleTileB;
  /// Global table -> its workgroup copy (stageTables).
  IRMapping tableCopies;
  /// Two stages: the second stage's tiles, and the tiles the MMA of the
  /// current step reads.
  Value tileA1, tileB1, mmaA, mmaB;
  int64_t p = 0, tileK = 0;
  Value zeroIn, zeroAcc, tid, g, t, blockM, blockN, row0, row1, t2;
  /// The words this thread copies (see placeThread).
  Value copyWord, copyRow, copyAt, copyK;
  /// Whether copyWord is even (FP4: the lane that reads its block's scale).
  Value evenWord;
  VectorType accType, wordType;
  Type i32;
  Value alignedA, alignedB;
  /// Operands unpacked from signed nibbles (see findSignedNibbles), and
  /// the right shift that undoes their factors of 16 in the sums.
  std::optional<SignedNibbles> nibblesA, nibblesB;
  int64_t accShift = 0;
  /// Producer loads shared by the lanes of a row (see findSharedLoads),
  /// and the seed of the word being packed: staged tables, shared loads.
  SmallVector<SharedLoad> sharedLoadsA, sharedLoadsB;
  IRMapping wordSeed;
  /// Operands copied in 16-byte chunks: whether their first element is
  /// 16-byte aligned (an i1); null where a static condition fails.
  Value wideA, wideB;
  /// The 16-byte chunk this thread copies (see placeThread).
  Value chunkRow, chunkAt, chunkK;
  /// Split K: the partial sums' buffer (host), the block's split, whether
  /// the launch splits (an i1), and the block's K range [kBegin, kEnd)
  /// (without a split, [0, K)).
  Value partials, split, splitting, kBegin, kEnd;

  Value i32Constant(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i32, v);
  }

  /// The grid (one block per tile of C), its workgroup tiles, and
  /// the insertion point at the start of its body.
  void createLaunch() {
    rows = b.createOrFold<memref::DimOp>(loc, a, 0);
    depth = b.createOrFold<memref::DimOp>(loc, a, 1);
    cols = b.createOrFold<memref::DimOp>(loc, bm, 0);
    Value one = h.idx(1);
    Value gridX = arith::CeilDivUIOp::create(b, loc, cols, h.idx(shape.cols));
    Value gridY = arith::CeilDivUIOp::create(b, loc, rows, h.idx(shape.rows()));
    Value gridZ = one;
    if (splitK > 1)
      gridZ = arith::SelectOp::create(b, loc, splitRows(), h.idx(splitK), one);
    if (enabled)
      gridY = arith::SelectOp::create(b, loc, enabled, gridY, h.idx(0));
    MLIRContext *ctx = b.getContext();
    auto workgroup =
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
    auto tileType = [&](int64_t tileRows) {
      return MemRefType::get({tileRows * kRowWords}, b.getI32Type(),
                             MemRefLayoutAttrInterface(), workgroup);
    };
    SmallVector<Type> tiles = {tileType(shape.rows()), tileType(shape.cols)};
    auto scaleTileType = [&](int64_t count) {
      return MemRefType::get({count}, b.getI8Type(),
                             MemRefLayoutAttrInterface(), workgroup);
    };
    if (family.stagedScales)
      tiles.append({scaleTileType(shape.rows() * family.scalesPerRow()),
                    scaleTileType(shape.cols * family.scalesPerRow())});
    if (asyncCopies)
      tiles.append({tileType(shape.rows()), tileType(shape.cols)});
    launch = gpu::LaunchOp::create(
        b, loc, gridX, gridY, gridZ, h.idx(shape.threads()), one, one,
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
        /*asyncDependencies=*/{}, tiles);
    tileA = launch.getWorkgroupAttributions()[0];
    tileB = launch.getWorkgroupAttributions()[1];
    if (family.stagedScales) {
      scaleTileA = launch.getWorkgroupAttributions()[2];
      scaleTileB = launch.getWorkgroupAttributions()[3];
    }
    if (asyncCopies) {
      unsigned first = family.stagedScales ? 4 : 2;
      tileA1 = launch.getWorkgroupAttributions()[first];
      tileB1 = launch.getWorkgroupAttributions()[first + 1];
    }
    mmaA = tileA;
    mmaB = tileB;
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp::create(b, loc);
    b.setInsertionPointToStart(&launch.getBody().front());
  }

  /// Small read-only tables a fused decoder looks up per element (W4A8's
  /// 16-entry codebook): copied into workgroup memory once per block
  /// before anything reads them, the decoder reading the copy. Read from
  /// global memory, each decoded code would cost a 4-byte load.
  void stageTables() {
    SmallVector<linalg::GenericOp> decoders;
    for (Value operand : {a, bm})
      if (linalg::GenericOp producer = producers.lookup(operand))
        decoders.push_back(producer);
    stageProducerTables(b, loc, launch, decoders, tid, shape.threads(),
                        tableCopies);
    if (!tableCopies.getValueMap().empty())
      h.stagedTables = &tableCopies;
  }

  /// Each thread's warp, lane, accumulator rows and columns, and the words
  /// it copies: word `copyWord` of tile rows `copyRow + shape.rowsPerPass() * i`,
  /// stored at `copyAt + 128 * i` (the core-matrix layout, in words:
  /// (row / 8) * 64 + (word / 4) * 32 + (row % 8) * 4 + word % 4).
  void placeThread() {
    p = family.perReg;
    tileK = family.tileK();
    zeroIn = arith::ConstantOp::create(b, loc, b.getZeroAttr(family.load));
    zeroAcc = arith::ConstantOp::create(b, loc, b.getZeroAttr(family.acc));
    tid = launch.getThreadIds().x;
    Value lane = laneOf(b, loc, tid);
    Value warp = warpOf(b, loc, tid);
    g = arith::DivUIOp::create(b, loc, lane, h.idx(4));
    t = arith::RemUIOp::create(b, loc, lane, h.idx(4));
    blockM = h.mul(launch.getBlockIds().y, shape.rows());
    blockN = h.mul(launch.getBlockIds().x, shape.cols);
    row0 = h.add(h.add(blockM, h.mul(warp, 16)), g);
    row1 = h.add(row0, 8);
    t2 = h.mul(t, 2);

    copyWord = arith::RemUIOp::create(b, loc, tid, h.idx(kRowWords));
    copyRow = arith::DivUIOp::create(b, loc, tid, h.idx(kRowWords));
    // One op per statement (argument evaluation order is the host
    // compiler's).
    Value rowGroup = arith::DivUIOp::create(b, loc, copyRow, h.idx(8));
    Value rowGroupAt = h.mul(rowGroup, 64);
    Value kHalf = arith::DivUIOp::create(b, loc, copyWord, h.idx(4));
    Value kHalfAt = h.mul(kHalf, 32);
    Value rowInGroup = arith::RemUIOp::create(b, loc, copyRow, h.idx(8));
    Value rowInGroupAt = h.mul(rowInGroup, 4);
    Value wordInRow = arith::RemUIOp::create(b, loc, copyWord, h.idx(4));
    Value groupAt = h.add(rowGroupAt, kHalfAt);
    Value inGroupAt = h.add(rowInGroupAt, wordInRow);
    copyAt = h.add(groupAt, inGroupAt);
    copyK = h.mul(copyWord, p);
    Value wordParity = arith::RemUIOp::create(b, loc, copyWord, h.idx(2));
    evenWord = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                     wordParity, h.idx(0));

    // 16-byte copies: chunk `tid % 2` (a K half, one core matrix row) of
    // tile row `tid / 2 + 64i`, at word (row / 8) * 64 + chunk * 32 +
    // (row % 8) * 4.
    Value chunk = arith::RemUIOp::create(b, loc, tid, h.idx(kRowChunks));
    chunkRow = arith::DivUIOp::create(b, loc, tid, h.idx(kRowChunks));
    Value chunkGroup = arith::DivUIOp::create(b, loc, chunkRow, h.idx(8));
    Value chunkGroupAt = h.mul(chunkGroup, 64);
    Value chunkHalfAt = h.mul(chunk, 32);
    Value chunkRowInGroup = arith::RemUIOp::create(b, loc, chunkRow, h.idx(8));
    Value chunkRowAt = h.mul(chunkRowInGroup, 4);
    Value chunkGroupHalf = h.add(chunkGroupAt, chunkHalfAt);
    chunkAt = h.add(chunkGroupHalf, chunkRowAt);
    chunkK = h.mul(chunk, 4 * p);

    // The block's K range: split z of ceildiv(steps, splits) steps.
    kBegin = h.idx(0);
    kEnd = depth;
    if (splitK > 1) {
      split = launch.getBlockIds().z;
      Value splits = launch.getGridSize().z;
      splitting = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                        splits, h.idx(1));
      Value steps = arith::CeilDivUIOp::create(b, loc, depth, h.idx(tileK));
      Value perSplit = arith::CeilDivUIOp::create(b, loc, steps, splits);
      Value span = h.mul(perSplit, tileK);
      kBegin = arith::MulIOp::create(b, loc, split, span);
      Value next = h.add(kBegin, span);
      kEnd = h.min(next, depth);
    }
  }

  /// Column of accumulator element (j, *, e).
  Value cCol(int64_t j, int64_t e) {
    return h.add(h.add(blockN, j * 8 + e), t2);
  }

  /// Zero (C zero-filled) or C's elements, zero outside it.
  Value initialAccumulators() {
    Value init;
    if (fusion.zeroFill) {
      init = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(accType, b.getZeroAttr(family.acc)));
    } else {
      SmallVector<Value> elems;
      // Split K: C is added once, by split 0.
      Value first = split ? arith::CmpIOp::create(b, loc,
                                                  arith::CmpIPredicate::eq,
                                                  split, h.idx(0))
                                .getResult()
                          : Value();
      for (int64_t j = 0; j < shape.fragments(); ++j)
        for (Value row : {row0, row1})
          for (int64_t e = 0; e < 2; ++e) {
            Value v = h.loadOrZero(c, row, cCol(j, e), rows, cols, zeroAcc);
            if (first)
              v = arith::SelectOp::create(b, loc, first, v, zeroAcc);
            elems.push_back(v);
          }
      init = vector::FromElementsOp::create(b, loc, accType, elems);
    }
    return init;
  }

  /// Whether the words of `from` may be loaded whole: a buffer read as
  /// stored (no fused producer), 8- or 16-bit elements, rows of unit
  /// stride and a multiple of 4 bytes apart, its first element 4-byte
  /// aligned (an i1 computed once, before the K loop), K a multiple of the
  /// word. Null when any static condition fails.
  /// The i8 operands an elementwise op unpacks from signed int4 nibbles,
  /// read as words of nibbles placed in the high halves of their bytes
  /// (signedNibbleWord). That needs words wholly inside K (K a static
  /// multiple of 4) and sums from zero (a zero-filled C), so that the
  /// accumulators can be shifted back exactly; K below 2^17 keeps the
  /// products' sums (|16 v| <= 128, as an i8 times an i8) unsaturated.
  void findSignedNibbles() {
    int64_t depth = cast<ShapedType>(a.getType()).getDimSize(1);
    if (family.match.kind != GemmMatch::Kind::I8I8I32 || !fusion.zeroFill ||
        ShapedType::isDynamic(depth) || depth % p)
      return;
    for (auto [from, nibbles] : {std::pair{a, &nibblesA}, {bm, &nibblesB}})
      if (linalg::GenericOp producer = producers.lookup(from))
        if ((*nibbles = matchSignedNibbles(producer)))
          accShift += 4;
  }

  /// The word of four i8 lanes at (row, k) of a signed-nibble operand, k
  /// a multiple of 4 inside K: its two bytes b0 (elements k, k + 1) and
  /// b1, spread to bytes 0 and 2 of s = b0 | b1 << 16, then each nibble
  /// moved to the high half of its own byte: lanes 16 e0, 16 e1, 16 e2,
  /// 16 e3 (the nibble's sign is the byte's).
  Value signedNibbleWord(SignedNibbles nibbles, Value row, Value k) {
    SmallVector<Value> at = mlir::comfyquant::detail::producerLoadIndicesAt(
        b, loc, nibbles.load, row, k);
    Value packed = nibbles.load.getMemRef();
    Value b0 = memref::LoadOp::create(b, loc, packed, at);
    at.back() = h.add(at.back(), 1);
    Value b1 = memref::LoadOp::create(b, loc, packed, at);
    Value w0 = arith::ExtUIOp::create(b, loc, i32, b0);
    Value w1 = arith::ExtUIOp::create(b, loc, i32, b1);
    Value high = arith::ShLIOp::create(b, loc, w1, i32Constant(16));
    Value spread = arith::OrIOp::create(b, loc, w0, high);
    Value up4 = arith::ShLIOp::create(b, loc, spread, i32Constant(4));
    Value lows = arith::AndIOp::create(b, loc, up4, i32Constant(0x00F000F0));
    Value up8 = arith::ShLIOp::create(b, loc, spread, i32Constant(8));
    Value highs =
        arith::AndIOp::create(b, loc, up8, i32Constant(0xF000F000u));
    return arith::OrIOp::create(b, loc, lows, highs);
  }

  /// D where `load`'s indices depend on the K index only through
  /// k / D (0: not at all); nothing where they depend on it otherwise, on
  /// another load or on a block argument.
  static std::optional<int64_t> kDivisorOf(memref::LoadOp load) {
    Block *body = load->getBlock();
    int64_t divisor = 0;
    llvm::SmallPtrSet<Operation *, 16> seen;
    std::function<bool(Value)> walk = [&](Value v) -> bool {
      Operation *o = v.getDefiningOp();
      if (!o)
        return false;
      if (o->getBlock() != body || !seen.insert(o).second)
        return true;
      if (auto index = dyn_cast<linalg::IndexOp>(o))
        return index.getDim() == 0;
      if (auto div = dyn_cast<arith::DivUIOp>(o)) {
        auto index = div.getLhs().getDefiningOp<linalg::IndexOp>();
        APInt d;
        if (index && index.getDim() == 1 &&
            matchPattern(div.getRhs(), m_ConstantInt(&d))) {
          int64_t value = d.getSExtValue();
          if (value <= 0 || (divisor && divisor != value))
            return false;
          divisor = value;
          return true;
        }
      }
      if (o->getNumRegions() || isa<memref::LoadOp>(o) || !isPure(o))
        return false;
      return llvm::all_of(o->getOperands(), walk);
    };
    if (!llvm::all_of(load.getIndices(), walk))
      return std::nullopt;
    return divisor;
  }

  void findSharedLoads() {
    int64_t depth = cast<ShapedType>(a.getType()).getDimSize(1);
    if (ShapedType::isDynamic(depth) || depth % p)
      return;
    for (auto [from, found, nibbles] :
         {std::tuple{a, &sharedLoadsA, &nibblesA},
          std::tuple{bm, &sharedLoadsB, &nibblesB}}) {
      linalg::GenericOp producer = producers.lookup(from);
      if (!producer || *nibbles)
        continue;
      SmallVector<SharedLoad> *loads = found;
      producer.getRegion().walk([&](memref::LoadOp load) {
        Type t = load.getType();
        if (!(t.isF32() || (t.isInteger() && t.getIntOrFloatBitWidth() <= 32)))
          return;
        std::optional<int64_t> d = kDivisorOf(load);
        if (!d)
          return;
        // Words of one value: D / p, aligned to the row's words when they
        // divide the K step's or are a multiple of it.
        int64_t words = *d ? *d / p : kRowWords;
        if (*d && *d % p)
          return;
        int64_t lanes = 0;
        if (words >= kRowWords && (!*d || *d % tileK == 0))
          lanes = kRowWords;
        else if (words < kRowWords && kRowWords % words == 0)
          lanes = words;
        if (lanes >= 2)
          loads->push_back({load, lanes});
      });
    }
  }

  /// For each shared load of the word at (row, k): the leading lane of its
  /// group loads it (inside the operand; others and outside: zero), every
  /// lane takes the leader's value (`shfl.sync.idx`, outside any branch so
  /// all lanes run it), and the word's seed maps the load to it.
  void seedSharedLoads(ArrayRef<SharedLoad> loads, Value inside, Value row,
                       Value k) {
    wordSeed.clear();
    for (auto [from, to] : tableCopies.getValueMap())
      wordSeed.map(from, to);
    if (loads.empty())
      return;
    Value lane = arith::IndexCastOp::create(b, loc, i32, laneOf(b, loc, tid));
    for (const SharedLoad &shared : loads) {
      memref::LoadOp load = shared.load;
      Type t = load.getType();
      Value inGroup =
          arith::RemUIOp::create(b, loc, copyWord, h.idx(shared.lanes));
      Value leads = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          inGroup, h.idx(0));
      Value leaderInside = arith::AndIOp::create(b, loc, inside, leads);
      auto choice = scf::IfOp::create(b, loc, TypeRange{t}, leaderInside,
                                      /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(choice.thenBlock());
        SmallVector<Value> at =
            mlir::comfyquant::detail::producerLoadIndicesAt(b, loc, load, row,
                                                            k);
        Value mem = wordSeed.lookupOrDefault(load.getMemRef());
        scf::YieldOp::create(b, loc,
                             memref::LoadOp::create(b, loc, mem, at).getResult());
        b.setInsertionPointToStart(choice.elseBlock());
        scf::YieldOp::create(
            b, loc,
            arith::ConstantOp::create(b, loc, b.getZeroAttr(t)).getResult());
      }
      Value v = choice.getResult(0);
      Value bits = t.isF32() ? arith::BitcastOp::create(b, loc, i32, v).getResult()
                   : t.getIntOrFloatBitWidth() < 32
                       ? arith::ExtUIOp::create(b, loc, i32, v).getResult()
                       : v;
      Value leader = arith::AndIOp::create(b, loc, lane,
                                           i32Constant(~(shared.lanes - 1)));
      Value got = gpu::ShuffleOp::create(b, loc, bits, leader,
                                         i32Constant(32), gpu::ShuffleMode::IDX)
                      .getShuffleResult();
      Value back = t.isF32() ? arith::BitcastOp::create(b, loc, t, got).getResult()
                   : t.getIntOrFloatBitWidth() < 32
                       ? arith::TruncIOp::create(b, loc, t, got).getResult()
                       : got;
      wordSeed.map(load.getResult(), back);
    }
  }

  Value wordAligned(Value from) {
    // (The producer map, not operandProducer: the launch now stands
    // between the GEMM and its producers.)
    if ((h.producers && h.producers->lookup(from)) ||
        !wholeLoads(op, family, from == a ? 0 : 1, 4))
      return Value();
    return firstElementAligned(from, 4);
  }

  Value firstElementAddress(Value from) {
    return ::firstElementAddress(b, loc, from);
  }

  Value firstElementAligned(Value from, int64_t bytes) {
    return ::firstElementAligned(b, loc, from, bytes);
  }

  /// Whether `from` may be copied in 16-byte chunks (one ld.global.v4 per
  /// chunk): chunkableOperand, and the first element 16-byte aligned (the
  /// i1, computed once); null where a static condition fails.
  Value chunkAligned(Value from) {
    // (The producer map, not operandProducer: the launch now stands
    // between the GEMM and its producers.)
    if ((h.producers && h.producers->lookup(from)) ||
        !chunkableOperand(op, family, from == a ? 0 : 1))
      return Value();
    return firstElementAligned(from, 16);
  }

  /// The 16-byte chunks of the step at `k0` this thread copies, one per
  /// pass (each a vector<4xi32>). K is a multiple of the chunk, so a chunk
  /// is wholly inside the operand or outside it: inside, one aligned
  /// vector load (or, for a misaligned operand, 16 / p element loads at
  /// constant offsets, no clamping needed); outside, zeros without a load.
  SmallVector<Value> fetchChunks(Value from, Value fromRows, Value firstRow,
                                 int64_t tileRows, Value aligned, Value k0) {
    int64_t passes = tileRows / shape.wideRowsPerPass();
    auto chunkType = VectorType::get({4}, i32);
    auto eltsType = VectorType::get({4 * p}, family.load);
    SmallVector<Value> chunks;
    Value k = h.add(k0, chunkK);
    Value kInside = h.lt(k, kEnd);
    Value zeros = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(chunkType, b.getI32IntegerAttr(0)));
    for (int64_t i = 0; i < passes; ++i) {
      Value base = h.add(firstRow, chunkRow);
      Value row = h.add(base, shape.wideRowsPerPass() * i);
      Value rowInside = h.lt(row, fromRows);
      Value inside = arith::AndIOp::create(b, loc, rowInside, kInside);
      auto choice = scf::IfOp::create(b, loc, TypeRange{chunkType}, inside,
                                      /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(choice.thenBlock());
        auto load = scf::IfOp::create(b, loc, TypeRange{chunkType}, aligned,
                                      /*withElseRegion=*/true);
        scf::YieldOp::create(b, loc, load.getResult(0));
        b.setInsertionPointToStart(load.thenBlock());
        Value elts = vector::LoadOp::create(
            b, loc, eltsType, from, ValueRange{row, k},
            /*nontemporal=*/false, llvm::MaybeAlign(16));
        Value bits = vector::BitCastOp::create(b, loc, chunkType, elts);
        scf::YieldOp::create(b, loc, bits);
        b.setInsertionPointToStart(load.elseBlock());
        SmallVector<Value> elems;
        for (int64_t e = 0; e < 4 * p; ++e)
          elems.push_back(memref::LoadOp::create(b, loc, from,
                                                 ValueRange{row, h.add(k, e)}));
        Value packed = vector::FromElementsOp::create(b, loc, eltsType, elems);
        Value slow = vector::BitCastOp::create(b, loc, chunkType, packed);
        scf::YieldOp::create(b, loc, slow);
        b.setInsertionPointToStart(choice.elseBlock());
        scf::YieldOp::create(b, loc, zeros);
      }
      chunks.push_back(choice.getResult(0));
    }
    return chunks;
  }

  /// The `p` elements of the word at (row, k) of an operand read through
  /// its producer, for a word inside the operand (packWord's branch) when
  /// K is a static multiple of `p`: the word is then wholly inside K, so no
  /// element needs a bound or a clamp, and element e is at column k + e
  /// (k a multiple of p). The producer's reads of one stored byte (two
  /// E2M1 codes or int4 nibbles) or one scale (a block of 16 or more codes)
  /// then have one address, and each is loaded once per word instead of
  /// once per element. Empty otherwise.
  SmallVector<Value> wholeWordElements(Value from, Value row, Value k) {
    linalg::GenericOp producer =
        h.producers ? h.producers->lookup(from) : linalg::GenericOp();
    int64_t depth = cast<ShapedType>(from.getType()).getDimSize(1);
    if (!producer || ShapedType::isDynamic(depth) || depth % p)
      return {};
    // Columns (k / p) * p + e, the producer's divisions of them folded:
    // one index expression per stored byte or scale whatever LLVM proves
    // of k (a peeled first step's k is an or, where LLVM saw
    // (k | 2) >> 1 and (k >> 1) | 1 as two bytes and loaded W6A8's low
    // nibbles three times per word). k's low bits are cleared first so
    // LLVM knows x * 2 even and takes x * 2 + 1 as an address offset
    // (without it, (k >> 1) | 1 cost an or and an add per word).
    Value aligned = arith::AndIOp::create(b, loc, k, h.idx(~(p - 1)));
    Value word = arith::DivUIOp::create(b, loc, aligned, h.idx(p));
    return mlir::comfyquant::detail::emitAlignedProducerChunk(
        b, loc, producer, row, word, p, p, &wordSeed);
  }

  /// The word of `p` elements of `from` starting at (row, k); zero without
  /// a load for a row past the operand (the rows of A past a decode-sized
  /// M, the last tile's rows of B past N) or a word past the block's K
  /// range (the prefetch after its last step).
  Value packWord(Value from, Value fromRows, Value row, Value k) {
    Value rowInside = h.lt(row, fromRows);
    Value kInside = h.lt(k, kEnd);
    Value inside = arith::AndIOp::create(b, loc, rowInside, kInside);
    seedSharedLoads(from == a ? sharedLoadsA : sharedLoadsB, inside, row, k);
    auto choice = scf::IfOp::create(b, loc, TypeRange{i32}, inside,
                                    /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(choice.thenBlock());
    scf::YieldOp::create(b, loc, packWordOfRow(from, fromRows, row, k));
    b.setInsertionPointToStart(choice.elseBlock());
    scf::YieldOp::create(b, loc, i32Constant(0));
    return choice.getResult(0);
  }

  /// packWord for a word that starts inside the operand (its row and the
  /// block's K range).
  Value packWordOfRow(Value from, Value fromRows, Value row, Value k) {
    if (const std::optional<SignedNibbles> &nibbles =
            from == a ? nibblesA : nibblesB)
      return signedNibbleWord(*nibbles, row, k);
    Value aligned = from == a ? alignedA : from == bm ? alignedB : Value();
    if (aligned) {
      // The word is wholly inside (k is a multiple of the word, K too):
      // one aligned 4-byte load, or element loads from a misaligned
      // operand.
      auto choice = scf::IfOp::create(b, loc, TypeRange{i32}, aligned,
                                      /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(choice.thenBlock());
      Value word =
          vector::LoadOp::create(b, loc, wordType, from, ValueRange{row, k},
                                 /*nontemporal=*/false, llvm::MaybeAlign(4));
      Value bits =
          vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), word);
      Value loaded = vector::ExtractOp::create(b, loc, bits, 0);
      scf::YieldOp::create(b, loc, loaded);
      b.setInsertionPointToStart(choice.elseBlock());
      SmallVector<Value> elems;
      for (int64_t e = 0; e < p; ++e)
        elems.push_back(
            h.loadOrZero(from, row, h.add(k, e), fromRows, kEnd, zeroIn));
      Value packed = vector::FromElementsOp::create(b, loc, wordType, elems);
      Value packedBits =
          vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), packed);
      Value slow = vector::ExtractOp::create(b, loc, packedBits, 0);
      scf::YieldOp::create(b, loc, slow);
      return choice.getResult(0);
    }
    SmallVector<Value> elems = wholeWordElements(from, row, k);
    if (elems.empty())
      for (int64_t e = 0; e < p; ++e)
        elems.push_back(
            h.loadOrZero(from, row, h.add(k, e), fromRows, kEnd, zeroIn));
    if (!family.fp4()) {
      Value word = vector::FromElementsOp::create(b, loc, wordType, elems);
      Value bits =
          vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), word);
      return vector::ExtractOp::create(b, loc, bits, 0);
    }
    // E2M1 codes, one per byte.
    return packE2M1Word(b, loc, elems);
  }

  /// A scale of 1: E4M3 0x38, UE8M0 127.
  Value neutralScale() {
    return arith::ConstantIntOp::create(b, loc, b.getI8Type(),
                                        family.fp4() ? 0x38 : 127);
  }

  /// FP4: the block scale of an E4M3 with its sign set is staged without
  /// it (UE4M3) and the sign moves to the codes of its block, the product
  /// being the same (a negative zero scale stays a zero factor). The two
  /// words of a block are fetched by adjacent lanes (words 2c and 2c + 1
  /// of a row): the even lane loads the scale byte and both take it from
  /// that lane by a shuffle, so each byte is read once; the word folded,
  /// and the byte, which `store` stages (no second read).
  std::pair<Value, Value> foldScaleSign(Value word, Value scales,
                                        Value fromRows, Value row, Value k0) {
    Value step = arith::DivUIOp::create(b, loc, k0, h.idx(tileK));
    Value firstBlock = h.mul(step, family.scalesPerRow());
    Value blocks = b.createOrFold<memref::DimOp>(loc, scales, 1);
    Value blockInStep = arith::DivUIOp::create(b, loc, copyWord, h.idx(2));
    Value block = h.add(firstBlock, blockInStep);
    // Past the block's K range (the prefetch after its last step) too.
    Value blockEnd =
        arith::CeilDivUIOp::create(b, loc, kEnd, h.idx(family.match.block));
    // Odd lanes load nothing (their row is past every row).
    Value zero = h.idx(0);
    Value loadRows = arith::SelectOp::create(b, loc, evenWord, fromRows, zero);
    Value own = h.loadIfInside(scales, row, block, loadRows,
                               h.min(blocks, blockEnd), neutralScale());
    // Every lane reads lane & ~1 (an even lane itself), so the shuffle's
    // result is used unconditionally and stays where all lanes run it.
    Value ownWide = arith::ExtUIOp::create(b, loc, i32, own);
    Value lane = arith::IndexCastOp::create(b, loc, i32, laneOf(b, loc, tid));
    Value evenLane = arith::AndIOp::create(b, loc, lane, i32Constant(~1));
    Value wide = gpu::ShuffleOp::create(b, loc, ownWide, evenLane,
                                        i32Constant(32), gpu::ShuffleMode::IDX)
                     .getShuffleResult();
    Value sign = arith::AndIOp::create(b, loc, wide, i32Constant(0x80));
    Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                           sign, i32Constant(0));
    Value flipped =
        arith::XOrIOp::create(b, loc, word, i32Constant(0x88888888));
    Value folded = arith::SelectOp::create(b, loc, negative, flipped, word);
    Value byte = arith::TruncIOp::create(b, loc, b.getI8Type(), wide);
    return {folded, byte};
  }

  /// The words of the step at `k0`, one per pass of the block's threads,
  /// in a vector (FP4: and each word's block scale byte, in a second). The
  /// passes are unrolled: a loop would carry the vector and place each
  /// word by a select on a lane mask (a dynamic insert puts the vector in
  /// local memory), two instructions per lane per pass, more than a cheap
  /// decode costs.
  SmallVector<Value> fetch(Value from, Value fromRows, Value firstRow,
                           int64_t tileRows, Value scales, Value k0) {
    int64_t count = tileRows / shape.rowsPerPass();
    Value base = h.add(firstRow, copyRow);
    Value k = h.add(k0, copyK);
    SmallVector<Value> words, scaleBytes;
    for (int64_t i = 0; i < count; ++i) {
      Value row = h.add(base, i * shape.rowsPerPass());
      Value w = packWord(from, fromRows, row, k);
      if (family.fp4()) {
        auto [folded, byte] = foldScaleSign(w, scales, fromRows, row, k0);
        w = folded;
        scaleBytes.push_back(byte);
      }
      words.push_back(w);
    }
    SmallVector<Value> fetched = {vector::FromElementsOp::create(
        b, loc, VectorType::get({count}, i32), words)};
    if (family.fp4())
      fetched.push_back(vector::FromElementsOp::create(
          b, loc, VectorType::get({count}, b.getI8Type()), scaleBytes));
    return fetched;
  }

  /// The step at `k0` of operand `from`: in 16-byte chunks where it
  /// allows, else word by word.
  SmallVector<Value> fetchStep(Value from, Value fromRows, Value firstRow,
                               int64_t tileRows, Value scales, Value k0) {
    if (Value aligned = from == a ? wideA : wideB)
      return fetchChunks(from, fromRows, firstRow, tileRows, aligned, k0);
    return fetch(from, fromRows, firstRow, tileRows, scales, k0);
  }

  /// Stores what fetchStep fetched into the tile `to` (cheap to unroll: no
  /// decode).
  void store(ValueRange fetched, Value to) {
    if (to == tileA ? wideA : wideB) {
      for (auto [i, chunk] : llvm::enumerate(fetched)) {
        Value at = h.add(chunkAt, 64 * shape.wideRowsPerPass() / 8 * i);
        vector::StoreOp::create(b, loc, chunk, to, ValueRange{at},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      }
      return;
    }
    Value words = fetched[0];
    int64_t count = cast<VectorType>(words.getType()).getDimSize(0);
    for (int64_t i = 0; i < count; ++i) {
      Value w = vector::ExtractOp::create(b, loc, words, i);
      Value at = h.add(copyAt, shape.rowsPerPass() * kRowWords * i);
      memref::StoreOp::create(b, loc, w, to, ValueRange{at});
    }
    if (fetched.size() < 2)
      return;
    // FP4: the even lane of each block stages its scale byte without the
    // sign, at byte 4 * row + block of the step's scale tile.
    Value scaleTile = to == tileA ? scaleTileA : scaleTileB;
    auto staging = scf::IfOp::create(b, loc, evenWord, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(staging.thenBlock()->getTerminator());
    Value blockInStep = arith::DivUIOp::create(b, loc, copyWord, h.idx(2));
    Value magnitude = arith::ConstantIntOp::create(b, loc, b.getI8Type(), 0x7F);
    for (int64_t i = 0; i < count; ++i) {
      Value row = h.add(copyRow, i * shape.rowsPerPass());
      Value rowAt = h.mul(row, family.scalesPerRow());
      Value entry = h.add(rowAt, blockInStep);
      Value byte = vector::ExtractOp::create(b, loc, fetched[1], i);
      Value unsigned_ = arith::AndIOp::create(b, loc, byte, magnitude);
      memref::StoreOp::create(b, loc, unsigned_, scaleTile, ValueRange{entry});
    }
  }

  /// This K step's scale bytes of every tile row and column: MXFP8 one
  /// (byte `row`), FP4 four (byte `4 * row + block`, the sign dropped);
  /// outside the operands a factor of 1 (never NaN).
  void stageScales(Value scales, Value fromRows, Value firstRow, Value to,
                   int64_t tileRows, Value kb, Value neutral) {
    int64_t perRow = family.scalesPerRow();
    Value blocks = b.createOrFold<memref::DimOp>(loc, scales, 1);
    for (int64_t i = 0; i < tileRows * perRow; i += shape.threads()) {
      // Entries past the tile (MXFP8's 64 A rows) are stored twice.
      int64_t count = tileRows * perRow;
      Value entry = h.add(tid, i);
      if (count % shape.threads())
        entry = arith::RemUIOp::create(b, loc, entry, h.idx(count));
      Value rowInTile =
          perRow == 1 ? entry
                      : arith::DivUIOp::create(b, loc, entry, h.idx(perRow))
                            .getResult();
      Value block = kb;
      if (family.fp4()) {
        Value blockInStep =
            arith::RemUIOp::create(b, loc, entry, h.idx(perRow));
        Value firstBlock = h.mul(kb, perRow);
        block = h.add(firstBlock, blockInStep);
      }
      Value v = h.loadIfInside(scales, h.add(firstRow, rowInTile), block,
                               fromRows, blocks, neutral);
      if (family.fp4())
        v = arith::AndIOp::create(
            b, loc, v,
            arith::ConstantIntOp::create(b, loc, b.getI8Type(), 0x7F));
      memref::StoreOp::create(b, loc, v, to, ValueRange{entry});
    }
  }

  /// The MMA of one K step from the tiles, added to `acc`.
  Value mmaStep(Value acc, Value k0) {
    Value next;
    if (family.stagedScales) {
      // FP4's scale bytes came with the words (see store).
      if (!family.fp4()) {
        Value kb = arith::DivUIOp::create(b, loc, k0, h.idx(tileK));
        Value neutral = neutralScale();
        stageScales(scalesA, rows, blockM, scaleTileA, shape.rows(), kb,
                    neutral);
        stageScales(scalesB, cols, blockN, scaleTileB, shape.cols, kb,
                    neutral);
      }
      next =
          WarpgroupMmaOp::create(b, loc, accType, mmaA, mmaB, acc, scaleTileA,
                                 scaleTileB, family.mmaA(), family.mmaB());
    } else if (family.match.block) {
      // One scale block per K step: the block's partial sums, rescaled
      // in f32 and added to the accumulators.
      Value partial = WarpgroupMmaOp::create(b, loc, accType, mmaA, mmaB,
                                             Value(), Value(), Value(),
                                             family.mmaA(), family.mmaB());
      Value kb = arith::DivUIOp::create(b, loc, k0, h.idx(tileK));
      Value rowScales[2] = {h.loadClamped(scalesA, row0, kb),
                            h.loadClamped(scalesA, row1, kb)};
      SmallVector<Value> sums;
      for (int64_t j = 0; j < shape.fragments(); ++j) {
        Value colScales[2] = {h.loadClamped(scalesB, cCol(j, 0), kb),
                              h.loadClamped(scalesB, cCol(j, 1), kb)};
        for (int64_t r = 0; r < 2; ++r)
          for (int64_t e = 0; e < 2; ++e) {
            Value scale =
                blockScaleAt(b, op, family, rowScales[r], colScales[e]);
            SmallVector<int64_t> pos = {j, r, e};
            Value part = vector::ExtractOp::create(b, loc, partial, pos);
            Value old = vector::ExtractOp::create(b, loc, acc, pos);
            Value term = arith::MulFOp::create(b, loc, part, scale);
            sums.push_back(arith::AddFOp::create(b, loc, old, term));
          }
      }
      next = vector::FromElementsOp::create(b, loc, accType, sums);
    } else {
      next = WarpgroupMmaOp::create(b, loc, accType, mmaA, mmaB, acc, Value(),
                                    Value(), family.mmaA(), family.mmaB());
    }
    return next;
  }

  /// The K loop. With both operands chunkable: when both are 16-byte
  /// aligned (uniform), the two-stage cp.async loop, else the
  /// register-staged one.
  Value kLoop(Value init) {
    if (!asyncCopies)
      return stagedLoop(init);
    Value both = arith::AndIOp::create(b, loc, wideA, wideB);
    auto version = scf::IfOp::create(b, loc, TypeRange{accType}, both,
                                     /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(version.thenBlock());
    scf::YieldOp::create(b, loc, asyncLoop(init));
    b.setInsertionPointToStart(version.elseBlock());
    scf::YieldOp::create(b, loc, stagedLoop(init));
    return version.getResult(0);
  }

  /// One thread's cp.async chunks of one operand: per pass, the byte
  /// address of its row (the operand's first row when the row is outside;
  /// loop invariant) and whether the row is inside.
  struct AsyncRows {
    SmallVector<Value> rowAddress, rowInside;
    int64_t elementBytes = 1;
  };

  AsyncRows asyncRows(Value from, Value fromRows, Value firstRow,
                      int64_t tileRows) {
    AsyncRows r;
    auto type = cast<MemRefType>(from.getType());
    r.elementBytes = type.getElementTypeBitWidth() / 8;
    SmallVector<int64_t> strides;
    int64_t offset;
    (void)type.getStridesAndOffset(strides, offset);
    Value start = firstElementAddress(from);
    Value zero = h.idx(0);
    for (int64_t i = 0; i < tileRows / shape.wideRowsPerPass(); ++i) {
      Value rowBase = h.add(firstRow, chunkRow);
      Value row = h.add(rowBase, shape.wideRowsPerPass() * i);
      Value inside = h.lt(row, fromRows);
      Value used = arith::SelectOp::create(b, loc, inside, row, zero);
      Value rowBytes = h.mul(used, strides[0] * r.elementBytes);
      r.rowAddress.push_back(h.add(start, rowBytes));
      r.rowInside.push_back(inside);
    }
    return r;
  }

  /// cp.async.cg of this thread's 16-byte chunks of the step at `k0` into
  /// `to` (the places fetchChunks/store use); a chunk outside the operand
  /// copies 0 bytes and zero-fills, its source kept inside the operand
  /// (the row's first element).
  void copyChunksAsync(const AsyncRows &r, Value to, Value k0) {
    Value k = h.add(k0, chunkK);
    Value kInside = h.lt(k, kEnd);
    Value kUsed = arith::SelectOp::create(b, loc, kInside, k, h.idx(0));
    Value kBytes = h.mul(kUsed, r.elementBytes);
    for (auto [i, rowAddress] : llvm::enumerate(r.rowAddress)) {
      Value inside = arith::AndIOp::create(b, loc, r.rowInside[i], kInside);
      Value address = h.add(rowAddress, kBytes);
      Value src = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address);
      Value bytes = arith::SelectOp::create(b, loc, inside, i32Constant(16),
                                            i32Constant(0));
      Value at = h.add(chunkAt, 64 * shape.wideRowsPerPass() / 8 * i);
      Value dst = tileSharedAddress(b, loc, to, at);
      NVVM::InlinePtxOp::create(
          b, loc, TypeRange{}, ValueRange{dst, src, bytes}, ValueRange{},
          b.getStringAttr("cp.async.cg.shared.global [$0], [$1], 16, $2;"),
          Value());
    }
  }

  /// One step of the two-stage loop: issue the copies of the step at
  /// `kNext` into (nextA, nextB), wait for this step's (all but the
  /// newest group), multiply the tiles (curA, curB), and barrier so that
  /// the following copies stay off them.
  Value asyncStep(const AsyncRows &ra, const AsyncRows &rb, Value acc, Value k0,
                  Value curA, Value curB, Value nextA, Value nextB) {
    Value kNext = h.add(k0, tileK);
    copyChunksAsync(ra, nextA, kNext);
    copyChunksAsync(rb, nextB, kNext);
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 1);
    mmaA = curA;
    mmaB = curB;
    Value next = mmaStep(acc, k0);
    mmaA = tileA;
    mmaB = tileB;
    gpu::BarrierOp::create(b, loc);
    return next;
  }

  /// Two stages, (tileA, tileB) and (tileA1, tileB1), the loop unrolled
  /// by two so that every address is loop invariant: an iteration runs
  /// steps s (stage 0) and s + 1 (stage 1), each issuing the next step's
  /// copies into the other stage first; an odd last step runs after the
  /// loop, on stage 0.
  Value asyncLoop(Value init) {
    AsyncRows ra = asyncRows(a, rows, blockM, shape.rows());
    AsyncRows rb = asyncRows(bm, cols, blockN, shape.cols);
    copyChunksAsync(ra, tileA, kBegin);
    copyChunksAsync(rb, tileB, kBegin);
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    Value span = arith::SubIOp::create(b, loc, kEnd, kBegin);
    Value steps = arith::CeilDivUIOp::create(b, loc, span, h.idx(tileK));
    Value pairs = arith::DivUIOp::create(b, loc, steps, h.idx(2));
    Value pairSpan = h.mul(pairs, 2 * tileK);
    Value pairsEnd = h.add(kBegin, pairSpan);
    auto loop = scf::ForOp::create(b, loc, kBegin, pairsEnd, h.idx(2 * tileK),
                                   ValueRange{init});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value k0 = loop.getInductionVar();
      Value acc = asyncStep(ra, rb, loop.getRegionIterArgs()[0], k0, tileA,
                            tileB, tileA1, tileB1);
      Value k1 = h.add(k0, tileK);
      acc = asyncStep(ra, rb, acc, k1, tileA1, tileB1, tileA, tileB);
      scf::YieldOp::create(b, loc, acc);
    }
    b.setInsertionPointAfter(loop);
    Value odd = h.lt(pairsEnd, kEnd);
    auto last = scf::IfOp::create(b, loc, TypeRange{accType}, odd,
                                  /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(last.thenBlock());
      scf::YieldOp::create(b, loc,
                           asyncStep(ra, rb, loop.getResult(0), pairsEnd, tileA,
                                     tileB, tileA1, tileB1));
      b.setInsertionPointToStart(last.elseBlock());
      scf::YieldOp::create(b, loc, loop.getResult(0));
    }
    // Nothing may be left in flight at the end of the kernel.
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
    return last.getResult(0);
  }

  /// The register-staged K loop: store the fetched step, fetch the next,
  /// multiply.
  Value stagedLoop(Value init) {
    Value kStart = kBegin;
    Value kStep = h.idx(tileK);
    SmallVector<Value> firstA =
        fetchStep(a, rows, blockM, shape.rows(), scalesA, kStart);
    SmallVector<Value> firstB =
        fetchStep(bm, cols, blockN, shape.cols, scalesB, kStart);
    SmallVector<Value> carried = {init};
    llvm::append_range(carried, firstA);
    llvm::append_range(carried, firstB);
    auto loop = scf::ForOp::create(b, loc, kStart, kEnd, kStep, carried);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value k0 = loop.getInductionVar();
      ValueRange args = loop.getRegionIterArgs();
      store(args.slice(1, firstA.size()), tileA);
      store(args.slice(1 + firstA.size(), firstB.size()), tileB);
      // Past the last step the fetch reads nothing: every element is
      // outside K and loads as zero.
      Value kNext = h.add(k0, tileK);
      SmallVector<Value> nextA =
          fetchStep(a, rows, blockM, shape.rows(), scalesA, kNext);
      SmallVector<Value> nextB =
          fetchStep(bm, cols, blockN, shape.cols, scalesB, kNext);
      Value acc = args[0];
      SmallVector<Value> yielded = {mmaStep(acc, k0)};
      llvm::append_range(yielded, nextA);
      llvm::append_range(yielded, nextB);
      // The next step overwrites the tiles the MMA read.
      gpu::BarrierOp::create(b, loc);
      scf::YieldOp::create(b, loc, yielded);
    }
    return loop.getResult(0);
  }

  /// Writes back the elements inside C, through the fused epilogue; a
  /// split launch writes its partial sums instead.
  void writeBack(Value result) {
    if (splitK == 1)
      return writeElements(result, /*toPartials=*/false);
    auto choice = scf::IfOp::create(b, loc, splitting, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    writeElements(result, /*toPartials=*/true);
    b.setInsertionPoint(choice.elseBlock()->getTerminator());
    writeElements(result, /*toPartials=*/false);
  }

  /// How the fused epilogue's operands other than the accumulator are read
  /// where each element is stored: operands that vary only along the
  /// columns from the block's copy in workgroup memory (slot q of tileB:
  /// words [q * BN, q * BN + BN)), those that vary only along the rows from
  /// the thread's two rows read once, those that vary with neither read
  /// once; the rest per element.
  struct EpilogueInputs {
    llvm::DenseMap<unsigned, int64_t> columnSlot;
    llvm::DenseMap<unsigned, std::array<Value, 2>> byRow;
    llvm::DenseMap<unsigned, Value> uniform;
  };

  /// operand[map(row, col)] with every row or column index clamped into
  /// the operand (a value read for an element outside C is never used).
  Value readClamped(OpOperand &in, Value row, Value col) {
    linalg::GenericOp epi = fusion.epilogue;
    SmallVector<Value> at;
    for (auto [pos, e] :
         llvm::enumerate(epi.getMatchingIndexingMap(&in).getResults())) {
      if (auto d = dyn_cast<AffineDimExpr>(e)) {
        Value size = b.createOrFold<memref::DimOp>(loc, in.get(), pos);
        Value last = arith::SubIOp::create(b, loc, size, h.idx(1));
        at.push_back(h.min(d.getPosition() == 0 ? row : col, last));
      } else {
        at.push_back(h.idx(cast<AffineConstantExpr>(e).getValue()));
      }
    }
    return memref::LoadOp::create(b, loc, in.get(), at);
  }

  /// A value of at most 32 bits as the i32 word it is staged in, and back.
  Value toWord(Value v) {
    Type t = v.getType();
    unsigned bits = t.getIntOrFloatBitWidth();
    if (isa<FloatType>(t))
      v = arith::BitcastOp::create(b, loc, b.getIntegerType(bits), v);
    return bits == 32 ? v : arith::ExtUIOp::create(b, loc, i32, v).getResult();
  }
  Value fromWord(Value word, Type t) {
    unsigned bits = t.getIntOrFloatBitWidth();
    Value v = bits == 32 ? word
                         : arith::TruncIOp::create(
                               b, loc, b.getIntegerType(bits), word)
                               .getResult();
    return isa<FloatType>(t) ? arith::BitcastOp::create(b, loc, t, v).getResult()
                             : v;
  }

  /// Reads the epilogue operands that do not vary along both dims once per
  /// block or thread (see EpilogueInputs): a per-column scale or bias read
  /// per element is most of the kernel's global bytes past the operands.
  /// The tiles are free after the K loop; two barriers keep the staging
  /// off the last MMA's tiles and its reads behind its writes.
  EpilogueInputs stageEpilogueInputs() {
    EpilogueInputs inputs;
    linalg::GenericOp epi = fusion.epilogue;
    int64_t slots = cast<MemRefType>(tileB.getType()).getNumElements() /
                    shape.cols;
    SmallVector<OpOperand *> columnOperands;
    for (OpOperand *in : epi.getDpsInputOperands()) {
      auto type = dyn_cast<MemRefType>(in->get().getType());
      if (in->getOperandNumber() == fusion.accOperand || !type)
        continue;
      AffineMap map = epi.getMatchingIndexingMap(in);
      bool byRow = map.isFunctionOfDim(0), byCol = map.isFunctionOfDim(1);
      if (byRow && byCol)
        continue;
      unsigned number = in->getOperandNumber();
      if (byCol) {
        Type t = type.getElementType();
        if (t.isIntOrFloat() && t.getIntOrFloatBitWidth() <= 32 &&
            static_cast<int64_t>(columnOperands.size()) < slots) {
          inputs.columnSlot[number] = columnOperands.size();
          columnOperands.push_back(in);
        }
      } else if (byRow) {
        inputs.byRow[number] = {readClamped(*in, row0, blockN),
                                readClamped(*in, row1, blockN)};
      } else {
        inputs.uniform[number] = readClamped(*in, blockM, blockN);
      }
    }
    if (columnOperands.empty())
      return inputs;
    gpu::BarrierOp::create(b, loc);
    for (auto [q, in] : llvm::enumerate(columnOperands))
      for (int64_t i = 0; i < shape.cols; i += shape.threads()) {
        Value at = h.add(tid, i);
        OpBuilder::InsertionGuard guard(b);
        if (i + shape.threads() > shape.cols) {
          auto inTile = scf::IfOp::create(b, loc, h.lt(at, h.idx(shape.cols)),
                                          false);
          b.setInsertionPoint(inTile.thenBlock()->getTerminator());
        }
        Value col = h.add(blockN, at);
        Value word = toWord(readClamped(*in, blockM, col));
        Value slotAt = h.add(at, static_cast<int64_t>(q) * shape.cols);
        memref::StoreOp::create(b, loc, word, tileB, ValueRange{slotAt});
      }
    gpu::BarrierOp::create(b, loc);
    return inputs;
  }

  void writeElements(Value result, bool toPartials) {
    EpilogueInputs inputs;
    if (!toPartials && fusion.epilogue)
      inputs = stageEpilogueInputs();
    for (int64_t j = 0; j < shape.fragments(); ++j)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t e = 0; e < 2; ++e) {
          Value row = r ? row1 : row0, col = cCol(j, e);
          Value rowInside = h.lt(row, rows);
          Value colInside = h.lt(col, cols);
          Value inside = arith::AndIOp::create(b, loc, rowInside, colInside);
          auto store = scf::IfOp::create(b, loc, inside, false);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(store.thenBlock()->getTerminator());
          Value v = vector::ExtractOp::create(b, loc, result,
                                              ArrayRef<int64_t>{j, r, e});
          if (toPartials) {
            memref::StoreOp::create(b, loc, v, partials,
                                    ValueRange{split, row, col});
            continue;
          }
          // Column 8j + e + 2t of the block's tile.
          auto read = [&](OpOperand &in) -> Value {
            unsigned number = in.getOperandNumber();
            if (auto it = inputs.columnSlot.find(number);
                it != inputs.columnSlot.end()) {
              Value inTile = h.add(t2, j * 8 + e);
              Value at = h.add(inTile, it->second * shape.cols);
              Value word =
                  memref::LoadOp::create(b, loc, tileB, ValueRange{at});
              return fromWord(
                  word, cast<MemRefType>(in.get().getType()).getElementType());
            }
            if (auto it = inputs.byRow.find(number); it != inputs.byRow.end())
              return it->second[r];
            return inputs.uniform.lookup(number);
          };
          storeElement(v, row, col, read);
        }
  }

  /// C[row, col] = v, or the fused epilogue's output there (its operands
  /// read by `readInput` where it gives a value).
  void storeElement(Value v, Value row, Value col,
                    llvm::function_ref<Value(OpOperand &)> readInput = {}) {
    if (!fusion.epilogue) {
      memref::StoreOp::create(b, loc, v, c, ValueRange{row, col});
      return;
    }
    Value y = mlir::comfyquant::detail::emitEpilogueAt(
        b, loc, fusion.epilogue, fusion.accOperand, v, row, col, readInput);
    memref::StoreOp::create(b, loc, y,
                            fusion.epilogue.getDpsInitOperand(0)->get(),
                            ValueRange{row, col});
  }

  /// Whether M (host) is decode-sized, 1 to kSplitRows rows: the launch
  /// then splits K (no M, no launch).
  Value splitRows() {
    Value below = arith::SubIOp::create(b, loc, rows, h.idx(1));
    return h.lt(below, h.idx(GpuGemmAttr::kSplitRows));
  }

  /// After a split launch (M at most kSplitRows): one thread per element
  /// of C adds the splits' partial sums in split order and stores the sum
  /// as the GEMM would have (through the epilogue).
  void reduceSplits() {
    b.setInsertionPoint(op);
    constexpr int64_t kReduceThreads = 256;
    auto onlyIfSplit = scf::IfOp::create(b, loc, splitRows(), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(onlyIfSplit.thenBlock()->getTerminator());
    Value elements = arith::MulIOp::create(b, loc, rows, cols);
    Value blocks =
        arith::CeilDivUIOp::create(b, loc, elements, h.idx(kReduceThreads));
    Value one = h.idx(1);
    auto reduce = gpu::LaunchOp::create(
        b, loc, blocks, one, one, h.idx(kReduceThreads), one, one,
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr);
    b.setInsertionPointToStart(&reduce.getBody().front());
    gpu::TerminatorOp::create(b, loc);
    b.setInsertionPointToStart(&reduce.getBody().front());
    Value blockFirst = h.mul(reduce.getBlockIds().x, kReduceThreads);
    Value element = h.add(blockFirst, reduce.getThreadIds().x);
    Value inside = h.lt(element, elements);
    auto ifInside = scf::IfOp::create(b, loc, inside, false);
    b.setInsertionPoint(ifInside.thenBlock()->getTerminator());
    Value row = arith::DivUIOp::create(b, loc, element, cols);
    Value col = arith::RemUIOp::create(b, loc, element, cols);
    Value sum;
    for (int64_t z = 0; z < splitK; ++z) {
      Value part = memref::LoadOp::create(b, loc, partials,
                                          ValueRange{h.idx(z), row, col});
      if (!sum)
        sum = part;
      else if (isa<FloatType>(family.acc))
        sum = arith::AddFOp::create(b, loc, sum, part);
      else
        sum = arith::AddIOp::create(b, loc, sum, part);
    }
    storeElement(sum, row, col);
  }

  /// Erases what the kernel replaces.
  void eraseReplaced() {
    op.erase();
    if (fusion.epilogue)
      fusion.epilogue.erase();
    for (auto &[operand, producer] : producers) {
      producer.erase();
      if (operand.use_empty())
        operand.getDefiningOp()->erase();
    }
    // The kernel starts from zero and stores every element of C (or of the
    // epilogue's output) inside the bounds, so the fill is dead; with the
    // epilogue fused, so is C.
    if (fusion.zeroFill)
      fusion.zeroFill.erase();
    if (auto alloc = c.getDefiningOp<memref::AllocOp>(); alloc && c.use_empty())
      alloc.erase();
  }
};

/// Threads of the kernel that decodes an operand once per call, and the
/// elements each decodes (K is a multiple).
constexpr int64_t kDecodeThreads = 256;
constexpr int64_t kDecodeChunk = 16;

/// A launch of the kernel that decodes an operand once per call: one
/// thread per chunk of `chunks` (an index), no blocks unless `enabled`.
/// `b` is left at the start of its body.
gpu::LaunchOp createDecodeLaunch(OpBuilder &b, Location loc, Value chunks,
                                Value enabled) {
  Builder h{b, loc};
  Value blocks =
      b.createOrFold<arith::CeilDivUIOp>(loc, chunks, h.idx(kDecodeThreads));
  Value grid = arith::SelectOp::create(b, loc, enabled, blocks, h.idx(0));
  Value one = h.idx(1);
  auto launch = gpu::LaunchOp::create(
      b, loc, grid, one, one, h.idx(kDecodeThreads), one, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/{}, /*workgroupAttributions=*/{},
      /*privateAttributions=*/{}, nullptr, nullptr, nullptr,
      /*module=*/nullptr,
      FlatSymbolRefAttr::get(b.getContext(), GpuGemmAttr::kDecodeKernelName));
  b.setInsertionPointToStart(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  return launch;
}

/// This thread's chunk in a decode launch over rows of `chunksPerRow`
/// chunks, `chunks` in all: its row and its chunk in the row, `b` left
/// inside the check that it is one of them.
std::pair<Value, Value> decodeChunkAt(OpBuilder &b, Location loc,
                                      gpu::LaunchOp launch, Value chunks,
                                      int64_t chunksPerRow) {
  Builder h{b, loc};
  Value chunk = h.add(h.mul(launch.getBlockIds().x, kDecodeThreads),
                      launch.getThreadIds().x);
  auto inside = scf::IfOp::create(b, loc, h.lt(chunk, chunks), false);
  b.setInsertionPoint(inside.thenBlock()->getTerminator());
  Value row = arith::DivUIOp::create(b, loc, chunk, h.idx(chunksPerRow));
  Value chunkInRow =
      arith::RemUIOp::create(b, loc, chunk, h.idx(chunksPerRow));
  return {row, chunkInRow};
}

/// Writes B's producer into `decoded` (N x K of the integer operand's
/// type), 16 elements per thread; no blocks unless `enabled`.
void decodeProducerOnce(OpBuilder &b, Location loc, linalg::GenericOp producer,
                        Value decoded, Value enabled) {
  OpBuilder::InsertionGuard guard(b);
  Builder h{b, loc};
  auto type = cast<MemRefType>(decoded.getType());
  int64_t chunksPerRow = type.getDimSize(1) / kDecodeChunk;
  Value chunks = h.idx(type.getDimSize(0) * chunksPerRow);
  gpu::LaunchOp launch = createDecodeLaunch(b, loc, chunks, enabled);
  IRMapping tables;
  stageProducerTables(b, loc, launch, producer, launch.getThreadIds().x,
                      kDecodeThreads, tables);
  auto [row, chunkInRow] =
      decodeChunkAt(b, loc, launch, chunks, chunksPerRow);
  Value k = h.mul(chunkInRow, kDecodeChunk);
  // Element e at k + e: the reads of one stored byte or scale by several
  // elements have one address.
  SmallVector<Value> elems = mlir::comfyquant::detail::emitAlignedProducerChunk(
      b, loc, producer, row, chunkInRow, kDecodeChunk, kDecodeChunk, &tables);
  Value packed = vector::FromElementsOp::create(
      b, loc, VectorType::get({kDecodeChunk}, type.getElementType()), elems);
  vector::StoreOp::create(b, loc, packed, decoded, ValueRange{row, k},
                          /*nontemporal=*/false,
                          llvm::MaybeAlign(kDecodeChunk));
}

/// A decode launch writing `to` (rows x K of f16), one chunk of 16 values
/// per thread: `stage` first (the block's tables), then `decode` gives
/// the 16 values of the chunk at (row, chunk in the row, its first K),
/// stored with one 32-byte store. No blocks unless `enabled`.
void widenOnce(
    OpBuilder &b, Location loc, Value to, Value rows, Value enabled,
    function_ref<void(gpu::LaunchOp)> stage,
    function_ref<SmallVector<Value>(Value row, Value chunkInRow, Value k)>
        decode) {
  OpBuilder::InsertionGuard guard(b);
  Builder h{b, loc};
  int64_t chunksPerRow =
      cast<MemRefType>(to.getType()).getDimSize(1) / kDecodeChunk;
  Value chunks =
      b.createOrFold<arith::MulIOp>(loc, rows, h.idx(chunksPerRow));
  gpu::LaunchOp launch = createDecodeLaunch(b, loc, chunks, enabled);
  stage(launch);
  auto [row, chunkInRow] =
      decodeChunkAt(b, loc, launch, chunks, chunksPerRow);
  Value k = h.mul(chunkInRow, kDecodeChunk);
  Value packed = vector::FromElementsOp::create(
      b, loc, VectorType::get({kDecodeChunk}, b.getF16Type()),
      decode(row, chunkInRow, k));
  vector::StoreOp::create(b, loc, packed, to, ValueRange{row, k},
                          /*nontemporal=*/false,
                          llvm::MaybeAlign(2 * kDecodeChunk));
}

/// Writes the exact f16 of the FP8 codes of type `fp8` in `from` (rows x
/// K of i8, rows of 16-byte chunks at 16-byte aligned addresses) into
/// `to` (rows x K of f16), 16 codes per thread: one 16-byte load, four
/// word decodes (decodeFP8Word), two 16-byte stores. No blocks unless
/// `enabled`.
void widenFP8Once(OpBuilder &b, Location loc, Value from, Value to,
                  Value rows, Type fp8, Value enabled) {
  widenOnce(
      b, loc, to, rows, enabled, [](gpu::LaunchOp) {},
      [&](Value row, Value, Value k) {
        Value codes = vector::LoadOp::create(
            b, loc, VectorType::get({kDecodeChunk}, b.getI8Type()), from,
            ValueRange{row, k}, /*nontemporal=*/false,
            llvm::MaybeAlign(kDecodeChunk));
        Value words = vector::BitCastOp::create(
            b, loc, VectorType::get({kDecodeChunk / 4}, b.getI32Type()),
            codes);
        SmallVector<Value> halves;
        for (int64_t w = 0; w < kDecodeChunk / 4; ++w) {
          Value word = vector::ExtractOp::create(b, loc, words, w);
          Value four = decodeFP8Word(b, loc, word, fp8);
          for (int64_t e = 0; e < 4; ++e)
            halves.push_back(vector::ExtractOp::create(b, loc, four, e));
        }
        return halves;
      });
}

/// The i8 elements of `operand` at (row, x * 16 + e), e < 16: through its
/// producer (its stored bytes and scales loaded once per chunk), else
/// loaded.
SmallVector<Value> chunkOf(OpBuilder &b, Location loc, Value operand,
                           linalg::GenericOp producer, Value row, Value x,
                           const IRMapping &tables) {
  if (producer)
    return mlir::comfyquant::detail::emitAlignedProducerChunk(
        b, loc, producer, row, x, kDecodeChunk, kDecodeChunk, &tables);
  Builder h{b, loc};
  Value k = h.mul(x, kDecodeChunk);
  SmallVector<Value> elems;
  for (int64_t e = 0; e < kDecodeChunk; ++e)
    elems.push_back(
        memref::LoadOp::create(b, loc, operand, ValueRange{row, h.add(k, e)}));
  return elems;
}

/// Writes the exact f16 of NVFP4 operand `codes` (rows x K, one E2M1 code
/// per i8) times its E4M3 block scales `scales` (rows x K / 16) into `to`
/// (rows x K of f16), one block of 16 per thread: the codes packed as
/// nibbles into two words, their signs flipped for a negative scale, each
/// word decoded with the scale's magnitude (decodeFP4Word), two 16-byte
/// stores. Operands with a producer are read through it. No blocks unless
/// `enabled`.
void widenFP4Once(OpBuilder &b, Location loc, linalg::GenericOp op,
                  unsigned codesIndex, Value to, Value rows, Value enabled) {
  Value codes = op.getDpsInputs()[codesIndex];
  Value scales = op.getDpsInputs()[codesIndex + 2];
  linalg::GenericOp codesProducer =
      mlir::comfyquant::detail::operandProducer(codes, op);
  linalg::GenericOp scalesProducer =
      mlir::comfyquant::detail::operandProducer(scales, op);
  SmallVector<linalg::GenericOp> producers;
  for (linalg::GenericOp p : {codesProducer, scalesProducer})
    if (p)
      producers.push_back(p);
  IRMapping tables;
  auto stage = [&](gpu::LaunchOp launch) {
    stageProducerTables(b, loc, launch, producers, launch.getThreadIds().x,
                        kDecodeThreads, tables);
  };
  auto decode = [&](Value row, Value chunkInRow, Value) {
    SmallVector<Value> elems =
        chunkOf(b, loc, codes, codesProducer, row, chunkInRow, tables);
    Value scale =
        scalesProducer
            ? mlir::comfyquant::detail::emitProducerAt(
                  b, loc, scalesProducer, row, chunkInRow, &tables)
            : memref::LoadOp::create(b, loc, scales,
                                     ValueRange{row, chunkInRow})
                  .getResult();
    Type i32 = b.getI32Type();
    auto c32 = [&](int64_t v) {
      return arith::ConstantIntOp::create(b, loc, i32, v).getResult();
    };
    // A negative scale flips every code's sign (bit 3 of its nibble).
    Value scale32 = arith::ExtUIOp::create(b, loc, i32, scale);
    Value negative = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, loc, scale32, c32(0x80)), c32(0));
    Value flip = arith::SelectOp::create(
        b, loc, negative, c32(static_cast<int32_t>(0x88888888u)), c32(0));
    Value magnitude = ue4m3ToF16(b, loc, scale);
    SmallVector<Value> halves;
    for (int64_t w = 0; w < kDecodeChunk / 8; ++w) {
      Value word =
          packE2M1Word(b, loc, ArrayRef<Value>(elems).slice(8 * w, 8));
      word = arith::XOrIOp::create(b, loc, word, flip);
      Value eight = decodeFP4Word(b, loc, word, magnitude);
      for (int64_t e = 0; e < 8; ++e)
        halves.push_back(vector::ExtractOp::create(b, loc, eight, e));
    }
    return halves;
  };
  widenOnce(b, loc, to, rows, enabled, stage, decode);
}

/// The tagged f16 GEMM `c[m, n] += a[m, k] * b[n, k]` (f32 C, `op`'s maps
/// and iterators), which the FP8 or NVFP4 GEMM `op` is on the widened
/// operands.
linalg::GenericOp f16Gemm(OpBuilder &b, Location loc, linalg::GenericOp op,
                          Value a, Value bOperand, Value c) {
  Type f32 = b.getF32Type();
  // A's, B's and C's maps (a block-scaled op has its scales' between).
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto gemm = linalg::GenericOp::create(
      b, loc, ValueRange{a, bOperand}, ValueRange{c},
      ArrayRef<AffineMap>{maps[0], maps[1], maps.back()},
      op.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = arith::ExtFOp::create(nb, l, f32, args[0]);
        Value w = arith::ExtFOp::create(nb, l, f32, args[1]);
        Value product = arith::MulFOp::create(nb, l, x, w);
        Value sum = arith::AddFOp::create(nb, l, args[2], product);
        linalg::YieldOp::create(nb, l, sum);
      });
  std::optional<GemmMatch> m = mlir::comfyquant::detail::matchGemm(gemm);
  assert(m && "an f16 GEMM matches");
  gemm->setAttr(ComfyQuantDialect::getGemmInfoAttrName(),
                mlir::comfyquant::detail::gemmInfo(b.getContext(), *m));
  return gemm;
}

/// The copy predecodedCopy builds: the GEMM, its family, config and tile,
/// and the i1 that enables it.
struct PredecodedCopy {
  linalg::GenericOp op;
  Family family;
  GpuGemmAttr config;
  TileShape shape;
  Value enabled;
};

/// GpuGemmAttr's decode_rows for `op` (predecodeFor says how): from
/// `decodeRows` rows of A on, decode kernels write the decoded operands
/// into workspace buffers (B's producer into the integer operand, or both
/// FP8 operands widened to f16, A's kernel sized by M), and a copy of the
/// fill, GEMM and epilogue reads them as stored; the copy's config is the
/// one stored operands get. Returns the copy and the i1 that enables it
/// (the original runs otherwise). The i1 is computed before the fill, the
/// rest follows the epilogue: between the producer and the GEMM a launch
/// would hide the producer (operandProducer).
PredecodedCopy predecodedCopy(linalg::GenericOp op, const Family &family,
                              Predecode form, const Fusion &fusion,
                              int64_t decodeRows) {
  assert(form != Predecode::None && "a GEMM that decodes once per call");
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Value a = op.getDpsInputs()[0];
  Value bOperand = op.getDpsInputs()[1];
  auto bType = cast<MemRefType>(bOperand.getType());
  OpBuilder b(fusion.zeroFill);
  Builder h{b, loc};
  Value rows = b.createOrFold<memref::DimOp>(loc, a, 0);
  Value enabled = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                        rows, h.idx(decodeRows));
  if (form == Predecode::FP8ToF16) {
    // Misaligned operands keep the fused kernel.
    enabled = arith::AndIOp::create(b, loc, enabled,
                                    firstElementAligned(b, loc, a, 16));
    enabled = arith::AndIOp::create(b, loc, enabled,
                                    firstElementAligned(b, loc, bOperand, 16));
  }
  b.setInsertionPointAfter(fusion.epilogue);
  // The copy: its own C, zero-filled, the GEMM on the decoded operands,
  // the epilogue reading the copy's C.
  Value c = op.getDpsInitOperand(0)->get();
  IRMapping map;
  linalg::GenericOp copy;
  auto clonedC = [&] {
    Operation *newC = b.clone(*c.getDefiningOp());
    map.map(c, newC->getResult(0));
    b.clone(*fusion.zeroFill, map);
    return newC->getResult(0);
  };
  if (form == Predecode::Producer) {
    auto func = op->getParentOfType<func::FuncOp>();
    OpBuilder entry = OpBuilder::atBlockBegin(&func.getBody().front());
    Value decoded = memref::AllocOp::create(
        entry, loc, MemRefType::get(bType.getShape(), bType.getElementType()),
        entry.getI64IntegerAttr(64));
    decodeProducerOnce(b, loc,
                       mlir::comfyquant::detail::operandProducer(bOperand, op),
                       decoded, enabled);
    clonedC();
    map.map(bOperand, decoded);
    copy = cast<linalg::GenericOp>(b.clone(*op, map));
  } else {
    int64_t depth = bType.getDimSize(1);
    Type f16 = b.getF16Type();
    auto alignment = b.getI64IntegerAttr(64);
    // A's rows as C's temporary counts them (the workspace sizes a dynamic
    // temporary by the rows of x, which C's size is known to be).
    auto aType = cast<MemRefType>(a.getType());
    auto cAlloc = c.getDefiningOp<memref::AllocOp>();
    Value wideA =
        !aType.isDynamicDim(0)
            ? memref::AllocOp::create(
                  b, loc, MemRefType::get(aType.getShape(), f16), alignment)
            : memref::AllocOp::create(
                  b, loc, MemRefType::get({ShapedType::kDynamic, depth}, f16),
                  ValueRange{cAlloc && cAlloc.getDynamicSizes().size() == 1
                                 ? cAlloc.getDynamicSizes()[0]
                                 : rows},
                  alignment);
    Value wideB = memref::AllocOp::create(
        b, loc, MemRefType::get(bType.getShape(), f16), alignment);
    Value cols = h.idx(bType.getDimSize(0));
    if (form == Predecode::FP8ToF16) {
      widenFP8Once(b, loc, a, wideA, rows, family.match.aElt, enabled);
      widenFP8Once(b, loc, bOperand, wideB, cols, family.match.bElt,
                   enabled);
    } else {
      widenFP4Once(b, loc, op, 0, wideA, rows, enabled);
      widenFP4Once(b, loc, op, 1, wideB, cols, enabled);
    }
    copy = f16Gemm(b, loc, op, wideA, wideB, clonedC());
  }
  b.clone(*fusion.epilogue, map);
  // The same operands but the decoded ones: a family covers it as it
  // covers op.
  Family f = *tensorCoreFamily(copy);
  int64_t stages = stagesFor(copy, f);
  TileShape shape = tileFor(copy, f, stages, true);
  GpuGemmAttr config = builtConfig(ctx, f.kind, shape, 1, stages);
  copy->setAttr(ComfyQuantDialect::getGemmAttrName(), config);
  return {copy, std::move(f), config, shape, enabled};
}

struct TensorCoreGemmPass
    : mlir::comfyquant::impl::ComfyQuantGPUTensorCoreGemmBase<
          TensorCoreGemmPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    // The GEMMs the selection chose, with the config it chose.
    // (With the i1 that enables the kernel, for decode_rows.)
    SmallVector<
        std::tuple<linalg::GenericOp, Family, GpuGemmAttr, TileShape, Value>>
        gemms;
    // Each selected GEMM's Predecode, found before any copy changes the IR.
    SmallVector<Predecode> forms;
    // (The family is held by value: the builder keeps a reference.)
    for (auto op : func.getBody().front().getOps<linalg::GenericOp>()) {
      auto config = op->getAttrOfType<GpuGemmAttr>(
          ComfyQuantDialect::getGemmAttrName());
      if (!config)
        continue;
      std::optional<Family> f = tensorCoreFamily(op);
      if (!f || f->kind != config.getKind()) {
        op.emitOpError("its config ")
            << config << " is not a tensor-core kernel for these operands";
        return signalPassFailure();
      }
      std::optional<TileShape> shape = shapeOf(config);
      if (!shape || config.getStages() > 2) {
        op.emitOpError("its config ")
            << config << " is not built; the tensor-core kernels are "
            << builtConfig(&getContext(), f->kind) << ", "
            << builtConfig(&getContext(), f->kind, kWideTile, 1, 2) << " or "
            << builtConfig(&getContext(), f->kind, kTallTile, 1, 2)
            << " with any split_k and 1 or 2 stages (two for two warpgroups)";
        return signalPassFailure();
      }
      if (shape->warpgroups > 1 &&
          !twoWarpgroupsFit(op, *f, config.getStages(), shape->cols)) {
        op.emitOpError("its config ")
            << config
            << " has two warpgroups, which need two stages, no block scales "
               "and N not below the tile's columns";
        return signalPassFailure();
      }
      if (config.getStages() == 2 && stagesFor(op, *f) != 2) {
        op.emitOpError("its config ")
            << config
            << " has two stages, which need both operands copied in 16-byte "
               "chunks (read as stored, K and the row strides multiples of 16 "
               "bytes)";
        return signalPassFailure();
      }
      Predecode form =
          config.getDecodeRows() ? predecodeFor(op, *f) : Predecode::None;
      if (config.getDecodeRows() && form == Predecode::None) {
        op.emitOpError("its config ")
            << config
            << " decodes once per call, which needs a static N x K B read "
               "through an integer producer (K a multiple of 16 bytes) or "
               "plain FP8 B read as stored in 16-byte chunks, A read as "
               "stored in 16-byte chunks, or NVFP4 with a static B and K a "
               "multiple of 16; and the fill and epilogue fused";
        return signalPassFailure();
      }
      gemms.push_back({op, *f, config, *shape, Value()});
      forms.push_back(form);
    }
    // decode_rows: the copy reading the decoded operand, then the original
    // for fewer rows. Last GEMM first: a copy's launches follow its
    // epilogue, so they never stand between an earlier GEMM and the
    // producers its decode reads (operandProducer).
    for (size_t i = gemms.size(); i-- > 0;) {
      auto [op, family, config, shape, enabled] = gemms[i];
      if (!config.getDecodeRows())
        continue;
      PredecodedCopy copy = predecodedCopy(op, family, forms[i], fusionFor(op),
                                           config.getDecodeRows());
      OpBuilder b(op);
      Value small = arith::XOrIOp::create(
          b, op.getLoc(), copy.enabled,
          arith::ConstantIntOp::create(b, op.getLoc(), b.getI1Type(), 1));
      std::get<4>(gemms[i]) = small;
      gemms.push_back(
          {copy.op, copy.family, copy.config, copy.shape, copy.enabled});
    }
    SmallVector<Attribute> configs;
    for (auto &[op, family, config, shape, enabled] : gemms) {
      TensorCoreKernelBuilder(op, family, shape, config.getSplitK(),
                              config.getStages(), enabled)
          .build();
      configs.push_back(config);
    }
    if (!configs.empty())
      func->setAttr(ComfyQuantDialect::getGemmsAttrName(),
                    ArrayAttr::get(&getContext(), configs));
  }

};

} // namespace
