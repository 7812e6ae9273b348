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
#include "GemmConfig.h"

#include "comfyquant/Codegen/CPU/Passes.h"

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

namespace {

class GemmBuilder {
public:
  GemmBuilder(linalg::GenericOp op, const GemmMatch &m, const GemmConfig &c)
      : op(op), m(m), c(c) {}

  LogicalResult build(RewriterBase &rw);

private:
  linalg::GenericOp op;
  GemmMatch m;
  GemmConfig c;
  Value A, B, dest;
  /// The GEMM's own accumulator input (C before the GEMM).
  Value accInit;
  bool zeroInit = false;
  /// An elementwise consumer computed in the micro-kernel's store (the
  /// epilogue: scales, bias, cast), so the accumulator matrix never reaches
  /// memory; `dest` is then its destination.
  linalg::GenericOp epilogue;
  unsigned epilogueAcc = 0;
  linalg::GenericOp bProducer;
  /// B's producer yielding f32 where bProducer narrows an exact f32 to
  /// bf16 (see exactNarrowing): what the f32 kernels multiply, so a one-row
  /// call does not narrow and widen back each element (an AND per vector,
  /// which LLVM cannot prove redundant after a float multiply or a table
  /// read).
  linalg::GenericOp bProducerF32;
  /// B's producer as a lookup of each byte's bf16 in a 256-entry table
  /// (see tabulateByteDecoder), where bProducer is a function of one byte
  /// alone: the bf16 dot kernels read it in registers (two word permutes
  /// per 32 codes), so a one-row call keeps vdpbf16ps, two products per
  /// lane, instead of widening to f32 FMAs.
  linalg::GenericOp bProducerTable;
  /// With bProducerTable, where bProducer narrows a product X · S of a
  /// function X of the byte (an FP8 code) and a scale S uniform over each
  /// kv-vector (an MXFP8 block scale, blocks a multiple of kv): a copy of
  /// bProducer yielding S. The table then holds X, and the register-decoding
  /// kernels multiply each vector's dot product by S (vdpbf16ps into zero,
  /// then an FMA): B's scale is factored out of the block's sum.
  linalg::GenericOp bScale;
  /// row = bf16_dot: the f32 FMA kernel's one-row calls take vdpbf16ps on
  /// B's table, reading A as stored (`aStored`, not widened).
  bool rowBF16Dot = false;
  Value aStored;
  /// tensor.empty [rows, K] for B's decoded tiles, by tile rows, and (outer
  /// form) [mc, columns] partial sums of K blocks, by columns: made on first
  /// use before `anchor`, the nest's first op, so every tile reuses one
  /// buffer.
  mutable llvm::SmallDenseMap<int64_t, Value> decodeBuffers, partialBuffers;
  /// Outer form: [rows, columns] panels, by (rows, columns), made alike.
  mutable llvm::SmallDenseMap<std::pair<int64_t, int64_t>, Value> panelBuffers;
  Operation *anchor = nullptr;
  /// The columns [colBegin, colEnd) to compute, when the function's
  /// column-range arguments apply to this GEMM (it writes y directly).
  Value colBegin, colEnd;
  /// VNNI: Σk A[m, k] of the rows of the current M block (tensor<mc x i32>,
  /// indexed by m - blockStart), set while that block's nest is built.
  mutable Value aSums, blockStart;

