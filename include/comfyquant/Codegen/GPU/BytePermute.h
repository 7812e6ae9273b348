//===- BytePermute.h - PTX prmt.b32 in the decoders ------------*- C++ -*-===//
//
// The fused decoders move bytes with `prmt.b32` (nvvm.prmt, default mode):
// one instruction places up to four bytes of two registers, or looks four
// 3-bit indices up in an 8-byte table. NVVM's op has no folder; the byte
// function is stated here too, so that tests fold decoders that use it.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_BYTEPERMUTE_H
#define COMFYQUANT_CODEGEN_GPU_BYTEPERMUTE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

#include <cstdint>

namespace mlir::comfyquant {

/// prmt.b32 default mode: byte i of the result is byte (selector >> 4i) & 7
/// of the pool {hi, lo} (bytes 0-3 lo, 4-7 hi), or that byte's sign bit
/// replicated when bit 3 of the selector nibble is set.
uint32_t permuteBytes(uint32_t lo, uint32_t hi, uint32_t selector);

/// The same as an nvvm.prmt (i32 operands).
Value permuteBytes(OpBuilder &b, Location loc, Value lo, Value hi,
                   Value selector);

/// The folds that make a decoder of constant codes a constant, for tests
/// that check decoders by folding them: default-mode nvvm.prmt and
/// vector.bitcast of constants (neither folds upstream).
void populateDecoderFoldPatterns(RewritePatternSet &patterns);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_BYTEPERMUTE_H
