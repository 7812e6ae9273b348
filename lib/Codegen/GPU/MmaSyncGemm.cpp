//===- MmaSyncGemm.cpp - i8 GEMMs on mma.sync m16n8k32 --------------------===//
//
// The Ampere-to-Blackwell warp-level tensor-core path for every integer
// format. Fragment layouts of mma.m16n8k32 with .s8 operands (PTX ISA,
// "Matrix fragments for mma.m16n8k32"), with g = lane / 4, t = lane % 4:
//   A (16 x 32, row): register r holds row g + 8 * (r % 2), K columns
//                     4t + 16 * (r / 2) + [0, 4)
//   B (32 x 8, col):  register r holds column g, K rows 4t + 16r + [0, 4)
//   C (16 x 8, s32):  register r holds row g + 8r, columns 2t, 2t + 1
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Codegen/GPU/Passes.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPUMMASYNCGEMM
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

constexpr int64_t kWarps = 4;
constexpr int64_t kTileM = 16, kTileN = 8, kTileK = 32;
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

  /// mem[row, col], or `zero` outside [rows) x [cols): the address is
  /// clamped into the buffer so no lane ever reads out of bounds.
  Value loadOrZero(Value mem, Value row, Value col, Value rows, Value cols,
                   Value zero) {
    // One op per statement: argument evaluation order would make the IR
    // depend on the host compiler.
    Value rowInside = lt(row, rows);
    Value colInside = lt(col, cols);
    Value inside = arith::AndIOp::create(b, loc, rowInside, colInside);
    Value one = idx(1);
    Value r = min(row, arith::SubIOp::create(b, loc, rows, one));
    Value c = min(col, arith::SubIOp::create(b, loc, cols, one));
    Value v = memref::LoadOp::create(b, loc, mem, ValueRange{r, c});
    return arith::SelectOp::create(b, loc, inside, v, zero);
  }
};

struct MmaSyncGemmPass
    : mlir::comfyquant::impl::ComfyQuantGPUMmaSyncGemmBase<MmaSyncGemmPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<linalg::GenericOp> gemms;
    for (auto op : func.getBody().front().getOps<linalg::GenericOp>()) {
      std::optional<comfyquant::detail::GemmMatch> m =
          comfyquant::detail::matchGemm(op);
      if (m && m->kind == comfyquant::detail::GemmMatch::Kind::I8I8I32 &&
          op.hasPureBufferSemantics())
        gemms.push_back(op);
    }
    for (linalg::GenericOp op : gemms)
      rewrite(op);
    if (!gemms.empty())
      func->setAttr("comfyquant.gpu.gemm",
                    StringAttr::get(&getContext(), "mma_sync_m16n8k32_s8"));
  }

  void rewrite(linalg::GenericOp op) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Builder h{b, loc};
    Value a = op.getDpsInputOperand(0)->get();
    Value bm = op.getDpsInputOperand(1)->get();
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

    Type i8 = b.getI8Type(), i32 = b.getI32Type();
    Value zero8 = arith::ConstantIntOp::create(b, loc, i8, 0);
    Value zero32 = arith::ConstantIntOp::create(b, loc, i32, 0);
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
    Value t4 = h.mul(t, 4), t2 = h.mul(t, 2);

    auto accType = VectorType::get({2, 2}, i32);
    auto aType = VectorType::get({4, 4}, i8);
    auto bType = VectorType::get({2, 4}, i8);
    // Column of C register element (r, e) of fragment j, and its row.
    auto cCol = [&](int64_t j, int64_t e) {
      return h.add(h.add(warpN, j * kTileN + e), t2);
    };
    SmallVector<Value> init;
    for (int64_t j = 0; j < kFragmentsN; ++j) {
      SmallVector<Value> elems;
      for (Value row : {row0, row1})
        for (int64_t e = 0; e < 2; ++e)
          elems.push_back(h.loadOrZero(c, row, cCol(j, e), rows, cols, zero32));
      init.push_back(vector::FromElementsOp::create(b, loc, accType, elems));
    }

    Value kStart = h.idx(0);
    Value kStep = h.idx(kTileK);
    auto loop = scf::ForOp::create(b, loc, kStart, depth, kStep, init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value k0 = loop.getInductionVar();
      SmallVector<Value> aElems;
      for (int64_t r = 0; r < 4; ++r) {
        Value row = r % 2 ? row1 : row0;
        Value kb = h.add(h.add(k0, t4), 16 * (r / 2));
        for (int64_t e = 0; e < 4; ++e)
          aElems.push_back(
              h.loadOrZero(a, row, h.add(kb, e), rows, depth, zero8));
      }
      Value fragA = vector::FromElementsOp::create(b, loc, aType, aElems);
      SmallVector<Value> next;
      for (int64_t j = 0; j < kFragmentsN; ++j) {
        Value n = h.add(h.add(warpN, j * kTileN), g);
        SmallVector<Value> bElems;
        for (int64_t r = 0; r < 2; ++r) {
          Value kb = h.add(h.add(k0, t4), 16 * r);
          for (int64_t e = 0; e < 4; ++e)
            bElems.push_back(
                h.loadOrZero(bm, n, h.add(kb, e), cols, depth, zero8));
        }
        Value fragB = vector::FromElementsOp::create(b, loc, bType, bElems);
        next.push_back(nvgpu::MmaSyncOp::create(
            b, loc, fragA, fragB, loop.getRegionIterArgs()[j],
            ArrayRef<int64_t>{kTileM, kTileN, kTileK}));
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
          memref::StoreOp::create(b, loc, v, c, ValueRange{row, col});
        }
    op.erase();
  }
};

} // namespace