  /// The function's column-range arguments, if the nest's result is what
  /// the function materializes into y.
  std::pair<Value, Value> columnRange(Operation *producerOfY) const;
  bool ints() const { return m.kind == GemmMatch::Kind::I8I8I32; }
  bool outer() const { return c.isOuter(); }
  /// K elements per 32-bit lane of the dot product: 4 bytes (VNNI), 2 bf16
  /// values, else 1.
  int64_t group() const {
    if (vnni())
      return 4;
    return bf16Dot() || c.ukernel == CpuMicroKernel::i8_pmaddwd ? 2 : 1;
  }
  /// Outer form: columns of C per accumulator vector (the i32 or f32 lanes
  /// of one register).
  int64_t lanes() const { return c.kv / group(); }
  /// Outer form: K elements per K block (all of K without blocking).
  int64_t kBlock() const { return c.kc > 0 && c.kc < m.k ? c.kc : m.k; }
  /// The inner kernel's tile where the outer form falls back to it (column
  /// tails, one-row calls): the outer tile is too wide for K-vector
  /// accumulators.
  int64_t innerMr() const {
    return outer() ? std::min<int64_t>(c.mr, 4) : c.mr;
  }
  static constexpr int64_t kInnerNrInOuter = 4;
  bool vnni() const {
    return c.ukernel == CpuMicroKernel::i8_vnni ||
           c.ukernel == CpuMicroKernel::i8_vnni_emulated;
  }
  bool bf16Dot() const {
    return c.ukernel == CpuMicroKernel::bf16_dot ||
           c.ukernel == CpuMicroKernel::bf16_dot_emulated;
  }

  /// Whether the call has one row (M = 1), the case the one-row kernels
  /// serve. Not "this M block has one row": a row's summation order must
  /// not depend on where an M block (or a thread's share of rows) ends.
  Value singleRowCall(ImplicitLocOpBuilder &b) const {
    Value rows = tensor::DimOp::create(b, A, 0);
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, rows,
                                 arith::ConstantIndexOp::create(b, 1));
  }

  /// The builder of one-row calls: the strategy's `row` micro-kernel.
  GemmBuilder oneRowBuilder() const {
    GemmBuilder r = *this;
    if (c.row == CpuRowKernel::f32_fma) {
      r.c.ukernel = CpuMicroKernel::f32_fma;
      r.c.kv = c.kv / 2;
    } else if (c.row == CpuRowKernel::bf16_dot) {
      r.c.ukernel = CpuMicroKernel::bf16_dot;
      r.c.kv = c.kv * 2;
      r.A = aStored;
    }
    return r;
  }

  Type accElt(ImplicitLocOpBuilder &b) const {
    return ints() ? Type(b.getI32Type()) : Type(b.getF32Type());
  }
  VectorType accType(ImplicitLocOpBuilder &b) const {
    int64_t lanes = c.kv;
    if (c.ukernel == CpuMicroKernel::i8_pmaddwd)
      lanes = c.kv / 2;
    else
      lanes = c.kv / group();
    return VectorType::get({lanes}, accElt(b));
  }

  /// base + i (base itself for i = 0).
  static Value plus(ImplicitLocOpBuilder &b, Value base, int64_t i) {
    if (i == 0)
      return base;
    return arith::AddIOp::create(b, base, arith::ConstantIndexOp::create(b, i));
  }

  /// VNNI: 128·Σk A[row, k], the bias of B's unsigned operand to subtract.
  Value biasCorrection(ImplicitLocOpBuilder &b, Value row) const {
    Value at = arith::SubIOp::create(b, row, blockStart);
    Value sum = tensor::ExtractOp::create(b, aSums, ValueRange{at});
    Value c128 = arith::ConstantOp::create(b, b.getI32IntegerAttr(128));
    return arith::MulIOp::create(b, c128, sum);
  }

  Value zeroAcc(ImplicitLocOpBuilder &b) const {
    VectorType t = accType(b);
    return arith::ConstantOp::create(b, t, b.getZeroAttr(t));
  }

  Value readRow(ImplicitLocOpBuilder &b, Value src, Value row, Value col,
                bool inBounds) const {
    Type elt = cast<RankedTensorType>(src.getType()).getElementType();
    auto vt = VectorType::get({c.kv}, elt);
    Value pad = arith::ConstantOp::create(b, b.getZeroAttr(elt));
    return vector::TransferReadOp::create(b, vt, src, ValueRange{row, col}, pad,
                                          ArrayRef<bool>{inBounds});
  }

  Value intrinsic(ImplicitLocOpBuilder &b, StringRef name, Type result,
                  ValueRange args) const {
    return intrinsicPlaceholder(b, b.getLoc(), name, result, args);
  }

