//===- ThreadIndex.h - a thread's place in its block, as index values -*- C++ -*-===//
//
// The kernel builders (tensor-core GEMMs, MMA and tcgen05 lowering) each ask
// which warp and lane a thread is; the warp size and the index arithmetic
// are stated here once. Each caller keeps its own order of the ops it
// creates, which the emitted PTX follows.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_THREADINDEX_H
#define COMFYQUANT_CODEGEN_GPU_THREADINDEX_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace mlir::comfyquant::gpu_codegen {

/// Threads per warp.
constexpr int64_t kWarpSize = 32;
/// Threads of a warpgroup (four warps: what wgmma and tcgen05's lane
/// quarters count in).
constexpr int64_t kWarpgroupSize = 4 * kWarpSize;

/// An index constant.
inline Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// threadIdx.x.
inline Value threadIndex(OpBuilder &b, Location loc) {
  return gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
}

/// The warp of thread `tid`.
inline Value warpOf(OpBuilder &b, Location loc, Value tid) {
  return arith::DivUIOp::create(b, loc, tid, indexConstant(b, loc, kWarpSize));
}

/// The lane of thread `tid` in its warp.
inline Value laneOf(OpBuilder &b, Location loc, Value tid) {
  return arith::RemUIOp::create(b, loc, tid, indexConstant(b, loc, kWarpSize));
}

} // namespace mlir::comfyquant::gpu_codegen

#endif // COMFYQUANT_CODEGEN_GPU_THREADINDEX_H
