//===- GemmInnerForm.cpp - micro-kernel, N and M tiles of vector GEMMs ----===//
//
// The inner form of comfyquant-cpu-vectorize-gemm (K along the lanes, one
// horizontal reduction per accumulator), and the tiles every form shares:
// B's rows and decoded tiles, the N tile and the M tiles with their
// remainders, the epilogue of a tile.
//===----------------------------------------------------------------------===//
#include "GemmBuilder.h"
#include "GemmDecoderTables.h"
#include "NibblePlanes.h"


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

/// A kv-vector of i8 ones: vpdpbusd of it and A sums A's bytes.
static Value onesVector(ImplicitLocOpBuilder &b, int64_t kv) {
  auto ones = DenseElementsAttr::get(VectorType::get({kv}, b.getI8Type()),
                                     b.getIntegerAttr(b.getI8Type(), 1));
  return arith::ConstantOp::create(b, ones.getType(), ones);
}

Value GemmBuilder::aSumOver(ImplicitLocOpBuilder &b, Value row,
                            ArrayRef<std::pair<int64_t, bool>> steps) const {
  Value one = onesVector(b, c.kv);
  Value acc = zeroAcc(b);
  for (auto [k, inBounds] : steps) {
    Value kc = arith::ConstantIndexOp::create(b, k);
    acc = dpbusd(b, acc, one, readRow(b, A, row, kc, inBounds));
  }
  return reduce(b, acc);
}

Value GemmBuilder::aRowSums(ImplicitLocOpBuilder &b, Value mb,
                            Value mEnd) const {
  Value one = onesVector(b, c.kv);
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

SmallVector<Value>
GemmBuilder::planeSums(ImplicitLocOpBuilder &b, Value m0, Value n0, int64_t mr,
                       int64_t nr, KStep step,
                       SmallVector<Value> &corrections) const {
  const int64_t span = 2 * c.kv;
  const int64_t kPlanes = m.k - m.k % span;
  SmallVector<int64_t> evenLanes, oddLanes;
  for (int64_t i = 0; i < c.kv; ++i) {
    evenLanes.push_back(2 * i);
    oddLanes.push_back(2 * i + 1);
  }
  Type aElt = cast<RankedTensorType>(A.getType()).getElementType();
  // VNNI's unsigned B: the least bias that makes B's values bytes, folded
  // into its decoder (a signed nibble plus 8 is the nibble with its top bit
  // flipped), not an xor with 0x80 after it.
  const int64_t bias = vnni() ? nibblePlaneBias(bProducer) : 0;
  auto planeStep = [&](ImplicitLocOpBuilder &ib, Value k0, ValueRange in,
                       bool) {
    // A's even and odd elements apart, once per row and step, shared by
    // the nr columns.
    SmallVector<Value> as;
    Value pad = arith::ConstantOp::create(ib, ib.getZeroAttr(aElt));
    for (int64_t i = 0; i < mr; ++i) {
      Value row = plus(ib, m0, i);
      Value both = vector::TransferReadOp::create(
          ib, VectorType::get({span}, aElt), A, ValueRange{row, k0}, pad,
          ArrayRef<bool>{true});
      Value even = vector::ShuffleOp::create(ib, both, both, evenLanes);
      as.push_back(prepare(ib, even, /*isA=*/true));
      Value odd = vector::ShuffleOp::create(ib, both, both, oddLanes);
      as.push_back(prepare(ib, odd, /*isA=*/true));
    }
    Value two = arith::ConstantIndexOp::create(ib, 2);
    Value half = arith::DivUIOp::create(ib, k0, two);
    Value zero = arith::ConstantIndexOp::create(ib, 0);
    SmallVector<Value> bs;
    for (int64_t j = 0; j < nr; ++j) {
      Value n = plus(ib, n0, j);
      for (int64_t parity = 0; parity < 2; ++parity) {
        Value plane = nibblePlane(ib, ib.getLoc(), bProducer, n, half,
                                  parity, c.kv, bias);
        Value v = readRow(ib, plane, zero, zero, /*inBounds=*/true);
        bs.push_back(vnni() ? v : prepare(ib, v, /*isA=*/false));
      }
    }
    SmallVector<Value> out;
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j)
        for (int64_t parity = 0; parity < 2; ++parity) {
          Value acc = in[(i * nr + j) * 2 + parity];
          Value sum = dot(ib, acc, as[2 * i + parity], bs[2 * j + parity]);
          out.push_back(sum);
        }
    return out;
  };
  // One accumulator per plane, so the two dot products of a step do not
  // wait on each other.
  SmallVector<Value> planes =
      foldSteps(b, SmallVector<Value>(2 * mr * nr, zeroAcc(b)), kPlanes, span,
                /*tail=*/false, planeStep);
  SmallVector<Value> sums;
  for (int64_t q = 0; q < mr * nr; ++q)
    sums.push_back(arith::AddIOp::create(b, planes[2 * q], planes[2 * q + 1]));
  // K past the last whole pair of steps: at most one whole step and a tail,
  // B biased by 128 there (prepare).
  SmallVector<std::pair<int64_t, bool>> rest;
  if (m.k - kPlanes >= c.kv)
    rest.push_back({kPlanes, true});
  if (m.k % c.kv != 0)
    rest.push_back({m.k - m.k % c.kv, false});
  for (auto [k, inBounds] : rest)
    sums = step(b, arith::ConstantIndexOp::create(b, k), sums, inBounds);
  if (!vnni())
    return sums;
  // Each row's correction: bias · Σ A over the planes + 128 · Σ A over the
  // rest.
  Value biasC = arith::ConstantOp::create(b, b.getI32IntegerAttr(bias));
  Value restC = arith::ConstantOp::create(b, b.getI32IntegerAttr(128 - bias));
  for (int64_t i = 0; i < mr; ++i) {
    Value row = plus(b, m0, i);
    Value corr = arith::MulIOp::create(b, biasC, aRowSum(b, row));
    if (!rest.empty()) {
      Value restSum = aSumOver(b, row, rest);
      Value extra = arith::MulIOp::create(b, restC, restSum);
      corr = arith::AddIOp::create(b, corr, extra);
    }
    corrections.push_back(corr);
  }
  return sums;
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
  SmallVector<Value> corrections;
  SmallVector<Value> accs =
      !bt && bProducer && c.row == CpuRowKernel::i8_planes
          ? planeSums(b, m0, n0, mr, nr, step, corrections)
          : kLoop(b, SmallVector<Value>(mr * nr, zeroAcc(b)), step);
  Type elt = accElt(b);
  for (int64_t i = 0; i < mr; ++i) {
    Value row = plus(b, m0, i);
    Value corr;
    if (vnni())
      corr = corrections.empty() ? biasCorrection(b, row) : corrections[i];
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
