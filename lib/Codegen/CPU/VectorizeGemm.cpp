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

SmallVector<Value> GemmBuilder::foldSteps(ImplicitLocOpBuilder &b,
                                          SmallVector<Value> accs, int64_t end,
                                          int64_t stride, bool tail,
                                          KStep step) {
  if (end > 0) {
    Value lb = arith::ConstantIndexOp::create(b, 0);
    Value ub = arith::ConstantIndexOp::create(b, end);
    Value strideC = arith::ConstantIndexOp::create(b, stride);
    auto loop = scf::ForOp::create(
        b, lb, ub, strideC, accs,
        [&](OpBuilder &nb, Location loc, Value k0, ValueRange iter) {
          ImplicitLocOpBuilder ib(loc, nb);
          scf::YieldOp::create(ib, step(ib, k0, iter, /*inBounds=*/true));
        });
    accs = loop.getResults();
  }
  if (tail)
    accs = step(b, arith::ConstantIndexOp::create(b, end), accs,
                /*inBounds=*/false);
  return accs;
}

Value GemmBuilder::aRowSums(ImplicitLocOpBuilder &b, Value mb,
                            Value mEnd) const {
  auto ones = DenseElementsAttr::get(VectorType::get({c.kv}, b.getI8Type()),
                                     b.getIntegerAttr(b.getI8Type(), 1));
  Value one = arith::ConstantOp::create(b, ones.getType(), ones);
  Value sums =
      tensor::EmptyOp::create(b, ArrayRef<int64_t>{c.mc}, b.getI32Type());
  auto rows = scf::ForOp::create(
      b, mb, mEnd, arith::ConstantIndexOp::create(b, 1), ValueRange{sums},
      [&](OpBuilder &nb, Location loc, Value m, ValueRange iter) {
        ImplicitLocOpBuilder ib(loc, nb);
        SmallVector<Value> acc =
            kLoop(ib, {zeroAcc(ib)},
                  [&](ImplicitLocOpBuilder &kb, Value k0, ValueRange in,
                      bool inBounds) {
                    return SmallVector<Value>{dpbusd(
                        kb, in[0], one, readRow(kb, A, m, k0, inBounds))};
                  });
        Value at = arith::SubIOp::create(ib, m, mb);
        Value total = reduce(ib, acc[0]);
        scf::YieldOp::create(
            ib, tensor::InsertOp::create(ib, total, iter[0], ValueRange{at})
                    .getResult());
      });
  return rows.getResult(0);
}

Value GemmBuilder::microKernel(ImplicitLocOpBuilder &b, Value C, Value bt,
                               Value m0, Value n0, int64_t mr,
                               int64_t nr) const {
  auto step = [&](ImplicitLocOpBuilder &ib, Value k0, ValueRange in,
                  bool inBounds) {
    SmallVector<Value> as, bs, out;
    for (int64_t i = 0; i < mr; ++i)
      as.push_back(prepare(ib, readRow(ib, A, plus(ib, m0, i), k0, inBounds),
                           /*isA=*/true));
    const bool scaled = bScale && !bt && bf16Dot();
    SmallVector<Value> scales;
    for (int64_t j = 0; j < nr; ++j) {
      bs.push_back(prepare(ib,
                           bRow(ib, bt, n0, j, k0, inBounds, Value(),
                                /*registerKernel=*/!bt),
                           /*isA=*/false));
      if (scaled)
        scales.push_back(vector::BroadcastOp::create(
            ib, accType(ib),
            emitEpilogueAt(ib, ib.getLoc(), bScale, /*accOperand=*/~0u, Value(),
                           plus(ib, n0, j), k0)));
    }
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j) {
        Value acc = in[i * nr + j];
        if (!scaled) {
          out.push_back(dot(ib, acc, as[i], bs[j]));
          continue;
        }
        Value sum = dot(ib, zeroAcc(ib), as[i], bs[j]);
        out.push_back(vector::FMAOp::create(ib, sum, scales[j], acc));
      }
    return out;
  };
  SmallVector<Value> accs =
      kLoop(b, SmallVector<Value>(mr * nr, zeroAcc(b)), step);
  Type elt = accElt(b);
  for (int64_t i = 0; i < mr; ++i) {
    Value row = plus(b, m0, i);
    Value corr;
    if (vnni())
      corr = biasCorrection(b, row);
    SmallVector<Value> vals;
    for (int64_t j = 0; j < nr; ++j) {
      Value s = reduce(b, accs[i * nr + j]);
      if (vnni())
        s = arith::SubIOp::create(b, s, corr);
      Value col = plus(b, n0, j);
      if (!zeroInit) {
        Value old =
            tensor::ExtractOp::create(b, accInit, ValueRange{row, col});
        s = ints() ? Value(arith::AddIOp::create(b, old, s))
                   : Value(arith::AddFOp::create(b, old, s));
      }
      if (epilogue)
        s = applyEpilogue(b, s, row, col);
      vals.push_back(s);
    }
    if (epilogue)
      elt = cast<RankedTensorType>(dest.getType()).getElementType();
    Value v = vector::FromElementsOp::create(
        b, VectorType::get({nr}, elt), vals);
    C = vector::TransferWriteOp::create(b, v, C, ValueRange{row, n0},
                                        ArrayRef<bool>{true})
            .getResult();
  }
  return C;
}

