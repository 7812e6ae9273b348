//===- GemmBuilder.h - one register-blocked vector GEMM ---------*- C++ -*-===//
//
// The builder of comfyquant-cpu-vectorize-gemm: the whole GEMM and the pass
// (VectorizeGemm.cpp), the inner micro-kernel and the N and M tiles
// (GemmInnerForm.cpp), the K-major panel and the outer-product form
// (GemmOuterForm.cpp).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_LIB_CODEGEN_CPU_GEMMBUILDER_H
#define COMFYQUANT_LIB_CODEGEN_CPU_GEMMBUILDER_H

#include "GemmConfig.h"
#include "GemmDecoderTables.h"

#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant::detail {

class GemmBuilder {
public:
  GemmBuilder(linalg::GenericOp op, const GemmMatch &m, const GemmConfig &c)
      : op(op), m(m), c(c) {}

  LogicalResult build(RewriterBase &rw);

private:
  /// Finds A, B, the destination, the epilogue and B's decoder, and builds
  /// the decoder tables the configuration reads.
  LogicalResult analyzeOperands(RewriterBase &rw);
  /// The f32 FMA kernels multiply f32 and the outer pmaddwd kernel i16
  /// pairs: A is widened once per call, not at every use.
  void widenA(ImplicitLocOpBuilder &b);
  /// Columns per full N tile: nr vectors of lanes (outer form) or nr
  /// columns.
  int64_t tileWidth() const { return outer() ? c.nr * lanes() : c.nr; }
  /// One full N tile at n0 of the M block [mb, mEnd).
  Value fullTile(ImplicitLocOpBuilder &b, Value C, Value n0, Value mb,
                 Value mEnd);
  /// An M block's columns [colBegin, colEnd): full tiles, then single
  /// vectors (outer form), then single columns.
  Value columnRangeBlock(ImplicitLocOpBuilder &b, Value C, Value mb,
                         Value mEnd);
  /// An M block's N columns: full tiles, then the tail.
  Value allColumnsBlock(ImplicitLocOpBuilder &b, Value C, Value mb,
                        Value mEnd);

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

  /// VNNI: Σk A[row, k] of a row of the current M block.
  Value aRowSum(ImplicitLocOpBuilder &b, Value row) const {
    Value at = arith::SubIOp::create(b, row, blockStart);
    return tensor::ExtractOp::create(b, aSums, ValueRange{at});
  }
  /// VNNI: 128·Σk A[row, k], the bias of B's unsigned operand to subtract.
  Value biasCorrection(ImplicitLocOpBuilder &b, Value row) const {
    Value c128 = arith::ConstantOp::create(b, b.getI32IntegerAttr(128));
    return arith::MulIOp::create(b, c128, aRowSum(b, row));
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

  /// VNNI: Σ A[row, k] over the K steps `steps` (their starts, and whether
  /// each is whole, not a padded tail), as vpdpbusd of ones and A.
  Value aSumOver(ImplicitLocOpBuilder &b, Value row,
                 ArrayRef<std::pair<int64_t, bool>> steps) const;

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

  /// row = i8_planes, B decoded in registers: the micro-kernel's sums over
  /// K, its whole steps of 2·kv elements taken as two nibble planes (see
  /// NibblePlanes.h), the rest (under 2·kv) by `step`. VNNI: B's planes
  /// carry nibblePlaneBias, not 128, and `corrections` gets each row's
  /// bias correction in place of biasCorrection's.
  SmallVector<Value> planeSums(ImplicitLocOpBuilder &b, Value m0, Value n0,
                               int64_t mr, int64_t nr, KStep step,
                               SmallVector<Value> &corrections) const;

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

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_LIB_CODEGEN_CPU_GEMMBUILDER_H
