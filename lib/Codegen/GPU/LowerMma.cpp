//===- LowerMma.cpp - tensor-core ops for one CUDA arch -------------------===//
//
// Kernel formation is the same for every arch; the instructions are not.
// comfyquant.warpgroup_mma becomes wgmma on sm_90a and per-warp mma.sync
// elsewhere. sm_89+ get the FP8 mma.sync as inline PTX (MLIR 22's mma.sync
// ops reject FP8 operands); sm_80/sm_86 convert the codes to f16 exactly
// and issue two m16n8k16 MMAs.
//
// The tiles of a warpgroup_mma are K-major 8 x 16-byte core matrices:
// word (row, w) of a tile (4 bytes, w < 8) is at word (row / 8) * 64 +
// (w / 4) * 32 + (row % 8) * 4 + w % 4. In the m16n8 fragment layouts
// (lane 4g + t) register r of A holds the 4 bytes 4t + 16 (r / 2) of row
// g + 8 (r % 2), register r of B the 4 bytes 4t + 16 r of column g, for
// 8-bit and 16-bit operands alike: warp w's A register r is word
// (2w + r % 2) * 64 + (r / 2) * 32 + 4g + t, fragment j's B register r
// word j * 64 + r * 32 + 4g + t.
//
// K order of the emulation: the 8-bit layout gives lane t, in register r of
// A (and r of B), the K columns 4t + 16 * (r / 2) + [0, 4) (B: 4t + 16r +
// [0, 4)). The f16 m16n8k16 layout gives lane t the columns 2t + [0, 2)
// (registers 0, 1 of A; 0 of B) and 2t + 8 + [0, 2) (registers 2, 3 of A;
// 1 of B). Bytes 0-1 of each 8-bit register go to the first pair, bytes 2-3
// to the second, the low half of K to the first MMA and the high half to
// the second: A and B columns map alike, so every product is taken once.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/GPU/FP4Decode.h"
#include "comfyquant/Codegen/GPU/FP8Decode.h"
#include "comfyquant/Codegen/GPU/GPUCodegen.h"
#include "comfyquant/Codegen/GPU/Passes.h"
#include "comfyquant/Codegen/GPU/ScaleTile.h"
#include "comfyquant/Codegen/GPU/Tcgen05.h"
#include "comfyquant/Codegen/GPU/ThreadIndex.h"
#include "comfyquant/Codegen/GPU/TileLayout.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTGPULOWERMMA
#include "comfyquant/Codegen/GPU/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::gpu_codegen;

namespace {

/// The f16 values of the four FP8 codes in `reg` (vector<4xi8>).
SmallVector<Value> codesToF16(OpBuilder &b, Location loc, Value reg,
                              Type fp8) {
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), reg);
  Value halves = decodeFP8Word(
      b, loc, vector::ExtractOp::create(b, loc, word, 0), fp8);
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(vector::ExtractOp::create(b, loc, halves, i));
  return out;
}

/// Row `r` of a 2-D vector.
Value row(OpBuilder &b, Location loc, Value v, int64_t r) {
  return vector::ExtractOp::create(b, loc, v, r);
}

/// sm_80/sm_86: two exact f16 m16n8k16 MMAs.
Value emulate(OpBuilder &b, Location loc, MmaFP8Op op) {
  SmallVector<SmallVector<Value>> a, bv;
  for (int64_t r = 0; r < 4; ++r)
    a.push_back(codesToF16(b, loc, row(b, loc, op.getA(), r), op.getAType()));
  for (int64_t r = 0; r < 2; ++r)
    bv.push_back(codesToF16(b, loc, row(b, loc, op.getB(), r), op.getBType()));
  auto aType = VectorType::get({4, 2}, b.getF16Type());
  auto bType = VectorType::get({2, 2}, b.getF16Type());
  Value acc = op.getAcc();
  if (!acc)
    acc = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(op.getResult().getType(),
                                       b.getF32FloatAttr(0.0f)));
  for (int64_t half = 0; half < 2; ++half) {
    // 8-bit registers 2*half (row g) and 2*half + 1 (row g + 8).
    const SmallVector<Value> &lo = a[2 * half], &hi = a[2 * half + 1];
    Value fragA = vector::FromElementsOp::create(
        b, loc, aType,
        ValueRange{lo[0], lo[1], hi[0], hi[1], lo[2], lo[3], hi[2], hi[3]});
    const SmallVector<Value> &col = bv[half];
    Value fragB = vector::FromElementsOp::create(
        b, loc, bType, ValueRange{col[0], col[1], col[2], col[3]});
    acc = nvgpu::MmaSyncOp::create(b, loc, fragA, fragB, acc,
                                   ArrayRef<int64_t>{16, 8, 16});
  }
  return acc;
}


/// The 32-bit register holding row `r` of an 8-bit fragment.
Value packed(OpBuilder &b, Location loc, Value v, int64_t r) {
  Value bytes = row(b, loc, v, r);
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), bytes);
  return vector::ExtractOp::create(b, loc, word, 0);
}

/// An f32-accumulating m16n8 mma.sync as inline PTX (`instruction` up to
/// its C operand) on A registers `a` (4), B registers `b` (2) and the
/// accumulator fragment `acc` (vector<2x2xf32>; null: zero): the form of
/// the MMAs MLIR 22's mma.sync ops cannot type (FP8, bf16).
FailureOr<Value> inlineMmaSync(OpBuilder &b, Location loc, Operation *op,
                               StringRef instruction, ArrayRef<Value> aRegs,
                               ArrayRef<Value> bRegs, Value acc,
                               Type resultType) {
  if (acc && matchPattern(acc, m_Constant()) &&
      !matchPattern(acc, m_PosZeroFloat()))
    return op->emitOpError("a constant accumulator other than zero cannot "
                           "be an inline-PTX operand");
  SmallVector<Value> operands(aRegs);
  llvm::append_range(operands, bRegs);
  std::string head = llvm::formatv("{0} {{$0, $1, $2, $3}, {{$4, $5, $6, $7}, "
                                   "{{$8, $9}, ",
                                   instruction);
  std::string ptx;
  // A zero C (none, or a zero constant: the first K step of a kernel whose
  // accumulators start at zero, once a one-step loop is folded) is a
  // register of the asm's own; constant asm operands would become
  // immediates, 'n', which f32 values cannot be.
  if (!acc || matchPattern(acc, m_PosZeroFloat())) {
    ptx = "{\n.reg .f32 zero;\nmov.f32 zero, 0f00000000;\n" + head +
          "{zero, zero, zero, zero};\n}";
  } else {
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t e = 0; e < 2; ++e)
        operands.push_back(vector::ExtractOp::create(
            b, loc, acc, ArrayRef<int64_t>{r, e}));
    ptx = head + "{$10, $11, $12, $13};";
  }
  Type f32 = b.getF32Type();
  auto mma = NVVM::InlinePtxOp::create(b, loc, TypeRange{f32, f32, f32, f32},
                                       operands, ValueRange{},
                                       b.getStringAttr(ptx), Value());
  Value result =
      vector::FromElementsOp::create(b, loc, resultType, mma.getResults());
  return result;
}

