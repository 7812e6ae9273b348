//===- VectorizeGemm.cpp - register-blocked vector GEMMs on tensors -------===//
//
// C[m, n] += A[m, k] · B[n, k] with both operands contiguous along K: the
// micro-kernel keeps mr x nr vector accumulators of kv K-elements (A rows
// times B rows, element-wise products accumulated along K) and reduces each
// horizontally once per tile. The loops are built on tensors, before
// bufferization, so the accumulators are SSA values that never touch
// memory:
//
//   for mb in [0, M) step mc                      (M block)
//     for n0 in [0, N) step nr (+ a static partial tile)
//       Bt = B[n0 : n0+nr, :]   (or B's elementwise producer, tiled here)
//       for m0 in block step mr (+ remainder tiles of 4, 2, 1 rows)
//         acc[mr][nr] = 0
//         for k0 in [0, K) step kv: acc[i][j] = dot(acc[i][j], A[m0+i, k0:],
//                                                   Bt[j, k0:])
//         (padded K tail)
//         C[m0+i, n0:n0+nr] = (C +) reduce(acc[i][:])
//
// Micro-kernels ("dot"):
//   f32-fma           acc(f32 x kv) = fma(ext(a), ext(b), acc)
//   i8-generic        acc(i32 x kv) += sext(a) * sext(b)
//   i8-pmaddwd        acc(i32 x kv/2) += pmaddwd(sext16(a), sext16(b))
//   i8-vnni           acc(i32 x 16) = vpdpbusd(acc, b ^ 0x80, a); the
//                     unsigned bias is removed with 128 · Σk A[m, k], summed
//                     once per row of the M block (so B needs no pass of
//                     its own, and a decoder can feed the micro-kernel
//                     straight from registers)
//   i8-vnni-emulated  the same algorithm with portable vector ops (tests
//                     the VNNI bias correction on any CPU)
//   bf16-dot          acc(f32 x kv/2) = vdpbf16ps(acc, a, b): bf16 operands,
//                     two exact products per lane (odd, then even element)
//   bf16-dot-emulated the same with portable vector ops
//
// The outer form (`form = outer`, f32-fma, VNNI and bf16) turns the tile
// around: an accumulator is one vector of `lanes` adjacent columns of C, a
// tile is mr rows x nr such vectors, and each K step multiplies a broadcast
// element of A (VNNI: four bytes, bf16: two values; a group) by nr vectors
// of a K-major panel of B:
//
//   for mb ...                                    (M block)
//     for n0 in [0, N) step nr·lanes
//       P[p, j] = B[n0 + j, p]   (decoded tile, transposed lanes x lanes at
//                                 a time in registers; VNNI and bf16:
//                                 32-bit groups of four K bytes, biased to
//                                 unsigned, or of two bf16 K values)
//       for m0 in block step mr
//         acc[i][v] += bcast(A[m0+i, p]) * P[p, v·lanes :]   for p in K
//         C[m0+i, n0 + v·lanes :] = epilogue(acc[i][v]) (vector epilogue)
//
// so no horizontal reduction is left and one panel load feeds mr products.
// One-row M blocks (decode adaptive or none) and column tails narrower than
// a vector use the inner form.
// Intrinsics are placeholders (`builtin.unrealized_conversion_cast` tagged
// `comfyquant.intrinsic`) until comfyquant-cpu-materialize-intrinsics.
//===----------------------------------------------------------------------===//
#include "GemmBuilder.h"
#include "GemmDecoderTables.h"


#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/TilingInterface.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUVECTORIZEGEMM
#include "comfyquant/Codegen/CPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;