  /// vpdpbusd semantics: acc[i] += Σ_{j<4} zext(u[4i+j]) · sext(s[4i+j]).
  Value dpbusd(ImplicitLocOpBuilder &b, Value acc, Value u, Value s) const {
    if (c.ukernel == CpuMicroKernel::i8_vnni)
      return intrinsic(b, "llvm.x86.avx512.vpdpbusd.512", acc.getType(),
                       ValueRange{acc, u, s});
    auto wide = VectorType::get({c.kv}, b.getI32Type());
    Value uWide = arith::ExtUIOp::create(b, wide, u);
    Value sWide = arith::ExtSIOp::create(b, wide, s);
    Value p = arith::MulIOp::create(b, uWide, sWide);
    return addGroups(b, acc, p, {0, 1, 2, 3});
  }

  /// The emulated dot products' sums: acc[i] + p[g·i + j] for each j of
  /// `order` in turn (g = its size), one strided shuffle per j.
  Value addGroups(ImplicitLocOpBuilder &b, Value acc, Value p,
                  ArrayRef<int64_t> order) const {
    const int64_t g = order.size();
    const bool isFloat = isa<FloatType>(getElementTypeOrSelf(acc.getType()));
    Value sum = acc;
    for (int64_t j : order) {
      SmallVector<int64_t> mask;
      for (int64_t i = 0; i < c.kv / g; ++i)
        mask.push_back(g * i + j);
      Value lanes = vector::ShuffleOp::create(b, p, p, mask);
      sum = isFloat ? Value(arith::AddFOp::create(b, sum, lanes))
                    : Value(arith::AddIOp::create(b, sum, lanes));
    }
    return sum;
  }

  /// vdpbf16ps semantics: acc[i] += f32(a[2i+1])·f32(b[2i+1]), then
  /// += f32(a[2i])·f32(b[2i]) (each product exact).
  Value dpbf16(ImplicitLocOpBuilder &b, Value acc, Value x, Value y) const {
    if (c.ukernel == CpuMicroKernel::bf16_dot)
      return intrinsic(b, "llvm.x86.avx512bf16.dpbf16ps.512", acc.getType(),
                       ValueRange{acc, x, y});
    auto wide = VectorType::get({c.kv}, b.getF32Type());
    Value xw = arith::ExtFOp::create(b, wide, x);
    Value yw = arith::ExtFOp::create(b, wide, y);
    Value p = arith::MulFOp::create(b, xw, yw);
    return addGroups(b, acc, p, {1, 0});
  }

  /// A loaded A (isA) or B vector in the form the micro-kernel multiplies:
  /// widened to f32 (f32-fma), sign-extended to i16 (pmaddwd) or i32
  /// (generic), or, for B under VNNI, biased to unsigned (b ^ 0x80 =
  /// b + 128); bf16 pairs as they are. Done once per loaded vector, not per
  /// accumulator.
  Value prepare(ImplicitLocOpBuilder &b, Value v, bool isA) const {
    auto type = cast<VectorType>(v.getType());
    if (bf16Dot())
      return v;
    if (c.ukernel == CpuMicroKernel::f32_fma) {
      if (type.getElementType().isF32())
        return v;
      return arith::ExtFOp::create(b, type.clone(b.getF32Type()), v);
    }
    if (c.ukernel == CpuMicroKernel::i8_pmaddwd)
      return type.getElementType().isInteger(16)
                 ? v
                 : Value(arith::ExtSIOp::create(b, type.clone(b.getI16Type()),
                                                v));
    if (c.ukernel == CpuMicroKernel::i8_generic)
      return arith::ExtSIOp::create(b, type.clone(b.getI32Type()), v);
    if (isA)
      return v;
    Value bias = arith::ConstantOp::create(
        b, type,
        DenseElementsAttr::get(cast<ShapedType>(type),
                               b.getIntegerAttr(b.getI8Type(), -128)));
    return arith::XOrIOp::create(b, v, bias);
  }