std::pair<Value, Value>
GemmBuilder::columnRange(Operation *producerOfY) const {
  auto func = producerOfY->getParentOfType<func::FuncOp>();
  if (!func || producerOfY->getParentOp() != func.getOperation())
    return {};
  Value begin, end;
  for (BlockArgument a : func.getArguments()) {
    if (func.getArgAttr(a.getArgNumber(), "comfyquant.column_begin"))
      begin = a;
    if (func.getArgAttr(a.getArgNumber(), "comfyquant.column_end"))
      end = a;
  }
  Value r = producerOfY->getResult(0);
  if (!begin || !end || !r.hasOneUse())
    return {};
  auto store =
      dyn_cast<bufferization::MaterializeInDestinationOp>(*r.getUsers().begin());
  auto y = store ? dyn_cast<BlockArgument>(store.getDest()) : BlockArgument();
  if (!y || y.getOwner() != &func.getBody().front() ||
      !func.getArgAttr(y.getArgNumber(), "comfyquant.output"))
    return {};
  func->setAttr("comfyquant.column_range", UnitAttr::get(func.getContext()));
  return {begin, end};
}

linalg::GenericOp GemmBuilder::matchEpilogue(linalg::GenericOp gemm,
                                             unsigned &accOperand) {
  Value r = gemm.getResult(0);
  if (!r.hasOneUse())
    return {};
  auto epi = dyn_cast<linalg::GenericOp>(*r.getUsers().begin());
  // Its other operands are read inside the GEMM's nest, which is built at
  // the epilogue, so they dominate it.
  if (!epi || epi.getNumResults() != 1 || !epi.hasPureTensorSemantics())
    return {};
  std::optional<unsigned> acc = epilogueAccOperand(epi, r);
  if (!acc)
    return {};
  accOperand = *acc;
  return epi;
}

Value GemmBuilder::applyEpilogue(ImplicitLocOpBuilder &b, Value acc, Value row,
                                 Value col) const {
  return emitEpilogueAt(b, b.getLoc(), epilogue, epilogueAcc, acc, row, col);
}

Value GemmBuilder::bRow(ImplicitLocOpBuilder &b, Value bt, Value n0, int64_t j,
                        Value k0, bool inBounds, Value jBase,
                        bool registerKernel) const {
  if (bt)
    return readRow(b, bt,
                   jBase ? plus(b, jBase, j)
                         : Value(arith::ConstantIndexOp::create(b, j)),
                   k0, inBounds);
  const int64_t width = inBounds ? c.kv : m.k % c.kv;
  Value n = plus(b, jBase ? Value(arith::AddIOp::create(b, n0, jBase)) : n0, j);
  SmallVector<OpFoldResult> offsets = {n, k0};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(width)};
  // The f32 kernels take the decoder's f32 before its exact narrowing;
  // the bf16 dot kernels its table, when it has one.
  linalg::GenericOp producer = bProducer;
  if (bProducerF32 && c.ukernel == CpuMicroKernel::f32_fma)
    producer = bProducerF32;
  else if (bProducerTable && bf16Dot() && registerKernel)
    producer = bProducerTable;
  Type elt =
      cast<RankedTensorType>(producer->getResult(0).getType()).getElementType();
  Value into = tensor::EmptyOp::create(b, ArrayRef<int64_t>{1, width}, elt);
  FailureOr<TilingResult> tiled =
      cast<TilingInterface>(producer.getOperation())
          .generateResultTileValue(b, 0, offsets, sizes);
  Value piece = tiled->tiledValues[0];
  auto tiledOp = dyn_cast<linalg::GenericOp>(piece.getDefiningOp());
  if (tiledOp && tiledOp.getNumDpsInits() == 1)
    tiledOp.getDpsInitsMutable()[0].set(into);
  Value row = arith::ConstantIndexOp::create(b, 0);
  Value col = arith::ConstantIndexOp::create(b, 0);
  return readRow(b, piece, row, col, width == c.kv);
}

