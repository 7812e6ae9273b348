//===- TileLayout.h - tensor-core tiles in workgroup memory -----*- C++ -*-===//
//
// The GEMM kernels stage each K step's operands in workgroup tiles that the
// tensor cores read through matrix descriptors: K-major 8-row x 16-byte
// core matrices, 128 bytes apart along K and 256 bytes apart between 8-row
// groups, no swizzle, each tile on a 128-byte line.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_TILELAYOUT_H
#define COMFYQUANT_CODEGEN_GPU_TILELAYOUT_H

#include "mlir/IR/Builders.h"

namespace mlir::comfyquant {

/// The alignment of every tile (descriptors address 16-byte units from a
/// 128-byte line).
constexpr int64_t kTileAlignment = 128;

/// The shared-memory byte address of word `offsetWords` (null: 0) of a
/// workgroup tile, as an index.
Value tileByteAddress(OpBuilder &b, Location loc, Value tile,
                      Value offsetWords);

/// The same address as a 32-bit register, the form of a `.shared` operand
/// of inline PTX (shared addresses fit in 32 bits).
Value tileSharedAddress(OpBuilder &b, Location loc, Value tile,
                        Value offsetWords);

/// The 64-bit matrix descriptor of a tile starting `offsetWords` (null: 0)
/// words into workgroup buffer `tile`: its shared-window address bits
/// 17..4, leading byte offset 128 >> 4 at bit 16, stride byte offset
/// 256 >> 4 at bit 32, or'ed with `fixedBits` (wgmma: none; tcgen05: the
/// descriptor version at bit 46).
Value tileDescriptor(OpBuilder &b, Location loc, Value tile, Value offsetWords,
                     int64_t fixedBits);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_TILELAYOUT_H
