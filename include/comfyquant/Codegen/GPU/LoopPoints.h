//===- LoopPoints.h - scf.parallel points from a linear id ------*- C++ -*-===//
//
// The SIMT kernels give each thread a linear id and recover the point of a
// parallel loop nest from it, the last dimension fastest so that
// neighbouring threads touch neighbouring elements.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_LOOPPOINTS_H
#define COMFYQUANT_CODEGEN_GPU_LOOPPOINTS_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::comfyquant {

/// The trip counts of dimensions [first, rank) of `loop`, built at `b`.
SmallVector<Value> loopTripCounts(OpBuilder &b, Location loc,
                                  scf::ParallelOp loop, unsigned first = 0);

/// Maps the induction variables of dimensions [first, rank) of `loop` to
/// the point whose linear index (last dimension fastest) is `linear`;
/// `counts` are those dimensions' trip counts.
void mapLinearPoint(OpBuilder &b, Location loc, scf::ParallelOp loop,
                    unsigned first, ValueRange counts, Value linear,
                    IRMapping &map);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_LOOPPOINTS_H