  /// One micro-kernel step on prepared A and B vectors.
  Value dot(ImplicitLocOpBuilder &b, Value acc, Value a, Value bv) const {
    if (c.ukernel == CpuMicroKernel::f32_fma)
      return vector::FMAOp::create(b, a, bv, acc);
    if (c.ukernel == CpuMicroKernel::i8_generic)
      return arith::AddIOp::create(b, acc, arith::MulIOp::create(b, a, bv));
    if (c.ukernel == CpuMicroKernel::i8_pmaddwd) {
      StringRef name = c.kv == 32 ? "llvm.x86.avx512.pmaddw.d.512"
                                  : "llvm.x86.avx2.pmadd.wd";
      Value p = intrinsic(b, name, acc.getType(), ValueRange{a, bv});
      return arith::AddIOp::create(b, acc, p);
    }
    if (bf16Dot())
      return dpbf16(b, acc, a, bv);
    return dpbusd(b, acc, /*u=*/bv, /*s=*/a);
  }

  Value reduce(ImplicitLocOpBuilder &b, Value acc) const {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD, acc);
  }

  using KStep = function_ref<SmallVector<Value>(
      ImplicitLocOpBuilder &, Value k0, ValueRange acc, bool inBounds)>;
  /// Folds `step` over [0, end) in steps of `stride` (in bounds), then, if
  /// `tail`, once more at `end` with padding; returns the accumulators.
  static SmallVector<Value> foldSteps(ImplicitLocOpBuilder &b,
                                      SmallVector<Value> accs, int64_t end,
                                      int64_t stride, bool tail, KStep step);
  /// foldSteps over K: full kv steps, then one padded step for a K tail.
  SmallVector<Value> kLoop(ImplicitLocOpBuilder &b, SmallVector<Value> init,
                           KStep step) const {
    const int64_t kFull = m.k - m.k % c.kv;
    return foldSteps(b, std::move(init), kFull, c.kv, m.k % c.kv != 0, step);
  }

  /// Σk A[m, k] for the rows [mb, mEnd) of an M block (VNNI bias
  /// correction), as a tensor<mc x i32> indexed by m - mb.
  Value aRowSums(ImplicitLocOpBuilder &b, Value mb, Value mEnd) const;

  /// The epilogue's body at (row, col) with accumulator value `acc`.
  Value applyEpilogue(ImplicitLocOpBuilder &b, Value acc, Value row,
                      Value col) const;

  /// The single elementwise consumer that can be computed per element.
  static linalg::GenericOp matchEpilogue(linalg::GenericOp gemm,
                                         unsigned &accOperand);

  /// Row j of the B tile at K offset k0 as a kv-vector: read from the
  /// decoded tile `bt`, or, with no `bt` (one-row calls), B's producer
  /// evaluated for just these kv elements (vectorized later by
  /// comfyquant-cpu-vectorize-elementwise; the decoded vector is forwarded
  /// to the FMA and never stored).
  /// With `jBase`, the row is jBase + j.
  /// With `registerKernel` (a micro-kernel decoding B in registers, not a
  /// panel), B's table copy (bProducerTable) is read, bScale applied by the
  /// caller.
  Value bRow(ImplicitLocOpBuilder &b, Value bt, Value n0, int64_t j, Value k0,
             bool inBounds, Value jBase = Value(),
             bool registerKernel = false) const;

  /// A tensor.empty made before the nest (see decodeBuffers).
  Value emptyBeforeNest(ArrayRef<int64_t> shape, Type elt) const;
  Value decodeBuffer(int64_t rows) const;

  /// B's rows [n0, n0 + rows) as a [rows, K] tensor: a slice of B, or B's
  /// elementwise producer computed for the slice into a reused buffer.
  Value bTile(ImplicitLocOpBuilder &b, Value n0, int64_t rows) const;

  using MTile = function_ref<Value(ImplicitLocOpBuilder &, Value C, Value m0,
                                   int64_t rows)>;
  /// `tile` over [mb, mEnd): full mr-row tiles, then the rest in tiles of
  /// the powers of two below mr.
  Value mTiles(ImplicitLocOpBuilder &b, Value C, Value mb, Value mEnd,
               int64_t mr, MTile tile) const;

  /// Outer form: the columns [n0, n0 + vecs·lanes) of B over the K range
  /// [kBegin, kBegin + kLen) packed K-major (⌈kLen / group⌉ rows of 32-bit
  /// groups), read from `bt` ([vecs·lanes, K]) or, without it, decoded by
  /// B's producer in registers on the way. A range ending inside a kv step
  /// must end at K (its tail is read with zero padding).
  Value packPanel(ImplicitLocOpBuilder &b, Value n0, Value bt, int64_t vecs,
                  Value kBegin, int64_t kLen) const;
  /// Outer form: the mr x (vecs·lanes) tile at (m0, n0) of C, over the K
  /// range of `panel`. The accumulators start at zero or, with `partial`,
  /// at its rows m0 - mb (the sums of the K blocks before); the last K
  /// block applies the epilogue and writes C, the others write their sums
  /// into C, which is then the partial-sum buffer.
  Value outerKernel(ImplicitLocOpBuilder &b, Value C, Value panel, Value m0,
                    Value n0, int64_t mr, int64_t vecs, Value kBegin,
                    int64_t kLen, Value partial, Value mb, bool last) const;
  /// Outer form: the columns [n0, n0 + vecs·lanes) of the rows [mb, mEnd).
  Value outerTile(ImplicitLocOpBuilder &b, Value C, Value n0, int64_t vecs,
                  Value mb, Value mEnd) const;
  /// The inner form over `cols` static columns, kInnerNrInOuter at a time.
  Value innerColumns(ImplicitLocOpBuilder &b, Value C, Value n0, int64_t cols,
                     Value mb, Value mEnd, bool oneRow) const;

  /// The mr x nr tile at (m0, n0) of C.
  Value microKernel(ImplicitLocOpBuilder &b, Value C, Value bt, Value m0,
                    Value n0, int64_t mr, int64_t nr) const;

  /// All M rows of [mb, mEnd) for the N tile at n0 (nr static).
  Value nTile(ImplicitLocOpBuilder &b, Value C, Value n0, int64_t nr, Value mb,
              Value mEnd) const;
  /// nTile with B's tile (decoded once, if B has a producer) in a buffer.
  Value bufferedTile(ImplicitLocOpBuilder &b, Value C, Value n0, int64_t nr,
                     Value mb, Value mEnd) const;
};

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

