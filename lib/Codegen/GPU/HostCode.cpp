//===- HostCode.cpp - what a CUDA host entry computes itself --------------===//
#include "comfyquant/Codegen/GPU/HostCode.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

bool mlir::comfyquant::computesSizesOrViews(Operation *op) {
  if (isa<memref::AllocOp, memref::DimOp>(op))
    return true;
  if (isa<ViewLikeOpInterface>(op) &&
      isa<MemRefType>(op->getResult(0).getType()))
    return true;
  return isPure(op) && op->getNumRegions() == 0;
}

BlockArgument mlir::comfyquant::activationArgument(func::FuncOp func) {
  for (BlockArgument a : func.getArguments())
    if (isa<MemRefType>(a.getType()))
      return a;
  return nullptr;
}