/// sm_89+: the FP8 mma.sync itself.
FailureOr<Value> native(OpBuilder &b, Location loc, MmaFP8Op op) {
  SmallVector<Value> aRegs, bRegs;
  for (int64_t r = 0; r < 4; ++r)
    aRegs.push_back(packed(b, loc, op.getA(), r));
  for (int64_t r = 0; r < 2; ++r)
    bRegs.push_back(packed(b, loc, op.getB(), r));
  std::string instruction = llvm::formatv(
      "mma.sync.aligned.m16n8k32.row.col.f32.{0}.{1}.f32",
      MmaFP8Op::getPtxTypeName(op.getAType()),
      MmaFP8Op::getPtxTypeName(op.getBType()));
  return inlineMmaSync(b, loc, op, instruction, aRegs, bRegs, op.getAcc(),
                       op.getResult().getType());
}

/// One warpgroup MMA step as the lowerings read it: a warpgroup_mma, or
/// one of the f16 steps an FP4 one becomes, whose tiles start `aOffset` /
/// `bOffset` words into larger workgroup buffers.
struct Step {
  Value a, b, acc, aScales, bScales;
  Type aType, bType;
  VectorType resultType;
  Value aOffset, bOffset; ///< word offsets into a and b; null for 0
  int64_t warpgroups = 1; ///< of the block, each with 64 rows of A
  explicit Step(WarpgroupMmaOp op)
      : a(op.getA()), b(op.getB()), acc(op.getAcc()), aScales(op.getAScales()),
        bScales(op.getBScales()), aType(op.getAType()), bType(op.getBType()),
        resultType(cast<VectorType>(op.getResult().getType())),
        warpgroups(op.getWarpgroups()) {}
  Step(Value a, Value b, Value acc, Type type, VectorType resultType,
       Value aOffset, Value bOffset)
      : a(a), b(b), acc(acc), aType(type), bType(type), resultType(resultType),
        aOffset(aOffset), bOffset(bOffset) {}
  Value getA() const { return a; }
  Value getB() const { return b; }
  Value getAcc() const { return acc; }
  Value getAScales() const { return aScales; }
  Value getBScales() const { return bScales; }
  Type getAType() const { return aType; }
  Type getBType() const { return bType; }
  int64_t getColumns() const { return resultType.getDimSize(0) * 8; }
};

/// `index` plus an optional offset.
Value offsetBy(OpBuilder &b, Location loc, Value index, Value offset) {
  return offset ? arith::AddIOp::create(b, loc, index, offset).getResult()
                : index;
}

/// `words` (i32 registers, one per fragment row) as a fragment of `type`
/// (1-D bitcasts, which LLVM lowering takes, unlike 2-D ones).
Value fragmentOf(OpBuilder &b, Location loc, ArrayRef<Value> words,
                 VectorType type) {
  auto rowType = VectorType::get({type.getDimSize(1)}, type.getElementType());
  auto wordType = VectorType::get({1}, b.getI32Type());
  Value fragment = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
  for (auto [r, word] : llvm::enumerate(words)) {
    Value wordVec = vector::FromElementsOp::create(b, loc, wordType, word);
    Value row = vector::BitCastOp::create(b, loc, rowType, wordVec);
    fragment = vector::InsertOp::create(b, loc, row, fragment,
                                        static_cast<int64_t>(r));
  }
  return fragment;
}

/// Four 8 x 16-byte core matrices of a tile by one ldmatrix.x4 (x2 for
/// `count` 2): lane i addresses row i % 8 of matrix i / 8 at word
/// `laneWord`, and register q receives word t of row g of matrix q, the
/// 32-bit element of the m16n8 fragment layouts, for 8-bit and 16-bit
/// operands alike. One shared load per four registers instead of four.
SmallVector<Value> loadMatrices(OpBuilder &b, Location loc, Value tile,
                                Value laneWord, int64_t count) {
  Value address = tileSharedAddress(b, loc, tile, laneWord);
  Type i32 = b.getI32Type();
  std::string ptx = count == 4
                        ? "ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                          "{$0, $1, $2, $3}, [$4];"
                        : "ldmatrix.sync.aligned.m8n8.x2.shared.b16 "
                          "{$0, $1}, [$2];";
  auto load = NVVM::InlinePtxOp::create(
      b, loc, SmallVector<Type>(count, i32), ValueRange{address}, ValueRange{},
      b.getStringAttr(ptx), Value());
  return SmallVector<Value>(load.getResults());
}

/// The thread's place in the warpgroup: warp w, lane 4g + t.
struct LaneIds {
  Value warp, g, t;
};

LaneIds laneIds(OpBuilder &b, Location loc) {
  Value tid = threadIndex(b, loc);
  Value lane = laneOf(b, loc, tid);
  Value warp = warpOf(b, loc, tid);
  Value g = arith::DivUIOp::create(b, loc, lane, indexConstant(b, loc, 4));
  Value t = arith::RemUIOp::create(b, loc, lane, indexConstant(b, loc, 4));
  return {warp, g, t};
}

/// The f32 value of a UE8M0 byte, as the block-scaled MMAs read it:
/// 2^(code - 127) (code 0 is the subnormal 2^-127), NaN for 0xFF.
Value ue8m0ToF32(OpBuilder &b, Location loc, Value code) {
  auto i32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  };
  Value e = arith::ExtUIOp::create(b, loc, b.getI32Type(), code);
  Value bits = arith::ShLIOp::create(b, loc, e, i32(23));
  Value isZero =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, e, i32(0));
  bits = arith::SelectOp::create(b, loc, isZero, i32(0x00400000), bits);
  Value isNaN =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, e, i32(255));
  bits = arith::SelectOp::create(b, loc, isNaN, i32(0x7FC00000), bits);
  return arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
}

/// A step's UE8M0 factors decoded to f32 once by the block, as i32 bits
/// in workgroup buffers of one word per row of A (`rows`) and column of B
/// (`cols`): each thread then loads its fragments' factors instead of
/// decoding two scale bytes per 8 columns (six instructions each). Empty
/// (null buffers) where the factors are decoded from the bytes.
struct StagedFactors {
  Value rows, cols;
};

/// Workgroup buffers of a kernel by key: the decoded f16 tiles (key: rows,
/// negated for B, FP8 and FP4 alike) and the staged scale factors
/// (stagedKey). Every step of
/// the kernel writes the same buffers (a barrier precedes each write, so
/// the previous step has read them).
using DecodedTiles = llvm::DenseMap<int64_t, Value>;
Value decodedBuffer(OpBuilder &b, Location loc, gpu::GPUFuncOp func,
                    DecodedTiles &tiles, int64_t key, int64_t words);

