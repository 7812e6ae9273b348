//===- FormRowKernels.cpp - row-local loop runs as one kernel per row -----===//
//
// Activation quantization is a run of small loop nests over the rows of x:
// ConvRot's butterfly stages, the amax fill and reduction, the scale, the
// quantizer. Each touches row m of its buffers only, so one block per row
// can run the whole run with a barrier between nests, and a reduction over
// the row is shared by the block's threads. One launch replaces one per
// nest, and the amax no longer runs K steps in one thread.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/LoopPoints.h"
#include "comfyquant/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUFORMROWKERNELS
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

constexpr int64_t kWarp = 32;

/// The buffer a memref value views, and whether row m of the value is row
/// m of that buffer. Views of the workspace and allocations are buffers of
/// their own (they never overlap); subviews, reshapes that keep dim 0 alone
/// and casts are followed.
struct RowView {
  Value buffer;
  bool keepsRows = true;
};

RowView traceRows(Value v) {
  RowView view;
  while (Operation *def = v.getDefiningOp()) {
    if (auto sub = dyn_cast<memref::SubViewOp>(def)) {
      if (sub.getDroppedDims().test(0) ||
          !isConstantIntValue(sub.getMixedOffsets()[0], 0) ||
          !isConstantIntValue(sub.getMixedStrides()[0], 1))
        view.keepsRows = false;
      v = sub.getSource();
    } else if (auto expand = dyn_cast<memref::ExpandShapeOp>(def)) {
      if (expand.getReassociationIndices()[0] != ReassociationIndices{0})
        view.keepsRows = false;
      v = expand.getSrc();
    } else if (auto collapse = dyn_cast<memref::CollapseShapeOp>(def)) {
      if (collapse.getReassociationIndices()[0] != ReassociationIndices{0})
        view.keepsRows = false;
      v = collapse.getSrc();
    } else if (auto cast = dyn_cast<memref::CastOp>(def)) {
      v = cast.getSource();
    } else if (isa<memref::AllocOp, memref::ViewOp>(def)) {
      break;
    } else if (auto other = dyn_cast<ViewLikeOpInterface>(def)) {
      // Any other view: the same buffer, rows unknown.
      view.keepsRows = false;
      v = other.getViewSource();
    } else {
      break;
    }
  }
  view.buffer = v;
  return view;
}

/// A reduction into memory, `R[i] = combine(R[i], v(k))` over a loop of k,
/// that the threads of a block can share: each combines a strided part of
/// the loop in a register, then the partial results are combined across the
/// block. Only combiners whose result does not depend on the order are
/// taken: max/min (also of floats: maxnumf of a set is the same in any
/// order), and/or (idempotent: every thread may start from R[i]), integer
/// add and xor (only thread 0 starts from R[i], the others from 0).
struct SharedReduction {
  scf::ForOp loop;
  memref::LoadOp start;
  Operation *combine = nullptr;
  memref::StoreOp store;
  bool idempotent = true;
};

bool isOrderFreeCombiner(Operation *op, bool &idempotent) {
  idempotent =
      isa<arith::MaxNumFOp, arith::MinNumFOp, arith::MaximumFOp,
          arith::MinimumFOp, arith::MaxSIOp, arith::MinSIOp, arith::MaxUIOp,
          arith::MinUIOp, arith::AndIOp, arith::OrIOp>(op);
  return idempotent || isa<arith::AddIOp, arith::XOrIOp>(op);
}

