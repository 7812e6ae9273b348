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
//   for mb in [0, Mp) step mc                  (M blocks: Ap's rows in L2)
//     for n0 in [0, N) step nr                 (nr = 32: two B tiles)
//       for m0 in [mb, mb + mc) step mr        (mr = 32: two A tiles)
//         T[i][j] = 0; for k0 in [0, K) step 64:
//           T[i][j] += B[n0 + 16i:+16, k0:+64] · Ap[k0/4:+16, 4(m0 + 16j):+64]
//         y[m0 + 16j + r][n0 + 16i:+16] = epilogue(transpose(T[i][j])[r])
//
// with the N and M tails in tiles of 16. The 2 x 2 block uses all eight
// tile registers (four accumulators, two B and two A tiles): four tdpbssd
// per four tile loads. The write-back transposes each tile in vector
// registers and computes the epilogue on 16 columns at a time.
//
// Needs N % 16 == 0 and K % 64 == 0 (the strategy picks AMX only then, so
// no tile reads past the weights). `i8-amx-emulated` builds the same kernel
// and then replaces each amx op by scalar code with its instruction's
// semantics (see "AMX emulation" below), so the whole kernel is tested on
// CPUs without AMX.
//===----------------------------------------------------------------------===//
#include "GemmConfig.h"

#include "comfyquant/Codegen/CPU/Passes.h"

#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/AMX/Transforms.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTCPUAMXGEMM
#define GEN_PASS_DEF_COMFYQUANTCPUCONVERTCFANDAMXTOLLVM
#include "comfyquant/Codegen/CPU/Passes.h.inc"
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

//===----------------------------------------------------------------------===//
// AMX emulation (i8-amx-emulated)
//===----------------------------------------------------------------------===//
//
// The kernel keeps the amx ops of the native one; each is then replaced by
// scalar code with the semantics of the instruction it lowers to, on an
// emulated tile state: a 64-byte ldtilecfg block (palette 1, per tile
// register its rows and bytes per row, from the tile types as LLVM derives
// the real one) and eight 16 x 64-byte tile registers. Every tile op takes
// its shape from the config and traps (ud2, where the CPU raises #UD) when
// the config does not match its use; tileloadd / tilestored move rows of
// colsb bytes at base + row · stride; tdpbssd(dst, src1, src2) is
//   dst[m][n] += Σ_{k < src1.colsb/4} Σ_{i<4} src1[m][4k+i] · src2[k][4n+i]
// in i32 with wrap-around. So a swapped operand, a wrong stride, index or
// tile shape gives wrong results (or a trap) as it would on the CPU.

/// The ldtilecfg layout (palette 1): palette id at byte 0, the bytes per
/// row of tile t at 16 + 2t (u16), its rows at 48 + t.
constexpr int64_t kCfgBytes = 64, kCfgColsb = 16, kCfgRows = 48;
constexpr int64_t kTileRegs = 8, kTileRows = 16, kTileRowBytes = 64;

/// The emulated tile state of one GEMM: its config block and registers.
struct TileState {
  Value cfg; // memref<64xi8>
  Value tmm; // memref<8x16x64xi8>
};

struct EmulationPlan {
  DenseMap<Operation *, TileState> state; // every amx op of an emulated GEMM
  DenseMap<Operation *, int64_t> reg;     // tile_zero / tile_load: its tile
};

int64_t tileRowBytes(amx::TileType t) {
  return t.getShape()[1] * t.getElementType().getIntOrFloatBitWidth() / 8;
}

/// The tile registers of a block: accumulators 0-3 (B tile i, A tile j at
/// i * blockM + j), B tiles 4-5, A tiles 6-7.
constexpr int64_t kAccReg = 0, kBReg = 4, kAReg = 6;

/// Allocates the tile state before `first` (the GEMM's loops are the ops
/// [first, end)), records it for every amx op in them and writes the
/// config: each register (given to every tile_zero / tile_load result in
/// `plan.reg` by the kernel; tile_muli accumulates into its acc's) with the
/// shape of the tiles it holds.
LogicalResult planTiles(ImplicitLocOpBuilder &b, Operation *first,
                        Operation *end, EmulationPlan &plan) {
  auto i8 = b.getI8Type();
  TileState st;
  b.setInsertionPoint(first);
  st.cfg = memref::AllocaOp::create(b, MemRefType::get({kCfgBytes}, i8));
  st.tmm = memref::AllocaOp::create(
      b, MemRefType::get({kTileRegs, kTileRows, kTileRowBytes}, i8));
  SmallVector<amx::TileType> tiles(kTileRegs);
  LogicalResult result = success();
  for (Operation *it = first; it != end; it = it->getNextNode())
    it->walk<WalkOrder::PreOrder>([&](Operation *x) {
      if (!isa<amx::AMXDialect>(x->getDialect()))
        return;
      plan.state[x] = st;
      if (!isa<amx::TileZeroOp, amx::TileLoadOp>(x))
        return;
      auto reg = plan.reg.find(x);
      auto type = cast<amx::TileType>(x->getResult(0).getType());
      if (reg == plan.reg.end() || reg->second >= kTileRegs ||
          (tiles[reg->second] && tiles[reg->second] != type)) {
        result = x->emitError("AMX emulation: no register, or one holding "
                              "tiles of two shapes");
        return;
      }
      tiles[reg->second] = type;
    });
  if (failed(result))
    return failure();
  // The 64-byte block ldtilecfg would load, stored once before the loops.
  SmallVector<int8_t> bytes(kCfgBytes, 0);
  bytes[0] = 1; // palette 1
  for (auto [t, type] : llvm::enumerate(tiles)) {
    if (!type)
      continue;
    const int64_t colsb = tileRowBytes(type);
    bytes[kCfgColsb + 2 * t] = static_cast<int8_t>(colsb & 0xFF);
    bytes[kCfgColsb + 2 * t + 1] = static_cast<int8_t>(colsb >> 8);
    bytes[kCfgRows + t] = static_cast<int8_t>(type.getShape()[0]);
  }
  auto blockType = VectorType::get({kCfgBytes}, i8);
  Value block = arith::ConstantOp::create(
      b, blockType, DenseElementsAttr::get(blockType, ArrayRef<int8_t>(bytes)));
  Value c0 = arith::ConstantIndexOp::create(b, 0);
  vector::StoreOp::create(b, block, st.cfg, ValueRange{c0});
  return success();
}

