//===- SinkShuffles.h - lane-replicating shuffles below elementwise ops --===//
#ifndef COMFYQUANT_CODEGEN_COMMON_SINKSHUFFLES_H
#define COMFYQUANT_CODEGEN_COMMON_SINKSHUFFLES_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant {

/// `f(shuffle(x, m), c)` -> `shuffle(f(x, c'), m)` for an elementwise `f`
/// whose other operands are constants agreeing with `m` (or shuffles of the
/// same mask) when `m` replicates lanes at least four times: a per-block
/// scale is then decoded once per block rather than in every lane of it.
void populateSinkReplicatingShufflePatterns(RewritePatternSet &patterns);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_COMMON_SINKSHUFFLES_H