/// The DecodedTiles key of the staged factors of A's rows (`ofB` false) or
/// B's columns, `count` of them: apart from the tiles' keys and each other.
int64_t stagedKey(bool ofB, int64_t count) {
  return (int64_t(ofB ? 2 : 1) << 32) + count;
}

/// `body(u)` for every u in [0, count), `threads` at a time from thread
/// `tid`: rounds unrolled, the last one guarded where `count` is not a
/// multiple of `threads` (a thread past the end has nothing to do).
void forEachByBlock(OpBuilder &b, Location loc, Value tid, int64_t count,
                    int64_t threads, function_ref<void(Value)> body) {
  for (int64_t i = 0; i < count; i += threads) {
    Value u = i ? arith::AddIOp::create(b, loc, tid, indexConstant(b, loc, i))
                      .getResult()
                : tid;
    OpBuilder::InsertionGuard guard(b);
    if (i + threads > count) {
      Value inside = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ult, u, indexConstant(b, loc, count));
      auto guarded = scf::IfOp::create(b, loc, inside, false);
      b.setInsertionPoint(guarded.thenBlock()->getTerminator());
    }
    body(u);
  }
}

/// Writes the factors of `op`'s scale bytes into workgroup buffers of
/// `func` (those in `tiles`, shared by its steps), `threads` threads at a
/// time, after the barrier that opened the step; their readers need one
/// more barrier before them.
StagedFactors stageScaleFactors(OpBuilder &b, Location loc,
                                gpu::GPUFuncOp func, DecodedTiles &tiles,
                                const Step &op, int64_t threads) {
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  auto stage = [&](Value scales, bool ofB) {
    int64_t count = cast<MemRefType>(scales.getType()).getNumElements();
    Value out =
        decodedBuffer(b, loc, func, tiles, stagedKey(ofB, count), count);
    forEachByBlock(b, loc, tid, count, threads, [&](Value at) {
      Value code = memref::LoadOp::create(b, loc, scales, ValueRange{at});
      Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(),
                                            ue8m0ToF32(b, loc, code));
      memref::StoreOp::create(b, loc, bits, out, ValueRange{at});
    });
    return out;
  };
  return {stage(op.getAScales(), false), stage(op.getBScales(), true)};
}

/// The f32 factor at `index` of a staged buffer.
Value stagedFactor(OpBuilder &b, Location loc, Value buffer, Value index) {
  Value bits = memref::LoadOp::create(b, loc, buffer, ValueRange{index});
  return arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
}

/// The factors UE8M0(a_scales[row]) of the thread's two accumulator rows
/// (16w + g + 8r): the same for every 8-column fragment of a step, so
/// decoded once per step rather than once per fragment (the MMAs between
/// fragments are asm, across which LLVM does not merge the shared loads).
SmallVector<Value, 2> rowScaleFactors(OpBuilder &b, Location loc,
                                      const Step &op, const LaneIds &ids,
                                      Value staged = Value()) {
  Value rowBase = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, ids.warp, indexConstant(b, loc, 16)),
      ids.g);
  SmallVector<Value, 2> factors;
  for (int64_t r = 0; r < 2; ++r) {
    Value row =
        arith::AddIOp::create(b, loc, rowBase, indexConstant(b, loc, 8 * r));
    if (staged) {
      factors.push_back(stagedFactor(b, loc, staged, row));
      continue;
    }
    Value rowCode =
        memref::LoadOp::create(b, loc, op.getAScales(), ValueRange{row});
    factors.push_back(ue8m0ToF32(b, loc, rowCode));
  }
  return factors;
}

/// Fragment j of `acc` plus `partial` (fragment j of a product that
/// started from zero) times the factor of its rows (16w + g + 8r;
/// rowScaleFactors) and columns (8j + 2t + e): UE8M0(a_scales[row]) *
/// UE8M0(b_scales[col]), the column's from `staged` where it has them.
Value rescaleFragment(OpBuilder &b, Location loc, const Step &op,
                      const LaneIds &ids, ArrayRef<Value> rowFactors,
                      const StagedFactors &staged, int64_t j, Value partial,
                      Value acc) {
  // One op per statement: argument evaluation order is the host
  // compiler's.
  Value t2 = arith::MulIOp::create(b, loc, ids.t, indexConstant(b, loc, 2));
  Value colBase =
      arith::AddIOp::create(b, loc, t2, indexConstant(b, loc, 8 * j));
  SmallVector<Value, 2> colFactors;
  for (int64_t e = 0; e < 2; ++e) {
    Value col =
        arith::AddIOp::create(b, loc, colBase, indexConstant(b, loc, e));
    if (staged.cols) {
      colFactors.push_back(stagedFactor(b, loc, staged.cols, col));
      continue;
    }
    Value colCode =
        memref::LoadOp::create(b, loc, op.getBScales(), ValueRange{col});
    colFactors.push_back(ue8m0ToF32(b, loc, colCode));
  }
  SmallVector<Value> sums;
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t e = 0; e < 2; ++e) {
      Value factor =
          arith::MulFOp::create(b, loc, rowFactors[r], colFactors[e]);
      SmallVector<int64_t> pos = {r, e};
      Value p = vector::ExtractOp::create(b, loc, partial, pos);
      Value term = arith::MulFOp::create(b, loc, p, factor);
      // Without an accumulator the body's start is +0.0: adding it keeps a
      // -0.0 product +0.0, as the body computes it.
      Value old = acc ? vector::ExtractOp::create(b, loc, acc, pos).getResult()
                      : arith::ConstantOp::create(
                            b, loc, b.getZeroAttr(b.getF32Type()))
                            .getResult();
      term = arith::AddFOp::create(b, loc, old, term);
      sums.push_back(term);
    }
  }
  return vector::FromElementsOp::create(b, loc, partial.getType(), sums);
}