/// The f32 `x` of a value yielded as bitcast<bf16>(trunci<i16>(shrui(
/// bitcast<i32>(x), 16))): the high half of an f32's bits, the narrowing
/// convert-comfyquant-to-linalg gives decoded values that are bf16s exactly
/// (FP8 and E2M1 codes, E2M1 x E4M3, FP8 x E8M0; Emitter::exactBF16).
/// Null for anything else.
static Value exactNarrowing(Value v) {
  auto toBf16 = v.getDefiningOp<arith::BitcastOp>();
  if (!toBf16 || !toBf16.getType().isBF16())
    return {};
  auto half = toBf16.getIn().getDefiningOp<arith::TruncIOp>();
  if (!half || !half.getType().isInteger(16))
    return {};
  auto high = half.getIn().getDefiningOp<arith::ShRUIOp>();
  APInt shift;
  if (!high || !high.getType().isInteger(32) ||
      !matchPattern(high.getRhs(), m_ConstantInt(&shift)) || shift != 16)
    return {};
  auto bits = high.getLhs().getDefiningOp<arith::BitcastOp>();
  if (!bits || !bits.getIn().getType().isF32())
    return {};
  return bits.getIn();
}

/// The f32 that `producer` (elementwise, one init, whose block argument is
/// unused: a copy may change its type) yields narrowed exactly to bf16
/// (exactNarrowing), or null.
static Value producerNarrowedF32(linalg::GenericOp producer) {
  if (producer.getNumDpsInits() != 1)
    return {};
  Block &body = producer.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (!body.getArgument(body.getNumArguments() - 1).use_empty())
    return {};
  return exactNarrowing(yield.getOperand(0));
}