LogicalResult GemmBuilder::analyzeOperands(RewriterBase &rw) {
  A = op.getDpsInputs()[0];
  B = op.getDpsInputs()[1];
  dest = accInit = op.getDpsInits()[0];
  if (auto fill = dest.getDefiningOp<linalg::FillOp>()) {
    Value v = fill.getInputs()[0];
    if (matchPattern(v, m_Zero()) || matchPattern(v, m_AnyZeroFloat())) {
      zeroInit = true;
      dest = fill.getOutputs()[0];
    }
  }
  epilogue = matchEpilogue(op, epilogueAcc);
  if (epilogue)
    dest = epilogue.getDpsInits()[0];
  // decode = none: B is used as it is (a producer, if any, runs whole).
  if (auto producer = B.getDefiningOp<linalg::GenericOp>();
      producer && c.decode != CpuDecode::none)
    if (producer.getNumResults() == 1 &&
        producer.getNumReductionLoops() == 0 && producer.getNumLoops() == 2)
      bProducer = producer;
  const ::comfyquant::rt::CpuVariantInfo *variant =
      targetVariant(op->getParentOfType<func::FuncOp>());
  rowBF16Dot = c.row == CpuRowKernel::bf16_dot;
  if (rowBF16Dot &&
      !(variant && variant->bf16Dot && m.aElt.isBF16() && m.bElt.isBF16()))
    return op.emitError("row = bf16_dot needs bf16 operands and a CPU "
                        "variant with a bf16 dot product");
  // A table read by word permutes (vpermi2w: AVX-512 alone).
  if (bProducer && c.decode != CpuDecode::panel &&
      (c.ukernel == CpuMicroKernel::bf16_dot || rowBF16Dot)) {
    const int64_t bf16Kv = rowBF16Dot ? c.kv * 2 : c.kv;
    bProducerTable = tabulateByteDecoder(rw, bProducer);
    if (!bProducerTable)
      std::tie(bProducerTable, bScale) =
          splitScaledByteDecoder(rw, bProducer, bf16Kv);
    if (!bProducerTable)
      bProducerTable = narrowTableRows(rw, bProducer);
  }
  // The strategy chose row = bf16_dot where B's decoder is a table
  // (decodesThroughTable: the test the tables above pass).
  if (rowBF16Dot && !bProducerTable)
    return op.emitError("row = bf16_dot reads B's decoder as a table of bf16s "
                        "in registers, and it is not one");
  // Read by the f32 kernels and by bf16 one-row calls without a table:
  // none under decode = panel.
  if (bProducer && c.decode != CpuDecode::panel &&
      ((bf16Dot() && c.row == CpuRowKernel::f32_fma) ||
       c.ukernel == CpuMicroKernel::f32_fma))
    bProducerF32 = widenExactNarrowing(rw, bProducer);

  return success();
}

void GemmBuilder::widenA(ImplicitLocOpBuilder &b) {
  // The f32 FMA kernels multiply f32: a bf16 / f16 A is widened once per
  // call, not at every use (the outer form broadcasts each A element once
  // per N tile, which as a 16-bit scalar is a load, a shift and a move to
  // a vector register; as an f32 it is one vbroadcastss from memory).
  // Likewise the outer pmaddwd kernel broadcasts i16 pairs of A: A is
  // sign-extended to i16 once per call, so a pair is one 32-bit load.
  const bool wideInts = c.ukernel == CpuMicroKernel::i8_pmaddwd && outer();
  aStored = A;
  if (c.ukernel == CpuMicroKernel::f32_fma || wideInts) {
    auto aType = cast<RankedTensorType>(A.getType());
    Type wide = wideInts ? Type(b.getI16Type()) : Type(b.getF32Type());
    if (aType.getElementType() != wide) {
      SmallVector<Value> sizes;
      for (int64_t d = 0; d < aType.getRank(); ++d)
        if (aType.isDynamicDim(d))
          sizes.push_back(tensor::DimOp::create(b, A, d));
      Value into = tensor::EmptyOp::create(b, aType.getShape(), wide, sizes);
      AffineMap id = b.getMultiDimIdentityMap(aType.getRank());
      SmallVector<utils::IteratorType> parallel(aType.getRank(),
                                                utils::IteratorType::parallel);
      A = linalg::GenericOp::create(
              b, TypeRange{into.getType()}, ValueRange{A}, ValueRange{into},
              ArrayRef<AffineMap>{id, id}, parallel,
              [&](OpBuilder &nb, Location loc, ValueRange args) {
                Value x =
                    wideInts
                        ? Value(arith::ExtSIOp::create(nb, loc, wide, args[0]))
                        : Value(arith::ExtFOp::create(nb, loc, wide, args[0]));
                linalg::YieldOp::create(nb, loc, x);
              })
              .getResult(0);
    }
  }
}

Value GemmBuilder::fullTile(ImplicitLocOpBuilder &b, Value C, Value n0,
                            Value mb, Value mEnd) {
  return outer() ? outerTile(b, C, n0, c.nr, mb, mEnd)
                 : nTile(b, C, n0, c.nr, mb, mEnd);
}

