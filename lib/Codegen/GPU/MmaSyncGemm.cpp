//===- MmaSyncGemm.cpp - GEMMs on warp-level mma.sync ---------------------===//
//
// The Ampere-to-Blackwell warp-level tensor-core path: i8 x i8 -> i32
// (every integer format), FP8 x FP8 -> f32 and bf16/f16 x bf16/f16 -> f32.
// With g = lane / 4, t = lane % 4 and p = the elements per 32-bit register
// (4 for 8-bit operands, K tile 32; 2 for 16-bit ones, K tile 16), the PTX
// ISA's fragment layouts ("Matrix fragments for mma.m16n8k32 / m16n8k16")
// are:
//   A (16 x K, row): register r holds row g + 8 * (r % 2), K columns
//                    p * t + 4p * (r / 2) + [0, p)
//   B (K x 8, col):  register r holds column g, K rows p * t + 4p * r + [0, p)
//   C (16 x 8):      register r holds row g + 8r, columns 2t, 2t + 1
//
// When C is a temporary, its zero fill before the GEMM becomes zero
// registers, and its elementwise consumer (scales, bias, cast) is evaluated
// in registers where each accumulator element is stored, writing the
// consumer's output instead. With both, the fill, the GEMM and the epilogue
// are one kernel and C is left unused (no workspace).
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUMMASYNCGEMM
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

using mlir::comfyquant::detail::GemmMatch;

constexpr int64_t kWarps = 4;
constexpr int64_t kTileM = 16, kTileN = 8;
/// Accumulator fragments per warp along N (they share the A fragment).
constexpr int64_t kFragmentsN = 4;
constexpr int64_t kBlockN = kWarps * kFragmentsN * kTileN;

struct Builder {
  OpBuilder &b;
  Location loc;
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
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
};

/// The instruction shape and operand form of one kind of GEMM.
struct Family {
  GemmMatch match;
  Type load;          ///< element type read from the operands
  int64_t perReg;     ///< elements per 32-bit register
  Type acc;           ///< accumulator element type
  const char *name;   ///< recorded in comfyquant.gpu.gemm
  int64_t tileK() const { return 8 * perReg; }
};

/// The family covering `m` on buffers, if any.
std::optional<Family> familyOf(const GemmMatch &m, linalg::GenericOp op) {
  MLIRContext *ctx = op.getContext();
  Type i8 = IntegerType::get(ctx, 8), i32 = IntegerType::get(ctx, 32);
  Type f32 = Float32Type::get(ctx);
  switch (m.kind) {
  case GemmMatch::Kind::I8I8I32:
    return Family{m, i8, 4, i32, "mma_sync_m16n8k32_s8"};
  case GemmMatch::Kind::F8F8F32:
    return Family{m, i8, 4, f32,
                  m.block ? "mma_sync_m16n8k32_f8_block_scaled"
                          : "mma_sync_m16n8k32_f8"};
  case GemmMatch::Kind::FloatF32: {
    // f16 operands as stored. f32 ones are not rounded (SIMT); bf16 ones
    // too, as MLIR 22's nvgpu-to-nvvm cannot type a bf16 mma.sync.
    auto stored = [&](unsigned i) {
      return cast<ShapedType>(op.getDpsInputs()[i].getType()).getElementType();
    };
    Type t = stored(0);
    if (t != stored(1) || !t.isF16())
      return std::nullopt;
    return Family{m, t, 2, f32, "mma_sync_m16n8k16_f16"};
  }
  }
  return std::nullopt;
}

/// The body's block-scale factor of `op` for one pair of raw scales: the
/// ops it depends on, cloned at `b` with the scale arguments replaced.
Value blockScaleAt(OpBuilder &b, linalg::GenericOp op, const Family &family,
                   Value rowScale, Value colScale) {
  Block &body = op.getRegion().front();
  llvm::SmallPtrSet<Operation *, 16> slice;
  SmallVector<Value> work = {family.match.blockScale};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != &body || !slice.insert(def).second)
      continue;
    for (Value v : def->getOperands())
      work.push_back(v);
  }
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