/// A copy of `producer` (elementwise, its init's block argument unused)
/// yielding `v`, an f32 of its body, beside it.
static linalg::GenericOp copyYieldingF32(RewriterBase &rw,
                                         linalg::GenericOp producer, Value v) {
  OpBuilder::InsertionGuard guard(rw);
  rw.setInsertionPoint(producer);
  Location loc = producer.getLoc();
  Block &body = producer.getRegion().front();
  auto type = cast<RankedTensorType>(producer->getResult(0).getType())
                  .clone(rw.getF32Type());
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(rw, loc, producer.getDpsInits()[0]);
  Value init = tensor::EmptyOp::create(rw, loc, sizes, rw.getF32Type());
  return linalg::GenericOp::create(
      rw, loc, TypeRange{type}, producer.getDpsInputs(), ValueRange{init},
      producer.getIndexingMapsArray(), producer.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location, ValueRange args) {
        IRMapping map;
        map.map(body.getArguments(), args);
        for (Operation &op : body.without_terminator())
          nb.clone(op, map);
        linalg::YieldOp::create(nb, loc, map.lookup(v));
      });
}

/// A copy of `producer` (elementwise, one bf16 result) that yields the f32
/// its body narrows exactly, or null. Made beside the producer; unused
/// copies are dead code.
static linalg::GenericOp widenExactNarrowing(RewriterBase &rw,
                                             linalg::GenericOp producer) {
  Value wide = producerNarrowedF32(producer);
  if (!wide)
    return {};
  return copyYieldingF32(rw, producer, wide);
}

/// An elementwise generic beside `producer` (its byte input first, its
/// init) reading `entries`, the bf16s of the 256 codes, at each byte.
static linalg::GenericOp byteTableLookup(RewriterBase &rw,
                                         linalg::GenericOp producer,
                                         ArrayRef<Attribute> entries) {
  OpBuilder::InsertionGuard guard(rw);
  rw.setInsertionPoint(producer);
  Location loc = producer.getLoc();
  auto tableType = RankedTensorType::get({256}, rw.getBF16Type());
  Value table = arith::ConstantOp::create(
      rw, loc, tableType, DenseElementsAttr::get(tableType, entries));
  SmallVector<AffineMap> maps = {producer.getIndexingMapsArray().front(),
                                 producer.getIndexingMapsArray().back()};
  return linalg::GenericOp::create(
      rw, loc, producer->getResultTypes(), producer.getDpsInputs().front(),
      producer.getDpsInits(), maps, producer.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value code = arith::ExtUIOp::create(nb, l, nb.getI32Type(), args[0]);
        Value index =
            arith::IndexCastOp::create(nb, l, nb.getIndexType(), code);
        Value entry = tensor::ExtractOp::create(nb, l, table, index);
        linalg::YieldOp::create(nb, l, entry);
      });
}

/// The bf16s of `producer` (elementwise, one i8 input, one bf16 result of
/// that byte alone and constants) at each of the 256 codes; none otherwise.
static std::optional<SmallVector<Attribute>>
byteTableEntries(linalg::GenericOp producer) {
  if (producer.getNumDpsInputs() != 1 || producer.getNumDpsInits() != 1)
    return std::nullopt;
  Block &body = producer.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Value out = yield.getOperand(0);
  if (!out.getType().isBF16() || !body.getArgument(1).use_empty())
    return std::nullopt;
  SmallVector<Attribute> values = evaluateAtEveryCode(producer, out, 0);
  if (values.size() != 256 || !llvm::all_of(values, [](Attribute a) {
        auto f = dyn_cast<FloatAttr>(a);
        return f && f.getType().isBF16();
      }))
    return std::nullopt;
  return values;
}

/// A copy of `producer` (elementwise, one i8 input, one bf16 result of
/// that byte alone and constants) reading its result at each of the 256
/// codes from a constant table, or null. Made beside the producer; unused
/// copies are dead code.
static linalg::GenericOp tabulateByteDecoder(RewriterBase &rw,
                                             linalg::GenericOp producer) {
  std::optional<SmallVector<Attribute>> entries = byteTableEntries(producer);
  if (!entries)
    return {};
  return byteTableLookup(rw, producer, *entries);
}