/// sm_120a: the block-scaled MMAs, FP8 m16n8k32 kind::mxf8f6f4 with one
/// UE8M0 scale per row of A and column of B (scale_vec::1X), FP4 m16n8k64
/// kind::mxf4nvf4 with four UE4M3 scales each (scale_vec::4X; the FP4
/// registers hold the same bytes as the 8-bit ones, two codes each). With
/// selectors (byte 0, thread 0) lane 4g + t supplies the scales of A row
/// g + 8t (t < 2) and lane 4g (t = 0) those of B column g.
Value blockScaledFragment(OpBuilder &b, Location loc, const Step &op,
                          const LaneIds &ids, int64_t j, Value fragA,
                          Value fragB, Value acc) {
  auto words = [&](Value fragment) {
    SmallVector<Value> out;
    int64_t rows = cast<VectorType>(fragment.getType()).getDimSize(0);
    for (int64_t r = 0; r < rows; ++r)
      out.push_back(packed(b, loc, fragment, r));
    return out;
  };
  SmallVector<Value> c;
  Type f32 = b.getF32Type();
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t e = 0; e < 2; ++e)
      c.push_back(acc ? b.createOrFold<vector::ExtractOp>(
                            loc, acc, ArrayRef<int64_t>{r, e})
                      : arith::ConstantOp::create(b, loc, b.getZeroAttr(f32))
                            .getResult());
  Value tLow = arith::AndIOp::create(b, loc, ids.t, indexConstant(b, loc, 1));
  Value warpRow =
      arith::MulIOp::create(b, loc, ids.warp, indexConstant(b, loc, 16));
  Value groupRow = arith::AddIOp::create(b, loc, warpRow, ids.g);
  Value half = arith::MulIOp::create(b, loc, tLow, indexConstant(b, loc, 8));
  Value aRow = arith::AddIOp::create(b, loc, groupRow, half);
  Value bCol =
      arith::AddIOp::create(b, loc, ids.g, indexConstant(b, loc, 8 * j));
  bool fp4 = isa<Float4E2M1FNType>(op.getAType());
  // MXFP8: one UE8M0 byte per row and step; FP4: the four UE4M3 bytes of
  // the row, byte j for the K block [16j, 16j + 16) (scale_vec::4X).
  Value zero16 = arith::ConstantIntOp::create(b, loc, b.getI16Type(), 0);
  auto mmaType = [](Type t) {
    if (isa<Float4E2M1FNType>(t))
      return NVVM::MMATypes::e2m1;
    return isa<Float8E5M2Type>(t) ? NVVM::MMATypes::e5m2 : NVVM::MMATypes::e4m3;
  };
  auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                     SmallVector<Type>(4, f32));
  SmallVector<Value> aWords = words(fragA);
  SmallVector<Value> bWords = words(fragB);
  Value aScale = loadScaleWord(b, loc, op.getAScales(), aRow, fp4);
  Value bScale = loadScaleWord(b, loc, op.getBScales(), bCol, fp4);
  auto mma = NVVM::MmaBlockScaleOp::create(
      b, loc, structType, aWords, bWords, c, aScale, zero16, zero16, bScale,
      zero16, zero16, ArrayRef<int64_t>{16, 8, fp4 ? 64 : 32},
      std::array<NVVM::MMATypes, 2>{mmaType(op.getAType()),
                                    mmaType(op.getBType())},
      fp4 ? NVVM::ScaleVecSize::X4 : NVVM::ScaleVecSize::X1,
      fp4 ? NVVM::BlockScaleFormat::UE4M3 : NVVM::BlockScaleFormat::UE8M0,
      fp4 ? NVVM::MMABlockScaleKind::MXF4NVF4
          : NVVM::MMABlockScaleKind::MXF8F6F4);
  SmallVector<Value> d;
  for (int64_t i = 0; i < 4; ++i)
    d.push_back(LLVM::ExtractValueOp::create(b, loc, mma, i));
  return vector::FromElementsOp::create(b, loc, VectorType::get({2, 2}, f32),
                                        d);
}

/// Everywhere but sm_90a: each warp multiplies its 16 rows of A by every
/// 8 columns of B with m16n8 mma.sync (block-scaled on sm_120a).
Value warpgroupBySync(OpBuilder &b, Location loc, const Step &op,
                      const CUDAArch &arch, DecodedTiles *staging = nullptr) {
  gpu::BarrierOp::create(b, loc);
  LaneIds ids = laneIds(b, loc);
  // Lane 8q + r of an ldmatrix addresses row r of matrix q. A: the warp's
  // four matrices are rows 16w + 8 (q % 2), K half q / 2, at word
  // 128w + 64 (q % 2) + 32 (q / 2); B: fragments j and j + 1 are the four
  // matrices from word 64j on, 32 words apart, so lane i reads word
  // 64j + 4i.
  Value four = indexConstant(b, loc, 4);
  Value lane = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, ids.g, four), ids.t);
  Value matrix = arith::DivUIOp::create(b, loc, lane, indexConstant(b, loc, 8));
  Value rowInMatrix =
      arith::RemUIOp::create(b, loc, lane, indexConstant(b, loc, 8));
  Value rowHalf =
      arith::RemUIOp::create(b, loc, matrix, indexConstant(b, loc, 2));
  Value kHalf = arith::DivUIOp::create(b, loc, matrix, indexConstant(b, loc, 2));
  Value warpRows =
      arith::MulIOp::create(b, loc, ids.warp, indexConstant(b, loc, 128));
  Value rowHalfAt =
      arith::MulIOp::create(b, loc, rowHalf, indexConstant(b, loc, 64));
  Value kHalfAt = arith::MulIOp::create(b, loc, kHalf, indexConstant(b, loc, 32));
  Value rowAt = arith::MulIOp::create(b, loc, rowInMatrix, four);
  Value aMatrix = arith::AddIOp::create(b, loc, rowHalfAt, kHalfAt);
  Value aLane = arith::AddIOp::create(b, loc, aMatrix, rowAt);
  Value aWarp = arith::AddIOp::create(b, loc, warpRows, aLane);
  Value aFirst = offsetBy(b, loc, aWarp, op.aOffset);
  Value bLaneWord = arith::MulIOp::create(b, loc, lane, four);
  Value bLane = offsetBy(b, loc, bLaneWord, op.bOffset);

  Type a = op.getAType();
  bool fp8 = isa<Float8E4M3FNType, Float8E5M2Type>(a);
  bool scaled = static_cast<bool>(op.getAScales());
  // Codes are loaded as bytes (FP4: two per byte).
  Type elt = fp8 || isa<Float4E2M1FNType>(a) ? Type(b.getI8Type()) : a;
  int64_t perReg = 32 / elt.getIntOrFloatBitWidth();
  auto aType = VectorType::get({4, perReg}, elt);
  auto bType = VectorType::get({2, perReg}, elt);
  Value fragA =
      fragmentOf(b, loc, loadMatrices(b, loc, op.getA(), aFirst, 4), aType);

  VectorType resultType = op.resultType;
  auto fragType = VectorType::get({2, 2}, resultType.getElementType());
  int64_t k = a.isF16() || a.isBF16() ? 16 : 32;
  // A zero accumulator (a one-step K loop folded away) is no accumulator:
  // the FP8 inline asm takes a zero register of its own.
  Value accIn = op.getAcc();
  if (accIn &&
      (matchPattern(accIn, m_Zero()) || matchPattern(accIn, m_PosZeroFloat())))
    accIn = Value();
  Value result = accIn;
  if (!result)
    result = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(resultType,
                               b.getZeroAttr(resultType.getElementType())));
  int64_t fragments = resultType.getDimSize(0);
  // Every B fragment is loaded before the MMAs: interleaving each pair's
  // loads with its two MMAs made ptxas spill (MXFP8 and FP8 on sm_80, 8 to
  // 40 bytes) and saved no register in the 128 x 256 tile.
  SmallVector<Value> bWords;
  for (int64_t j = 0; j < fragments; j += 2) {
    Value bFirst =
        arith::AddIOp::create(b, loc, bLane, indexConstant(b, loc, 64 * j));
    llvm::append_range(bWords, loadMatrices(b, loc, op.getB(), bFirst,
                                            j + 1 < fragments ? 4 : 2));
  }
  SmallVector<Value, 2> rowFactors;
  StagedFactors staged;
  if (scaled && !arch.blockScaledMma) {
    // The scale bytes came with the tiles, before the step's barrier. The
    // step is in the kernel's body or nested in its loops.
    Operation *parent = b.getInsertionBlock()->getParentOp();
    auto func = dyn_cast<gpu::GPUFuncOp>(parent);
    if (!func)
      func = parent->getParentOfType<gpu::GPUFuncOp>();
    if (func && staging) {
      staged =
          stageScaleFactors(b, loc, func, *staging, op, 128 * op.warpgroups);
      gpu::BarrierOp::create(b, loc);
    }
    rowFactors = rowScaleFactors(b, loc, op, ids, staged.rows);
  }
  for (int64_t j = 0; j < fragments; ++j) {
    Value fragB = fragmentOf(
        b, loc, ArrayRef<Value>(bWords).slice(2 * j, 2), bType);
    Value acc =
        accIn ? b.createOrFold<vector::ExtractOp>(loc, accIn, j) : Value();
    Value d;
    if (scaled && arch.blockScaledMma) {
      d = blockScaledFragment(b, loc, op, ids, j, fragA, fragB, acc);
    } else if (scaled) {
      Value partial = MmaFP8Op::create(b, loc, fragType, fragA, fragB, Value(),
                                       a, op.getBType());
      d = rescaleFragment(b, loc, op, ids, rowFactors, staged, j, partial,
                          acc);
    } else if (fp8) {
      d = MmaFP8Op::create(b, loc, fragType, fragA, fragB, acc, a,
                           op.getBType());
    } else if (a.isBF16()) {
      // MLIR 22's nvgpu-to-nvvm cannot type a bf16 mma.sync.
      SmallVector<Value> aRegs, bRegs;
      for (int64_t r = 0; r < 4; ++r)
        aRegs.push_back(packed(b, loc, fragA, r));
      for (int64_t r = 0; r < 2; ++r)
        bRegs.push_back(packed(b, loc, fragB, r));
      // A constant accumulator other than zero (no asm operand) is added
      // after a product from zero.
      bool constantAcc = acc && matchPattern(acc, m_Constant()) &&
                         !matchPattern(acc, m_PosZeroFloat());
      d = *inlineMmaSync(b, loc, fragA.getDefiningOp(),
                         "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                         aRegs, bRegs, constantAcc ? Value() : acc, fragType);
      if (constantAcc)
        d = arith::AddFOp::create(b, loc, acc, d);
    } else {
      if (!acc)
        acc = arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(fragType,
                                   b.getZeroAttr(fragType.getElementType())));
      d = nvgpu::MmaSyncOp::create(b, loc, fragA, fragB, acc,
                                   ArrayRef<int64_t>{16, 8, k});
    }
    result = vector::InsertOp::create(b, loc, d, result, j);
  }
  return result;
}

