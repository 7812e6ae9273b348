//===- Tcgen05.cpp - warpgroup MMAs as tcgen05.mma (sm_100a) --------------===//
//
// Per kernel: warp 0 allocates tensor memory (the accumulator's N columns
// per warpgroup, plus 4 + N / 32 scale columns for block-scaled MMAs,
// rounded up to a power of two), thread 0 initialises one mbarrier, and
// every return deallocates. With two warpgroups thread 0 issues one M = 64
// MMA per warpgroup, the second's rows of A into the N columns after the
// first's; warp w reads its accumulator in lane quarter w % 4.
//
// Per step: the block's tiles are made visible to the tensor cores (async
// proxy fence, barrier, tcgen05 fence), thread 0 issues tcgen05.mma and
// commits it to the mbarrier, and every thread waits for the barrier's next
// phase before the tiles are overwritten. The accumulator moves between
// registers and tensor memory with tcgen05.st / tcgen05.ld of shape
// 16x256b, whose per-thread layout is the m16n8 fragment layout of the
// registers (thread 4g + t: rows g and g + 8 of the warp's 16, columns
// 8j + 2t + {0, 1} for repetition j). When the step is the whole body of a
// K loop's accumulation (its accumulator an iteration argument used only
// by it, its result yielded back, no other MMA in the loop: every step
// uses the same columns) the accumulator stays in tensor memory across the
// loop: stored once before it, loaded once after it.
//
// Tensor-memory layouts (PTX ISA, tcgen05 data-path layouts): for M = 64
// row r of D is lane 32 * (r / 16) + r % 16, so warp w (lanes 32w ..
// 32w + 31) reads its rows 16w .. 16w + 15 at its quarter's base. For
// M = 128 row r is lane r; the copy of A puts data row 16w + i at MMA row
// 32w + i (i < 16) and zeros in rows 32w + 16 .. 32w + 31, so the same
// loads read the same rows. Block scale factors sit in 32 lanes x M / 32
// columns (row m at lane m % 32, column m / 32), repeated in each warp's
// quarter; byte 0 of the word is the 1X scale (scale-factor id 0), bytes
// 0..3 the four 4X scales of a K step of 64.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/Tcgen05.h"
#include "comfyquant/Codegen/GPU/ScaleTile.h"
#include "comfyquant/Codegen/GPU/ThreadIndex.h"
#include "comfyquant/Codegen/GPU/TileLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::gpu_codegen;

namespace {

constexpr int64_t kThreads = 128;
/// Rows of a block-scaled MMA (the only M those kinds have).
constexpr int64_t kScaledRows = 128;
/// Words of the interleaved A copy: 128 rows of one 32-byte step.
constexpr int64_t kWideWords = kScaledRows * WarpgroupMmaOp::kStepBytes / 4;
/// mbarrier.try_wait's suspend-time hint, in nanoseconds.
constexpr int64_t kWaitHintNs = 10000000;

Value idx(OpBuilder &b, Location loc, int64_t v) {
  return indexConstant(b, loc, v);
}
Value i32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}

/// The shared-memory address of a workgroup buffer, as an LLVM pointer.
Value sharedPointer(OpBuilder &b, Location loc, Value buffer) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value address = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3), address);
}

/// A tensor-memory address (lane in bits 31:16, column in 15:0) as a
/// pointer.
Value tensorPointer(OpBuilder &b, Location loc, Value address) {
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), 6), address);
}

/// The operand format field of the instruction descriptor.
int64_t formatCode(Type t) {
  if (isa<Float8E5M2Type>(t) || t.isBF16())
    return 1;
  if (t.isInteger(8))
    return 1; // signed
  return 0;   // e4m3, f16
}

/// The 32-bit instruction descriptor (PTX ISA, tcgen05 instruction
/// descriptor), both operands K-major.
int64_t instructionDescriptor(WarpgroupMmaOp op, int64_t m, int64_t n) {
  Type a = op.getAType(), b = op.getBType();
  int64_t d = (n >> 3) << 17;
  if (isa<Float4E2M1FNType>(a)) // E2M1 x E2M1, UE4M3 scales, K = 64
    return d | 1 << 7 | 1 << 10 | (m >> 7) << 27;
  if (op.getAScales()) // E4M3/E5M2, UE8M0 scales, scale-factor ids 0
    return d | formatCode(a) << 7 | formatCode(b) << 10 | 1 << 23 |
           (m >> 7) << 27;
  bool integer = a.isInteger(8);
  // D format: f32 1, s32 2; integer results saturate, as wgmma's do.
  d |= (integer ? 2 : 1) << 4 | (integer ? 1 << 3 : 0);
  return d | formatCode(a) << 7 | formatCode(b) << 10 | (m >> 4) << 24;
}

