//===- DistributeLoops.cpp - top-level loop nests -> gpu.launch -----------===//
//
// The SIMT mapping that covers every module: one thread per point of each
// parallel loop nest, reductions sequential inside the thread. Everything
// else that touches memory runs in a one-thread launch, so host code only
// computes sizes, carves buffers and launches.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/HostCode.h"
#include "comfyquant/Codegen/GPU/LoopPoints.h"
#include "comfyquant/Codegen/GPU/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUDISTRIBUTELOOPS
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

/// Operations the host may run: size and view code, deallocations, the
/// return, the launches already formed, and an scf.if without results
/// whose body is all of these (a launch made conditional on sizes, as the
/// split-K reduction is).
bool runsOnHost(Operation *op) {
  if (auto choice = dyn_cast<scf::IfOp>(op))
    return choice->getNumResults() == 0 &&
           llvm::all_of(choice->getRegions(), [](Region &r) {
             return llvm::all_of(r.getOps(), [](Operation &inner) {
               return isa<scf::YieldOp>(inner) || runsOnHost(&inner);
             });
           });
  return isa<memref::DeallocOp, func::ReturnOp, gpu::LaunchOp>(op) ||
         computesSizesOrViews(op);
}

/// Whether `v` is (or is computed from) a value loaded from memory: such
/// values must be recomputed inside the kernels that use them.
bool dependsOnMemory(Value v, DenseMap<Value, bool> &memo) {
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  bool result = false;
  if (Operation *def = v.getDefiningOp()) {
    if (isa<memref::LoadOp>(def))
      result = true;
    else if (runsOnHost(def) && !isa<memref::AllocOp>(def))
      result = llvm::any_of(def->getOperands(), [&](Value o) {
        return dependsOnMemory(o, memo);
      });
  }
  memo[v] = result;
  return result;
}