NVVM::WGMMATypes wgmmaType(Type t) {
  if (isa<Float8E4M3FNType>(t))
    return NVVM::WGMMATypes::e4m3;
  if (isa<Float8E5M2Type>(t))
    return NVVM::WGMMATypes::e5m2;
  if (t.isF16())
    return NVVM::WGMMATypes::f16;
  if (t.isBF16())
    return NVVM::WGMMATypes::bf16;
  return NVVM::WGMMATypes::s8;
}

/// The columns of one promoted FP8 wgmma: a product of N = 256 beside the
/// 256-column accumulator it is added to would need 256 f32 registers per
/// thread; in halves of 128 it needs 192.
constexpr int64_t kPromotedColumns = 128;

/// sm_90a: one wgmma m64nNk{32,16} reading both tiles through descriptors
/// (promoted FP8 steps wider than kPromotedColumns: one per half), waited
/// for before the result is used.
Value warpgroupByWgmma(OpBuilder &b, Location loc, const Step &op) {
  // The tiles were written by ordinary stores (the generic proxy); wgmma
  // reads shared memory through the async proxy.
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  gpu::BarrierOp::create(b, loc);
  VectorType resultType = op.resultType;
  Type elt = resultType.getElementType();
  // With scales the product starts from zero and is rescaled below. FP8
  // products start from zero too and are added to the f32 accumulator
  // after the wgmma: FP8 wgmma sums keep fewer bits than f32 (PTX ISA:
  // "higher than half precision but lower than single precision"), so a
  // K sum kept inside it would lose the small products of every later step
  // against the grown accumulator. Promoting every step bounds that loss by
  // one step's products.
  const bool promote = WarpgroupMmaOp::promotesProducts(
      op.getAType(), static_cast<bool>(op.getAScales()));
  Value acc = op.getAScales() || promote ? Value() : op.getAcc();
  bool zero = !acc || matchPattern(acc, m_Zero()) ||
              matchPattern(acc, m_PosZeroFloat());
  // Warpgroup q multiplies A's rows [64q, 64q + 64): 8 core-matrix rows
  // groups, 64 words each, further on.
  Value aOffset = op.aOffset;
  if (op.warpgroups > 1) {
    Value tid = threadIndex(b, loc);
    Value q = arith::DivUIOp::create(b, loc, tid,
                                     indexConstant(b, loc, kWarpgroupSize));
    Value rowsAt = arith::MulIOp::create(
        b, loc, q,
        indexConstant(b, loc,
                      WarpgroupMmaOp::kRows * WarpgroupMmaOp::kStepBytes / 4));
    aOffset = offsetBy(b, loc, rowsAt, aOffset);
  }
  bool integer = elt.isInteger(32);
  int64_t k = op.getAType().isF16() || op.getAType().isBF16() ? 16 : 32;

  // One wgmma over B's columns [first, first + n), onto `inouts` (the
  // accumulator struct, or none for a zero start), waited for: its
  // product as fragments.
  auto issue = [&](int64_t first, int64_t n) -> Value {
    int64_t count = n / 8 * 4;
    auto structType = LLVM::LLVMStructType::getLiteral(
        b.getContext(), SmallVector<Type>(count, elt));
    Value inouts = LLVM::PoisonOp::create(b, loc, structType);
    if (!zero) {
      auto flat = VectorType::get({resultType.getNumElements()}, elt);
      Value values = vector::ShapeCastOp::create(b, loc, flat, acc);
      for (int64_t i = 0; i < count; ++i) {
        Value v = vector::ExtractOp::create(b, loc, values, first / 8 * 4 + i);
        inouts = LLVM::InsertValueOp::create(b, loc, inouts, v, i);
      }
    }
    Value descA = tileDescriptor(b, loc, op.getA(), aOffset, 0);
    // B's rows from `first` on: 8-row groups of 64 words.
    Value bOffset = op.bOffset;
    if (first)
      bOffset = offsetBy(b, loc, indexConstant(b, loc, first * 8), bOffset);
    Value descB = tileDescriptor(b, loc, op.getB(), bOffset, 0);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    auto shape =
        NVVM::MMAShapeAttr::get(b.getContext(), WarpgroupMmaOp::kRows, n, k);
    auto mma = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, structType, inouts, descA, descB, shape,
        wgmmaType(op.getAType()), wgmmaType(op.getBType()),
        integer ? NVVM::WGMMATypes::s32 : NVVM::WGMMATypes::f32,
        zero ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
        NVVM::MMALayout::col,
        integer ? NVVM::MMAIntOverflowAttr::get(b.getContext(),
                                                NVVM::MMAIntOverflow::satfinite)
                : NVVM::MMAIntOverflowAttr());
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    SmallVector<Value> elems;
    for (int64_t i = 0; i < count; ++i)
      elems.push_back(LLVM::ExtractValueOp::create(b, loc, mma, i));
    auto type = VectorType::get({n / 8, 2, 2}, elt);
    return vector::FromElementsOp::create(b, loc, type, elems);
  };

  if (promote) {
    Value accIn = op.getAcc();
    if (accIn && matchPattern(accIn, m_PosZeroFloat()))
      accIn = Value();
    int64_t n = op.getColumns();
    if (n <= kPromotedColumns) {
      Value product = issue(0, n);
      return accIn ? arith::AddFOp::create(b, loc, accIn, product).getResult()
                   : product;
    }
    // Each half's product is added to its fragments before the next half
    // is issued.
    Value result = accIn;
    if (!result)
      result = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(resultType, b.getZeroAttr(elt)));
    for (int64_t first = 0; first < n; first += kPromotedColumns) {
      Value product = issue(first, kPromotedColumns);
      for (int64_t j = 0; j < kPromotedColumns / 8; ++j) {
        int64_t at = first / 8 + j;
        Value part = vector::ExtractOp::create(b, loc, product, j);
        Value sum = part;
        if (accIn) {
          Value old = vector::ExtractOp::create(b, loc, accIn, at);
          sum = arith::AddFOp::create(b, loc, old, part);
        }
        result = vector::InsertOp::create(b, loc, sum, result, at);
      }
    }
    return result;
  }
  Value product = issue(0, op.getColumns());
  if (!op.getAScales())
    return product;
  // No block-scaled wgmma: each 8-column fragment of the product is
  // rescaled in f32 and added to the accumulator.
  LaneIds ids = laneIds(b, loc);
  Value accIn = op.getAcc();
  if (accIn && matchPattern(accIn, m_PosZeroFloat()))
    accIn = Value();
  Value result = product;
  SmallVector<Value, 2> rowFactors = rowScaleFactors(b, loc, op, ids);
  for (int64_t j = 0; j < resultType.getDimSize(0); ++j) {
    Value partial = vector::ExtractOp::create(b, loc, product, j);
    Value fragAcc =
        accIn ? vector::ExtractOp::create(b, loc, accIn, j) : Value();
    Value d = rescaleFragment(b, loc, op, ids, rowFactors, StagedFactors(), j,
                              partial, fragAcc);
    result = vector::InsertOp::create(b, loc, d, result, j);
  }
  return result;
}

