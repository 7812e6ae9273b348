//===- NibblePlanes.h - B's decoder one nibble plane at a time -*- C++ -*-===//
//
// A decoder that reads its codes two to a byte (k / 2, nibble k % 2) yields,
// per K step in natural order, half a vector of bytes that each feed two
// lanes: an unpack that repeats every byte. An integer GEMM sums exactly in
// any order, so a one-row call may instead take 2·kv elements of K at a
// time as two planes, the even and the odd elements: the even plane reads
// kv whole bytes and keeps their first nibble, the odd plane the same bytes'
// second nibble, and A's even and odd elements are shuffled apart once per
// step. What comfyquant-cpu-select-strategy (row = i8_planes) and
// comfyquant-cpu-vectorize-gemm agree on.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_LIB_CODEGEN_CPU_NIBBLEPLANES_H
#define COMFYQUANT_LIB_CODEGEN_CPU_NIBBLEPLANES_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::comfyquant::detail {

/// Whether `producer` (B's decoder: elementwise over [N, K], its loops the
/// result's dimensions in order, no inputs, one result) reads the K index (loop 1) only as k / 2 (at least once), k % 2,
/// and k / d for d a multiple of 2·kv (the same over both planes of a
/// step), each in its body's own block.
bool decodesNibblePlanes(linalg::GenericOp producer, int64_t kv);

/// The bias that makes every i8 `producer` yields an unsigned byte for
/// vpdpbusd: minus the least entry where it yields a read of a constant
/// table (a signed nibble's -8..7 become 0..15), else 128.
int64_t nibblePlaneBias(linalg::GenericOp producer);

/// B's row `n` at the elements k = 2·(half + i) + parity, i < width, plus
/// `bias` (modulo 256), as a [1, width] tensor: a generic evaluating
/// `producer`'s body with k / 2 = half + i, k % 2 = parity and k / d =
/// (half + i) / (d / 2). `half` must be a multiple of d / 2 for every such
/// d (decodesNibblePlanes). A bias is folded into a constant table the body
/// reads, and a table that is then its index up to an xor becomes that xor.
Value nibblePlane(OpBuilder &b, Location loc, linalg::GenericOp producer,
                  Value n, Value half, int64_t parity, int64_t width,
                  int64_t bias);

} // namespace mlir::comfyquant::detail

#endif // COMFYQUANT_LIB_CODEGEN_CPU_NIBBLEPLANES_H
