//===- GemmOuterForm.cpp - the outer-product form of vector GEMMs ---------===//
//
// form = outer (f32-fma, VNNI, bf16): an accumulator is one vector of
// adjacent columns of C; each K step multiplies a broadcast element (group)
// of A by the vectors of a K-major panel of B, decoded and transposed in
// registers (packPanel), so no horizontal reduction is left.
//===----------------------------------------------------------------------===//
#include "GemmBuilder.h"

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

/// rows[t][s] -> result[s][t] for n vectors of n lanes (n a power of two):
/// log2(n) rounds that interleave row i with row i + n/2 into rows 2i and
/// 2i + 1 (a perfect shuffle of the row index, which after log2(n) rounds
/// has swapped the row and lane indices). Each shuffle is one two-source
/// permute (vpermt2ps / vpermt2d on AVX-512).
static SmallVector<Value> transposeSquare(ImplicitLocOpBuilder &b,
                                          SmallVector<Value> rows) {
  const int64_t n = rows.size(), half = n / 2;
  SmallVector<int64_t> lo, hi;
  for (int64_t i = 0; i < half; ++i) {
    lo.append({i, n + i});
    hi.append({half + i, n + half + i});
  }
  for (int64_t round = 1; round < n; round *= 2) {
    SmallVector<Value> next;
    for (int64_t i = 0; i < half; ++i) {
      next.push_back(vector::ShuffleOp::create(b, rows[i], rows[i + half], lo));
      next.push_back(vector::ShuffleOp::create(b, rows[i], rows[i + half], hi));
    }
    rows = std::move(next);
  }
  return rows;
}

Value GemmBuilder::packPanel(ImplicitLocOpBuilder &b, Value n0, Value bt,
                             int64_t vecs, Value kBegin, int64_t kLen) const {
  const int64_t L = lanes(), P = (kLen + group() - 1) / group();
  // Blocks of L panel rows whose kv source elements (L groups) all lie
  // inside the range; then at most L rows from K's last K % kv elements,
  // zero-padded (the padding multiplies A's zero padding).
  const int64_t full = kLen / c.kv, tailRows = P - full * L;
  const bool grouped = group() > 1;
  Type elt32 = grouped ? Type(b.getI32Type()) : Type(b.getF32Type());
  auto vt = VectorType::get({L}, elt32);
  // The L x L block of the vector at column `col` at panel row p0 (source
  // K offset k0).
  auto block = [&](ImplicitLocOpBuilder &ib, Value col, Value p0, Value k0,
                   int64_t count, bool inBounds, Value panel) {
    SmallVector<Value> src;
    for (int64_t t = 0; t < L; ++t) {
      Value r = prepare(ib, bRow(ib, bt, n0, t, k0, inBounds, col),
                        /*isA=*/false);
      if (grouped)
        r = vector::BitCastOp::create(ib, vt, r);
      src.push_back(r);
    }
    SmallVector<Value> cols = transposeSquare(ib, src);
    for (int64_t r = 0; r < count; ++r) {
      Value at = plus(ib, p0, r);
      panel = vector::TransferWriteOp::create(
                  ib, cols[r], panel, ValueRange{at, col}, ArrayRef<bool>{true})
                  .getResult();
    }
    return panel;
  };
  Value &buffer = panelBuffers[{P, vecs * L}];
  if (!buffer)
    buffer = emptyBeforeNest({P, vecs * L}, elt32);
  // One column vector at a time: L source rows of B stream at once (not
  // vecs·L), which the hardware prefetchers follow. The vectors are the
  // steps of a loop: one copy of B's decoder, not vecs.
  auto packVector = [&](ImplicitLocOpBuilder &vb, Value col, Value panel) {
    if (full > 0) {
      Value lb = arith::ConstantIndexOp::create(vb, 0);
      Value ub = arith::ConstantIndexOp::create(vb, full * c.kv);
      Value step = arith::ConstantIndexOp::create(vb, c.kv);
      auto loop = scf::ForOp::create(
          vb, lb, ub, step, ValueRange{panel},
          [&](OpBuilder &nb, Location loc, Value local, ValueRange iter) {
            ImplicitLocOpBuilder ib(loc, nb);
            Value p0 = local;
            if (grouped)
              p0 = arith::DivUIOp::create(
                  ib, local, arith::ConstantIndexOp::create(ib, group()));
            Value k0 = arith::AddIOp::create(ib, kBegin, local);
            scf::YieldOp::create(ib, block(ib, col, p0, k0, L, true, iter[0]));
          });
      panel = loop.getResult(0);
    }
    if (tailRows > 0) {
      Value p0 = arith::ConstantIndexOp::create(vb, full * L);
      Value k0 = plus(vb, kBegin, full * c.kv);
      panel = block(vb, col, p0, k0, tailRows, false, panel);
    }
    return panel;
  };
  if (vecs == 1)
    return packVector(b, arith::ConstantIndexOp::create(b, 0), buffer);
  auto loop = scf::ForOp::create(
      b, arith::ConstantIndexOp::create(b, 0),
      arith::ConstantIndexOp::create(b, vecs * L),
      arith::ConstantIndexOp::create(b, L), ValueRange{buffer},
      [&](OpBuilder &nb, Location loc, Value col, ValueRange iter) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, packVector(ib, col, iter[0]));
      });
  return loop.getResult(0);
}