Value GemmBuilder::columnRangeBlock(ImplicitLocOpBuilder &ib, Value C,
                                    Value mb, Value mEnd) {
  const int64_t N = m.n, width = tileWidth();
    // A column range: full tiles, then single columns. The range lies
    // in [0, N] (y has N columns), so a loop whose step exceeds N
    // never runs and is not built: a narrow module's wide tiles would
    // be dead code that bufferization's analysis and LLVM still pay
    // for (96-column AVX-512 outer tiles made an 11-column module
    // take 17 s to compile).
    Value restBegin = colBegin, Cr = C;
    if (N >= width) {
      Value nrC = arith::ConstantIndexOp::create(ib, width);
      Value span = arith::SubIOp::create(ib, colEnd, colBegin);
      Value fullEnd = arith::AddIOp::create(
          ib, colBegin,
          arith::MulIOp::create(ib, arith::DivUIOp::create(ib, span, nrC),
                                nrC));
      auto tiles = scf::ForOp::create(
          ib, colBegin, fullEnd, nrC, ValueRange{C},
          [&](OpBuilder &nb2, Location loc2, Value n0, ValueRange it2) {
            ImplicitLocOpBuilder ib2(loc2, nb2);
            scf::YieldOp::create(ib2, fullTile(ib2, it2[0], n0, mb, mEnd));
          });
      restBegin = fullEnd;
      Cr = tiles.getResult(0);
    }
    if (outer() && N >= lanes()) {
      // Then single vectors: with a range that starts at a multiple of
      // lanes, every column below the last whole vector of N takes the
      // outer form and the others the inner one, however the columns
      // are split (float sums do not depend on the thread count).
      Value lanesC = arith::ConstantIndexOp::create(ib, lanes());
      Value left = arith::SubIOp::create(ib, colEnd, restBegin);
      Value vecEnd = arith::AddIOp::create(
          ib, restBegin,
          arith::MulIOp::create(
              ib, arith::DivUIOp::create(ib, left, lanesC), lanesC));
      auto vecs = scf::ForOp::create(
          ib, restBegin, vecEnd, lanesC, ValueRange{Cr},
          [&](OpBuilder &nb2, Location loc2, Value n0, ValueRange it2) {
            ImplicitLocOpBuilder ib2(loc2, nb2);
            scf::YieldOp::create(ib2,
                                 outerTile(ib2, it2[0], n0, 1, mb, mEnd));
          });
      restBegin = vecEnd;
      Cr = vecs.getResult(0);
    }
    auto rest = scf::ForOp::create(
        ib, restBegin, colEnd, arith::ConstantIndexOp::create(ib, 1),
        ValueRange{Cr},
        [&](OpBuilder &nb2, Location loc2, Value n0, ValueRange it2) {
          ImplicitLocOpBuilder ib2(loc2, nb2);
          scf::YieldOp::create(ib2, nTile(ib2, it2[0], n0, 1, mb, mEnd));
        });
  return rest.getResult(0);
}

Value GemmBuilder::allColumnsBlock(ImplicitLocOpBuilder &ib, Value C,
                                   Value mb, Value mEnd) {
  const int64_t N = m.n, width = tileWidth(), nFull = N - N % width;
  if (nFull > 0) {
    Value lb = arith::ConstantIndexOp::create(ib, 0);
    Value ub = arith::ConstantIndexOp::create(ib, nFull);
    Value nStep = arith::ConstantIndexOp::create(ib, width);
    auto tiles = scf::ForOp::create(
        ib, lb, ub, nStep, ValueRange{C},
        [&](OpBuilder &nb2, Location loc2, Value n0, ValueRange it2) {
          ImplicitLocOpBuilder ib2(loc2, nb2);
          scf::YieldOp::create(ib2, fullTile(ib2, it2[0], n0, mb, mEnd));
        });
    C = tiles.getResult(0);
  }
  const int64_t tail = N % width;
  if (tail && !outer())
    C = nTile(ib, C, arith::ConstantIndexOp::create(ib, nFull), tail, mb,
              mEnd);
  // Outer form: whole vectors of the tail, then its last columns in
  // the inner form.
  const int64_t tailVecs = outer() ? tail / lanes() : 0;
  if (tailVecs)
    C = outerTile(ib, C, arith::ConstantIndexOp::create(ib, nFull),
                  tailVecs, mb, mEnd);
  if (outer() && tail % lanes()) {
    Value n0 =
        arith::ConstantIndexOp::create(ib, nFull + tailVecs * lanes());
    C = innerColumns(ib, C, n0, tail % lanes(), mb, mEnd,
                     /*oneRow=*/false);
  }
  return C;
}

