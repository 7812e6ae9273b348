//===- ScaleTile.h - reading the staged block-scale tiles -------*- C++ -*-===//
//
// Block-scaled GEMM kernels stage each K step's scale bytes beside the
// operand tiles: MXFP8 one UE8M0 byte per row, NVFP4 four UE4M3 bytes per
// row (one per 16 codes). The block-scaled MMAs take them a 32-bit word
// per row.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_SCALETILE_H
#define COMFYQUANT_CODEGEN_GPU_SCALETILE_H

#include "mlir/IR/Builders.h"

namespace mlir::comfyquant {

/// The i32 scale word of row `row` of a staged scale tile (i8 memref):
/// MXFP8 its byte zero-extended (byte 0), FP4 (`fp4`) its four bytes, the
/// first in the low byte.
Value loadScaleWord(OpBuilder &b, Location loc, Value tile, Value row,
                    bool fp4);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_SCALETILE_H