/// Without an FP4 block-scaled MMA: the block decodes both FP4 tiles into
/// four f16 tiles each, one after the other in a workgroup buffer (tile q
/// holds the codes [16q, 16q + 16) of every row, in the same core-matrix
/// layout, f16 pair (2w, 2w + 1) in word w), each value times its scale,
/// exact in f16; then a loop of four f16 steps over them, each starting
/// with the barrier that makes the decoded tiles seen. Thread `tid` decodes
/// the FP4 words `tid + 128 i` of the 2 words per row that make sub-block
/// q.
/// The word where `row` starts in a core-matrix tile: (row / 8) * 64 +
/// (row % 8) * 4.
Value coreMatrixRowAt(OpBuilder &b, Location loc, Value row) {
  auto idx = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value group = arith::DivUIOp::create(b, loc, row, idx(8));
  Value groupAt = arith::MulIOp::create(b, loc, group, idx(64));
  Value inGroup = arith::RemUIOp::create(b, loc, row, idx(8));
  Value inGroupAt = arith::MulIOp::create(b, loc, inGroup, idx(4));
  return arith::AddIOp::create(b, loc, groupAt, inGroupAt);
}

/// Word `word` of the row starting at `rowAt` in a core-matrix tile:
/// (word / 4) * 32 + word % 4 further.
Value coreMatrixWordAt(OpBuilder &b, Location loc, Value rowAt, Value word) {
  auto idx = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value half = arith::DivUIOp::create(b, loc, word, idx(4));
  Value halfAt = arith::MulIOp::create(b, loc, half, idx(32));
  Value inHalf = arith::RemUIOp::create(b, loc, word, idx(4));
  Value wordAt = arith::AddIOp::create(b, loc, halfAt, inHalf);
  return arith::AddIOp::create(b, loc, rowAt, wordAt);
}

/// The kernel's workgroup buffer of `words` i32 under `key` in `tiles`,
/// added on first use, 128-byte aligned (wgmma descriptors address
/// 16-byte units from a 128-byte line).
Value decodedBuffer(OpBuilder &b, Location loc, gpu::GPUFuncOp func,
                    DecodedTiles &tiles, int64_t key, int64_t words) {
  Value &out = tiles[key];
  if (!out) {
    auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(),
                                                gpu::AddressSpace::Workgroup);
    auto type = MemRefType::get({words}, b.getI32Type(),
                                MemRefLayoutAttrInterface(), workgroup);
    out = func.addWorkgroupAttribution(type, loc);
    func.setWorkgroupAttributionAttr(func.getNumWorkgroupAttributions() - 1,
                                     LLVM::LLVMDialect::getAlignAttrName(),
                                     b.getI64IntegerAttr(kTileAlignment));
  }
  return out;
}

