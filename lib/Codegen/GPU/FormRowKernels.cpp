//===- FormRowKernels.cpp - row-local loop runs as one kernel per row -----===//
//
// Activation quantization is a run of small loop nests over the rows of x:
// ConvRot's butterfly stages, the amax fill and reduction, the scale, the
// quantizer. Each touches row m of its buffers only, so one block per row
// can run the whole run with a barrier between nests, and a reduction over
// the row is shared by the block's threads. One launch replaces one per
// nest, and the amax no longer runs K steps in one thread.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/HostCode.h"
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
/// m of that buffer. Arguments, allocations and views of the workspace are
/// buffers of their own (they never overlap); subviews, reshapes that keep
/// dim 0 alone and casts are followed. Any other origin (a transpose, a
/// select of memrefs, a global) is not `known`, and a nest that touches it
/// stays out of row kernels.
struct RowView {
  Value buffer;
  bool keepsRows = true;
  bool known = false;
};

/// Whether reassociation `groups` keeps dim 0 in a group of its own.
bool keepsDim0(ArrayRef<ReassociationIndices> groups) {
  return !groups.empty() && groups.front() == ReassociationIndices{0};
}

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
      if (!keepsDim0(expand.getReassociationIndices()))
        view.keepsRows = false;
      v = expand.getSrc();
    } else if (auto collapse = dyn_cast<memref::CollapseShapeOp>(def)) {
      if (!keepsDim0(collapse.getReassociationIndices()))
        view.keepsRows = false;
      v = collapse.getSrc();
    } else if (auto cast = dyn_cast<memref::CastOp>(def)) {
      v = cast.getSource();
    } else if (isa<memref::AllocOp, memref::ViewOp>(def)) {
      view.known = true;
      break;
    } else if (auto other = dyn_cast<ViewLikeOpInterface>(def)) {
      // Any other view: the same buffer, rows unknown.
      view.keepsRows = false;
      v = other.getViewSource();
    } else {
      break;
    }
  }
  if (auto arg = dyn_cast<BlockArgument>(v))
    view.known = isa<FunctionOpInterface>(arg.getOwner()->getParentOp());
  view.buffer = v;
  return view;
}

/// A reduction into memory, `R[i] = combine(R[i], v(k))` over a loop of
/// k, that the threads of a block can share. The loop is a left fold; when
/// the combiner is associative, splitting k into contiguous chunks, one per
/// thread in thread order, folding each chunk, and folding the chunks'
/// results in the same order gives the same value bit for bit. Associative
/// here: integer max/min/and/or/xor/add (add and xor modulo 2^n, their
/// overflow flags dropped), and the float max/min ops as the device
/// pipeline expands them (`arith-expand`): each selects one operand, the
/// one with the larger key (NaN, value) with ties to the right operand, and
/// such a selection is associative, signed zeros and NaN payloads included.
/// Float sums are not: their rounding depends on the grouping.
struct SharedReduction {
  scf::ForOp loop;
  memref::LoadOp start;
  Operation *combine = nullptr;
  memref::StoreOp store;
};