struct DistributeLoopsPass
    : mlir::comfyquant::impl::ComfyQuantGPUDistributeLoopsBase<
          DistributeLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("a CUDA host entry must have one block");
      return signalPassFailure();
    }
    if (blockSize < 1 || blockSize > 1024) {
      func.emitOpError("block-size must be in [1, 1024], not ")
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    for (auto copy : llvm::make_early_inc_range(body.getOps<memref::CopyOp>()))
      copyAsParallelLoop(copy);
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
        distribute(loop);
        continue;
      }
      if (isa<memref::LoadOp>(op) || runsOnHost(&op))
        continue;
      if (op.getNumResults() != 0) {
        op.emitOpError("produces a value on the host from device memory; "
                       "the CUDA back end cannot launch it");
        return signalPassFailure();
      }
      wrapInOneThread(&op);
    }
    if (failed(sinkLoads(func)))
      return signalPassFailure();
  }

  /// memref.copy would be a host memcpy of device memory: make it an
  /// element-wise parallel loop like every other kernel.
  void copyAsParallelLoop(memref::CopyOp copy) {
    OpBuilder b(copy);
    Location loc = copy.getLoc();
    auto type = cast<MemRefType>(copy.getTarget().getType());
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    SmallVector<Value> lbs(type.getRank(), zero), steps(type.getRank(), one),
        ubs;
    for (int64_t d = 0; d < type.getRank(); ++d)
      ubs.push_back(b.createOrFold<memref::DimOp>(loc, copy.getTarget(), d));
    if (type.getRank() == 0) {
      Value v = memref::LoadOp::create(b, loc, copy.getSource());
      memref::StoreOp::create(b, loc, v, copy.getTarget());
    } else {
      scf::ParallelOp::create(
          b, loc, lbs, ubs, steps,
          [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
            Value v = memref::LoadOp::create(nb, nloc, copy.getSource(), ivs);
            memref::StoreOp::create(nb, nloc, v, copy.getTarget(), ivs);
          });
    }
    copy.erase();
  }

  /// gpu.launch over the linearized iteration space of `loop`.
  void distribute(scf::ParallelOp loop) {
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value block = arith::ConstantIndexOp::create(b, loc, blockSize);
    SmallVector<Value> counts = loopTripCounts(b, loc, loop);
    Value total = one;
    for (Value count : counts)
      total = arith::MulIOp::create(b, loc, total, count);
    Value grid = arith::CeilDivUIOp::create(b, loc, total, block);
    auto launch = gpu::LaunchOp::create(b, loc, grid, one, one, block, one, one);
    Block &kernel = launch.getBody().front();
    b.setInsertionPointToStart(&kernel);
    Value id = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, launch.getBlockIds().x, block),
        launch.getThreadIds().x);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          id, total);
    auto guard = scf::IfOp::create(b, loc, inRange, /*withElse=*/false);
    gpu::TerminatorOp::create(b, loc);

    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    IRMapping map;
    mapLinearPoint(b, loc, loop, /*first=*/0, counts, id, map);
    for (Operation &inner : loop.getBody()->without_terminator())
      b.clone(inner, map);
    loop.erase();
  }

  void wrapInOneThread(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto launch = gpu::LaunchOp::create(b, loc, one, one, one, one, one, one);
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp::create(b, loc);
    op->moveBefore(launch.getBody().front().getTerminator());
  }

  /// Where a launch recomputes the loaded scalars it uses: before the
  /// first use in the innermost block that holds every use, or before the
  /// outermost loop around that block. A scale used only by a split-K
  /// launch's final epilogue is then read by that branch alone, once per
  /// thread, not by every thread at kernel entry.
  static Operation *whereUsesBegin(gpu::LaunchOp launch,
                                   const llvm::SetVector<Value> &captured) {
    Region &body = launch.getBody();
    Block *common = nullptr;
    SmallVector<Operation *> users;
    for (Value v : captured)
      for (Operation *user : v.getUsers())
        if (body.isAncestor(user->getParentRegion()))
          users.push_back(user);
    for (Operation *user : users) {
      Block *block = user->getBlock();
      if (!common) {
        common = block;
        continue;
      }
      llvm::SmallPtrSet<Block *, 8> chain;
      for (Block *a = common; a; a = a->getParentOp() == launch
                                         ? nullptr
                                         : a->getParentOp()->getBlock())
        chain.insert(a);
      while (!chain.contains(block))
        block = block->getParentOp()->getBlock();
      common = block;
    }
    Operation *first = nullptr;
    for (Operation *user : users) {
      Operation *at = common->findAncestorOpInBlock(*user);
      if (!first || at->isBeforeInBlock(first))
        first = at;
    }
    for (Operation *p = common->getParentOp(); p != launch; p = p->getParentOp())
      if (isa<LoopLikeOpInterface>(p))
        first = p;
    return first;
  }

  /// Recomputes loaded scalars (and what is computed from them) inside each
  /// launch that uses them; none may be left on the host.
  LogicalResult sinkLoads(func::FuncOp func) {
    DenseMap<Value, bool> memo;
    SmallVector<gpu::LaunchOp> launches;
    func.walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp launch : launches) {
      llvm::SetVector<Value> captured;
      launch.getBody().walk([&](Operation *op) {
        for (Value v : op->getOperands())
          if (!launch.getBody().isAncestor(v.getParentRegion()) &&
              dependsOnMemory(v, memo))
            captured.insert(v);
      });
      if (captured.empty())
        continue;
      OpBuilder b(launch.getContext());
      b.setInsertionPoint(whereUsesBegin(launch, captured));
      IRMapping map;
      std::function<Value(Value)> clone = [&](Value v) -> Value {
        if (Value m = map.lookupOrNull(v))
          return m;
        if (!dependsOnMemory(v, memo))
          return v;
        Operation *def = v.getDefiningOp();
        for (Value o : def->getOperands())
          clone(o);
        Operation *copy = b.clone(*def, map);
        return copy->getResult(cast<OpResult>(v).getResultNumber());
      };
      for (Value v : captured) {
        Value inside = clone(v);
        v.replaceUsesWithIf(inside, [&](OpOperand &use) {
          return launch.getBody().isAncestor(
              use.getOwner()->getParentRegion());
        });
      }
    }
    // Host copies are dead now, unless a size or a grid depends on memory.
    Block &body = func.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (op.getNumResults() == 0 || !llvm::any_of(op.getResults(), [&](Value r) {
            return dependsOnMemory(r, memo);
          }))
        continue;
      if (!op.use_empty())
        return op.emitOpError("a launch size depends on device memory; the "
                              "CUDA back end cannot compute it on the host");
      op.erase();
    }
    return success();
  }
};

} // namespace
