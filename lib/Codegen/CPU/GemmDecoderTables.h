//===- GemmDecoderTables.h - B's decoder as register tables -----*- C++ -*-===//
//
// The decoder producing a GEMM's B operand, read as a table the micro-kernel
// looks codes up in (byte codes through a 256-entry table, a block scale
// factored out of the table, E2M1 x E4M3 rows narrowed to bf16), and the
// exact bf16 narrowings the bf16 kernels read widened: what
// comfyquant-cpu-vectorize-gemm and comfyquant-cpu-select-strategy
// (decodesThroughTable) agree on.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_LIB_CODEGEN_CPU_GEMMDECODERTABLES_H
#define COMFYQUANT_LIB_CODEGEN_CPU_GEMMDECODERTABLES_H

#include "GemmConfig.h"

#include "comfyquant/Codegen/Common/Gemm.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <utility>

namespace mlir::comfyquant::detail {

/// The f32 `x` of a value yielded as bitcast<bf16>(trunci<i16>(shrui(
/// bitcast<i32>(x), 16))): the high half of an f32's bits, the narrowing
/// convert-comfyquant-to-linalg gives decoded values that are bf16s exactly
/// (FP8 and E2M1 codes, E2M1 x E4M3, FP8 x E8M0; Emitter::exactBF16).
/// Null for anything else.
Value exactNarrowing(Value v);

/// The f32 that `producer` (elementwise, one init, whose block argument is
/// unused: a copy may change its type) yields narrowed exactly to bf16
/// (exactNarrowing), or null.
Value producerNarrowedF32(linalg::GenericOp producer);

/// A copy of `producer` (elementwise, its init's block argument unused)
/// yielding `v`, an f32 of its body, beside it.
linalg::GenericOp copyYieldingF32(RewriterBase &rw,
                                         linalg::GenericOp producer, Value v);

/// A copy of `producer` (elementwise, one bf16 result) that yields the f32
/// its body narrows exactly, or null. Made beside the producer; unused
/// copies are dead code.
linalg::GenericOp widenExactNarrowing(RewriterBase &rw,
                                             linalg::GenericOp producer);

/// An elementwise generic beside `producer` (its byte input first, its
/// init) reading `entries`, the bf16s of the 256 codes, at each byte.
linalg::GenericOp byteTableLookup(RewriterBase &rw,
                                         linalg::GenericOp producer,
                                         ArrayRef<Attribute> entries);

/// The bf16s of `producer` (elementwise, one i8 input, one bf16 result of
/// that byte alone and constants) at each of the 256 codes; none otherwise.
std::optional<SmallVector<Attribute>>
byteTableEntries(linalg::GenericOp producer);

/// A copy of `producer` (elementwise, one i8 input, one bf16 result of
/// that byte alone and constants) reading its result at each of the 256
/// codes from a constant table, or null. Made beside the producer; unused
/// copies are dead code.
linalg::GenericOp tabulateByteDecoder(RewriterBase &rw,
                                             linalg::GenericOp producer);

/// The read of an f32 [R, C] table defined outside `producer`'s body whose
/// exact narrowing `producer` yields; null otherwise.
tensor::ExtractOp narrowedTableRead(linalg::GenericOp producer);

/// For a producer (elementwise, one bf16 result) yielding the exact
/// narrowing (exactNarrowing) of a read of an f32 [R, C] table defined
/// outside its body (comfyquant-cpu-tabulate-decoders' E2M1 x E4M3 rows of
/// NVFP4): a copy reading the same entry of the table narrowed once (a
/// generic beside the table), so a bf16 kernel reads bf16 rows. Null
/// otherwise.
linalg::GenericOp narrowTableRows(RewriterBase &rw,
                                         linalg::GenericOp producer);

/// Whether `v` (in `producer`'s body) is the same at every element of a
/// kv-vector along K that starts at a multiple of kv: it reads the K index
/// (loop 1) only as k floordiv G (arith.divui), G a multiple of kv, and not
/// the byte (argument 0).
bool uniformOverKVectors(linalg::GenericOp producer, Value v,
                                int64_t kv);

/// The bf16 table of X and the value S where `producer` (elementwise, its
/// byte first, one bf16 result) narrows exactly (exactNarrowing) a product
/// X · S, X a function of the byte alone that is a bf16 at every code and S
/// uniform over kv-vectors; none when it is not of that form.
std::optional<std::pair<SmallVector<Attribute>, Value>>
scaledByteTable(linalg::GenericOp producer, int64_t kv);

/// For a producer (elementwise, its byte first, one bf16 result) that
/// narrows exactly (exactNarrowing) a product X · S, X a function of the
/// byte alone that is a bf16 at every code and S uniform over kv-vectors:
/// {a table copy yielding bf16(X), a copy yielding S}. Null when it is not
/// of that form.
std::pair<linalg::GenericOp, linalg::GenericOp>
splitScaledByteDecoder(RewriterBase &rw, linalg::GenericOp producer,
                       int64_t kv);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_LIB_CODEGEN_CPU_GEMMDECODERTABLES_H