LogicalResult GemmBuilder::build(RewriterBase &rw) {
  if (failed(analyzeOperands(rw)))
    return failure();
  // With an epilogue, the nest replaces it (its other operands are defined
  // before it; the GEMM's operands dominate it too).
  rw.setInsertionPoint(epilogue ? epilogue.getOperation() : op.getOperation());
  ImplicitLocOpBuilder b(op.getLoc(), rw);
  Value M = tensor::DimOp::create(b, A, 0);
  anchor = M.getDefiningOp();
  widenA(b);
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value mcC = arith::ConstantIndexOp::create(b, c.mc);
  std::tie(colBegin, colEnd) =
      columnRange(epilogue ? epilogue.getOperation() : op.getOperation());
  // M blocks of mc rows; in each, the N tiles of the block's rows.
  auto blocks = scf::ForOp::create(
      b, zero, M, mcC, ValueRange{dest},
      [&](OpBuilder &nb, Location loc, Value mb, ValueRange iter) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value mEnd = arith::MinSIOp::create(
            ib, arith::AddIOp::create(ib, mb, mcC), M);
        Value C = iter[0];
        if (vnni()) {
          blockStart = mb;
          aSums = aRowSums(ib, mb, mEnd);
        }
        scf::YieldOp::create(ib, colBegin
                                     ? columnRangeBlock(ib, C, mb, mEnd)
                                     : allColumnsBlock(ib, C, mb, mEnd));
      });
  Value result = blocks.getResult(0);
  Operation *replaced = epilogue ? epilogue.getOperation() : op.getOperation();
  Type type = replaced->getResult(0).getType();
  if (result.getType() != type)
    result = tensor::CastOp::create(b, type, result);
  rw.replaceOp(replaced, result);
  if (epilogue)
    rw.eraseOp(op);
  return success();
}

namespace {

struct VectorizeGemmPass
    : mlir::comfyquant::impl::ComfyQuantCPUVectorizeGemmBase<VectorizeGemmPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> gemms;
    getOperation().walk([&](linalg::GenericOp op) {
      // AMX GEMMs are tiled after bufferization (comfyquant-cpu-amx-gemm).
      if (std::optional<GemmConfig> c = readGemmConfig(op))
        if (!c->isAmx())
          gemms.push_back(op);
    });
    IRRewriter rw(&getContext());
    // The configs outlive their ops: recorded on the function (as the CUDA
    // back end does), so the chosen blocking and decode stay visible in the
    // lowered IR and the emitted MLIR.
    SmallVector<Attribute> configs;
    for (linalg::GenericOp op : gemms)
      configs.push_back(op->getAttr(ComfyQuantDialect::getGemmAttrName()));
    if (!configs.empty())
      getOperation()->setAttr(ComfyQuantDialect::getGemmsAttrName(),
                              ArrayAttr::get(&getContext(), configs));
    for (linalg::GenericOp op : gemms) {
      std::optional<GemmMatch> m = taggedGemm(op);
      std::optional<GemmConfig> c = readGemmConfig(op);
      if (!m || !c) {
        op.emitError("comfyquant.gemm on an op that is not a supported GEMM "
                     "or with an incomplete configuration");
        return signalPassFailure();
      }
      if (c->mr < 1 || c->nr < 1 || c->kv < 1 || c->mc < 1) {
        op.emitError("comfyquant.gemm tile sizes must be positive");
        return signalPassFailure();
      }
      const bool bf16Kernel = c->ukernel == CpuMicroKernel::bf16_dot ||
                              c->ukernel == CpuMicroKernel::bf16_dot_emulated;
      if (bf16Kernel && !(m->aElt.isBF16() && m->bElt.isBF16())) {
        op.emitError(stringifyCpuMicroKernel(c->ukernel))
            << " multiplies bf16 operands, not " << m->aElt << " x " << m->bElt;
        return signalPassFailure();
      }
      GemmBuilder builder(op, *m, *c);
      if (failed(builder.build(rw)))
        return signalPassFailure();
    }
  }
};

} // namespace