/// Scalar building blocks over one GEMM's tile state.
class TileEmitter {
public:
  TileEmitter(ImplicitLocOpBuilder &b, TileState st) : b(b), st(st) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }

  /// Rows / bytes per row of tile `t` as configured.
  Value rows(Value t) {
    return cfgByte(arith::AddIOp::create(b, idx(kCfgRows), t));
  }
  Value colsb(Value t) {
    Value first = idx(kCfgColsb);
    Value at =
        arith::AddIOp::create(b, first, arith::MulIOp::create(b, t, idx(2)));
    Value lo = cfgByte(at);
    Value hi = cfgByte(arith::AddIOp::create(b, at, idx(1)));
    return arith::AddIOp::create(b, lo, arith::MulIOp::create(b, hi, idx(256)));
  }

  /// ud2 (#UD on the CPU) unless `ok`.
  void trapUnless(Value ok) {
    Value bad = arith::XOrIOp::create(
        b, ok, arith::ConstantOp::create(b, b.getBoolAttr(true)));
    scf::IfOp::create(b, bad, [&](OpBuilder &nb, Location loc) {
      LLVM::Trap::create(nb, loc);
      scf::YieldOp::create(nb, loc);
    });
  }
  Value eq(Value a, Value c) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, a, c);
  }
  Value both(Value a, Value c) { return arith::AndIOp::create(b, a, c); }

  /// The config is palette 1 and gives tile `t` the shape of `type`.
  void checkUse(Value t, amx::TileType type) {
    Value paletteId = cfgByte(idx(0));
    Value palette = eq(paletteId, idx(1));
    Value configuredRows = rows(t);
    Value r = eq(configuredRows, idx(type.getShape()[0]));
    Value configuredColsb = colsb(t);
    Value c = eq(configuredColsb, idx(tileRowBytes(type)));
    trapUnless(both(palette, both(r, c)));
  }

  Value byte(Value t, Value r, Value c) {
    return memref::LoadOp::create(b, st.tmm, ValueRange{t, r, c});
  }
  void setByte(Value t, Value r, Value c, Value v) {
    memref::StoreOp::create(b, v, st.tmm, ValueRange{t, r, c});
  }
  /// Element `n` of type `elt` (2 or 4 bytes) of row `r`: bytes
  /// size·n .. size·n + size - 1, little-endian.
  Value element(Value t, Value r, Value n, Type elt) {
    const int64_t size = elt.getIntOrFloatBitWidth() / 8;
    Value c = arith::MulIOp::create(b, n, idx(size));
    Value bytes = vector::LoadOp::create(
        b, VectorType::get({size}, b.getI8Type()), st.tmm, ValueRange{t, r, c});
    Value word = vector::BitCastOp::create(b, VectorType::get({1}, elt), bytes);
    return vector::ExtractOp::create(b, word, ArrayRef<int64_t>{0});
  }
  void setElement(Value t, Value r, Value n, Value v) {
    const int64_t size = v.getType().getIntOrFloatBitWidth() / 8;
    Value c = arith::MulIOp::create(b, n, idx(size));
    Value word =
        vector::BroadcastOp::create(b, VectorType::get({1}, v.getType()), v);
    Value bytes = vector::BitCastOp::create(
        b, VectorType::get({size}, b.getI8Type()), word);
    vector::StoreOp::create(b, bytes, st.tmm, ValueRange{t, r, c});
  }
  Value dword(Value t, Value r, Value n) {
    return element(t, r, n, b.getI32Type());
  }
  void setDword(Value t, Value r, Value n, Value v) { setElement(t, r, n, v); }
  /// tilezero: every byte of the register.
  void zero(Value t) {
    auto row = VectorType::get({kTileRowBytes}, b.getI8Type());
    Value zeros = arith::ConstantOp::create(b, row, b.getZeroAttr(row));
    Value c0 = idx(0);
    Value rowsEnd = idx(kTileRows);
    Value c1 = idx(1);
    forLoop(b, c0, rowsEnd, c1, [&](ImplicitLocOpBuilder &rb, Value r) {
      vector::StoreOp::create(rb, zeros, st.tmm, ValueRange{t, r, c0});
    });
  }

  ImplicitLocOpBuilder &b;
  TileState st;

