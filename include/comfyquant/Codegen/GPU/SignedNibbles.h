//===- SignedNibbles.h - GEMM operands unpacked from signed int4 -*- C++ -*-===//
//
// A weight stored as signed int4, two per byte with the low nibble first
// (W4A4), reaches the GEMM through an elementwise op that unpacks it to i8.
// The tensor-core kernels skip that op's per-element code: each 32-bit
// word of four i8 lanes is formed from the two bytes holding its nibbles
// by shifts and masks, every nibble in the high half of its byte (16 times
// its value, exactly the i8 of that value times 16), and the accumulators
// are shifted back right by 4 (the sums are multiples of 16).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_SIGNEDNIBBLES_H
#define COMFYQUANT_CODEGEN_GPU_SIGNEDNIBBLES_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <optional>

namespace mlir::comfyquant::gpu_codegen {

/// The byte buffer an unpacking op reads, and its one load.
struct SignedNibbles {
  /// The load of the byte holding element (index 0, index 1): its last
  /// index is a value independent of index 1 plus index 1 / 2, its other
  /// indices independent of index 1; the last dim has unit stride.
  memref::LoadOp load;
};

/// `producer` as a signed nibble unpack: 2-D, i8 out, no inputs, one i8
/// load, and a result that is, for every byte b and parity of index 1,
/// the nibble (low for even, high for odd) of b read as a 4-bit two's
/// complement number. The result is checked by folding the body at all
/// 512 (byte, parity) pairs, so any spelling of the unpack is recognised.
std::optional<SignedNibbles> matchSignedNibbles(linalg::GenericOp producer);

} // namespace mlir::comfyquant::gpu_codegen

#endif // COMFYQUANT_CODEGEN_GPU_SIGNEDNIBBLES_H