Value GemmBuilder::outerKernel(ImplicitLocOpBuilder &b, Value C, Value panel,
                               Value m0, Value n0, int64_t mr, int64_t vecs,
                               Value kBegin, int64_t kLen, Value partial,
                               Value mb, bool last) const {
  const int64_t L = lanes(), g = group();
  VectorType acc = accType(b);
  Type elt32 = acc.getElementType();
  // Grouped kernels: the panel holds i32 groups, multiplied as g·L
  // elements of A's type (i8 or bf16).
  auto words = VectorType::get({L}, b.getI32Type());
  Type aElt = cast<RankedTensorType>(A.getType()).getElementType();
  auto groups = VectorType::get({g * L}, aElt);
  // A[row, p] broadcast to every lane (grouped: the g elements of group p).
  auto broadcastA = [&](ImplicitLocOpBuilder &ib, Value row, Value p,
                        bool inBounds) -> Value {
    if (g == 1) {
      Value k = arith::AddIOp::create(ib, kBegin, p);
      Value a = tensor::ExtractOp::create(ib, A, ValueRange{row, k});
      if (!a.getType().isF32())
        a = arith::ExtFOp::create(ib, ib.getF32Type(), a);
      return vector::BroadcastOp::create(ib, acc, a);
    }
    Value k = arith::AddIOp::create(
        ib, kBegin,
        arith::MulIOp::create(ib, p, arith::ConstantIndexOp::create(ib, g)));
    Value pad = arith::ConstantOp::create(ib, ib.getZeroAttr(aElt));
    Value elems = vector::TransferReadOp::create(ib, VectorType::get({g}, aElt),
                                                 A, ValueRange{row, k}, pad,
                                                 ArrayRef<bool>{inBounds});
    Value word = vector::BitCastOp::create(
        ib, VectorType::get({1}, ib.getI32Type()), elems);
    Value all = vector::BroadcastOp::create(ib, words, word);
    return vector::BitCastOp::create(ib, groups, all);
  };
  auto step = [&](ImplicitLocOpBuilder &ib, Value p, ValueRange in,
                  bool inBounds) {
    SmallVector<Value> bs, out;
    VectorType panelVec = g > 1 ? words : acc;
    Value pad = arith::ConstantOp::create(
        ib, ib.getZeroAttr(panelVec.getElementType()));
    for (int64_t v = 0; v < vecs; ++v) {
      Value col = arith::ConstantIndexOp::create(ib, v * L);
      Value bv = vector::TransferReadOp::create(
          ib, panelVec, panel, ValueRange{p, col}, pad, ArrayRef<bool>{true});
      if (g > 1)
        bv = vector::BitCastOp::create(ib, groups, bv);
      bs.push_back(bv);
    }
    for (int64_t i = 0; i < mr; ++i) {
      Value a = broadcastA(ib, plus(ib, m0, i), p, inBounds);
      for (int64_t v = 0; v < vecs; ++v) {
        Value prev = in[i * vecs + v];
        Value next;
        if (vnni())
          next = dpbusd(ib, prev, /*u=*/bs[v], /*s=*/a);
        else if (bf16Dot())
          next = dpbf16(ib, prev, a, bs[v]);
        else if (c.ukernel == CpuMicroKernel::i8_pmaddwd)
          next = dot(ib, prev, a, bs[v]);
        else
          next = vector::FMAOp::create(ib, a, bs[v], prev);
        out.push_back(next);
      }
    }
    return out;
  };
  // Panel rows whose A elements are all inside K, then (K % g) the last
  // group, read with zero padding.
  const int64_t pIn = kLen / g, P = (kLen + g - 1) / g;
  SmallVector<Value> init;
  for (int64_t i = 0; i < mr; ++i) {
    Value r;
    if (partial)
      r = arith::SubIOp::create(b, plus(b, m0, i), mb);
    for (int64_t v = 0; v < vecs; ++v) {
      if (!partial) {
        init.push_back(zeroAcc(b));
        continue;
      }
      Value col = arith::ConstantIndexOp::create(b, v * L);
      Value pad = arith::ConstantOp::create(b, b.getZeroAttr(elt32));
      init.push_back(vector::TransferReadOp::create(
          b, acc, partial, ValueRange{r, col}, pad, ArrayRef<bool>{true}));
    }
  }
  SmallVector<Value> accs = foldSteps(b, init, pIn, 1, P > pIn, step);
  if (!last) {
    // A K block before the last: C is the partial-sum buffer.
    for (int64_t i = 0; i < mr; ++i) {
      Value r = arith::SubIOp::create(b, plus(b, m0, i), mb);
      for (int64_t v = 0; v < vecs; ++v) {
        Value col = arith::ConstantIndexOp::create(b, v * L);
        C = vector::TransferWriteOp::create(b, accs[i * vecs + v], C,
                                            ValueRange{r, col},
                                            ArrayRef<bool>{true})
                .getResult();
      }
    }
    return C;
  }

  Type outElt = epilogue
                    ? cast<RankedTensorType>(dest.getType()).getElementType()
                    : accElt(b);
  for (int64_t i = 0; i < mr; ++i) {
    Value row = plus(b, m0, i);
    Value corr;
    if (vnni())
      corr = vector::BroadcastOp::create(b, acc, biasCorrection(b, row));
    for (int64_t v = 0; v < vecs; ++v) {
      Value s = accs[i * vecs + v];
      if (vnni())
        s = arith::SubIOp::create(b, s, corr);
      Value col = plus(b, n0, v * L);
      if (!zeroInit) {
        Value pad = arith::ConstantOp::create(b, b.getZeroAttr(elt32));
        Value old = vector::TransferReadOp::create(
            b, acc, accInit, ValueRange{row, col}, pad, ArrayRef<bool>{true});
        s = ints() ? Value(arith::AddIOp::create(b, old, s))
                   : Value(arith::AddFOp::create(b, old, s));
      }
      if (epilogue) {
        Value e = emitEpilogueVectorAt(b, b.getLoc(), epilogue, epilogueAcc, s,
                                       row, col);
        if (!e) {
          // Lane by lane where the body has no vector form.
          SmallVector<Value> vals;
          for (int64_t l = 0; l < L; ++l) {
            Value x = vector::ExtractOp::create(b, s, ArrayRef<int64_t>{l});
            vals.push_back(applyEpilogue(b, x, row, plus(b, col, l)));
          }
          e = vector::FromElementsOp::create(b, VectorType::get({L}, outElt),
                                             vals);
        }
        s = e;
      }
      C = vector::TransferWriteOp::create(b, s, C, ValueRange{row, col},
                                          ArrayRef<bool>{true})
              .getResult();
    }
  }
  return C;
}