/// The buffer a view (subview, cast, reshape, view) is of.
Value baseBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
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
  if (fill && (matchPattern(fill.getInputs()[0], m_Zero()) ||
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
  Value out = baseBuffer(epi.getDpsInitOperand(0)->get());
  for (Value in : op.getDpsInputs())
    if (baseBuffer(in) == out)
      return fusion;
  fusion.epilogue = epi;
  fusion.accOperand = *acc;
  return fusion;
}

struct MmaSyncGemmPass
    : mlir::comfyquant::impl::ComfyQuantGPUMmaSyncGemmBase<MmaSyncGemmPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<std::pair<linalg::GenericOp, Family>> gemms;
    for (auto op : func.getBody().front().getOps<linalg::GenericOp>()) {
      if (!op.hasPureBufferSemantics())
        continue;
      std::optional<GemmMatch> m = mlir::comfyquant::detail::matchGemm(op);
      if (!m)
        continue;
      std::optional<Family> f = familyOf(*m, op);
      // A scale block must be one K step (one rescale per MMA).
      if (f && (!m->block || m->block == f->tileK()))
        gemms.push_back({op, *f});
    }
    llvm::SetVector<StringRef> names;
    for (auto &[op, family] : gemms) {
      rewrite(op, family);
      names.insert(family.name);
    }
    if (!names.empty())
      func->setAttr("comfyquant.gpu.gemm",
                    StringAttr::get(&getContext(),
                                    llvm::join(names.getArrayRef(), ",")));
  }

  void rewrite(linalg::GenericOp op, const Family &family) {
    Fusion fusion = fusionFor(op);
    // The consumer's operands must be defined where the kernel starts.
    if (fusion.epilogue)
      while (op->getNextNode() != fusion.epilogue.getOperation())
        op->getNextNode()->moveBefore(op);
    OpBuilder b(op);
    Location loc = op.getLoc();
    Builder h{b, loc};
    Value a = op.getDpsInputOperand(0)->get();
    Value bm = op.getDpsInputOperand(1)->get();
    Value scalesA = family.match.block ? op.getDpsInputOperand(2)->get() : Value();
    Value scalesB = family.match.block ? op.getDpsInputOperand(3)->get() : Value();
    Value c = op.getDpsInitOperand(0)->get();
    Value rows = b.createOrFold<memref::DimOp>(loc, a, 0);
    Value depth = b.createOrFold<memref::DimOp>(loc, a, 1);
    Value cols = b.createOrFold<memref::DimOp>(loc, bm, 0);
    Value one = h.idx(1);
    Value gridX = arith::CeilDivUIOp::create(b, loc, cols, h.idx(kBlockN));
    Value gridY = arith::CeilDivUIOp::create(b, loc, rows, h.idx(kTileM));
    auto launch = gpu::LaunchOp::create(b, loc, gridX, gridY, one,
                                        h.idx(kWarps * 32), one, one);
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp::create(b, loc);
    b.setInsertionPointToStart(&launch.getBody().front());

    const int64_t p = family.perReg, tileK = family.tileK();
    Value zeroIn = arith::ConstantOp::create(b, loc, b.getZeroAttr(family.load));
    Value zeroAcc = arith::ConstantOp::create(b, loc, b.getZeroAttr(family.acc));
    Value tid = launch.getThreadIds().x;
    Value lane = arith::RemUIOp::create(b, loc, tid, h.idx(32));
    Value warp = arith::DivUIOp::create(b, loc, tid, h.idx(32));
    Value g = arith::DivUIOp::create(b, loc, lane, h.idx(4));
    Value t = arith::RemUIOp::create(b, loc, lane, h.idx(4));
    Value row0 = h.add(h.mul(launch.getBlockIds().y, kTileM), g);
    Value row1 = h.add(row0, 8);
    Value blockN = h.mul(launch.getBlockIds().x, kBlockN);
    Value warpOffset = h.mul(warp, kFragmentsN * kTileN);
    Value warpN = h.add(blockN, warpOffset);
    Value tp = h.mul(t, p), t2 = h.mul(t, 2);

    auto accType = VectorType::get({2, 2}, family.acc);
    auto aType = VectorType::get({4, p}, family.load);
    auto bType = VectorType::get({2, p}, family.load);
    // Column of C register element (r, e) of fragment j, and its row.
    auto cCol = [&](int64_t j, int64_t e) {
      return h.add(h.add(warpN, j * kTileN + e), t2);
    };
    SmallVector<Value> init;
    for (int64_t j = 0; j < kFragmentsN; ++j) {
      SmallVector<Value> elems;
      for (Value row : {row0, row1})
        for (int64_t e = 0; e < 2; ++e)
          elems.push_back(fusion.zeroFill ? zeroAcc
                                          : h.loadOrZero(c, row, cCol(j, e),
                                                         rows, cols, zeroAcc));
      init.push_back(vector::FromElementsOp::create(b, loc, accType, elems));
    }

    Value kStart = h.idx(0);
    Value kStep = h.idx(tileK);
    auto loop = scf::ForOp::create(b, loc, kStart, depth, kStep, init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value k0 = loop.getInductionVar();
      SmallVector<Value> aElems;
      for (int64_t r = 0; r < 4; ++r) {
        Value row = r % 2 ? row1 : row0;
        Value kb = h.add(h.add(k0, tp), 4 * p * (r / 2));
        for (int64_t e = 0; e < p; ++e)
          aElems.push_back(
              h.loadOrZero(a, row, h.add(kb, e), rows, depth, zeroIn));
      }
      Value fragA = vector::FromElementsOp::create(b, loc, aType, aElems);
      SmallVector<Value> next;
      for (int64_t j = 0; j < kFragmentsN; ++j) {
        Value n = h.add(h.add(warpN, j * kTileN), g);
        SmallVector<Value> bElems;
        for (int64_t r = 0; r < 2; ++r) {
          Value kb = h.add(h.add(k0, tp), 4 * p * r);
          for (int64_t e = 0; e < p; ++e)
            bElems.push_back(
                h.loadOrZero(bm, n, h.add(kb, e), cols, depth, zeroIn));
        }
        Value fragB = vector::FromElementsOp::create(b, loc, bType, bElems);
        Value acc = loop.getRegionIterArgs()[j];
        if (family.match.block) {
          // One scale block per K step: the block's partial sum, rescaled
          // in f32 and added to the accumulator.
          Value partial = MmaFP8Op::create(b, loc, accType, fragA, fragB,
                                           Value(), family.match.aElt,
                                           family.match.bElt);
          Value kb = arith::DivUIOp::create(b, loc, k0, h.idx(tileK));
          SmallVector<Value> sums;
          for (int64_t r = 0; r < 2; ++r)
            for (int64_t e = 0; e < 2; ++e) {
              Value row = r ? row1 : row0;
              Value rowScale = h.loadClamped(scalesA, row, kb);
              Value colScale = h.loadClamped(scalesB, cCol(j, e), kb);
              Value scale = blockScaleAt(b, op, family, rowScale, colScale);
              Value p = vector::ExtractOp::create(b, loc, partial,
                                                  ArrayRef<int64_t>{r, e});
              Value old = vector::ExtractOp::create(b, loc, acc,
                                                    ArrayRef<int64_t>{r, e});
              Value term = arith::MulFOp::create(b, loc, p, scale);
              sums.push_back(arith::AddFOp::create(b, loc, old, term));
            }
          next.push_back(
              vector::FromElementsOp::create(b, loc, accType, sums));
        } else if (family.match.kind == GemmMatch::Kind::F8F8F32)
          next.push_back(MmaFP8Op::create(b, loc, accType, fragA, fragB, acc,
                                          family.match.aElt,
                                          family.match.bElt));
        else
          next.push_back(nvgpu::MmaSyncOp::create(
              b, loc, fragA, fragB, acc,
              ArrayRef<int64_t>{kTileM, kTileN, tileK}));
      }
      scf::YieldOp::create(b, loc, next);
    }

    // Write back the elements inside C.
    for (int64_t j = 0; j < kFragmentsN; ++j)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t e = 0; e < 2; ++e) {
          Value row = r ? row1 : row0, col = cCol(j, e);
          Value rowInside = h.lt(row, rows);
          Value colInside = h.lt(col, cols);
          Value inside = arith::AndIOp::create(b, loc, rowInside, colInside);
          auto store = scf::IfOp::create(b, loc, inside, false);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(store.thenBlock()->getTerminator());
          Value v = vector::ExtractOp::create(b, loc, loop.getResult(j),
                                              ArrayRef<int64_t>{r, e});
          if (!fusion.epilogue) {
            memref::StoreOp::create(b, loc, v, c, ValueRange{row, col});
            continue;
          }
          Value y = mlir::comfyquant::detail::emitEpilogueAt(
              b, loc, fusion.epilogue, fusion.accOperand, v, row, col);
          memref::StoreOp::create(
              b, loc, y, fusion.epilogue.getDpsInitOperand(0)->get(),
              ValueRange{row, col});
        }
    op.erase();
    if (fusion.epilogue)
      fusion.epilogue.erase();
    // The kernel starts from zero and stores every element of C (or of the
    // epilogue's output) inside the bounds, so the fill is dead; with the
    // epilogue fused, so is C.
    if (fusion.zeroFill)
      fusion.zeroFill.erase();
    if (auto alloc = c.getDefiningOp<memref::AllocOp>(); alloc && c.use_empty())
      alloc.erase();
  }
};

} // namespace
