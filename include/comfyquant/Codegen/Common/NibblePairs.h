//===- NibblePairs.h - packed nibbles to byte pairs in 16-bit lanes -------===//
#ifndef COMFYQUANT_CODEGEN_COMMON_NIBBLEPAIRS_H
#define COMFYQUANT_CODEGEN_COMMON_NIBBLEPAIRS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::comfyquant {

/// The vectorized nibble unpack `select(even lanes, lo(s), hi(s))` with
/// `s = shuffle(x, x, [0, 0, 1, 1, ...])` (each packed byte repeated, then
/// one nibble kept per lane; `lo(s) = s & 15`, `hi(s) = (s >> 4) & 15`,
/// on s or its zero extension) -> the bytes of the 16-bit lanes
/// `(w | w << 4) & 0x0F0F` (low nibble first) or
/// `(w >> 4 | w << 8) & 0x0F0F` (high nibble first), `w = zext(x)`: one
/// widening and two bit operations instead of a lane-crossing byte
/// repetition, two masks and a blend.
void populateNibblePairPatterns(RewritePatternSet &patterns);

/// The packed bytes x of such a select and the nibble its even lanes take.
struct NibblePair {
  Value bytes;
  bool lowFirst;
};
std::optional<NibblePair> matchNibblePair(arith::SelectOp sel);

} // namespace mlir::comfyquant

#endif // COMFYQUANT_CODEGEN_COMMON_NIBBLEPAIRS_H