/// What the kernel's tcgen05 steps share.
struct KernelState {
  Value base;    ///< i32 tensor-memory address of the allocation
  Value barrier; ///< !llvm.ptr<3> to the mbarrier
  Value phase;   ///< memref<1xi32> (private): the phase to wait for next
  Value wideA;   ///< the interleaved A buffer of block-scaled steps, or null
  int64_t columns = 0;
};

/// The thread's index, its warp, and its lane.
struct Ids {
  Value tid, warp, lane;
};

Ids ids(OpBuilder &b, Location loc) {
  Value tid = threadIndex(b, loc);
  Value warp = warpOf(b, loc, tid);
  Value lane = laneOf(b, loc, tid);
  return {tid, warp, lane};
}

/// Runs `body` in the threads where `cond` holds.
template <typename Fn>
void ifThen(OpBuilder &b, Location loc, Value cond, Fn body) {
  auto op = scf::IfOp::create(b, loc, cond, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(op.thenBlock()->getTerminator());
  body();
}

Value isZero(OpBuilder &b, Location loc, Value v) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, v,
                               idx(b, loc, 0));
}

/// Barrier between the tcgen05 operations before it and those after it.
void threadSync(OpBuilder &b, Location loc) {
  MLIRContext *ctx = b.getContext();
  NVVM::Tcgen05FenceOp::create(
      b, loc,
      NVVM::Tcgen05FenceKindAttr::get(
          ctx, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC));
  gpu::BarrierOp::create(b, loc);
  NVVM::Tcgen05FenceOp::create(
      b, loc,
      NVVM::Tcgen05FenceKindAttr::get(
          ctx, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC));
}

/// The address of the warp's lane quarter at `column`. With two
/// warpgroups (`groupColumns` nonzero) warp w reaches the lanes of quarter
/// w % 4 only, and warpgroup w / 4's accumulator starts `groupColumns`
/// columns after the previous one's.
Value quarterAddress(OpBuilder &b, Location loc, const KernelState &k,
                     Value warp, int64_t column, int64_t groupColumns = 0) {
  Value quarter = warp;
  if (groupColumns)
    quarter = arith::RemUIOp::create(b, loc, warp, idx(b, loc, 4));
  Value warp32 = arith::IndexCastUIOp::create(b, loc, b.getI32Type(), quarter);
  Value lane = arith::MulIOp::create(b, loc, warp32, i32(b, loc, 32 << 16));
  Value at = arith::AddIOp::create(b, loc, k.base, lane);
  if (groupColumns) {
    Value group = arith::DivUIOp::create(b, loc, warp, idx(b, loc, 4));
    Value group32 =
        arith::IndexCastUIOp::create(b, loc, b.getI32Type(), group);
    Value groupAt =
        arith::MulIOp::create(b, loc, group32, i32(b, loc, groupColumns));
    at = arith::AddIOp::create(b, loc, at, groupAt);
  }
  if (column)
    at = arith::AddIOp::create(b, loc, at, i32(b, loc, column));
  return tensorPointer(b, loc, at);
}

/// The position of element `i` of a row-major vector of `shape`.
SmallVector<int64_t> delinearize(int64_t i, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> pos(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    pos[d] = i % shape[d];
    i /= shape[d];
  }
  return pos;
}

Type wordVector(OpBuilder &b, int64_t n) {
  return VectorType::get({n}, b.getI32Type());
}