/// Matches `loop` as a shared reduction: its only write is the combined
/// value back to the element it loaded, at indices defined outside it.
std::optional<SharedReduction> matchReductionLoop(scf::ForOp loop) {
  if (loop.getNumResults() != 0)
    return std::nullopt;
  SharedReduction r;
  r.loop = loop;
  Block &inner = *r.loop.getBody();
  for (Operation &op : inner.without_terminator()) {
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (r.store)
        return std::nullopt;
      r.store = store;
      continue;
    }
    if (isa<memref::LoadOp>(op))
      continue;
    if (!isPure(&op) || op.getNumRegions() != 0)
      return std::nullopt;
  }
  if (!r.store)
    return std::nullopt;
  Type type = r.store.getValueToStore().getType();
  // gpu.shuffle moves 32-bit values.
  if (!type.isIntOrFloat() || type.getIntOrFloatBitWidth() != 32)
    return std::nullopt;
  r.combine = r.store.getValueToStore().getDefiningOp();
  if (!r.combine || r.combine->getBlock() != &inner ||
      r.combine->getNumOperands() != 2 || !r.combine->hasOneUse() ||
      !isOrderFreeCombiner(r.combine, r.idempotent))
    return std::nullopt;
  for (Value operand : r.combine->getOperands())
    if (auto load = operand.getDefiningOp<memref::LoadOp>())
      if (load.getMemRef() == r.store.getMemRef() &&
          load.getIndices() == r.store.getIndices() && load->hasOneUse())
        r.start = load;
  if (!r.start)
    return std::nullopt;
  // The element is the same for the whole loop.
  for (Value v : r.store->getOperands().drop_front())
    if (r.loop.getRegion().isAncestor(v.getParentRegion()))
      return std::nullopt;
  // Nothing else in the loop may read the accumulated buffer.
  Value acc = traceRows(r.store.getMemRef()).buffer;
  for (Operation &op : inner.without_terminator())
    if (auto load = dyn_cast<memref::LoadOp>(op))
      if (load != r.start && traceRows(load.getMemRef()).buffer == acc)
        return std::nullopt;
  return r;
}

/// Matches a nest's body (one point) as a shared reduction: pure scalar
/// code and one reduction loop.
std::optional<SharedReduction> matchSharedReduction(Block &body) {
  scf::ForOp loop;
  for (Operation &op : body.without_terminator()) {
    if (auto inner = dyn_cast<scf::ForOp>(op)) {
      if (loop)
        return std::nullopt;
      loop = inner;
      continue;
    }
    if (!isPure(&op) || op.getNumRegions() != 0)
      return std::nullopt;
  }
  if (!loop)
    return std::nullopt;
  return matchReductionLoop(loop);
}

/// The static trip count of dimension `d` of `loop`, if it has one.
std::optional<int64_t> staticTripCount(scf::ParallelOp loop, unsigned d) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()[d]);
  std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound()[d]);
  std::optional<int64_t> step = getConstantIntValue(loop.getStep()[d]);
  if (!lb || !ub || !step || *step <= 0)
    return std::nullopt;
  return *ub <= *lb ? 0 : llvm::divideCeil(*ub - *lb, *step);
}

/// The static trip count of `loop`, or 0.
int64_t tripCount(scf::ForOp loop) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
  std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!lb || !ub || !step || *step <= 0)
    return 0;
  return llvm::divideCeil(std::max<int64_t>(*ub - *lb, 0), *step);
}

/// A nest over the rows of x that a row kernel may run, with what it reads
/// and writes.
struct RowNest {
  scf::ParallelOp loop;
  std::optional<SharedReduction> reduction;
  /// Threads that have work: the points of the other dimensions, or the
  /// reduction's trip count; 0 when not static.
  int64_t work = 0;
  /// Every access, as (buffer, row index is the nest's row, writes).
  struct Access {
    Value buffer;
    bool rowLocal;
    bool writes;
  };
  SmallVector<Access> accesses;
  /// Buffers loaded on the host between the previous nest of the run and
  /// this one. The loads move into the kernel's start (before the earlier
  /// nests), so the run must not write them.
  SmallVector<Value> hostReads;
};

/// Whether op (between nests of one run) may move below them: it computes
/// sizes, views or allocations, never touches memory.
bool movesFreely(Operation *op) {
  if (isa<memref::AllocOp, memref::DimOp>(op))
    return true;
  if (isa<ViewLikeOpInterface>(op) &&
      isa<MemRefType>(op->getResult(0).getType()))
    return true;
  return isPure(op) && op->getNumRegions() == 0;
}