Value GemmBuilder::innerColumns(ImplicitLocOpBuilder &b, Value C, Value n0,
                                int64_t cols, Value mb, Value mEnd,
                                bool oneRow) const {
  // The w <= kInnerNrInOuter columns at n.
  auto columns = [&](ImplicitLocOpBuilder &ib, Value Ci, Value n, int64_t w) {
    if (!oneRow)
      return nTile(ib, Ci, n, w, mb, mEnd);
    // One row: B's producer in registers, or B's rows as stored.
    Value bt = bProducer ? Value() : bTile(ib, n, w);
    return oneRowBuilder().microKernel(ib, Ci, bt, mb, n, 1, w);
  };
  // Whole groups in a loop: one copy of the kernel (and of B's decoder)
  // rather than one per group; an AVX-512 outer tile has 64 or 96 columns.
  const int64_t groups = cols / kInnerNrInOuter;
  const int64_t whole = groups * kInnerNrInOuter;
  if (groups > 1) {
    auto loop = scf::ForOp::create(
        b, n0, plus(b, n0, whole),
        arith::ConstantIndexOp::create(b, kInnerNrInOuter), ValueRange{C},
        [&](OpBuilder &nb, Location loc, Value n, ValueRange iter) {
          ImplicitLocOpBuilder ib(loc, nb);
          scf::YieldOp::create(ib, columns(ib, iter[0], n, kInnerNrInOuter));
        });
    C = loop.getResult(0);
  } else if (groups == 1) {
    C = columns(b, C, n0, kInnerNrInOuter);
  }
  if (cols > whole)
    C = columns(b, C, plus(b, n0, whole), cols - whole);
  return C;
}

