//===- Tcgen05.h - warpgroup MMAs on 5th-gen tensor cores -------*- C++ -*-===//
//
// On sm_100a a comfyquant.warpgroup_mma becomes tcgen05.mma: one thread
// issues it on the block's shared-memory tiles, the accumulator lives in
// tensor memory (allocated once per kernel), and completion is signalled on
// an mbarrier. Integer, FP8 and f16 steps use M = 64, whose accumulator
// rows 16w .. 16w + 15 sit in warp w's lane quarter, the layout the
// registers already have; block-scaled steps (MXFP8, NVFP4) exist only
// with M = 128 and read A through a copy with zero rows interleaved.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_TCGEN05_H
#define COMFYQUANT_CODEGEN_GPU_TCGEN05_H

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::comfyquant {

/// Lowers the warpgroup MMAs `ops` of `kernel` (all of them in it) to
/// tcgen05 and adds the tensor-memory allocation, the mbarrier and the
/// deallocation before each return. Fails (with a diagnostic) on a shape
/// the lowering does not cover.
LogicalResult lowerByTcgen05(gpu::GPUFuncOp kernel,
                             ArrayRef<WarpgroupMmaOp> ops);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_TCGEN05_H