private:
  Value cfgByte(Value at) {
    Value v = memref::LoadOp::create(b, st.cfg, ValueRange{at});
    Value wide = arith::ExtUIOp::create(b, b.getI64Type(), v);
    return arith::IndexCastOp::create(b, b.getIndexType(), wide);
  }
};

/// Memory as tileloadd / tilestored address it: `base`'s elements from
/// its first one as a 1-D memref, the element index of base[indices] and
/// the row stride in elements (given, else the stride of the second
/// innermost dimension, as the amx lowering takes it).
struct RowMajorView {
  Value flat, start, stride;
};
RowMajorView viewOf(TileEmitter &e, Value base, ValueRange indices,
                    Value stride) {
  ImplicitLocOpBuilder &b = e.b;
  auto type = cast<MemRefType>(base.getType());
  auto md = memref::ExtractStridedMetadataOp::create(b, base);
  Value start = e.idx(0), extent = e.idx(1);
  for (auto [i, at] : llvm::enumerate(indices)) {
    Value step = md.getStrides()[i];
    start = arith::AddIOp::create(b, start,
                                  arith::MulIOp::create(b, at, step));
    Value last = arith::SubIOp::create(b, md.getSizes()[i], e.idx(1));
    extent = arith::AddIOp::create(b, extent,
                                   arith::MulIOp::create(b, last, step));
  }
  auto flatType = MemRefType::get(
      {ShapedType::kDynamic}, type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}));
  Value flat = memref::ReinterpretCastOp::create(
      b, flatType, md.getBaseBuffer(), OpFoldResult(md.getOffset()),
      ArrayRef<OpFoldResult>{OpFoldResult(extent)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  if (!stride)
    stride = md.getStrides()[type.getRank() - 2];
  return {flat, start, stride};
}

/// Visits every element a tileloadd / tilestored of tile `t` moves: rows
/// r < rows(t), elements i < colsb(t) / element size of the row; `fn`
/// gets the flat index of the row's start (base + r · stride).
void forEachTileElement(
    TileEmitter &e, Value t, Type elt, const RowMajorView &mem,
    llvm::function_ref<void(TileEmitter &, Value r, Value i, Value rowStart)>
        fn) {
  ImplicitLocOpBuilder &b = e.b;
  Value rows = e.rows(t);
  Value perRow = e.colsb(t);
  if (const int64_t size = elt.getIntOrFloatBitWidth() / 8; size > 1)
    perRow = arith::DivUIOp::create(b, perRow, e.idx(size));
  Value c0 = e.idx(0), c1 = e.idx(1);
  forLoop(b, c0, rows, c1, [&](ImplicitLocOpBuilder &rb, Value r) {
    Value offset = arith::MulIOp::create(rb, r, mem.stride);
    Value rowStart = arith::AddIOp::create(rb, mem.start, offset);
    forLoop(rb, c0, perRow, c1, [&](ImplicitLocOpBuilder &cb, Value i) {
      TileEmitter ce(cb, e.st);
      fn(ce, r, i, rowStart);
    });
  });
}

template <typename Op>
struct TileOpEmulation : OpConversionPattern<Op> {
  TileOpEmulation(const TypeConverter &tc, MLIRContext *ctx,
                  const EmulationPlan &plan)
      : OpConversionPattern<Op>(tc, ctx), plan(plan) {}
  TileState stateOf(Operation *op) const { return plan.state.lookup(op); }
  Value regOf(ImplicitLocOpBuilder &b, Operation *op) const {
    return arith::ConstantIndexOp::create(b, plan.reg.lookup(op));
  }
  const EmulationPlan &plan;
};

struct TileZeroEmulation : TileOpEmulation<amx::TileZeroOp> {
  using TileOpEmulation::TileOpEmulation;
  LogicalResult
  matchAndRewrite(amx::TileZeroOp op, OpAdaptor,
                  ConversionPatternRewriter &rw) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    TileEmitter e(b, stateOf(op));
    Value t = regOf(b, op);
    e.checkUse(t, op.getTileType());
    e.zero(t);
    rw.replaceOp(op, t);
    return success();
  }
};

/// Element `i` of a row in the register: a byte (i8 tiles), a word (bf16)
/// or a dword (i32, f32).
bool supportedElement(Type elt) {
  return elt.isInteger(8) || elt.isInteger(32) || elt.isBF16() || elt.isF32();
}

struct TileLoadEmulation : TileOpEmulation<amx::TileLoadOp> {
  using TileOpEmulation::TileOpEmulation;
  LogicalResult
  matchAndRewrite(amx::TileLoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rw) const override {
    auto type = cast<amx::TileType>(op.getRes().getType());
    Type elt = type.getElementType();
    if (!supportedElement(elt))
      return rw.notifyMatchFailure(op, "AMX emulation: i8, bf16, i32 or f32 "
                                       "tiles only");
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    TileEmitter e(b, stateOf(op));
    Value t = regOf(b, op);
    e.checkUse(t, type);
    // tileloadd: rows of colsb bytes from base + r · stride, the rest of
    // the register zeroed.
    e.zero(t);
    RowMajorView mem = viewOf(e, adaptor.getBase(), adaptor.getIndices(),
                              adaptor.getStride());
    forEachTileElement(e, t, elt, mem,
                       [&](TileEmitter &ce, Value r, Value i, Value row) {
                         Value at = arith::AddIOp::create(ce.b, row, i);
                         Value v = memref::LoadOp::create(ce.b, mem.flat,
                                                          ValueRange{at});
                         if (elt.isInteger(8))
                           ce.setByte(t, r, i, v);
                         else
                           ce.setElement(t, r, i, v);
                       });
    rw.replaceOp(op, t);
    return success();
  }
};