/// The read of an f32 [R, C] table defined outside `producer`'s body whose
/// exact narrowing `producer` yields; null otherwise.
static tensor::ExtractOp narrowedTableRead(linalg::GenericOp producer) {
  Value wide = producerNarrowedF32(producer);
  auto read = wide ? wide.getDefiningOp<tensor::ExtractOp>() : nullptr;
  if (!read)
    return {};
  Value table = read.getTensor();
  auto tableType = dyn_cast<RankedTensorType>(table.getType());
  if (!tableType || tableType.getRank() != 2 || !tableType.hasStaticShape() ||
      !tableType.getElementType().isF32() ||
      producer->isAncestor(table.getParentBlock()->getParentOp()))
    return {};
  return read;
}

/// For a producer (elementwise, one bf16 result) yielding the exact
/// narrowing (exactNarrowing) of a read of an f32 [R, C] table defined
/// outside its body (comfyquant-cpu-tabulate-decoders' E2M1 x E4M3 rows of
/// NVFP4): a copy reading the same entry of the table narrowed once (a
/// generic beside the table), so a bf16 kernel reads bf16 rows. Null
/// otherwise.
static linalg::GenericOp narrowTableRows(RewriterBase &rw,
                                         linalg::GenericOp producer) {
  tensor::ExtractOp read = narrowedTableRead(producer);
  if (!read)
    return {};
  Block &body = producer.getRegion().front();
  Value table = read.getTensor();
  auto tableType = cast<RankedTensorType>(table.getType());
  OpBuilder::InsertionGuard guard(rw);
  rw.setInsertionPointAfterValue(table);
  Location loc = table.getLoc();
  Value empty =
      tensor::EmptyOp::create(rw, loc, tableType.getShape(), rw.getBF16Type());
  auto identity = rw.getMultiDimIdentityMap(2);
  auto narrowed = linalg::GenericOp::create(
      rw, loc, TypeRange{empty.getType()}, ValueRange{table}, ValueRange{empty},
      ArrayRef<AffineMap>{identity, identity},
      SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value bits = arith::BitcastOp::create(nb, l, nb.getI32Type(), args[0]);
        Value sixteen =
            arith::ConstantOp::create(nb, l, nb.getI32IntegerAttr(16));
        Value high = arith::ShRUIOp::create(nb, l, bits, sixteen);
        Value half = arith::TruncIOp::create(nb, l, nb.getI16Type(), high);
        Value bf = arith::BitcastOp::create(nb, l, nb.getBF16Type(), half);
        linalg::YieldOp::create(nb, l, bf);
      });
  Value rows = narrowed.getResult(0);
  rw.setInsertionPoint(producer);
  return linalg::GenericOp::create(
      rw, producer.getLoc(), producer->getResultTypes(),
      producer.getDpsInputs(), producer.getDpsInits(),
      producer.getIndexingMapsArray(), producer.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        IRMapping map;
        map.map(body.getArguments(), args);
        for (Operation &op : body.without_terminator())
          nb.clone(op, map);
        SmallVector<Value> at;
        for (Value i : read.getIndices())
          at.push_back(map.lookupOrDefault(i));
        Value entry = tensor::ExtractOp::create(nb, l, rows, at);
        linalg::YieldOp::create(nb, l, entry);
      });
}

/// Whether `v` (in `producer`'s body) is the same at every element of a
/// kv-vector along K that starts at a multiple of kv: it reads the K index
/// (loop 1) only as k floordiv G (arith.divui), G a multiple of kv, and not
/// the byte (argument 0).
static bool uniformOverKVectors(linalg::GenericOp producer, Value v,
                                int64_t kv) {
  Block &body = producer.getRegion().front();
  auto blockOfKv = [&](Value divisor) {
    APInt g;
    return matchPattern(divisor, m_ConstantInt(&g)) && g.getSExtValue() > 0 &&
           g.getSExtValue() % kv == 0;
  };
  llvm::SmallPtrSet<Operation *, 16> slice = bodySlice(producer, v);
  auto reads = [&](Value x) {
    return x == v || llvm::any_of(x.getUsers(), [&](Operation *user) {
             return slice.contains(user);
           });
  };
  if (reads(body.getArgument(0)))
    return false;
  // S is evaluated by emitEpilogueAt, which reads operands at maps of loop
  // dims and constants; one S reads must not index K.
  for (OpOperand *in : producer.getDpsInputOperands()) {
    const bool read = in->getOperandNumber() != 0 &&
                      reads(body.getArgument(in->getOperandNumber()));
    for (AffineExpr e : producer.getMatchingIndexingMap(in).getResults())
      if (!isa<AffineDimExpr, AffineConstantExpr>(e) ||
          (read && e.isFunctionOfDim(1)))
        return false;
  }
  for (Operation *op : slice) {
    auto index = dyn_cast<linalg::IndexOp>(op);
    if (!index || index.getDim() != 1)
      continue;
    for (Operation *user : index->getUsers()) {
      auto div = dyn_cast<arith::DivUIOp>(user);
      if (slice.contains(user) &&
          (!div || div.getLhs() != index || !blockOfKv(div.getRhs())))
        return false;
    }
  }
  return true;
}