/// tcgen05.st of the accumulator registers (vector<Jx2x2>) into D.
void storeAccumulator(OpBuilder &b, Location loc, const KernelState &k,
                      Value warp, Value acc, int64_t groupColumns) {
  auto type = cast<VectorType>(acc.getType());
  int64_t count = type.getNumElements();
  auto flat = VectorType::get({count}, type.getElementType());
  // Element by element: LLVM lowering takes no n-D shape_cast.
  SmallVector<Value> elems;
  for (int64_t i = 0; i < count; ++i)
    elems.push_back(vector::ExtractOp::create(b, loc, acc,
                                              delinearize(i, type.getShape())));
  Value values = vector::FromElementsOp::create(b, loc, flat, elems);
  if (!type.getElementType().isInteger(32))
    values = vector::BitCastOp::create(b, loc, wordVector(b, count), values);
  NVVM::Tcgen05StOp::create(
      b, loc, UnitAttr(),
      NVVM::Tcgen05LdStShapeAttr::get(b.getContext(),
                                      NVVM::Tcgen05LdStShape::SHAPE_16X256B),
      quarterAddress(b, loc, k, warp, 0, groupColumns), values, Value());
}

/// tcgen05.ld of D into registers of `type`, waited for.
Value loadAccumulator(OpBuilder &b, Location loc, const KernelState &k,
                      Value warp, VectorType type, int64_t groupColumns) {
  int64_t count = type.getNumElements();
  Value words = NVVM::Tcgen05LdOp::create(
      b, loc, wordVector(b, count), UnitAttr(),
      NVVM::Tcgen05LdStShapeAttr::get(b.getContext(),
                                      NVVM::Tcgen05LdStShape::SHAPE_16X256B),
      quarterAddress(b, loc, k, warp, 0, groupColumns), Value());
  NVVM::Tcgen05WaitOp::create(b, loc,
                              NVVM::Tcgen05WaitKindAttr::get(
                                  b.getContext(), NVVM::Tcgen05WaitKind::LOAD));
  Value values = words;
  if (!type.getElementType().isInteger(32))
    values = vector::BitCastOp::create(
        b, loc, VectorType::get({count}, type.getElementType()), words);
  SmallVector<Value> elems;
  for (int64_t i = 0; i < count; ++i)
    elems.push_back(vector::ExtractOp::create(b, loc, values, i));
  return vector::FromElementsOp::create(b, loc, type, elems);
}

/// Waits until the mbarrier completes the phase of parity `phase`: a loop
/// of per-thread try_waits. (nvvm.mbarrier.try_wait.parity expands to a
/// loop that branches with bra.uni on each thread's own result, which
/// PTX leaves undefined when a warp's threads disagree.)
void waitForPhase(OpBuilder &b, Location loc, Value barrier, Value phase) {
  auto loop = scf::WhileOp::create(b, loc, TypeRange(), ValueRange());
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&loop.getBefore());
    Value ticks = i32(b, loc, kWaitHintNs);
    Value done = NVVM::MBarrierTryWaitOp::create(b, loc, b.getI1Type(), barrier,
                                                 phase, ticks);
    Value notDone = arith::XOrIOp::create(
        b, loc, done, arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1));
    scf::ConditionOp::create(b, loc, notDone, ValueRange());
    b.createBlock(&loop.getAfter());
    scf::YieldOp::create(b, loc);
  }
}