struct TileStoreEmulation : TileOpEmulation<amx::TileStoreOp> {
  using TileOpEmulation::TileOpEmulation;
  LogicalResult
  matchAndRewrite(amx::TileStoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rw) const override {
    auto type = cast<amx::TileType>(op.getVal().getType());
    Type elt = type.getElementType();
    if (!supportedElement(elt))
      return rw.notifyMatchFailure(op, "AMX emulation: i8, bf16, i32 or f32 "
                                       "tiles only");
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    TileEmitter e(b, stateOf(op));
    Value t = adaptor.getVal();
    e.checkUse(t, type);
    // tilestored: rows of colsb bytes to base + r · stride.
    RowMajorView mem = viewOf(e, adaptor.getBase(), adaptor.getIndices(),
                              adaptor.getStride());
    forEachTileElement(e, t, elt, mem,
                       [&](TileEmitter &ce, Value r, Value i, Value row) {
                         Value v = elt.isInteger(8)
                                       ? ce.byte(t, r, i)
                                       : ce.element(t, r, i, elt);
                         Value at = arith::AddIOp::create(ce.b, row, i);
                         memref::StoreOp::create(ce.b, v, mem.flat,
                                                 ValueRange{at});
                       });
    rw.eraseOp(op);
    return success();
  }
};

/// Reads element `i` of row `r` of operand tile `t` as the accumulator's
/// type (`lhs`: src1, else src2).
using TileReadFn = function_ref<Value(ImplicitLocOpBuilder &, TileEmitter &,
                                      Value t, Value r, Value i, bool lhs)>;
/// One multiply-add of the dot product: the new sum.
using TileStepFn =
    function_ref<Value(ImplicitLocOpBuilder &, Value sum, Value x, Value y)>;

/// A tile dot product (tdpbssd, tdpbf16ps) on the emulated registers:
///   dst[m][n] = step(... step(dst[m][n], src1[m][g·q + i], src2[q][g·n + i])
/// over q < rows(src2) and i < g (g elements of a dword) in that order,
/// after checking the three tiles' uses against the config and the
/// instruction's shapes (#UD unless dst is m x n dwords, src1 m x 4k
/// bytes, src2 k x 4n bytes). Returns dst's register.
template <typename Op>
Value emitTileDot(TileEmitter &e, Op op, typename Op::Adaptor adaptor,
                  Type accElt, int64_t group, TileReadFn read,
                  TileStepFn step) {
  ImplicitLocOpBuilder &b = e.b;
  Value dst = adaptor.getAcc(), src1 = adaptor.getLhs(),
        src2 = adaptor.getRhs();
  e.checkUse(dst, cast<amx::TileType>(op.getAcc().getType()));
  e.checkUse(src1, cast<amx::TileType>(op.getLhs().getType()));
  e.checkUse(src2, cast<amx::TileType>(op.getRhs().getType()));
  Value m = e.rows(dst), nBytes = e.colsb(dst);
  Value k = e.rows(src2), kBytes = e.colsb(src1);
  Value c4 = e.idx(4);
  Value k4 = arith::MulIOp::create(b, k, c4);
  Value sameM = e.eq(e.rows(src1), m);
  Value sameN = e.eq(e.colsb(src2), nBytes);
  Value shapes = e.both(sameM, sameN);
  shapes = e.both(shapes, e.eq(k4, kBytes));
  Value nRem = arith::RemUIOp::create(b, nBytes, c4);
  shapes = e.both(shapes, e.eq(nRem, e.idx(0)));
  e.trapUnless(shapes);
  Value n = arith::DivUIOp::create(b, nBytes, c4);
  Value c0 = e.idx(0), c1 = e.idx(1), cg = e.idx(group);
  forLoop(b, c0, m, c1, [&](ImplicitLocOpBuilder &mb, Value row) {
    forLoop(mb, c0, n, c1, [&](ImplicitLocOpBuilder &nb, Value col) {
      TileEmitter ne(nb, e.st);
      Value init = ne.element(dst, row, col, accElt);
      auto loop = scf::ForOp::create(
          nb, c0, k, c1, ValueRange{init},
          [&](OpBuilder &kb0, Location loc, Value q, ValueRange it) {
            ImplicitLocOpBuilder kb(loc, kb0);
            TileEmitter ke(kb, e.st);
            Value sum = it[0];
            Value qg = arith::MulIOp::create(kb, q, cg);
            Value colg = arith::MulIOp::create(kb, col, cg);
            for (int64_t i = 0; i < group; ++i) {
              Value ci = ke.idx(i);
              Value aAt = arith::AddIOp::create(kb, qg, ci);
              Value bAt = arith::AddIOp::create(kb, colg, ci);
              Value x = read(kb, ke, src1, row, aAt, /*lhs=*/true);
              Value y = read(kb, ke, src2, q, bAt, /*lhs=*/false);
              sum = step(kb, sum, x, y);
            }
            scf::YieldOp::create(kb, sum);
          });
      ne.setElement(dst, row, col, loop.getResult(0));
    });
  });
  return dst;
}

