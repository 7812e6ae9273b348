//===- ExtractLanes.h - single lanes read as scalars --------------*- C++
//-*-===//
#ifndef COMFYQUANT_CODEGEN_COMMON_EXTRACTLANES_H
#define COMFYQUANT_CODEGEN_COMMON_EXTRACTLANES_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::comfyquant {

/// `vector.extract` of a static lane computed as a scalar instead:
/// `extract(cast(v))` -> `cast(extract(v))` for integer and index casts,
/// and the lane of an in-bounds 1-D `vector.transfer_read` of a tensor as
/// a `tensor.extract`. A per-block table row or scale read by lane then
/// costs a scalar load, not a vector load and a lane extraction.
void populateExtractLanePatterns(RewritePatternSet &patterns);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_COMMON_EXTRACTLANES_H