/// Sets up the kernel's tensor memory, mbarrier and phase, and frees the
/// memory before each return.
FailureOr<KernelState> prepareKernel(gpu::GPUFuncOp kernel,
                                     ArrayRef<WarpgroupMmaOp> ops) {
  MLIRContext *ctx = kernel.getContext();
  Location loc = kernel.getLoc();
  bool scaled = llvm::any_of(ops, [](WarpgroupMmaOp op) {
    return static_cast<bool>(op.getAScales());
  });
  int64_t needed = 32;
  for (WarpgroupMmaOp op : ops)
    needed = std::max(
        needed,
        op.getWarpgroups() * op.getColumns() +
            (op.getAScales() ? kScaledRows / 32 + op.getColumns() / 32 : 0));
  KernelState k;
  k.columns = static_cast<int64_t>(llvm::PowerOf2Ceil(needed));
  if (k.columns > 512)
    return kernel.emitOpError("needs ")
           << needed << " tensor-memory columns; 512 exist";

  auto workgroup =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto privateSpace =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Private);
  OpBuilder b(ctx);
  auto attribution = [&](MemRefType type, int64_t align) {
    Value v = kernel.addWorkgroupAttribution(type, loc);
    kernel.setWorkgroupAttributionAttr(kernel.getNumWorkgroupAttributions() - 1,
                                       LLVM::LLVMDialect::getAlignAttrName(),
                                       b.getI64IntegerAttr(align));
    return v;
  };
  Value slot =
      attribution(MemRefType::get({1}, b.getI32Type(),
                                  MemRefLayoutAttrInterface(), workgroup),
                  4);
  Value barrier =
      attribution(MemRefType::get({1}, b.getI64Type(),
                                  MemRefLayoutAttrInterface(), workgroup),
                  8);
  if (scaled)
    k.wideA =
        attribution(MemRefType::get({kWideWords}, b.getI32Type(),
                                    MemRefLayoutAttrInterface(), workgroup),
                    kTileAlignment);
  k.phase = kernel.addPrivateAttribution(
      MemRefType::get({1}, b.getI32Type(), MemRefLayoutAttrInterface(),
                      privateSpace),
      loc);

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  Ids id = ids(b, loc);
  Value zero = idx(b, loc, 0);
  Value columns = i32(b, loc, k.columns);
  auto cta1 = NVVM::CTAGroupKindAttr::get(ctx, NVVM::CTAGroupKind::CTA_1);
  Value slotPointer = sharedPointer(b, loc, slot);
  ifThen(b, loc, isZero(b, loc, id.warp), [&] {
    NVVM::Tcgen05AllocOp::create(b, loc, slotPointer, columns, cta1);
    NVVM::Tcgen05RelinquishAllocPermitOp::create(b, loc, cta1);
  });
  k.barrier = sharedPointer(b, loc, barrier);
  ifThen(b, loc, isZero(b, loc, id.tid), [&] {
    NVVM::MBarrierInitOp::create(b, loc, k.barrier, i32(b, loc, 1), Value());
  });
  memref::StoreOp::create(b, loc, i32(b, loc, 0), k.phase, ValueRange{zero});
  if (k.wideA) {
    // The interleaved rows of A that no data row fills stay zero.
    auto quad = VectorType::get({4}, b.getI32Type());
    Value zeros = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(quad, b.getI32IntegerAttr(0)));
    constexpr int64_t perThread = kWideWords / kThreads;
    Value first = arith::MulIOp::create(b, loc, id.tid, idx(b, loc, perThread));
    for (int64_t i = 0; i < perThread; i += 4) {
      Value at = arith::AddIOp::create(b, loc, first, idx(b, loc, i));
      vector::StoreOp::create(b, loc, zeros, k.wideA, ValueRange{at});
    }
  }
  threadSync(b, loc);
  k.base = memref::LoadOp::create(b, loc, slot, ValueRange{zero});

  SmallVector<gpu::ReturnOp> returns;
  kernel.walk([&](gpu::ReturnOp r) { returns.push_back(r); });
  for (gpu::ReturnOp r : returns) {
    if (r->getParentOp() != kernel.getOperation())
      return r.emitOpError("a kernel with tensor memory must return from its "
                           "body (every thread frees the memory together)");
    b.setInsertionPoint(r);
    Value warp = ids(b, loc).warp;
    threadSync(b, loc);
    ifThen(b, loc, isZero(b, loc, warp), [&] {
      NVVM::Tcgen05DeallocOp::create(b, loc, tensorPointer(b, loc, k.base),
                                     columns, cta1);
    });
  }
  return k;
}

/// The K loop whose accumulation `op` is, if it is one (see the header).
scf::ForOp accumulationLoop(WarpgroupMmaOp op) {
  auto arg = dyn_cast_or_null<BlockArgument>(op.getAcc());
  if (!arg || !arg.hasOneUse() || !op.getResult().hasOneUse())
    return {};
  auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
  if (!loop || arg.getArgNumber() == 0)
    return {};
  unsigned index = arg.getArgNumber() - 1;
  OpOperand &use = *op.getResult().getUses().begin();
  if (use.getOwner() != loop.getBody()->getTerminator() ||
      use.getOperandNumber() != index || op->getBlock() != loop.getBody())
    return {};
  // Every step uses the same tensor-memory columns: another MMA in the
  // loop would overwrite the accumulator held there.
  bool alone = true;
  loop.getBody()->walk([&](WarpgroupMmaOp other) {
    if (other != op)
      alone = false;
  });
  return alone ? loop : scf::ForOp();
}