/// tdpbssd dst, src1, src2 (tdpbsud / tdpbusd / tdpbuud with zext):
///   dst[m][n] += Σ_{k < src1.colsb/4} Σ_{i<4} src1[m][4k+i] · src2[k][4n+i]
/// in i32 with wrap-around.
struct TileMulIEmulation : TileOpEmulation<amx::TileMulIOp> {
  using TileOpEmulation::TileOpEmulation;
  LogicalResult
  matchAndRewrite(amx::TileMulIOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rw) const override {
    if (!op.getAcc().hasOneUse())
      return op.emitError("AMX emulation: tdpbssd overwrites its "
                          "accumulator, which has other uses");
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    TileEmitter e(b, stateOf(op));
    const bool zextA = op.getIsZextLhs(), zextB = op.getIsZextRhs();
    Type i32 = b.getI32Type();
    Value dst = emitTileDot(
        e, op, adaptor, i32, 4,
        [&](ImplicitLocOpBuilder &rb, TileEmitter &te, Value t, Value r,
            Value i, bool lhs) -> Value {
          Value v = te.byte(t, r, i);
          if (lhs ? zextA : zextB)
            return arith::ExtUIOp::create(rb, i32, v);
          return arith::ExtSIOp::create(rb, i32, v);
        },
        [&](ImplicitLocOpBuilder &sb, Value sum, Value x, Value y) -> Value {
          Value p = arith::MulIOp::create(sb, x, y);
          return arith::AddIOp::create(sb, sum, p);
        });
    rw.replaceOp(op, dst);
    return success();
  }
};

/// tdpbf16ps dst, src1, src2:
///   dst[m][n] += src1[m][2k] · src2[k][2n], then += src1[m][2k+1] ·
///   src2[k][2n+1], for k < src1.colsb / 4 in order,
/// each step an f32 multiply-add rounded once to nearest even, bf16 inputs
/// that are denormal read as zero and a denormal result written as zero
/// (the instruction's DAZ and FTZ, whatever MXCSR says).
struct TileMulFEmulation : TileOpEmulation<amx::TileMulFOp> {
  using TileOpEmulation::TileOpEmulation;
  LogicalResult
  matchAndRewrite(amx::TileMulFOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rw) const override {
    if (!op.getAcc().hasOneUse())
      return op.emitError("AMX emulation: tdpbf16ps overwrites its "
                          "accumulator, which has other uses");
    if (!op.getLhsTileType().getElementType().isBF16())
      return rw.notifyMatchFailure(op, "AMX emulation: bf16 operands only");
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    TileEmitter e(b, stateOf(op));
    Type f32 = b.getF32Type(), bf16 = b.getBF16Type(), i32 = b.getI32Type();
    // A value whose exponent field is zero, as a signed zero.
    auto flush = [&](ImplicitLocOpBuilder &fb, Value v) -> Value {
      Value bits = arith::BitcastOp::create(fb, i32, v);
      Value expField = arith::AndIOp::create(
          fb, bits,
          arith::ConstantOp::create(fb, fb.getI32IntegerAttr(0x7F800000)));
      Value denormal = arith::CmpIOp::create(
          fb, arith::CmpIPredicate::eq, expField,
          arith::ConstantOp::create(fb, fb.getI32IntegerAttr(0)));
      Value sign = arith::AndIOp::create(
          fb, bits,
          arith::ConstantOp::create(fb, fb.getI32IntegerAttr(INT32_MIN)));
      return arith::SelectOp::create(
          fb, denormal, arith::BitcastOp::create(fb, f32, sign), v);
    };
    Value dst = emitTileDot(
        e, op, adaptor, f32, 2,
        [&](ImplicitLocOpBuilder &rb, TileEmitter &te, Value t, Value r,
            Value i, bool) -> Value {
          return flush(rb, arith::ExtFOp::create(rb, f32,
                                                 te.element(t, r, i, bf16)));
        },
        [&](ImplicitLocOpBuilder &sb, Value sum, Value x, Value y) -> Value {
          return flush(sb, math::FmaOp::create(sb, x, y, sum));
        });
    rw.replaceOp(op, dst);
    return success();
  }
};

/// Replaces the amx ops of the emulated GEMMs by their emulation; tiles
/// become their register numbers (index), loop-carried ones included.
LogicalResult emulateTiles(Operation *root, const EmulationPlan &plan) {
  MLIRContext *ctx = root->getContext();
  TypeConverter converter;
  converter.addConversion([](Type t) { return t; });
  converter.addConversion(
      [](amx::TileType t) -> Type { return IndexType::get(t.getContext()); });
  ConversionTarget target(*ctx);
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  target.addIllegalDialect<amx::AMXDialect>();
  RewritePatternSet patterns(ctx);
  patterns.add<TileZeroEmulation, TileLoadEmulation, TileStoreEmulation,
               TileMulIEmulation, TileMulFEmulation>(converter, ctx, plan);
  scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                       target);
  return applyPartialConversion(root, target, std::move(patterns));
}

