//===- LoopPoints.cpp - points of an scf.parallel from a linear id --------===//
#include "comfyquant/Codegen/GPU/LoopPoints.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

SmallVector<Value> mlir::comfyquant::loopTripCounts(OpBuilder &b, Location loc,
                                                    scf::ParallelOp loop,
                                                    unsigned first) {
  SmallVector<Value> counts;
  for (unsigned d = first; d < loop.getNumLoops(); ++d) {
    Value span = arith::SubIOp::create(b, loc, loop.getUpperBound()[d],
                                       loop.getLowerBound()[d]);
    counts.push_back(
        arith::CeilDivUIOp::create(b, loc, span, loop.getStep()[d]));
  }
  return counts;
}

void mlir::comfyquant::mapLinearPoint(OpBuilder &b, Location loc,
                                      scf::ParallelOp loop, unsigned first,
                                      ValueRange counts, Value linear,
                                      IRMapping &map) {
  Value rest = linear;
  for (int64_t i = counts.size() - 1; i >= 0; --i) {
    unsigned d = first + i;
    Value index =
        i == 0 ? rest : arith::RemUIOp::create(b, loc, rest, counts[i]);
    if (i != 0)
      rest = arith::DivUIOp::create(b, loc, rest, counts[i]);
    Value scaled = arith::MulIOp::create(b, loc, index, loop.getStep()[d]);
    Value iv = arith::AddIOp::create(b, loc, loop.getLowerBound()[d], scaled);
    map.map(loop.getInductionVars()[d], iv);
  }
}