void expandFP4(WarpgroupMmaOp op, gpu::GPUFuncOp func, DecodedTiles &tiles,
               const CUDAArch &arch) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  auto workgroup =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  constexpr int64_t kRowWords = WarpgroupMmaOp::kStepBytes / 4;
  constexpr int64_t kSteps =
      2 * WarpgroupMmaOp::kStepBytes / WarpgroupMmaOp::kFP4Block;
  constexpr int64_t kThreads = 128;
  auto idx = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  // The FP4 tiles' writers finish first.
  gpu::BarrierOp::create(b, loc);
  // A's and B's buffers apart even where their row counts are equal.
  auto decode = [&](Value tile, Value scales, int64_t rows, bool isB) {
    Value out = decodedBuffer(b, loc, func, tiles, isB ? -rows : rows,
                              kSteps * rows * kRowWords);
    for (int64_t q = 0; q < kSteps; ++q)
      forEachByBlock(b, loc, tid, rows * 2, kThreads, [&](Value u) {
        // FP4 word 2q + h of `row`: codes [16q + 8h, 16q + 8h + 8).
        Value row = arith::DivUIOp::create(b, loc, u, idx(2));
        Value h = arith::RemUIOp::create(b, loc, u, idx(2));
        // Core-matrix word of (row, w): (row / 8) * 64 + (w / 4) * 32 +
        // (row % 8) * 4 + w % 4.
        Value rowAt = coreMatrixRowAt(b, loc, row);
        // Word w = 2q + h.
        Value w = arith::AddIOp::create(b, loc, h, idx(2 * q));
        Value at = coreMatrixWordAt(b, loc, rowAt, w);
        Value word = memref::LoadOp::create(b, loc, tile, ValueRange{at});
        Value rowScales = arith::MulIOp::create(b, loc, row, idx(kSteps));
        Value scaleAt = arith::AddIOp::create(b, loc, rowScales, idx(q));
        Value scaleByte =
            memref::LoadOp::create(b, loc, scales, ValueRange{scaleAt});
        Value values =
            decodeFP4Word(b, loc, word, ue4m3ToF16(b, loc, scaleByte));
        Value pairs = vector::BitCastOp::create(
            b, loc, VectorType::get({4}, b.getI32Type()), values);
        // The pairs are the f16 words 4h + j of sub-block q.
        Value outHalfAt = arith::MulIOp::create(b, loc, h, idx(32));
        Value outRowAt = arith::AddIOp::create(b, loc, rowAt, outHalfAt);
        Value outTileAt =
            arith::AddIOp::create(b, loc, outRowAt, idx(q * rows * kRowWords));
        for (int64_t j = 0; j < 4; ++j) {
          Value pair = vector::ExtractOp::create(b, loc, pairs, j);
          Value outAt = arith::AddIOp::create(b, loc, outTileAt, idx(j));
          memref::StoreOp::create(b, loc, pair, out, ValueRange{outAt});
        }
      });
    return out;
  };
  const int64_t rowsA = WarpgroupMmaOp::kRows, rowsB = op.getColumns();
  Value a = decode(op.getA(), op.getAScales(), rowsA, /*isB=*/false);
  Value bt = decode(op.getB(), op.getBScales(), rowsB, /*isB=*/true);
  auto resultType = cast<VectorType>(op.getResult().getType());
  Value init = op.getAcc();
  if (!init)
    init = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(resultType, b.getF32FloatAttr(0.0f)));
  // One f16 step per sub-block, as a loop: the MMA code is in the kernel
  // once.
  Value first = idx(0);
  Value steps = idx(kSteps);
  Value one = idx(1);
  auto loop = scf::ForOp::create(b, loc, first, steps, one, ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value q = loop.getInductionVar();
    Value aOffset = arith::MulIOp::create(b, loc, q, idx(rowsA * kRowWords));
    Value bOffset = arith::MulIOp::create(b, loc, q, idx(rowsB * kRowWords));
    Step step(a, bt, loop.getRegionIterArgs()[0], b.getF16Type(), resultType,
              aOffset, bOffset);
    Value d = arch.wgmma ? warpgroupByWgmma(b, loc, step)
                         : warpgroupBySync(b, loc, step, arch);
    scf::YieldOp::create(b, loc, d);
  }
  op.getResult().replaceAllUsesWith(loop.getResult(0));
  op.erase();
}

/// sm_80/sm_86, FP8: the block decodes both FP8 tiles into
/// two f16 tiles each (tile q holds the codes [16q, 16q + 16) of every
/// row, in the core-matrix layout of the FP8 tiles, f16 pair (2w, 2w + 1)
/// in word w), in a workgroup buffer shared by the kernel's FP8 steps; then
/// two f16 steps over them. Each code is decoded once per block, where
/// decoding the fragments (emulate) decodes B once per warp.
void expandFP8(WarpgroupMmaOp op, gpu::GPUFuncOp func, DecodedTiles &tiles,
               const CUDAArch &arch) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto workgroup =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  constexpr int64_t kRowWords = WarpgroupMmaOp::kStepBytes / 4;
  constexpr int64_t kSteps = 2;
  const int64_t threads = 128 * op.getWarpgroups();
  auto idx = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  // The FP8 tiles' writers, and the previous step's MMAs on the decoded
  // tiles, finish first.
  gpu::BarrierOp::create(b, loc);
  // A's and B's buffers apart even where their row counts are equal.
  auto decode = [&](Value tile, Type fp8, int64_t rows, bool isB) {
    Value out = decodedBuffer(b, loc, func, tiles, isB ? -rows : rows,
                              kSteps * rows * kRowWords);
    forEachByBlock(b, loc, tid, rows * kRowWords, threads, [&](Value u) {
      // FP8 word w of `row` (codes [4w, 4w + 4)), at core-matrix word
      // (row / 8) * 64 + (w / 4) * 32 + (row % 8) * 4 + w % 4; its f16
      // pairs are words 2(w % 4) and 2(w % 4) + 1 of tile w / 4, whose
      // row starts at (row / 8) * 64 + (row % 8) * 4.
      Value row = arith::DivUIOp::create(b, loc, u, idx(kRowWords));
      Value w = arith::RemUIOp::create(b, loc, u, idx(kRowWords));
      Value rowAt = coreMatrixRowAt(b, loc, row);
      Value at = coreMatrixWordAt(b, loc, rowAt, w);
      Value q = arith::DivUIOp::create(b, loc, w, idx(4));
      Value j = arith::RemUIOp::create(b, loc, w, idx(4));
      Value word = memref::LoadOp::create(b, loc, tile, ValueRange{at});
      Value values = decodeFP8Word(b, loc, word, fp8);
      Value pairs = vector::BitCastOp::create(
          b, loc, VectorType::get({2}, b.getI32Type()), values);
      Value first = vector::ExtractOp::create(b, loc, pairs, 0);
      Value second = vector::ExtractOp::create(b, loc, pairs, 1);
      // Pair 2j + e is word 2j + e of the row in tile q.
      Value tileAt = arith::MulIOp::create(b, loc, q, idx(rows * kRowWords));
      Value tileRowAt = arith::AddIOp::create(b, loc, rowAt, tileAt);
      Value pair = arith::MulIOp::create(b, loc, j, idx(2));
      Value outAt = coreMatrixWordAt(b, loc, tileRowAt, pair);
      memref::StoreOp::create(b, loc, first, out, ValueRange{outAt});
      Value nextAt = arith::AddIOp::create(b, loc, outAt, idx(1));
      memref::StoreOp::create(b, loc, second, out, ValueRange{nextAt});
    });
    return out;
  };
  const int64_t rowsA = WarpgroupMmaOp::kRows * op.getWarpgroups();
  const int64_t rowsB = op.getColumns();
  Value a = decode(op.getA(), op.getAType(), rowsA, /*isB=*/false);
  Value bt = decode(op.getB(), op.getBType(), rowsB, /*isB=*/true);
  auto resultType = cast<VectorType>(op.getResult().getType());
  // With UE8M0 scales (MXFP8) the step's product starts from zero and is
  // rescaled into the accumulators, as emulate's fragments are; the
  // factors are staged with the decoded tiles (the f16 steps' barriers
  // make them seen).
  Step original(op);
  bool scaled = static_cast<bool>(op.getAScales());
  StagedFactors staged;
  if (scaled)
    staged = stageScaleFactors(b, loc, func, tiles, original, threads);
  Value sums = scaled ? Value() : op.getAcc();
  // Unrolled: two steps, each beginning with the barrier that makes the
  // decoded tiles seen.
  for (int64_t q = 0; q < kSteps; ++q) {
    Step step(a, bt, sums, b.getF16Type(), resultType,
              q ? idx(q * rowsA * kRowWords) : Value(),
              q ? idx(q * rowsB * kRowWords) : Value());
    sums = warpgroupBySync(b, loc, step, arch);
  }
  if (scaled) {
    LaneIds ids = laneIds(b, loc);
    Value acc = op.getAcc();
    Value result = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(resultType, b.getF32FloatAttr(0.0f)));
    SmallVector<Value, 2> rowFactors =
        rowScaleFactors(b, loc, original, ids, staged.rows);
    for (int64_t j = 0; j < resultType.getDimSize(0); ++j) {
      Value partial = vector::ExtractOp::create(b, loc, sums, j);
      Value fragAcc =
          acc ? vector::ExtractOp::create(b, loc, acc, j).getResult() : Value();
      Value d = rescaleFragment(b, loc, original, ids, rowFactors, staged, j,
                                partial, fragAcc);
      result = vector::InsertOp::create(b, loc, d, result, j);
    }
    sums = result;
  }
  op.getResult().replaceAllUsesWith(sums);
  op.erase();
}