/// The write-back of accumulator tiles: y = epilogue(C tile) or C += tile.
class TileWriteBack {
public:
  TileWriteBack(ImplicitLocOpBuilder &b, Value M, Value C,
                linalg::GenericOp epi, unsigned accOperand, Type acc)
      : M(M), C(C), epi(epi), accOperand(accOperand), acc(acc) {
    auto tileT = MemRefType::get({16, 16}, acc);
    T = memref::AllocaOp::create(b, tileT);
    Tt = memref::AllocaOp::create(b, tileT);
  }

  /// The first op the write-back made (its buffers, before the loops).
  Operation *firstOp() const { return T.getDefiningOp(); }

  /// Writes the tile at (n0, m0), transposed C: rows m0 .. m0 + 15 that
  /// exist, columns n0 .. n0 + 15.
  void emit(ImplicitLocOpBuilder &b, Value tile, Value n0, Value m0) {
    Value c0 = idx(b, 0), c1 = idx(b, 1), c16 = idx(b, 16);
    amx::TileStoreOp::create(b, T, ValueRange{c0, c0}, tile);
    Value rows =
        arith::MinSIOp::create(b, c16, arith::SubIOp::create(b, M, m0));
    if (vectorRows(b, n0, m0, rows))
      return;
    // C[m0 + j][n0 + i] (+)= T[i][j], one element at a time.
    forLoop(b, c0, rows, c1, [&](ImplicitLocOpBuilder &jb, Value j) {
      Value m = arith::AddIOp::create(jb, m0, j);
      forLoop(jb, c0, c16, c1, [&](ImplicitLocOpBuilder &ib, Value i) {
        Value n = arith::AddIOp::create(ib, n0, i);
        Value t = memref::LoadOp::create(ib, T, ValueRange{i, j});
        if (!epi) {
          Value old = memref::LoadOp::create(ib, C, ValueRange{m, n});
          memref::StoreOp::create(ib, add(ib, old, t), C, ValueRange{m, n});
          return;
        }
        Value y = emitEpilogueAt(ib, ib.getLoc(), epi, accOperand, t, m, n);
        memref::StoreOp::create(ib, y, epi.getDpsInits()[0], ValueRange{m, n});
      });
    });
  }

private:
  static Value idx(ImplicitLocOpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, v);
  }
  /// C's element plus a tile's (i32 or f32; scalars or vectors).
  Value add(ImplicitLocOpBuilder &b, Value x, Value y) const {
    if (isa<FloatType>(acc))
      return arith::AddFOp::create(b, x, y);
    return arith::AddIOp::create(b, x, y);
  }

  /// The tile transposed in registers (16 x 16 i32: 64 shuffles, not 256
  /// scalar moves) and written a row of 16 columns at a time, the epilogue
  /// on vectors; false, with nothing left behind, where the epilogue has
  /// no vector form.
  bool vectorRows(ImplicitLocOpBuilder &b, Value n0, Value m0, Value rows) {
    auto tileV = VectorType::get({16, 16}, acc);
    auto rowV = VectorType::get({16}, acc);
    Value c0 = idx(b, 0), c1 = idx(b, 1);
    Value zero = arith::ConstantOp::create(b, b.getZeroAttr(acc));
    Value tv = vector::TransferReadOp::create(b, tileV, T, ValueRange{c0, c0},
                                              zero, ArrayRef<bool>{true, true});
    Value tt = vector::TransposeOp::create(b, tv, ArrayRef<int64_t>{1, 0});
    Operation *write = vector::TransferWriteOp::create(
        b, tt, Tt, ValueRange{c0, c0}, ArrayRef<bool>{true, true});
    bool vectorized = true;
    auto loop = scf::ForOp::create(
        b, c0, rows, c1, ValueRange{},
        [&](OpBuilder &nb, Location loc, Value j, ValueRange) {
          ImplicitLocOpBuilder jb(loc, nb);
          Value m = arith::AddIOp::create(jb, m0, j);
          Value row = vector::LoadOp::create(jb, rowV, Tt, ValueRange{j, c0});
          if (!epi) {
            Value pad = arith::ConstantOp::create(jb, jb.getZeroAttr(acc));
            Value old = vector::TransferReadOp::create(
                jb, rowV, C, ValueRange{m, n0}, pad, ArrayRef<bool>{true});
            vector::TransferWriteOp::create(jb, add(jb, old, row), C,
                                            ValueRange{m, n0},
                                            ArrayRef<bool>{true});
          } else if (Value y = emitEpilogueVectorAt(jb, loc, epi, accOperand,
                                                    row, m, n0)) {
            vector::TransferWriteOp::create(jb, y, epi.getDpsInits()[0],
                                            ValueRange{m, n0},
                                            ArrayRef<bool>{true});
          } else {
            vectorized = false;
          }
          scf::YieldOp::create(jb);
        });
    if (vectorized)
      return true;
    loop.erase();
    write->erase();
    tt.getDefiningOp()->erase();
    tv.getDefiningOp()->erase();
    return false;
  }

  Value M, C;
  linalg::GenericOp epi;
  unsigned accOperand;
  Type acc;    ///< i32 or f32
  Value T, Tt; ///< a tile as stored, and transposed
};

