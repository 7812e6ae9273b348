//===- AmxGemm.cpp - AMX int8 tile GEMMs on buffers -----------------------===//
//
// The i8 GEMM C[m, n] += A[m, k] · B[n, k] with AMX tiles (tdpbssd), after
// bufferization (the amx dialect works on memrefs). tdpbssd computes
// T[r][c] += Σ_{q<16, i<4} L[r][4q + i] · R[q][4c + i]; with L = 16 rows of
// B (the weights as stored, [n][k], one 64-byte K step per row) and R = 16
// rows of Ap, the activation codes packed so Ap[k/4][4m + k%4] = A[m][k],
// T is the transposed C tile: T[n - n0][m - m0]. So the weights are loaded
// straight from the mapped checkpoint and only the (small) activation
// matrix is repacked, once per call:
//
//   Ap = pack(A)               [K/4, 4·Mp] bytes, rows m >= M are zero
//   for n0 in [0, N) step 16
//     for m0 in [0, Mp) step 16
//       T = 0; for k0 in [0, K) step 64: T += B[n0:+16, k0:+64] · Ap[k0/4:+16, 4m0:+64]
//       C[m0 + j][n0 + i] += T[i][j]   (j < M - m0)
//
// Needs N % 16 == 0 and K % 64 == 0 (the strategy picks AMX only then, so
// no tile reads past the weights). `i8-amx-emulated` runs the same packing,
// tiling and transposed write-back with the tile product done by plain
// loops, so the data movement is tested on CPUs without AMX.
//===----------------------------------------------------------------------===//
#include "Gemm.h"

#include "comfyquant/Codegen/Passes.h"

#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/AMX/Transforms.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUAMXGEMM
#define GEN_PASS_DEF_COMFYQUANTCPUCONVERTCFANDAMXTOLLVM
#include "comfyquant/Codegen/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;

namespace {

using BodyFn = function_ref<void(ImplicitLocOpBuilder &, Value)>;

void forLoop(ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
             BodyFn body) {
  scf::ForOp::create(b, lb, ub, step, ValueRange{},
                     [&](OpBuilder &nb, Location loc, Value iv, ValueRange) {
                       ImplicitLocOpBuilder ib(loc, nb);
                       body(ib, iv);
                       scf::YieldOp::create(ib);
                     });
}

/// The elementwise consumer of the GEMM's C buffer that directly follows it
/// (the epilogue: scales, bias, cast into y), to be computed in the tile
/// write-back: C read with the identity map, its destination only written,
/// every other map made of loop dims and constants.
linalg::GenericOp matchBufferEpilogue(linalg::GenericOp gemm, Value C,
                                      unsigned &accOperand) {
  auto epi = dyn_cast_or_null<linalg::GenericOp>(gemm->getNextNode());
  if (!epi || !epi.hasPureBufferSemantics())
    return {};
  std::optional<unsigned> acc = epilogueAccOperand(epi, C);
  if (!acc)
    return {};
  // C is otherwise only allocated, zero-filled before the GEMM and freed.
  for (Operation *user : C.getUsers())
    if (user != gemm && user != epi &&
        !isa<memref::DeallocOp, linalg::FillOp>(user))
      return {};
  accOperand = *acc;
  return epi;
}

LogicalResult rewrite(linalg::GenericOp op, bool emulate) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return op.emitError("AMX GEMM: expected C += A · Bᵀ on buffers");
  Value A = op.getDpsInputs()[0], B = op.getDpsInputs()[1],
        C = op.getDpsInits()[0];
  auto aType = dyn_cast<MemRefType>(A.getType());
  auto bType = dyn_cast<MemRefType>(B.getType());
  auto cType = dyn_cast<MemRefType>(C.getType());
  if (!aType || !bType || !cType || !aType.getElementType().isInteger(8) ||
      !bType.getElementType().isInteger(8) ||
      !cType.getElementType().isInteger(32) || !bType.hasStaticShape())
    return op.emitError("AMX GEMM: expected i8 memrefs A [M, K], B [N, K] "
                        "and an i32 C [M, N] (run after bufferization)");
  const int64_t N = bType.getShape()[0], K = bType.getShape()[1];
  if (N % 16 || K % 64)
    return op.emitError("AMX GEMM needs N % 16 == 0 and K % 64 == 0, got N = ")
           << N << ", K = " << K;