/// Block-scaled steps: copies A's 64 rows into the interleaved buffer of
/// 128 (zero rows between), as the M = 128 kinds read it. Every thread
/// copies 16 bytes: group d = tid / 16 of A's 8-row groups (64 words each)
/// to MMA group 4 * (d / 2) + d % 2.
void interleaveScaledA(OpBuilder &b, Location loc, const KernelState &k,
                       const Ids &id, Value a) {
  gpu::BarrierOp::create(b, loc);
  auto quad = VectorType::get({4}, b.getI32Type());
  Value group = arith::DivUIOp::create(b, loc, id.tid, idx(b, loc, 16));
  Value chunk = arith::RemUIOp::create(b, loc, id.tid, idx(b, loc, 16));
  Value chunkAt = arith::MulIOp::create(b, loc, chunk, idx(b, loc, 4));
  Value groupAt = arith::MulIOp::create(b, loc, group, idx(b, loc, 64));
  Value from = arith::AddIOp::create(b, loc, groupAt, chunkAt);
  Value v = vector::LoadOp::create(b, loc, quad, a, ValueRange{from});
  Value pair = arith::DivUIOp::create(b, loc, group, idx(b, loc, 2));
  Value pairAt = arith::MulIOp::create(b, loc, pair, idx(b, loc, 4 * 64));
  Value odd = arith::RemUIOp::create(b, loc, group, idx(b, loc, 2));
  Value oddAt = arith::MulIOp::create(b, loc, odd, idx(b, loc, 64));
  Value toGroup = arith::AddIOp::create(b, loc, pairAt, oddAt);
  Value to = arith::AddIOp::create(b, loc, toGroup, chunkAt);
  vector::StoreOp::create(b, loc, v, k.wideA, ValueRange{to});
}

/// Block-scaled steps: stores the A and B scale words into tensor memory
/// after the accumulator's columns.
void storeScaleWords(OpBuilder &b, Location loc, WarpgroupMmaOp op,
                     const KernelState &k, const Ids &id, int64_t n, bool fp4) {
  MLIRContext *ctx = op.getContext();
  // Thread lane i of every warp stores word j of the A scales (MMA row
  // 32j + i: data row 16j + i for i < 16, a zero row otherwise) and of
  // the B scales (column 32j + i).
  Value low = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                    id.lane, idx(b, loc, 16));
  Value inGroup = arith::RemUIOp::create(b, loc, id.lane, idx(b, loc, 16));
  Value neutral = i32(b, loc, fp4 ? 0x38383838 : 0x7F7F7F7F);
  SmallVector<Value> aWords, bWords;
  for (int64_t j = 0; j < kScaledRows / 32; ++j) {
    Value row = arith::AddIOp::create(b, loc, inGroup, idx(b, loc, 16 * j));
    Value word = loadScaleWord(b, loc, op.getAScales(), row, fp4);
    aWords.push_back(arith::SelectOp::create(b, loc, low, word, neutral));
  }
  for (int64_t j = 0; j < n / 32; ++j) {
    Value col = arith::AddIOp::create(b, loc, id.lane, idx(b, loc, 32 * j));
    bWords.push_back(loadScaleWord(b, loc, op.getBScales(), col, fp4));
  }
  auto shape = NVVM::Tcgen05LdStShapeAttr::get(
      ctx, NVVM::Tcgen05LdStShape::SHAPE_32X32B);
  auto store = [&](ArrayRef<Value> words, int64_t column) {
    // One word is an i32 (the op takes no 1-element vector).
    Value v = words.size() == 1
                  ? words.front()
                  : vector::FromElementsOp::create(
                        b, loc, wordVector(b, words.size()), words)
                        .getResult();
    NVVM::Tcgen05StOp::create(b, loc, UnitAttr(), shape,
                              quarterAddress(b, loc, k, id.warp, column), v,
                              Value());
  };
  store(aWords, n);
  store(bWords, n + kScaledRows / 32);
}

