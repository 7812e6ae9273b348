//===- HostCode.h - what a CUDA host entry computes itself ------*- C++ -*-===//
//
// A CUDA host entry never touches device memory: it computes sizes and
// views, carves temporaries and launches kernels. The kernel-forming
// passes share its notion of host code and of the rows of x.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_CODEGEN_GPU_HOSTCODE_H
#define COMFYQUANT_CODEGEN_GPU_HOSTCODE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::comfyquant {

/// Whether `op` computes sizes, views or allocations only: it never reads
/// or writes the memory behind a descriptor.
bool computesSizesOrViews(Operation *op);

/// x, the activation whose dim 0 is the row count M of an entry: the first
/// memref argument (after the launcher). Null when there is none.
BlockArgument activationArgument(func::FuncOp func);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_GPU_HOSTCODE_H