LogicalResult rewrite(linalg::GenericOp op, const GemmConfig &cfg,
                      EmulationPlan *plan) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return op.emitError("AMX GEMM: expected C += A · Bᵀ on buffers");
  Value A = op.getDpsInputs()[0], B = op.getDpsInputs()[1],
        C = op.getDpsInits()[0];
  auto aType = dyn_cast<MemRefType>(A.getType());
  auto bType = dyn_cast<MemRefType>(B.getType());
  auto cType = dyn_cast<MemRefType>(C.getType());
  // i8 x i8 -> i32 (tdpbssd) or bf16 x bf16 -> f32 (tdpbf16ps).
  const bool bf16 = cfg.isAmxBF16();
  Builder types(op.getContext());
  Type opElt = bf16 ? Type(types.getBF16Type()) : types.getI8Type();
  Type accElt = bf16 ? Type(types.getF32Type()) : types.getI32Type();
  if (!aType || !bType || !cType || aType.getElementType() != opElt ||
      bType.getElementType() != opElt || cType.getElementType() != accElt ||
      !bType.hasStaticShape())
    return op.emitError("AMX GEMM: expected ")
           << opElt << " memrefs A [M, K], B [N, K] and an " << accElt
           << " C [M, N] (run after bufferization)";
  // Elements per dword (a pair of K values per tdpbf16ps product, four per
  // tdpbssd one) and per 64-byte K step.
  const int64_t group = bf16 ? 2 : 4, kStep = 16 * group;
  const int64_t N = bType.getShape()[0], K = bType.getShape()[1];
  if (N % 16 || K % kStep)
    return op.emitError("AMX GEMM needs N % 16 == 0 and K % ")
           << kStep << " == 0, got N = " << N << ", K = " << K;
  // Tiles per block in each direction (the verifier allows 16 or 32).
  const int64_t blockN = cfg.nr / 16, blockM = cfg.mr / 16;

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
  Value c0 = idx(0), c1 = idx(1), c16 = idx(16), cg = idx(group);
  Value M = memref::DimOp::create(b, A, 0);
  Value Mp = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, arith::AddIOp::create(b, M, idx(15)), c16),
      c16);
  Value rowElts = arith::MulIOp::create(b, Mp, cg);
  auto apType = MemRefType::get({K / group, ShapedType::kDynamic}, opElt);
  Value Ap = memref::AllocOp::create(b, apType, ValueRange{rowElts},
                                     b.getI64IntegerAttr(64));
  // Pack: Ap[q][g·m .. g·m + g-1] = A[m][g·q .. g·q + g-1], the padding
  // rows zero: a transpose of A's dwords, 16 rows by 16 dwords (one 64-byte
  // K step) at a time in vector registers, not one dword per load and
  // store (K / g is a multiple of 16).
  Type i32 = b.getI32Type();
  auto stepV = VectorType::get({kStep}, opElt);
  auto dwordsV = VectorType::get({16}, i32);
  auto blockV = VectorType::get({16, 16}, i32);
  Value zeroRow = arith::ConstantOp::create(b, dwordsV, b.getZeroAttr(dwordsV));
  Value zeroBlock =
      arith::ConstantOp::create(b, blockV, b.getZeroAttr(blockV));
  forLoop(b, c0, Mp, c16, [&](ImplicitLocOpBuilder &ib, Value m0) {
    Value col = arith::MulIOp::create(ib, m0, cg);
    forLoop(ib, c0, idx(K / group), c16,
            [&](ImplicitLocOpBuilder &jb, Value q0) {
              Value k0 = arith::MulIOp::create(jb, q0, cg);
              Value block = zeroBlock;
              for (int64_t r = 0; r < 16; ++r) {
                Value m = arith::AddIOp::create(jb, m0, idx(r));
                Value real =
                    arith::CmpIOp::create(jb, arith::CmpIPredicate::ult, m, M);
                auto row = scf::IfOp::create(
                    jb, real,
                    [&](OpBuilder &tb, Location loc) {
                      Value v = vector::LoadOp::create(tb, loc, stepV, A,
                                                       ValueRange{m, k0});
                      Value d = vector::BitCastOp::create(tb, loc, dwordsV, v);
                      scf::YieldOp::create(tb, loc, d);
                    },
                    [&](OpBuilder &eb, Location loc) {
                      scf::YieldOp::create(eb, loc, zeroRow);
                    });
                block = vector::InsertOp::create(jb, row.getResult(0), block,
                                                 ArrayRef<int64_t>{r});
              }
              Value t = vector::TransposeOp::create(jb, block,
                                                    ArrayRef<int64_t>{1, 0});
              for (int64_t c = 0; c < 16; ++c) {
                Value d = vector::ExtractOp::create(jb, t, ArrayRef<int64_t>{c});
                Value v = vector::BitCastOp::create(jb, stepV, d);
                Value q = arith::AddIOp::create(jb, q0, idx(c));
                vector::StoreOp::create(jb, v, Ap, ValueRange{q, col});
              }
            });
  });

  TileWriteBack writeBack(b, M, C, epi, accOperand, accElt);
  Operation *tilesBegin = writeBack.firstOp();
  auto accT = amx::TileType::get({16, 16}, accElt);
  auto opT = amx::TileType::get({16, kStep}, opElt);
  auto assign = [&](Value tile, int64_t reg) {
    if (plan)
      plan->reg[tile.getDefiningOp()] = reg;
    return tile;
  };
  // bn x bm tiles of C at (n0, m0): B tiles of rows n0 + 16i, A tiles of
  // rows m0 + 16j.
  auto tileBlock = [&](ImplicitLocOpBuilder &tb, Value n0, Value m0,
                       int64_t bn, int64_t bm) {
    SmallVector<Value> init;
    for (int64_t t = 0; t < bn * bm; ++t)
      init.push_back(assign(amx::TileZeroOp::create(tb, accT), kAccReg + t));
    Value kEnd = idx(K);
    Value kStepV = idx(kStep);
    auto kLoop = scf::ForOp::create(
        tb, c0, kEnd, kStepV, init,
        [&](OpBuilder &kb0, Location loc, Value k0, ValueRange acc) {
          ImplicitLocOpBuilder kb(loc, kb0);
          Value q0 = arith::DivUIOp::create(kb, k0, cg);
          SmallVector<Value> bt, at, sums;
          for (int64_t i = 0; i < bn; ++i) {
            Value n = arith::AddIOp::create(kb, n0, idx(16 * i));
            bt.push_back(assign(
                amx::TileLoadOp::create(kb, opT, B, ValueRange{n, k0}),
                kBReg + i));
          }
          for (int64_t j = 0; j < bm; ++j) {
            Value m = arith::AddIOp::create(kb, m0, idx(16 * j));
            Value col = arith::MulIOp::create(kb, m, cg);
            at.push_back(assign(
                amx::TileLoadOp::create(kb, opT, Ap, ValueRange{q0, col}),
                kAReg + j));
          }
          for (int64_t i = 0; i < bn; ++i)
            for (int64_t j = 0; j < bm; ++j)
              sums.push_back(
                  bf16 ? Value(amx::TileMulFOp::create(kb, accT, bt[i], at[j],
                                                       acc[i * bm + j]))
                       : Value(amx::TileMulIOp::create(kb, accT, bt[i], at[j],
                                                       acc[i * bm + j])));
          scf::YieldOp::create(kb, sums);
        });
    for (int64_t i = 0; i < bn; ++i)
        for (int64_t j = 0; j < bm; ++j) {
          Value n = arith::AddIOp::create(tb, n0, idx(16 * i));
          Value m = arith::AddIOp::create(tb, m0, idx(16 * j));
          writeBack.emit(tb, kLoop.getResult(i * bm + j), n, m);
        }
  };
  // The M tiles of the block [mb, mEnd) for bn B tiles at n0: blocks of
  // blockM A tiles, then one of 16 rows (Mp and the blocks are multiples
  // of 16).
  auto mTiles = [&](ImplicitLocOpBuilder &nb, Value n0, int64_t bn, Value mb,
                    Value mEnd) {
    Value stepM = idx(16 * blockM);
    Value span = arith::SubIOp::create(nb, mEnd, mb);
    Value full = arith::AddIOp::create(
        nb, mb,
        arith::MulIOp::create(nb, arith::DivUIOp::create(nb, span, stepM),
                              stepM));
    forLoop(nb, mb, full, stepM, [&](ImplicitLocOpBuilder &mbb, Value m0) {
      tileBlock(mbb, n0, m0, bn, blockM);
    });
    if (blockM > 1) {
      Value tail =
          arith::CmpIOp::create(nb, arith::CmpIPredicate::ult, full, mEnd);
      scf::IfOp::create(nb, tail, [&](OpBuilder &tb0, Location loc) {
        ImplicitLocOpBuilder tb(loc, tb0);
        tileBlock(tb, n0, full, bn, 1);
        scf::YieldOp::create(tb);
      });
    }
  };
  // M blocks of mc rows (their packed codes stay in L2), every N tile over
  // each.
  const int64_t nFull = N / (16 * blockN) * (16 * blockN);
  forLoop(b, c0, Mp, idx(cfg.mc), [&](ImplicitLocOpBuilder &bb, Value mb) {
    Value mEnd =
        arith::MinUIOp::create(bb, Mp, arith::AddIOp::create(bb, mb, idx(cfg.mc)));
    // (Ops made one statement at a time: the IR must not depend on the
    // host compiler's order of evaluating arguments.)
    Value nEnd = idx(nFull);
    Value nStep = idx(16 * blockN);
    forLoop(bb, c0, nEnd, nStep, [&](ImplicitLocOpBuilder &nb, Value n0) {
      mTiles(nb, n0, blockN, mb, mEnd);
    });
    if (nFull < N)
      mTiles(bb, idx(nFull), 1, mb, mEnd);
  });
  if (plan && failed(planTiles(b, tilesBegin, op, *plan)))
    return failure();
  b.setInsertionPoint(op);
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
    SmallVector<std::pair<linalg::GenericOp, GemmConfig>> todo;
    EmulationPlan plan;
    getOperation().walk([&](linalg::GenericOp op) {
      std::optional<GemmConfig> c = readGemmConfig(op);
      if (c && c->isAmx())
        todo.push_back({op, *c});
    });
    for (auto [op, c] : todo)
      if (failed(rewrite(op, c, c.isEmulatedAmx() ? &plan : nullptr)))
        return signalPassFailure();
    if (!plan.state.empty() && failed(emulateTiles(getOperation(), plan)))
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