bool isAssociativeCombiner(Operation *op) {
  return isa<arith::MaxNumFOp, arith::MinNumFOp, arith::MaximumFOp,
             arith::MinimumFOp, arith::MaxSIOp, arith::MinSIOp, arith::MaxUIOp,
             arith::MinUIOp, arith::AndIOp, arith::OrIOp, arith::XOrIOp,
             arith::AddIOp>(op);
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
      !isAssociativeCombiner(r.combine))
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
  RowView acc = traceRows(r.store.getMemRef());
  if (!acc.known)
    return std::nullopt;
  for (Operation &op : inner.without_terminator())
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      RowView read = traceRows(load.getMemRef());
      if (!read.known || (load != r.start && read.buffer == acc.buffer))
        return std::nullopt;
    }
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
  /// Buffers loaded on the host whose values the nest uses, and those
  /// loaded between the previous nest of the run and this one
  /// (`betweenReads`). The loads move into the kernel's start, before the
  /// earlier nests and for every block, so the run must not write them.
  SmallVector<Value> hostReads, betweenReads;
};

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
    // Rows: dim 0 of x.
    Value x = activationArgument(func);
    if (!x || cast<MemRefType>(x.getType()).getRank() == 0)
      return;

    SmallVector<SmallVector<RowNest>, 4> runs(1);
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
        // Size and view code may stay above the kernel formed below it.
        if (!computesSizesOrViews(&op) && !runs.back().empty()) {
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
      nest->betweenReads = std::move(pendingReads);
      pendingReads.clear();
      runs.back().push_back(std::move(*nest));
      if (isRowLocal(runs.back()))
        continue;
      // It cannot join the run; it may start the next one.
      RowNest last = runs.back().pop_back_val();
      last.betweenReads.clear();
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
    // Host loads the nest uses, through the host code that computes with
    // them.
    llvm::SmallPtrSet<Operation *, 8> seen;
    std::function<void(Value)> visit = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != loop->getBlock() ||
          !seen.insert(def).second)
        return;
      if (auto load = dyn_cast<memref::LoadOp>(def)) {
        RowView view = traceRows(load.getMemRef());
        ok &= view.known;
        nest.hostReads.push_back(view.buffer);
      }
      for (Value operand : def->getOperands())
        visit(operand);
    };
    loop->walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        if (!loop->isAncestor(operand.getParentRegion()->getParentOp()))
          visit(operand);
    });
    loop.getBody()->walk([&](Operation *op) {
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        nest.accesses.push_back(access(load.getMemRef(), load.getIndices(), row,
                                       /*writes=*/false, ok));
        return;
      }
      if (auto store = dyn_cast<memref::StoreOp>(op)) {
        nest.accesses.push_back(access(store.getMemRef(), store.getIndices(),
                                       row, /*writes=*/true, ok));
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
                                bool writes, bool &ok) {
    RowView view = traceRows(memref);
    ok &= view.known;
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
      for (Value read : llvm::concat<Value>(nest.hostReads, nest.betweenReads))
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

  /// The fold of the reduction loop regrouped over the block: thread t
  /// folds the t-th contiguous chunk of k (thread 0 from the stored value,
  /// the others from their first element), xor shuffles fold each warp's
  /// chunks in lane order, thread 0 folds the warps' results in warp order
  /// and stores the row's value. A thread whose chunk is empty carries a
  /// false flag and drops out of the fold.
  static void emitSharedReduction(OpBuilder &b, Location loc,
                                  SharedReduction &r, IRMapping &map, Value tid,
                                  Value block, Value scratch) {
    Value start = b.clone(*r.start, map)->getResult(0);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto combine = [&](Value lhs, Value rhs) {
      IRMapping operands;
      Value acc = r.start.getResult();
      Value other = r.combine->getOperand(0) == acc ? r.combine->getOperand(1)
                                                    : r.combine->getOperand(0);
      operands.map(acc, lhs);
      operands.map(other, rhs);
      Operation *op = b.clone(*r.combine, operands);
      // Regrouped, a wrapping add may overflow where the loop did not.
      if (auto flags = dyn_cast<arith::ArithIntegerOverflowFlagsInterface>(op))
        op->setAttr(flags.getIntegerOverflowAttrName(),
                    arith::IntegerOverflowFlagsAttr::get(
                        op->getContext(), arith::IntegerOverflowFlags::none));
      return op->getResult(0);
    };
    // Chunks: ceildiv(trips, threads) steps each, in thread order.
    Value lb = map.lookupOrDefault(r.loop.getLowerBound());
    Value ub = map.lookupOrDefault(r.loop.getUpperBound());
    Value step = map.lookupOrDefault(r.loop.getStep());
    Value span = arith::SubIOp::create(b, loc, ub, lb);
    Value positive = arith::MaxSIOp::create(b, loc, span, zero);
    Value trips = arith::CeilDivUIOp::create(b, loc, positive, step);
    Value chunk = arith::CeilDivUIOp::create(b, loc, trips, block);
    Value chunkSpan = arith::MulIOp::create(b, loc, chunk, step);
    Value offset = arith::MulIOp::create(b, loc, tid, chunkSpan);
    Value begin = arith::AddIOp::create(b, loc, lb, offset);
    Value next = arith::AddIOp::create(b, loc, begin, chunkSpan);
    Value end = arith::MinSIOp::create(b, loc, next, ub);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
    auto part =
        scf::ForOp::create(b, loc, begin, end, step, ValueRange{start, first});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(part.getBody());
      map.map(r.loop.getInductionVar(), part.getInductionVar());
      Value acc = part.getRegionIterArgs()[0];
      Value valid = part.getRegionIterArgs()[1];
      for (Operation &op : r.loop.getBody()->without_terminator()) {
        if (&op == r.start.getOperation() || &op == r.store.getOperation())
          continue;
        if (&op == r.combine) {
          Value other = r.combine->getOperand(0) == r.start.getResult()
                            ? r.combine->getOperand(1)
                            : r.combine->getOperand(0);
          Value v = map.lookupOrDefault(other);
          Value folded = combine(acc, v);
          map.map(r.combine->getResult(0),
                  arith::SelectOp::create(b, loc, valid, folded, v));
          continue;
        }
        b.clone(op, map);
      }
      Value yes = arith::ConstantIntOp::create(b, loc, 1, 1);
      scf::YieldOp::create(
          b, loc,
          ValueRange{map.lookupOrDefault(r.combine->getResult(0)), yes});
    }
    Value value = part.getResult(0);
    Type i32 = b.getI32Type();
    Value valid = arith::ExtUIOp::create(b, loc, i32, part.getResult(1));
    Value i32Zero = arith::ConstantIntOp::create(b, loc, 0, 32);
    Value lane32 = arith::IndexCastUIOp::create(b, loc, i32, tid);
    for (int64_t distance = 1; distance < kWarp; distance *= 2) {
      auto theirs = gpu::ShuffleOp::create(b, loc, value, distance, kWarp,
                                           gpu::ShuffleMode::XOR);
      auto theirsValid = gpu::ShuffleOp::create(b, loc, valid, distance, kWarp,
                                                gpu::ShuffleMode::XOR);
      Value other = theirs.getShuffleResult();
      Value otherValid = theirsValid.getShuffleResult();
      // The lane whose bit is clear holds the earlier chunks.
      Value bit = arith::ConstantIntOp::create(b, loc, distance, 32);
      Value masked = arith::AndIOp::create(b, loc, lane32, bit);
      Value left = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         masked, i32Zero);
      Value lhs = arith::SelectOp::create(b, loc, left, value, other);
      Value rhs = arith::SelectOp::create(b, loc, left, other, value);
      Value lhsValid = arith::SelectOp::create(b, loc, left, valid, otherValid);
      Value rhsValid = arith::SelectOp::create(b, loc, left, otherValid, valid);
      Value both = combine(lhs, rhs);
      Value rhsOk = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          rhsValid, i32Zero);
      Value lhsOk = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          lhsValid, i32Zero);
      Value ifRhs = arith::SelectOp::create(b, loc, rhsOk, both, lhs);
      value = arith::SelectOp::create(b, loc, lhsOk, ifRhs, rhs);
      valid = arith::OrIOp::create(b, loc, lhsValid, rhsValid);
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
    auto finish = scf::IfOp::create(b, loc, first, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(finish.thenBlock()->getTerminator());
    // Warp w has chunks when its first thread's chunk starts below trips.
    Value warps = arith::DivUIOp::create(b, loc, block, warp);
    Value warpChunks = arith::MulIOp::create(b, loc, chunk, warp);
    Value head = memref::LoadOp::create(b, loc, scratch, ValueRange{zero});
    auto across = scf::ForOp::create(b, loc, one, warps, one, ValueRange{head});
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(across.getBody());
      Value w = across.getInductionVar();
      Value acc = across.getRegionIterArgs()[0];
      Value firstStep = arith::MulIOp::create(b, loc, w, warpChunks);
      Value has = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        firstStep, trips);
      Value result = memref::LoadOp::create(b, loc, scratch, ValueRange{w});
      Value folded = combine(acc, result);
      scf::YieldOp::create(
          b, loc,
          arith::SelectOp::create(b, loc, has, folded, acc).getResult());
    }
    SmallVector<Value> indices;
    for (Value index : r.store.getIndices())
      indices.push_back(map.lookupOrDefault(index));
    memref::StoreOp::create(b, loc, across.getResult(0),
                            map.lookupOrDefault(r.store.getMemRef()), indices);
  }
};

} // namespace