/// Warpgroup q's MMA of `op`: A's rows [64q, 64q + 64) (all of `a` for
/// one warpgroup) into the n columns from q * n.
void issueGroupMma(OpBuilder &b, Location loc, WarpgroupMmaOp op,
                   const KernelState &k, Value a, int64_t m, int64_t n,
                   Value accumulate, int64_t q) {
  MLIRContext *ctx = op.getContext();
  bool scaled = static_cast<bool>(op.getAScales());
  bool fp4 = isa<Float4E2M1FNType>(op.getAType());
  Value dAt = k.base;
  if (q)
    dAt = arith::AddIOp::create(b, loc, k.base, i32(b, loc, q * n));
  Value d = tensorPointer(b, loc, dAt);
  // Version 1 of the descriptor (bit 46): tcgen05's format.
  constexpr int64_t kVersion = int64_t(1) << 46;
  Value rowsAt =
      q ? idx(b, loc,
              q * WarpgroupMmaOp::kRows * WarpgroupMmaOp::kStepBytes / 4)
        : Value();
  Value descA = tileDescriptor(b, loc, a, rowsAt, kVersion);
  Value descB = tileDescriptor(b, loc, op.getB(), Value(), kVersion);
  Value idesc = i32(b, loc, instructionDescriptor(op, m, n));
  auto cta1 = NVVM::CTAGroupKindAttr::get(ctx, NVVM::CTAGroupKind::CTA_1);
  auto discard = NVVM::Tcgen05MMACollectorOpAttr::get(
      ctx, NVVM::Tcgen05MMACollectorOp::DISCARD);
  if (scaled) {
    Value sfaAt = arith::AddIOp::create(b, loc, k.base, i32(b, loc, n));
    Value sfbAt = arith::AddIOp::create(b, loc, k.base,
                                        i32(b, loc, n + kScaledRows / 32));
    Value sfa = tensorPointer(b, loc, sfaAt);
    Value sfb = tensorPointer(b, loc, sfbAt);
    NVVM::Tcgen05MMABlockScaleOp::create(
        b, loc,
        NVVM::MMABlockScaleKindAttr::get(
            ctx, fp4 ? NVVM::MMABlockScaleKind::MXF4NVF4
                     : NVVM::MMABlockScaleKind::MXF8F6F4),
        cta1,
        NVVM::Tcgen05MMABlockScaleAttr::get(
            ctx, fp4 ? NVVM::Tcgen05MMABlockScale::BLOCK16
                     : NVVM::Tcgen05MMABlockScale::DEFAULT),
        discard, d, descA, descB, idesc, accumulate, sfa, sfb);
  } else {
    Type t = op.getAType();
    auto kind = t.isInteger(8) ? NVVM::Tcgen05MMAKind::I8
                : isa<Float8E4M3FNType, Float8E5M2Type>(t)
                    ? NVVM::Tcgen05MMAKind::F8F6F4
                    : NVVM::Tcgen05MMAKind::F16;
    NVVM::Tcgen05MMAOp::create(
        b, loc, NVVM::Tcgen05MMAKindAttr::get(ctx, kind), cta1, discard,
        UnitAttr(), d, descA, descB, idesc, accumulate, Value(), Value());
  }
}

/// Thread 0 issues the MMAs of `op` (A from `a`, M rows per warpgroup,
/// N = n), warpgroup q's into the accumulator n columns after q - 1's,
/// and commits them to the kernel's mbarrier.
void issueMma(OpBuilder &b, Location loc, WarpgroupMmaOp op,
              const KernelState &k, Value a, int64_t m, int64_t n,
              Value accumulate) {
  for (int64_t q = 0; q < op.getWarpgroups(); ++q)
    issueGroupMma(b, loc, op, k, a, m, n, accumulate, q);
  NVVM::Tcgen05CommitOp::create(b, loc, k.barrier, Value(),
                                NVVM::CTAGroupKindAttr::get(
                                    op.getContext(), NVVM::CTAGroupKind::CTA_1));
}

/// Every thread waits for the committed MMA (the tiles are overwritten
/// next) and flips the phase it waits for.
void waitForMma(OpBuilder &b, Location loc, const KernelState &k) {
  MLIRContext *ctx = b.getContext();
  Value zero = idx(b, loc, 0);
  Value phase = memref::LoadOp::create(b, loc, k.phase, ValueRange{zero});
  waitForPhase(b, loc, k.barrier, phase);
  Value flipped = arith::XOrIOp::create(b, loc, phase, i32(b, loc, 1));
  memref::StoreOp::create(b, loc, flipped, k.phase, ValueRange{zero});
  NVVM::Tcgen05FenceOp::create(
      b, loc,
      NVVM::Tcgen05FenceKindAttr::get(
          ctx, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC));
}