/// The bf16 table of X and the value S where `producer` (elementwise, its
/// byte first, one bf16 result) narrows exactly (exactNarrowing) a product
/// X · S, X a function of the byte alone that is a bf16 at every code and S
/// uniform over kv-vectors; none when it is not of that form.
static std::optional<std::pair<SmallVector<Attribute>, Value>>
scaledByteTable(linalg::GenericOp producer, int64_t kv) {
  // Loop 1 must be K, as uniformOverKVectors and emitEpilogueAt read it.
  if (producer.getNumDpsInputs() < 1 ||
      !producer.getIndexingMapsArray().back().isIdentity())
    return std::nullopt;
  Value wide = producerNarrowedF32(producer);
  auto product = wide ? wide.getDefiningOp<arith::MulFOp>() : nullptr;
  Block &body = producer.getRegion().front();
  if (!product || !body.getArgument(0).getType().isInteger(8))
    return std::nullopt;
  Builder b(producer.getContext());
  for (auto [x, scale] : {std::pair(product.getLhs(), product.getRhs()),
                          std::pair(product.getRhs(), product.getLhs())}) {
    if (!scale.getType().isF32() || !uniformOverKVectors(producer, scale, kv))
      continue;
    SmallVector<Attribute> values = evaluateAtEveryCode(producer, x, 0);
    SmallVector<Attribute> narrowed;
    for (Attribute a : values) {
      auto f = dyn_cast<FloatAttr>(a);
      if (!f || !f.getType().isF32())
        break;
      APFloat bf = f.getValue();
      bool lost = false;
      bf.convert(APFloat::BFloat(), APFloat::rmTowardZero, &lost);
      if (lost && !f.getValue().isNaN())
        break;
      narrowed.push_back(b.getFloatAttr(b.getBF16Type(), bf));
    }
    if (narrowed.size() == 256)
      return std::pair(std::move(narrowed), scale);
  }
  return std::nullopt;
}

/// For a producer (elementwise, its byte first, one bf16 result) that
/// narrows exactly (exactNarrowing) a product X · S, X a function of the
/// byte alone that is a bf16 at every code and S uniform over kv-vectors:
/// {a table copy yielding bf16(X), a copy yielding S}. Null when it is not
/// of that form.
static std::pair<linalg::GenericOp, linalg::GenericOp>
splitScaledByteDecoder(RewriterBase &rw, linalg::GenericOp producer,
                       int64_t kv) {
  std::optional<std::pair<SmallVector<Attribute>, Value>> found =
      scaledByteTable(producer, kv);
  if (!found)
    return {};
  linalg::GenericOp codes = byteTableLookup(rw, producer, found->first);
  linalg::GenericOp scales = copyYieldingF32(rw, producer, found->second);
  return {codes, scales};
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
      configs.push_back(op->getAttr("comfyquant.gemm"));
    if (!configs.empty())
      getOperation()->setAttr("comfyquant.gemms",
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

bool mlir::comfyquant::detail::decodesThroughTable(linalg::GenericOp producer,
                                                   int64_t kv) {
  return byteTableEntries(producer) || scaledByteTable(producer, kv) ||
         narrowedTableRead(producer);
}
