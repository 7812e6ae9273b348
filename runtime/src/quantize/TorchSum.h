//===- TorchSum.h - torch's f32 summation order, for bit-exact sums -*- C++ -*-===//
//
// Where kitchen's result depends on an f32 sum (the W4A8/W6A8 ALS scales,
// the W6A8 scale search, Lloyd-Max means), the order is torch's CPU
// cascade_sum: items (8-lane vectors, or scalars below 8 elements) in rows of
// four accumulators, folded into higher levels every 2^lp items; for 8 or
// more elements the scalar tail is added first, then the 8 lanes in order.
// The same order under AVX2 and AVX-512 (the kernel uses 8 lanes in both).
// A reduction of 32768 or more elements split across threads is not
// covered: kitchen's result then depends on its thread count.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_TORCHSUM_H
#define COMFYQUANT_RUNTIME_QUANTIZE_TORCHSUM_H

#include <algorithm>
#include <array>
#include <cstdint>

namespace comfyquant::rt {

namespace torchsum {

inline int ceilLog2(int64_t x) {
  if (x <= 1)
    return 0;
  return 64 - __builtin_clzll(uint64_t(x - 1));
}

/// cascade_sum's row loop over m items (load(i) gives item i).
template <typename T, typename Load, typename Add>
T rowSum(int64_t m, Load load, T zero, Add add) {
  const int64_t sizeIlp = m / 4;
  const int lp = std::max(4, ceilLog2(sizeIlp) / 4);
  const int64_t step = int64_t(1) << lp, mask = step - 1;
  T acc[4][4];
  for (auto &level : acc)
    for (auto &a : level)
      a = zero;
  int64_t i = 0;
  while (i + step <= sizeIlp) {
    for (int64_t r = 0; r < step; ++r, ++i)
      for (int k = 0; k < 4; ++k)
        acc[0][k] = add(acc[0][k], load(i * 4 + k));
    for (int j = 1; j < 4; ++j) {
      for (int k = 0; k < 4; ++k) {
        acc[j][k] = add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = zero;
      }
      if ((i & (mask << (j * lp))) != 0)
        break;
    }
  }
  for (; i < sizeIlp; ++i)
    for (int k = 0; k < 4; ++k)
      acc[0][k] = add(acc[0][k], load(i * 4 + k));
  for (int j = 1; j < 4; ++j)
    for (int k = 0; k < 4; ++k)
      acc[0][k] = add(acc[0][k], acc[j][k]);
  for (int64_t t = sizeIlp * 4; t < m; ++t)
    acc[0][0] = add(acc[0][0], load(t));
  return add(add(add(acc[0][0], acc[0][1]), acc[0][2]), acc[0][3]);
}

} // namespace torchsum

/// torch.sum of n contiguous f32 values (x[i] computed by `get(i)`), in
/// torch's order, as f32.
template <typename Get> float torchSumF32(int64_t n, Get get) {
  using V = std::array<float, 8>;
  float r;
  if (n >= 8) {
    const int64_t nv = n / 8;
    V zero{};
    V v = torchsum::rowSum<V>(
        nv,
        [&](int64_t i) {
          V out;
          for (int l = 0; l < 8; ++l)
            out[size_t(l)] = get(i * 8 + l);
          return out;
        },
        zero,
        [](const V &a, const V &b) {
          V out;
          for (int l = 0; l < 8; ++l)
            out[size_t(l)] = a[size_t(l)] + b[size_t(l)];
          return out;
        });
    r = 0.0f;
    for (int64_t t = nv * 8; t < n; ++t)
      r += get(t);
    for (int l = 0; l < 8; ++l)
      r += v[size_t(l)];
  } else {
    r = torchsum::rowSum<float>(
        n, [&](int64_t i) { return get(i); }, 0.0f,
        [](float a, float b) { return a + b; });
  }
  return 0.0f + r;
}

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTIZE_TORCHSUM_H