/// Lowers one step; `loop`, when given, is the K loop whose accumulation
/// it is (decided for every step of the kernel before any is lowered).
LogicalResult lowerStep(WarpgroupMmaOp op, const KernelState &k,
                        scf::ForOp loop) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  bool scaled = static_cast<bool>(op.getAScales());
  bool fp4 = isa<Float4E2M1FNType>(op.getAType());
  int64_t n = op.getColumns();
  // N / 8 repetitions of the 16x256b accumulator access and N / 32 scale
  // words must be counts tcgen05.ld/st have (powers of two).
  if (!llvm::isPowerOf2_64(n) || n < 32 || n > 256)
    return op.emitOpError("tcgen05 lowering covers N = 32, 64, 128 or 256, "
                          "not ")
           << n;
  auto resultType = cast<VectorType>(op.getResult().getType());
  // Two warpgroups: the second's accumulator follows the first's.
  const int64_t groupColumns = op.getWarpgroups() > 1 ? n : 0;

  OpBuilder b(op);
  Ids id = ids(b, loc);
  if (loop) {
    // Accumulate in tensor memory across the loop.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop);
    Ids outer = ids(b, loc);
    unsigned index = cast<BlockArgument>(op.getAcc()).getArgNumber() - 1;
    storeAccumulator(b, loc, k, outer.warp, loop.getInitArgs()[index],
                     groupColumns);
    NVVM::Tcgen05WaitOp::create(
        b, loc,
        NVVM::Tcgen05WaitKindAttr::get(ctx, NVVM::Tcgen05WaitKind::STORE));
  }

  Value a = op.getA();
  if (scaled) {
    interleaveScaledA(b, loc, k, id, a);
    a = k.wideA;
  }
  bool stored = false;
  if (!loop && op.getAcc()) {
    storeAccumulator(b, loc, k, id.warp, op.getAcc(), groupColumns);
    stored = true;
  }
  if (scaled) {
    storeScaleWords(b, loc, op, k, id, n, fp4);
    stored = true;
  }
  if (stored)
    NVVM::Tcgen05WaitOp::create(
        b, loc,
        NVVM::Tcgen05WaitKindAttr::get(ctx, NVVM::Tcgen05WaitKind::STORE));

  // The tiles were written by ordinary stores (the generic proxy); the
  // tensor cores read them through the async proxy.
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  threadSync(b, loc);

  int64_t m = scaled ? kScaledRows : WarpgroupMmaOp::kRows;
  Value accumulate;
  if (loop)
    accumulate = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  else
    accumulate = arith::ConstantIntOp::create(b, loc, b.getI1Type(),
                                              op.getAcc() ? 1 : 0);
  ifThen(b, loc, isZero(b, loc, id.tid), [&] {
    issueMma(b, loc, op, k, a, m, n, accumulate);
  });
  waitForMma(b, loc, k);

  if (!loop) {
    op.getResult().replaceAllUsesWith(
        loadAccumulator(b, loc, k, id.warp, resultType, groupColumns));
    op.erase();
    return success();
  }
  // The loop carries its initial value through; its result is read from
  // tensor memory after it.
  unsigned index = cast<BlockArgument>(op.getAcc()).getArgNumber() - 1;
  loop.getBody()->getTerminator()->setOperand(index, op.getAcc());
  op.erase();
  b.setInsertionPointAfter(loop);
  Ids after = ids(b, loc);
  Value result =
      loadAccumulator(b, loc, k, after.warp, resultType, groupColumns);
  loop.getResult(index).replaceAllUsesWith(result);
  return success();
}

} // namespace

LogicalResult mlir::comfyquant::lowerByTcgen05(gpu::GPUFuncOp kernel,
                                               ArrayRef<WarpgroupMmaOp> ops) {
  FailureOr<KernelState> k = prepareKernel(kernel, ops);
  if (failed(k))
    return failure();
  SmallVector<scf::ForOp> loops;
  for (WarpgroupMmaOp op : ops)
    loops.push_back(accumulationLoop(op));
  for (auto [op, loop] : llvm::zip_equal(ops, loops))
    if (failed(lowerStep(op, *k, loop)))
      return failure();
  return success();
}
