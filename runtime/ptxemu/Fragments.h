//===- Fragments.h - which element each lane holds, per the PTX ISA -*- C++ -*-===//
//
// The fragment layouts of the tensor-core instructions the emulator runs,
// as functions of the lane and the element index (registers low to high,
// elements low to high within a register). TensorCore.cpp executes with
// them, and ptxemu-layouts prints them so that a test can hold them against
// CUTLASS/CuTe's own tables (test/tools/cute-layouts.test).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_PTXEMU_FRAGMENTS_H
#define COMFYQUANT_PTXEMU_FRAGMENTS_H

namespace comfyquant::ptxemu {

struct RowCol {
  int row, col;
};

/// mma.sync m16n8kK, A (16 x K, row-major fragment): element i of `lane`.
/// K = 16 (f16/bf16), 32 (8-bit), 64 (4-bit).
inline RowCol mmaA(int K, int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  if (K == 16)
    return {g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)};
  if (K == 32)
    return {g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)};
  return {g + 8 * ((i >> 3) & 1), 8 * t + (i & 7) + 32 * (i >> 4)};
}

/// mma.sync m16n8kK, B (K x 8): element i of `lane` as {k, n}.
inline RowCol mmaB(int K, int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  if (K == 16)
    return {2 * t + (i & 1) + 8 * (i >> 1), g};
  if (K == 32)
    return {4 * t + (i & 3) + 16 * (i >> 2), g};
  return {8 * t + (i & 7) + 32 * (i >> 3), g};
}

/// mma.sync m16n8, C/D (16 x 8): element i (0..3) of `lane`.
inline RowCol mmaC(int lane, int i) {
  return {(lane >> 2) + 8 * (i >> 1), 2 * (lane & 3) + (i & 1)};
}

/// Block-scaled mma.sync: the lane holding the scale factors of row `r` of
/// A (thread-id-a `tid` in 0..1) and of column `n` of B (tid in 0..3).
inline int scaleALane(int r, int tid) { return 4 * (r % 8) + 2 * tid + (r >= 8); }
inline int scaleBLane(int n, int tid) { return 4 * n + tid; }

/// wgmma m64nN, D: element i of thread `thread` (0..127) of the warpgroup.
inline RowCol wgmmaD(int thread, int i) {
  const int w = thread / 32, lane = thread % 32;
  return {16 * w + (lane >> 2) + 8 * ((i >> 1) & 1),
          8 * (i >> 2) + 2 * (lane & 3) + (i & 1)};
}

/// tcgen05.ld/st: register i of `lane` as {TMEM lane, column} relative to
/// the base address, for the 16x256b and 32x32b shapes.
inline RowCol tmem16x256b(int lane, int i) {
  return {(lane >> 2) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane & 3) + (i & 1)};
}
inline RowCol tmem32x32b(int lane, int i) { return {lane, i}; }

/// tcgen05.mma with cta_group::1: the TMEM lane of row m of D, relative to
/// the accumulator's lane field (M = 128: lane m; M = 64: 16 rows in each
/// warp's quarter).
inline int ummaDLane(int M, int m) {
  return M == 128 ? m : 32 * (m / 16) + (m % 16);
}

} // namespace comfyquant::ptxemu

#endif // COMFYQUANT_PTXEMU_FRAGMENTS_H