Value GemmBuilder::nTile(ImplicitLocOpBuilder &b, Value C, Value n0, int64_t nr,
                         Value mb, Value mEnd) const {
  // decode = adaptive: a one-row call (M = 1: decoding) evaluates B's
  // producer inside the K loop, in registers: a decoded tile would be
  // written and read once.
  if (bProducer && c.decode == CpuDecode::adaptive) {
    Value single = singleRowCall(b);
    auto branch = scf::IfOp::create(
        b, single,
        [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          scf::YieldOp::create(
              ib, oneRowBuilder().microKernel(ib, C, Value(), mb, n0, 1, nr));
        },
        [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          scf::YieldOp::create(ib, bufferedTile(ib, C, n0, nr, mb, mEnd));
        });
    return branch.getResult(0);
  }
  return bufferedTile(b, C, n0, nr, mb, mEnd);
}

Value GemmBuilder::emptyBeforeNest(ArrayRef<int64_t> shape, Type elt) const {
  OpBuilder ob(anchor);
  return tensor::EmptyOp::create(ob, anchor->getLoc(), shape, elt);
}

Value GemmBuilder::decodeBuffer(int64_t rows) const {
  Value &buf = decodeBuffers[rows];
  if (!buf)
    buf = emptyBeforeNest({rows, m.k},
                          cast<RankedTensorType>(B.getType()).getElementType());
  return buf;
}

Value GemmBuilder::bTile(ImplicitLocOpBuilder &b, Value n0,
                         int64_t rows) const {
  SmallVector<OpFoldResult> offsets = {n0, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(rows), b.getIndexAttr(m.k)};
  if (bProducer) {
    linalg::GenericOp producer = bProducer;
    FailureOr<TilingResult> tiled =
        cast<TilingInterface>(producer.getOperation())
            .generateResultTileValue(b, 0, offsets, sizes);
    if (succeeded(tiled)) {
      Value bt = tiled->tiledValues[0];
      // Decode into one [rows, K] buffer reused by every tile, not into a
      // slice of a full-size [N, K] temporary (which bufferizes to an N x K
      // allocation per call).
      auto tiledOp = dyn_cast<linalg::GenericOp>(bt.getDefiningOp());
      if (tiledOp && tiledOp.getNumDpsInits() == 1)
        if (auto slice = tiledOp.getDpsInits()[0]
                             .getDefiningOp<tensor::ExtractSliceOp>())
          if (slice.getSource().getDefiningOp<tensor::EmptyOp>())
            tiledOp.getDpsInitsMutable()[0].set(decodeBuffer(rows));
      return bt;
    }
  }
  SmallVector<OpFoldResult> strides = {b.getIndexAttr(1), b.getIndexAttr(1)};
  auto type = RankedTensorType::get(
      {rows, m.k}, cast<RankedTensorType>(B.getType()).getElementType());
  return tensor::ExtractSliceOp::create(b, type, B, offsets, sizes, strides);
}