struct LowerMmaPass
    : mlir::comfyquant::impl::ComfyQuantGPULowerMmaBase<LowerMmaPass> {
  using Base::Base;
  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    TargetAttr target = resolveTarget(module, chip, TargetKind::cuda, "sm_90a",
                                      getArgument());
    if (!target)
      return signalPassFailure();
    const CUDAArch *arch = target.getCudaArch();
    module->setAttr(ComfyQuantDialect::getTargetAttrName(), target);
    // Steps whose operands the arch cannot multiply as stored become f16
    // steps first: FP8 without an FP8 MMA, FP4 without an FP4 one.
    bool decodeFP8 = !arch->fp8Mma && !arch->wgmma && !arch->tcgen05;
    bool decodeFP4 = !arch->blockScaledMma && !arch->tcgen05;
    SmallVector<WarpgroupMmaOp> decodedSteps;
    getOperation().walk([&](WarpgroupMmaOp op) {
      Type a = op.getAType();
      if ((decodeFP8 && isa<Float8E4M3FNType, Float8E5M2Type>(a)) ||
          (decodeFP4 && isa<Float4E2M1FNType>(a)))
        decodedSteps.push_back(op);
    });
    llvm::DenseMap<Operation *, DecodedTiles> fp8Tiles, fp4Tiles;
    for (WarpgroupMmaOp op : decodedSteps) {
      auto func = op->getParentOfType<gpu::GPUFuncOp>();
      bool fp4 = isa<Float4E2M1FNType>(op.getAType());
      if (!func || !func.isKernel()) {
        op.emitOpError(fp4 ? "FP4" : "FP8")
            << " operands are decoded in workgroup memory, which only a "
               "kernel can be given";
        return signalPassFailure();
      }
      if (fp4)
        expandFP4(op, func, fp4Tiles[func], *arch);
      else
        expandFP8(op, func, fp8Tiles[func], *arch);
    }
    SmallVector<WarpgroupMmaOp> tiles;
    getOperation().walk([&](WarpgroupMmaOp op) { tiles.push_back(op); });
    // tcgen05 steps share per-kernel state: lowered by kernel, in order.
    llvm::MapVector<gpu::GPUFuncOp, SmallVector<WarpgroupMmaOp>> byKernel;
    for (WarpgroupMmaOp op : tiles) {
      // wgmma descriptors address 16-byte units; every tile starts on a
      // 128-byte line, which only a workgroup attribution of the kernel
      // can be given.
      // A tile may be a select between stages (two-stage copies): each
      // candidate must be an attribution.
      SmallVector<Value> candidates;
      std::function<void(Value)> collect = [&](Value v) {
        if (auto select = v ? v.getDefiningOp<arith::SelectOp>()
                            : arith::SelectOp()) {
          collect(select.getTrueValue());
          collect(select.getFalseValue());
        } else if (v) {
          candidates.push_back(v);
        }
      };
      for (Value tile :
           {op.getA(), op.getB(), op.getAScales(), op.getBScales()})
        collect(tile);
      for (Value tile : candidates) {
        auto arg = dyn_cast<BlockArgument>(tile);
        auto func = arg ? dyn_cast<gpu::GPUFuncOp>(arg.getOwner()->getParentOp())
                        : gpu::GPUFuncOp();
        unsigned index = arg ? arg.getArgNumber() : 0;
        if (!func || !arg.getOwner()->isEntryBlock() ||
            index < func.getNumArguments() ||
            index - func.getNumArguments() >=
                func.getNumWorkgroupAttributions()) {
          op.emitOpError("tiles must be workgroup attributions of the "
                         "kernel (their alignment is set here)");
          return signalPassFailure();
        }
        func.setWorkgroupAttributionAttr(
            index - func.getNumArguments(),
            LLVM::LLVMDialect::getAlignAttrName(),
            OpBuilder(func).getI64IntegerAttr(kTileAlignment));
      }
      // Integer steps where tcgen05 has no kind::i8 (the sm_100f family)
      // take mma.sync.
      if (arch->tcgen05 && (arch->tcgen05Int8 || !op.getAType().isInteger(8))) {
        byKernel[op->getParentOfType<gpu::GPUFuncOp>()].push_back(op);
        continue;
      }
      OpBuilder b(op);
      Step step(op);
      // Block-scaled steps without a block-scaled MMA stage their factors
      // in buffers the kernel's steps share (with its decoded tiles').
      DecodedTiles &staging =
          fp8Tiles[op->getParentOfType<gpu::GPUFuncOp>()];
      Value result =
          arch->wgmma ? warpgroupByWgmma(b, op.getLoc(), step)
                      : warpgroupBySync(b, op.getLoc(), step, *arch, &staging);
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
    for (auto &[kernel, ops] : byKernel)
      if (failed(lowerByTcgen05(kernel, ops)))
        return signalPassFailure();
    SmallVector<MmaFP8Op> mmas;
    getOperation().walk([&](MmaFP8Op op) { mmas.push_back(op); });
    for (MmaFP8Op op : mmas) {
      OpBuilder b(op);
      FailureOr<Value> result = arch->fp8Mma
                                    ? native(b, op.getLoc(), op)
                                    : FailureOr<Value>(emulate(b, op.getLoc(), op));
      if (failed(result))
        return signalPassFailure();
      op.getResult().replaceAllUsesWith(*result);
      op.erase();
    }
  }
};

} // namespace