  // With an epilogue, C (zero-filled) is never written: the write-back
  // computes y directly.
  unsigned accOperand = 0;
  linalg::GenericOp epi = matchBufferEpilogue(op, C, accOperand);
  linalg::FillOp zeroFill;
  if (epi) {
    zeroFill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
    if (!zeroFill || zeroFill.getOutputs()[0] != C ||
        !matchPattern(zeroFill.getInputs()[0], m_Zero()))
      epi = {};
  }

  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto idx = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  Value c0 = idx(0), c1 = idx(1), c4 = idx(4), c16 = idx(16), c64 = idx(64);
  Value M = memref::DimOp::create(b, A, 0);
  Value Mp = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, arith::AddIOp::create(b, M, idx(15)), c16),
      c16);
  Value rowBytes = arith::MulIOp::create(b, Mp, c4);
  auto apType = MemRefType::get({K / 4, ShapedType::kDynamic}, b.getI8Type());
  Value Ap = memref::AllocOp::create(b, apType, ValueRange{rowBytes},
                                     b.getI64IntegerAttr(64));
  // Pack: Ap[q][4m .. 4m+3] = A[m][4q .. 4q+3]; the padding rows are zero.
  auto quad = VectorType::get({4}, b.getI8Type());
  Value zeros = arith::ConstantOp::create(b, quad, b.getZeroAttr(quad));
  forLoop(b, c0, M, c1, [&](ImplicitLocOpBuilder &ib, Value m) {
    Value col = arith::MulIOp::create(ib, m, c4);
    forLoop(ib, c0, idx(K / 4), c1, [&](ImplicitLocOpBuilder &jb, Value q) {
      Value k = arith::MulIOp::create(jb, q, c4);
      Value v = vector::LoadOp::create(jb, quad, A, ValueRange{m, k});
      vector::StoreOp::create(jb, v, Ap, ValueRange{q, col});
    });
  });
  forLoop(b, M, Mp, c1, [&](ImplicitLocOpBuilder &ib, Value m) {
    Value col = arith::MulIOp::create(ib, m, c4);
    forLoop(ib, c0, idx(K / 4), c1, [&](ImplicitLocOpBuilder &jb, Value q) {
      vector::StoreOp::create(jb, zeros, Ap, ValueRange{q, col});
    });
  });

  auto tileT = MemRefType::get({16, 16}, b.getI32Type());
  Value T = memref::AllocaOp::create(b, tileT);
  forLoop(b, c0, idx(N), c16, [&](ImplicitLocOpBuilder &nb, Value n0) {
    forLoop(nb, c0, Mp, c16, [&](ImplicitLocOpBuilder &mb, Value m0) {
      Value ap0 = arith::MulIOp::create(mb, m0, c4);
      if (!emulate) {
        auto accT = amx::TileType::get({16, 16}, mb.getI32Type());
        auto opT = amx::TileType::get({16, 64}, mb.getI8Type());
        Value acc0 = amx::TileZeroOp::create(mb, accT);
        auto kLoop = scf::ForOp::create(
            mb, c0, idx(K), c64, ValueRange{acc0},
            [&](OpBuilder &kb0, Location loc, Value k0, ValueRange it) {
              ImplicitLocOpBuilder kb(loc, kb0);
              Value w = amx::TileLoadOp::create(kb, opT, B, ValueRange{n0, k0});
              Value q0 = arith::DivUIOp::create(kb, k0, c4);
              Value a = amx::TileLoadOp::create(kb, opT, Ap, ValueRange{q0, ap0});
              Value acc = amx::TileMulIOp::create(kb, accT, w, a, it[0]);
              scf::YieldOp::create(kb, acc);
            });
        amx::TileStoreOp::create(mb, T, ValueRange{c0, c0}, kLoop.getResult(0));
      } else {
        // T[r][c] = Σ_{k<K} B[n0 + r][k] · Ap[k/4][4(m0 + c) + k%4].
        forLoop(mb, c0, c16, c1, [&](ImplicitLocOpBuilder &rb, Value r) {
          forLoop(rb, c0, c16, c1, [&](ImplicitLocOpBuilder &cb, Value c) {
            Value zero = arith::ConstantOp::create(cb, cb.getI32IntegerAttr(0));
            Value col0 = arith::MulIOp::create(
                cb, arith::AddIOp::create(cb, m0, c), c4);
            Value n = arith::AddIOp::create(cb, n0, r);
            auto kLoop = scf::ForOp::create(
                cb, c0, idx(K), c1, ValueRange{zero},
                [&](OpBuilder &kb0, Location loc, Value k, ValueRange it) {
                  ImplicitLocOpBuilder kb(loc, kb0);
                  Value w = memref::LoadOp::create(kb, B, ValueRange{n, k});
                  Value q = arith::DivUIOp::create(kb, k, c4);
                  Value col = arith::AddIOp::create(
                      kb, col0, arith::RemUIOp::create(kb, k, c4));
                  Value a = memref::LoadOp::create(kb, Ap, ValueRange{q, col});
                  Value p = arith::MulIOp::create(
                      kb, arith::ExtSIOp::create(kb, kb.getI32Type(), w),
                      arith::ExtSIOp::create(kb, kb.getI32Type(), a));
                  scf::YieldOp::create(kb,
                                       Value(arith::AddIOp::create(kb, it[0], p)));
                });
            memref::StoreOp::create(cb, kLoop.getResult(0), T, ValueRange{r, c});
          });
        });
      }
      // C[m0 + j][n0 + i] += T[i][j] for the rows that exist.
      Value rows = arith::MinSIOp::create(
          mb, c16, arith::SubIOp::create(mb, M, m0));
      forLoop(mb, c0, rows, c1, [&](ImplicitLocOpBuilder &jb, Value j) {
        Value m = arith::AddIOp::create(jb, m0, j);
        forLoop(jb, c0, c16, c1, [&](ImplicitLocOpBuilder &ib, Value i) {
          Value n = arith::AddIOp::create(ib, n0, i);
          Value t = memref::LoadOp::create(ib, T, ValueRange{i, j});
          if (!epi) {
            Value old = memref::LoadOp::create(ib, C, ValueRange{m, n});
            memref::StoreOp::create(ib, arith::AddIOp::create(ib, old, t), C,
                                    ValueRange{m, n});
            return;
          }
          // y[m][n] = epilogue(T[i][j], its other operands at (m, n)).
          Value y = emitEpilogueAt(ib, ib.getLoc(), epi, accOperand, t, m, n);
          memref::StoreOp::create(ib, y, epi.getDpsInits()[0],
                                  ValueRange{m, n});
        });
      });
    });
  });
  memref::DeallocOp::create(b, Ap);
  op.erase();
  if (epi) {
    epi.erase();
    zeroFill.erase();
  }
  return success();
}

struct AmxGemmPass
    : mlir::comfyquant::impl::ComfyQuantCPUAmxGemmBase<AmxGemmPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, bool>> todo;
    getOperation().walk([&](linalg::GenericOp op) {
      std::optional<GemmConfig> c = readGemmConfig(op);
      if (c && (c->ukernel == "i8-amx" || c->ukernel == "i8-amx-emulated"))
        todo.push_back({op, c->ukernel == "i8-amx-emulated"});
    });
    for (auto [op, emulate] : todo)
      if (failed(rewrite(op, emulate)))
        return signalPassFailure();
  }
};

} // namespace

namespace {
struct ConvertCFAndAMXToLLVMPass
    : mlir::comfyquant::impl::ComfyQuantCPUConvertCFAndAMXToLLVMBase<
          ConvertCFAndAMXToLLVMPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    LLVMTypeConverter converter(ctx);
    RewritePatternSet patterns(ctx);
    populateAMXLegalizeForLLVMExportPatterns(converter, patterns);
    cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    cf::populateAssertToLLVMConversionPattern(converter, patterns);
    LLVMConversionTarget target(*ctx);
    configureAMXLegalizeForExportTarget(target);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
