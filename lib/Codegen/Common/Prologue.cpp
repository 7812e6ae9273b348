//===- Prologue.cpp - a GEMM operand's elementwise producer, per element --===//
//
// A weight operand is often a temporary that an elementwise op fills from
// the stored weight (nibbles unpacked, codebook values, unswizzled block
// scales) just before the GEMM. Evaluating that op where the GEMM reads the
// operand reads the stored weight instead: no kernel and no temporary for
// the decoded copy. These are the rules for when that is possible.
//===----------------------------------------------------------------------===//
#include "comfyquant/Codegen/Common/Gemm.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

Value mlir::comfyquant::detail::baseBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

SmallVector<Value>
mlir::comfyquant::detail::producerReads(linalg::GenericOp producer) {
  SmallVector<Value> reads;
  for (Value in : producer.getDpsInputs())
    reads.push_back(baseBuffer(in));
  producer.getRegion().walk([&](memref::LoadOp load) {
    reads.push_back(baseBuffer(load.getMemRef()));
  });
  return reads;
}

linalg::GenericOp
mlir::comfyquant::detail::operandProducer(Value operand,
                                          linalg::GenericOp gemm) {
  auto alloc = operand.getDefiningOp<memref::AllocOp>();
  if (!alloc || !alloc.getType().hasStaticShape() ||
      alloc.getType().getRank() != 2)
    return {};
  linalg::GenericOp producer;
  for (Operation *user : operand.getUsers()) {
    if (user == gemm.getOperation())
      continue;
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (!g || producer || g->getBlock() != gemm->getBlock() ||
        !g->isBeforeInBlock(gemm))
      return {};
    producer = g;
  }
  if (!producer || !producer.hasPureBufferSemantics() ||
      producer.getNumLoops() != 2 || producer.getNumParallelLoops() != 2 ||
      producer.getNumDpsInits() != 1 ||
      producer.getDpsInitOperand(0)->get() != operand ||
      !producer.getIndexingMapsArray().back().isIdentity() ||
      llvm::is_contained(producer.getDpsInputs(), operand))
    return {};
  // The destination is only written; inputs are read at loop dims and
  // constants; the body is pure scalar code, linalg.index and loads.
  Block &body = producer.getRegion().front();
  if (!body.getArgument(producer.getNumDpsInputs()).use_empty())
    return {};
  for (OpOperand *in : producer.getDpsInputOperands())
    if (!llvm::all_of(producer.getMatchingIndexingMap(in).getResults(),
                      [](AffineExpr e) {
                        return isa<AffineDimExpr, AffineConstantExpr>(e);
                      }))
      return {};
  for (Operation &o : body.without_terminator())
    if (o.getNumRegions() ||
        !(isPure(&o) || isa<linalg::IndexOp, memref::LoadOp>(o)))
      return {};
  // What the producer reads must hold the same values where the GEMM runs:
  // neither the GEMM nor anything in between may write it.
  SmallVector<Value> reads = producerReads(producer);
  for (Value init : gemm.getDpsInits())
    if (llvm::is_contained(reads, baseBuffer(init)))
      return {};
  for (Operation *o = producer->getNextNode(); o != gemm.getOperation();
       o = o->getNextNode()) {
    if (isMemoryEffectFree(o) || isa<memref::AllocOp, memref::LoadOp>(o))
      continue;
    auto written = dyn_cast<DestinationStyleOpInterface>(o);
    if (!written || o->getNumRegions() > 1)
      return {};
    for (Value init : written.getDpsInits())
      if (llvm::is_contained(reads, baseBuffer(init)))
        return {};
    // Any read-only op of its own region (a linalg body) is fine; anything
    // else with effects is not understood.
    bool plain = true;
    o->walk([&](Operation *inner) {
      if (inner != o && !isMemoryEffectFree(inner) &&
          !isa<memref::LoadOp>(inner))
        plain = false;
    });
    if (!plain)
      return {};
  }
  return producer;
}

Value mlir::comfyquant::detail::emitProducerAt(OpBuilder &b, Location loc,
                                               linalg::GenericOp producer,
                                               Value row, Value col,
                                               const IRMapping *seed) {
  return emitEpilogueAt(b, loc, producer, /*accOperand=*/~0u, Value(), row,
                        col, {}, seed);
}

SmallVector<Value> mlir::comfyquant::detail::producerLoadIndicesAt(
    OpBuilder &b, Location loc, memref::LoadOp load, Value row, Value col) {
  Block *body = load->getBlock();
  llvm::SetVector<Operation *> slice;
  std::function<void(Value)> collect = [&](Value v) {
    Operation *o = v.getDefiningOp();
    if (!o || o->getBlock() != body || slice.contains(o) ||
        isa<linalg::IndexOp>(o))
      return;
    for (Value in : o->getOperands())
      collect(in);
    slice.insert(o);
  };
  for (Value index : load.getIndices())
    collect(index);
  IRMapping map;
  for (Operation &o : *body)
    if (auto index = dyn_cast<linalg::IndexOp>(o))
      map.map(index.getResult(), index.getDim() == 0 ? row : col);
  // Operands before users: the slice is in walk order.
  for (Operation *o : slice)
    b.clone(*o, map);
  return llvm::map_to_vector(load.getIndices(), [&](Value index) {
    return map.lookupOrDefault(index);
  });
}