struct FormRowKernelsPass
    : mlir::comfyquant::impl::ComfyQuantGPUFormRowKernelsBase<
          FormRowKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    if (blockSize < kWarp || blockSize > 1024 || blockSize % kWarp != 0) {
      func.emitOpError("block-size must be a multiple of 32 in [32, 1024], "
                       "not ")
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    // Rows: dim 0 of x, the first memref argument (as the workspace rule).
    Value x;
    for (BlockArgument a : func.getArguments())
      if (isa<MemRefType>(a.getType())) {
        x = a;
        break;
      }
    if (!x || cast<MemRefType>(x.getType()).getRank() == 0)
      return;

    SmallVector<SmallVector<RowNest>> runs(1);
    SmallVector<SharedReduction> whole;
    SmallVector<Value> pendingReads;
    for (Operation &op : func.getBody().front()) {
      auto loop = dyn_cast<scf::ParallelOp>(op);
      if (auto load = dyn_cast<memref::LoadOp>(op);
          load && !runs.back().empty()) {
        pendingReads.push_back(traceRows(load.getMemRef()).buffer);
        continue;
      }
      if (!loop) {
        // A reduction over the rows themselves (NVFP4's per-tensor amax):
        // one block shares it.
        if (auto reduction = dyn_cast<scf::ForOp>(op))
          if (std::optional<SharedReduction> r = matchReductionLoop(reduction))
            whole.push_back(*r);
        if (!movesFreely(&op) && !runs.back().empty()) {
          runs.emplace_back();
          pendingReads.clear();
        }
        continue;
      }
      std::optional<RowNest> nest = analyze(loop, x);
      if (!nest) {
        if (!runs.back().empty())
          runs.emplace_back();
        pendingReads.clear();
        continue;
      }
      nest->hostReads = std::move(pendingReads);
      pendingReads.clear();
      runs.back().push_back(std::move(*nest));
      if (isRowLocal(runs.back()))
        continue;
      // It cannot join the run; it may start the next one.
      RowNest last = runs.back().pop_back_val();
      last.hostReads.clear();
      runs.emplace_back();
      if (isRowLocal(last))
        runs.back().push_back(std::move(last));
    }
    for (SmallVector<RowNest> &run : runs) {
      // One nest without a shared reduction gains nothing from a block per
      // row: it keeps one thread per point.
      if (run.empty() || (run.size() == 1 && !run.front().reduction))
        continue;
      form(run, x);
    }
    for (SharedReduction &r : whole)
      formWhole(r);
  }

  /// One block that shares the reduction loop `r`, at its place.
  void formWhole(SharedReduction &r) {
    OpBuilder b(r.loop);
    Location loc = r.loop.getLoc();
    int64_t steps = tripCount(r.loop);
    int64_t threads = std::clamp<int64_t>(
        llvm::alignTo(steps == 0 ? int64_t(blockSize) : steps, kWarp), kWarp,
        blockSize);
    Type scratch =
        MemRefType::get({threads / kWarp}, r.store.getValueToStore().getType(),
                        MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(
                            b.getContext(), gpu::AddressSpace::Workgroup));
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value block = arith::ConstantIndexOp::create(b, loc, threads);
    auto launch = gpu::LaunchOp::create(
        b, loc, one, one, one, block, one, one,
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
        /*asyncDependencies=*/{}, TypeRange{scratch});
    b.setInsertionPointToStart(&launch.getBody().front());
    IRMapping map;
    emitSharedReduction(b, loc, r, map, launch.getThreadIds().x, block,
                        launch.getWorkgroupAttributions()[0]);
    gpu::TerminatorOp::create(b, loc);
    r.loop.erase();
  }

  /// The nest as a candidate: dim 0 runs over the rows of x from 0 by 1,
  /// the body only loads and stores (in nested loops and ifs too).
  std::optional<RowNest> analyze(scf::ParallelOp loop, Value x) {
    if (loop.getNumResults() != 0 || loop.getNumLoops() == 0 ||
        !isConstantIntValue(loop.getLowerBound()[0], 0) ||
        !isConstantIntValue(loop.getStep()[0], 1))
      return std::nullopt;
    FailureOr<bool> rows = ValueBoundsConstraintSet::areEqual(
        ValueBoundsConstraintSet::Variable(loop.getUpperBound()[0]),
        ValueBoundsConstraintSet::Variable(x, 0));
    if (failed(rows) || !*rows)
      return std::nullopt;
    RowNest nest;
    nest.loop = loop;
    Value row = loop.getInductionVars()[0];
    bool ok = true;
    loop.getBody()->walk([&](Operation *op) {
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        nest.accesses.push_back(
            access(load.getMemRef(), load.getIndices(), row, /*writes=*/false));
        return;
      }
      if (auto store = dyn_cast<memref::StoreOp>(op)) {
        nest.accesses.push_back(access(store.getMemRef(), store.getIndices(),
                                       row,
                                       /*writes=*/true));
        return;
      }
      if (isa<scf::ForOp, scf::IfOp, scf::YieldOp, scf::ReduceOp>(op))
        return;
      if (!isPure(op) || op->getNumRegions() != 0)
        ok = false;
    });
    if (!ok)
      return std::nullopt;
    int64_t points = 1;
    for (unsigned d = 1; d < loop.getNumLoops() && points; ++d) {
      std::optional<int64_t> count = staticTripCount(loop, d);
      points = count ? points * *count : 0;
    }
    nest.work = points;
    if (points == 1)
      if ((nest.reduction = matchSharedReduction(*loop.getBody()))) {
        nest.work = tripCount(nest.reduction->loop);
      }
    return nest;
  }

  static RowNest::Access access(Value memref, ValueRange indices, Value row,
                                bool writes) {
    RowView view = traceRows(memref);
    bool rowLocal =
        view.keepsRows && !indices.empty() && indices.front() == row;
    return {view.buffer, rowLocal, writes};
  }

  /// Whether blocks may run the nests of `run` row by row: every buffer
  /// any of them writes is accessed at the nest's own row only.
  static bool isRowLocal(MutableArrayRef<RowNest> run) {
    llvm::SmallPtrSet<Value, 8> written;
    for (RowNest &nest : run)
      for (const RowNest::Access &a : nest.accesses)
        if (a.writes)
          written.insert(a.buffer);
    for (RowNest &nest : run) {
      for (const RowNest::Access &a : nest.accesses)
        if (written.contains(a.buffer) && !a.rowLocal)
          return false;
      for (Value read : nest.hostReads)
        if (written.contains(read))
          return false;
    }
    return true;
  }

  /// One launch of a block per row at the last nest of `run`.
  void form(MutableArrayRef<RowNest> run, Value x) {
    scf::ParallelOp last = run.back().loop;
    OpBuilder b(last);
    Location loc = last.getLoc();
    int64_t threads = blockSize;
    int64_t widest = 0;
    for (RowNest &nest : run)
      widest =
          std::max(widest, nest.work == 0 ? int64_t(blockSize) : nest.work);
    threads =
        std::clamp<int64_t>(llvm::alignTo(widest, kWarp), kWarp, blockSize);

    auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(),
                                                gpu::AddressSpace::Workgroup);
    SmallVector<Type> scratch;
    for (RowNest &nest : run)
      if (nest.reduction)
        scratch.push_back(
            MemRefType::get({threads / kWarp},
                            nest.reduction->store.getValueToStore().getType(),
                            MemRefLayoutAttrInterface(), workgroup));

    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value block = arith::ConstantIndexOp::create(b, loc, threads);
    Value rows = run.front().loop.getUpperBound()[0];
    auto launch = gpu::LaunchOp::create(b, loc, rows, one, one, block, one, one,
                                        /*dynamicSharedMemorySize=*/nullptr,
                                        /*asyncTokenType=*/nullptr,
                                        /*asyncDependencies=*/{}, scratch);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value row = launch.getBlockIds().x;
    Value tid = launch.getThreadIds().x;
    unsigned nextScratch = 0;
    for (auto [i, nest] : llvm::enumerate(run)) {
      if (i != 0)
        gpu::BarrierOp::create(b, loc);
      if (nest.reduction) {
        // The point's scalar code, then the loop shared by the block.
        IRMapping map;
        scf::ParallelOp loop = nest.loop;
        map.map(loop.getInductionVars()[0], row);
        for (unsigned d = 1; d < loop.getNumLoops(); ++d)
          map.map(loop.getInductionVars()[d], loop.getLowerBound()[d]);
        for (Operation &op : loop.getBody()->without_terminator())
          if (&op != nest.reduction->loop.getOperation())
            b.clone(op, map);
        emitSharedReduction(b, loc, *nest.reduction, map, tid, block,
                            launch.getWorkgroupAttributions()[nextScratch++]);
      } else
        emitPoints(b, loc, nest.loop, row, tid, block);
    }
    gpu::TerminatorOp::create(b, loc);
    for (RowNest &nest : run)
      nest.loop.erase();
  }

  /// The nest's points beyond the row, strided over the block's threads.
  static void emitPoints(OpBuilder &b, Location loc, scf::ParallelOp loop,
                         Value row, Value tid, Value block) {
    SmallVector<Value> counts = loopTripCounts(b, loc, loop, /*first=*/1);
    Value total = arith::ConstantIndexOp::create(b, loc, 1);
    for (Value count : counts)
      total = arith::MulIOp::create(b, loc, total, count);
    auto points = scf::ForOp::create(b, loc, tid, total, block);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(points.getBody()->getTerminator());
    IRMapping map;
    map.map(loop.getInductionVars()[0], row);
    mapLinearPoint(b, loc, loop, /*first=*/1, counts, points.getInductionVar(),
                   map);
    for (Operation &op : loop.getBody()->without_terminator())
      b.clone(op, map);
  }

  /// Every thread combines a strided part of the reduction loop in a
  /// register; warp shuffles, then thread 0 over the warps' results, give
  /// the row's value, which thread 0 stores.
  static void emitSharedReduction(OpBuilder &b, Location loc,
                                  SharedReduction &r, IRMapping &map, Value tid,
                                  Value block, Value scratch) {
    Value start = b.clone(*r.start, map)->getResult(0);
    Type type = start.getType();
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    if (!r.idempotent) {
      Value first =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
      Value identity =
          arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
      start = arith::SelectOp::create(b, loc, first, start, identity);
    }
    auto combine = [&](Value lhs, Value rhs) {
      IRMapping operands;
      operands.map(r.combine->getOperand(0), lhs);
      operands.map(r.combine->getOperand(1), rhs);
      return b.clone(*r.combine, operands)->getResult(0);
    };
    Value step = map.lookupOrDefault(r.loop.getStep());
    Value offset = arith::MulIOp::create(b, loc, tid, step);
    Value lb = arith::AddIOp::create(
        b, loc, map.lookupOrDefault(r.loop.getLowerBound()), offset);
    Value stride = arith::MulIOp::create(b, loc, step, block);
    auto part = scf::ForOp::create(b, loc, lb,
                                   map.lookupOrDefault(r.loop.getUpperBound()),
                                   stride, ValueRange{start});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(part.getBody());
      map.map(r.loop.getInductionVar(), part.getInductionVar());
      Value acc = part.getRegionIterArgs()[0];
      for (Operation &op : r.loop.getBody()->without_terminator()) {
        if (&op == r.start.getOperation() || &op == r.store.getOperation())
          continue;
        if (&op == r.combine) {
          Value other = r.combine->getOperand(0) == r.start.getResult()
                            ? r.combine->getOperand(1)
                            : r.combine->getOperand(0);
          map.map(r.combine->getResult(0),
                  combine(acc, map.lookupOrDefault(other)));
          continue;
        }
        b.clone(op, map);
      }
      scf::YieldOp::create(b, loc,
                           map.lookupOrDefault(r.combine->getResult(0)));
    }
    Value value = part.getResult(0);
    for (int64_t offset = kWarp / 2; offset >= 1; offset /= 2) {
      auto shuffle = gpu::ShuffleOp::create(b, loc, value, offset, kWarp,
                                            gpu::ShuffleMode::XOR);
      value = combine(value, shuffle.getShuffleResult());
    }
    Value warp = arith::ConstantIndexOp::create(b, loc, kWarp);
    Value lane = arith::RemUIOp::create(b, loc, tid, warp);
    Value warpId = arith::DivUIOp::create(b, loc, tid, warp);
    Value leader =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, zero);
    auto publish = scf::IfOp::create(b, loc, leader, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(publish.thenBlock()->getTerminator());
      memref::StoreOp::create(b, loc, value, scratch, ValueRange{warpId});
    }
    gpu::BarrierOp::create(b, loc);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
    auto finish = scf::IfOp::create(b, loc, first, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(finish.thenBlock()->getTerminator());
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value warps = arith::DivUIOp::create(b, loc, block, warp);
    Value head = memref::LoadOp::create(b, loc, scratch, ValueRange{zero});
    auto across = scf::ForOp::create(b, loc, one, warps, one, ValueRange{head});
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(across.getBody());
      Value next = memref::LoadOp::create(b, loc, scratch,
                                          ValueRange{across.getInductionVar()});
      scf::YieldOp::create(b, loc,
                           combine(across.getRegionIterArgs()[0], next));
    }
    SmallVector<Value> indices;
    for (Value index : r.store.getIndices())
      indices.push_back(map.lookupOrDefault(index));
    memref::StoreOp::create(b, loc, across.getResult(0),
                            map.lookupOrDefault(r.store.getMemRef()), indices);
  }
};

} // namespace