Value GemmBuilder::outerTile(ImplicitLocOpBuilder &b, Value C, Value n0,
                             int64_t vecs, Value mb, Value mEnd) const {
  auto packed = [&](ImplicitLocOpBuilder &ib) {
    // B's decoder runs on the way into the panel (no decoded tile).
    const int64_t cols = vecs * lanes();
    Value bt = bProducer ? Value() : bTile(ib, n0, cols);
    // K blocks before the last one (if K is blocked) sum into a zeroed
    // [mc, cols] buffer, each with its own panel.
    const int64_t kb = kBlock(), kLast = (m.k - 1) / kb * kb;
    Value partial;
    if (kLast > 0) {
      Value &buf = partialBuffers[cols];
      if (!buf)
        buf = emptyBeforeNest({c.mc, cols}, accElt(ib));
      Value zero = arith::ConstantOp::create(ib, ib.getZeroAttr(accElt(ib)));
      Value zeroed =
          linalg::FillOp::create(ib, ValueRange{zero}, ValueRange{buf})
              .getResult(0);
      Value lb = arith::ConstantIndexOp::create(ib, 0);
      Value ub = arith::ConstantIndexOp::create(ib, kLast);
      Value step = arith::ConstantIndexOp::create(ib, kb);
      auto blocks = scf::ForOp::create(
          ib, lb, ub, step, ValueRange{zeroed},
          [&](OpBuilder &nb, Location loc, Value k0, ValueRange iter) {
            ImplicitLocOpBuilder kb2(loc, nb);
            Value panel = packPanel(kb2, n0, bt, vecs, k0, kb);
            Value sums = mTiles(kb2, iter[0], mb, mEnd, c.mr,
                                [&](ImplicitLocOpBuilder &tb, Value Pi,
                                    Value m0, int64_t rows) {
                                  return outerKernel(
                                      tb, Pi, panel, m0, n0, rows, vecs, k0, kb,
                                      /*partial=*/Pi, mb, /*last=*/false);
                                });
            scf::YieldOp::create(kb2, sums);
          });
      partial = blocks.getResult(0);
    }
    Value kLastC = arith::ConstantIndexOp::create(ib, kLast);
    Value panel = packPanel(ib, n0, bt, vecs, kLastC, m.k - kLast);
    return mTiles(
        ib, C, mb, mEnd, c.mr,
        [&](ImplicitLocOpBuilder &tb, Value Ci, Value m0, int64_t rows) {
          return outerKernel(tb, Ci, panel, m0, n0, rows, vecs, kLastC,
                             m.k - kLast, partial, mb, /*last=*/true);
        });
  };
  if (c.decode == CpuDecode::panel)
    return packed(b);
  // A one-row call (M = 1) uses each element of B once: packing it would
  // cost more than the products; the inner form reads B (or decodes it in
  // registers) directly.
  Value single = singleRowCall(b);
  auto branch = scf::IfOp::create(
      b, single,
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, innerColumns(ib, C, n0, vecs * lanes(), mb,
                                              mEnd, /*oneRow=*/true));
      },
      [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, packed(ib));
      });
  return branch.getResult(0);
}