Value GemmBuilder::mTiles(ImplicitLocOpBuilder &b, Value C, Value mb,
                          Value mEnd, int64_t mr, MTile tile) const {
  // Tiles of mr rows, then of the powers of two below mr, each of those at
  // most once (4, 2, 1 for mr = 6): a remainder of 4 rows is one 4-row tile
  // rather than four single rows that load the panel once per row and leave
  // the FMA / VNNI ports idle. A row's sums do not depend on the height of
  // its tile.
  SmallVector<int64_t> sizes = {mr};
  int64_t below = 1;
  while (below * 2 < mr)
    below *= 2;
  for (; mr > 1 && below >= 1; below /= 2)
    sizes.push_back(below);
  Value result = C;
  Value from = mb;
  for (int64_t size : sizes) {
    Value sizeC = arith::ConstantIndexOp::create(b, size);
    Value to = mEnd;
    if (size > 1) {
      Value left = arith::SubIOp::create(b, mEnd, from);
      Value whole = arith::MulIOp::create(
          b, arith::DivUIOp::create(b, left, sizeC), sizeC);
      to = arith::AddIOp::create(b, from, whole);
    }
    auto loop = scf::ForOp::create(
        b, from, to, sizeC, ValueRange{result},
        [&](OpBuilder &nb, Location loc, Value m0, ValueRange iter) {
          ImplicitLocOpBuilder ib(loc, nb);
          scf::YieldOp::create(ib, tile(ib, iter[0], m0, size));
        });
    result = loop.getResult(0);
    from = to;
  }
  return result;
}

Value GemmBuilder::bufferedTile(ImplicitLocOpBuilder &b, Value C, Value n0,
                                int64_t nr, Value mb, Value mEnd) const {
  // decode = register: every M tile evaluates the producer per K step.
  // Otherwise the B rows of this tile: a slice, or B's elementwise producer
  // computed for the slice only (e.g. a weight decoder, once per tile).
  const bool inRegisters = bProducer && c.decode == CpuDecode::reg;
  Value bt = inRegisters ? Value() : bTile(b, n0, nr);
  return mTiles(
      b, C, mb, mEnd, innerMr(),
      [&](ImplicitLocOpBuilder &ib, Value Ci, Value m0, int64_t rows) {
        return microKernel(ib, Ci, bt, m0, n0, rows, nr);
      });
}

LogicalResult GemmBuilder::build(RewriterBase &rw) {
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

  // With an epilogue, the nest replaces it (its other operands are defined
  // before it; the GEMM's operands dominate it too).
  rw.setInsertionPoint(epilogue ? epilogue.getOperation() : op.getOperation());
  ImplicitLocOpBuilder b(op.getLoc(), rw);
  // Columns per N tile: nr vectors of lanes (outer form) or nr columns.
  const int64_t width = outer() ? c.nr * lanes() : c.nr;
  const int64_t N = m.n, nFull = N - N % width;
  Value M = tensor::DimOp::create(b, A, 0);
  anchor = M.getDefiningOp();
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
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value mcC = arith::ConstantIndexOp::create(b, c.mc);
  std::tie(colBegin, colEnd) =
      columnRange(epilogue ? epilogue.getOperation() : op.getOperation());
  // A full N tile at n0.
  auto tile = [&](ImplicitLocOpBuilder &ib, Value C, Value n0, Value mb,
                  Value mEnd) {
    return outer() ? outerTile(ib, C, n0, c.nr, mb, mEnd)
                   : nTile(ib, C, n0, c.nr, mb, mEnd);
  };
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
        if (colBegin) {
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
                  scf::YieldOp::create(ib2, tile(ib2, it2[0], n0, mb, mEnd));
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
          scf::YieldOp::create(ib, rest.getResult(0));
          return;
        }
        if (nFull > 0) {
          Value lb = arith::ConstantIndexOp::create(ib, 0);
          Value ub = arith::ConstantIndexOp::create(ib, nFull);
          Value nStep = arith::ConstantIndexOp::create(ib, width);
          auto tiles = scf::ForOp::create(
              ib, lb, ub, nStep, ValueRange{C},
              [&](OpBuilder &nb2, Location loc2, Value n0, ValueRange it2) {
                ImplicitLocOpBuilder ib2(loc2, nb2);
                scf::YieldOp::create(ib2, tile(ib2, it2[0], n0, mb, mEnd));
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
        scf::YieldOp::create(ib, C);
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
      std::optional<GemmMatch> m = matchGemm(op);
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
