//===- Gemm.h - matmul-like linalg.generic ops ------------------*- C++ -*-===//
//
// What every back end needs to find a GEMM and its epilogue in linalg on
// tensors or buffers, and to hold target intrinsics until bufferization is
// done.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_COMMON_GEMM_H
#define COMFYQUANT_CODEGEN_COMMON_GEMM_H

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

namespace mlir::comfyquant::detail {

/// A `linalg.generic` computing C[m, n] += f(A[m, k]) * g(B[n, k]).
struct GemmMatch {
  /// The dialect's GemmKind: I8I8I32, FloatF32, F8F8F32 (FP8 codes, plain
  /// or block-scaled), F4F4F32 (E2M1 codes, block-scaled).
  using Kind = GemmKind;
  Kind kind;
  /// Operand element types as multiplied: i8; f32, bf16 or f16; for
  /// F8F8F32 the FP8 type (f8E4M3FN or f8E5M2) of codes stored as i8; for
  /// F4F4F32 f4E2M1FN.
  Type aElt, bElt;
  int64_t n, k; ///< static N and K
  /// Block-scaled FP8 (MXFP8) and FP4 (NVFP4): the block size B of the scale
  /// operands (inputs 2 and 3, [M, K/B] and [N, K/B]) and the body value that
  /// multiplies each product, computed from those two scales alone; 0 and
  /// null otherwise.
  int64_t block = 0;
  Value blockScale;
};

/// Matches A [M, K] (M may be dynamic), B [N, K] and C [M, N] with maps
/// (m, k), (n, k), (m, n), iterators (parallel, parallel, reduction) and the
/// body `out + ext(a) * ext(b)` (extsi for i8 -> i32, extf or none for
/// floats -> f32, extf(bitcast(i8 -> f8)) for FP8 codes). Also matches the
/// block-scaled form with two more inputs, scales read at (m, k floordiv B)
/// and (n, k floordiv B), and the body `out + (dec(a) * dec(b)) *
/// s(scale_a, scale_b)`, `dec` being the FP8 widening or a decode of E2M1
/// codes (checked at every code).
std::optional<GemmMatch> matchGemm(linalg::GenericOp op);

/// The GEMM `op` is by its `comfyquant.gemm_info` tag (the conversion's, or
/// comfyquant-tag-gemms'): none for an untagged op. The back ends find
/// their GEMMs this way; the body is not matched again (the tag is checked
/// against it by verifyGemmTag).
std::optional<GemmMatch> taggedGemm(linalg::GenericOp op);

/// The tag of a matched GEMM.
GemmInfoAttr gemmInfo(MLIRContext *ctx, const GemmMatch &m);

/// Fails with an error on `op` when its tag does not describe its body
/// (what matchGemm finds).
LogicalResult verifyGemmTag(linalg::GenericOp op);

/// The ops of `op`'s body that `v` depends on.
llvm::SmallPtrSet<Operation *, 16> bodySlice(linalg::GenericOp op, Value v);

/// The constant `v` folds to when `x` is `xValue`: the ops of `body` that
/// `v` depends on (up to `x`; pure, without regions, their other operands
/// constants) cloned into a scratch function and folded there. Null when
/// `v` depends on anything else or does not fold.
Attribute foldSliceAt(Block &body, Value x, TypedAttr xValue, Value v);

/// The values of `v`, a pure function of `op`'s i8 body argument `arg`
/// alone (and of constants), at every code 0..255; empty when `v` depends on
/// anything else or some value does not fold.
SmallVector<Attribute> evaluateAtEveryCode(linalg::GenericOp op, Value v,
                                           unsigned arg);

/// Whether `v` (f32) is `decode(code)` at every code of argument `arg`,
/// bit for bit (any NaN where `decode` gives NaN).
bool decodesEveryCode(linalg::GenericOp op, Value v, unsigned arg,
                      llvm::function_ref<APFloat(unsigned)> decode);

/// The f32 value of the E2M1 code in the low 4 bits of `code`.
APFloat e2m1Value(unsigned code);
/// The f32 value of an E4M3 (f8E4M3FN) byte.
APFloat e4m3Value(unsigned code);

/// If `epi` (an elementwise consumer of the accumulator `acc`) can be
/// computed one element at a time where a GEMM stores `acc` (two parallel
/// loops, `acc` read with the identity map, a destination only written,
/// maps of loop dims and constants, a body of pure scalar ops), the operand
/// number of `acc` in it.
std::optional<unsigned> epilogueAccOperand(linalg::GenericOp epi, Value acc);

/// The value `epi` yields at (row, col) for accumulator element `acc`: its
/// other operands read there (tensor.extract or memref.load; or the value
/// `readInput` gives for the operand, where it gives one), its body cloned
/// at `b`.
Value emitEpilogueAt(OpBuilder &b, Location loc, linalg::GenericOp epi,
                     unsigned accOperand, Value acc, Value row, Value col,
                     llvm::function_ref<Value(OpOperand &)> readInput = {},
                     const IRMapping *seed = nullptr);

/// emitEpilogueAt for the columns [col, col + lanes) at once, `acc` a
/// vector of `lanes`: operands that vary along the column dim are read as
/// vectors (tensors, or memrefs of the identity layout; all columns in
/// bounds), the others once and
/// broadcast, and the body is cloned on vectors. Null, with nothing
/// emitted, when an op of the body has no elementwise vector form or an
/// operand is not contiguous along the columns.
Value emitEpilogueVectorAt(OpBuilder &b, Location loc, linalg::GenericOp epi,
                           unsigned accOperand, Value acc, Value row,
                           Value col);

/// The elementwise op that fills `operand`, a temporary GEMM operand, if the
/// GEMM can evaluate it per element instead of reading the temporary: the
/// operand is a static 2-D memref.alloc used only by `gemm` and that op
/// (before it in the block), which writes all of it (two parallel loops,
/// identity output map, output value unread), reads its inputs at loop
/// dims and constants, has a body of pure scalar ops, linalg.index and
/// memref.loads, and neither the GEMM nor anything between the two writes
/// what it reads.
linalg::GenericOp operandProducer(Value operand, linalg::GenericOp gemm);

/// The buffer a view (subview, cast, reshape, view) is of.
Value baseBuffer(Value v);

/// The buffers (their bases, through views) `producer` reads.
SmallVector<Value> producerReads(linalg::GenericOp producer);

/// The indices `load` (a load in a producer's body) reads for element
/// (row, col): the ops of the body its indices are computed by, cloned at
/// `b` with linalg.index replaced by row and col.
SmallVector<Value> producerLoadIndicesAt(OpBuilder &b, Location loc,
                                         memref::LoadOp load, Value row,
                                         Value col);

/// The value `producer` writes at (row, col): its inputs read there, its
/// body cloned at `b` with linalg.index replaced by row and col.
Value emitProducerAt(OpBuilder &b, Location loc, linalg::GenericOp producer,
                     Value row, Value col, const IRMapping *seed = nullptr);

/// Folds of a producer's index arithmetic at a column x * A + c (x * A | c,
/// or x * A) with constants A and 0 <= c < A, as emitProducerAt gives for
/// the elements of an aligned chunk: (x * A + c) / D -> x * (A / D) + c / D
/// and (x * A + c) % D -> c % D for D dividing A; x / (D / A) and
/// (x % (D / A)) * A + c for D a multiple of A. LLVM does not see through
/// an or whose constant has bits on both sides of a shift, and loads one
/// stored byte once per element that reads it.
void populateAlignedColumnFoldPatterns(RewritePatternSet &patterns);

/// The `count` values `producer` writes at (row, x * align + e) for e in
/// [0, count), count <= align, with the producer's divisions and remainders
/// of those columns folded (populateAlignedColumnFoldPatterns): every
/// element's read of one stored byte or scale then has the same index
/// expression, which CSE merges whatever LLVM knows of x.
SmallVector<Value> emitAlignedProducerChunk(OpBuilder &b, Location loc,
                                            linalg::GenericOp producer,
                                            Value row, Value x, int64_t align,
                                            int64_t count,
                                            const IRMapping *seed = nullptr);

/// An LLVM intrinsic call, held as a pure placeholder (a tagged unrealized
/// cast) until comfyquant-cpu-materialize-intrinsics: the buffer
/// deallocation pipeline rejects llvm.call_intrinsic, whose memory effects
/// are unknown.
Value intrinsicPlaceholder(OpBuilder &b, Location loc, StringRef name,
                           Type result, ValueRange args);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_CODEGEN_COMMON_GEMM_H
