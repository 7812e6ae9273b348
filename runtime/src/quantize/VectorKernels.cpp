//===- VectorKernels.cpp - the encoders' shared loops, per vector ISA -----===//
//
// Loops several encoders call, built for AVX-512, AVX2 and the baseline and
// picked at load time. They live alone in this file: the other files call
// them through plain declarations (Encoders.h), which resolve to the
// dispatching symbol; a declaration with the clones attribute in each
// caller would make every caller emit its own resolver (GCC), or be refused
// after a first use (clang).
//===----------------------------------------------------------------------===//

#include "FastRound.h"
#include "VectorClones.h"

#include "comfyquant/runtime/DType.h"

#include <cmath>
#include <cstdint>
#include <vector>


namespace comfyquant::rt {

CQ_VECTOR_CLONES
float amaxOf(const float *x, int64_t n) {
  float m = 0.f;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    float a = fast::absf(x[i]);
    nan |= a != a;
    m = a > m ? a : m;
  }
  return nan ? NAN : m;
}

CQ_VECTOR_CLONES
void rotateRowInDType(float *row, int64_t k, int64_t group, DType dtype) {
  thread_local std::vector<double> buf;
  buf.resize(size_t(group));
  double *x = buf.data();
  int log4 = 0;
  for (int64_t g = group; g > 1; g /= 4)
    ++log4;
  const double norm = std::ldexp(1.0, -log4); // 1/sqrt(group), exact
  for (int64_t g0 = 0; g0 < k; g0 += group) {
    for (int64_t i = 0; i < group; ++i)
      x[i] = row[g0 + i];
    // One H4 stage per base-4 digit (H4 is symmetric: x·H4 = H4·x).
    for (int64_t s = 1; s < group; s *= 4)
      for (int64_t base = 0; base < group; base += 4 * s)
        for (int64_t i = base; i < base + s; ++i) {
          double a = x[i], b = x[i + s], c = x[i + 2 * s], d = x[i + 3 * s];
          x[i] = ((a + b) + c) - d;
          x[i + s] = ((a + b) - c) + d;
          x[i + 2 * s] = ((a - b) + c) + d;
          x[i + 3 * s] = ((b - a) + c) + d;
        }
    for (int64_t i = 0; i < group; ++i)
      row[g0 + i] = float(x[i] * norm);
  }
  if (dtype == DType::BF16)
    for (int64_t i = 0; i < k; ++i)
      row[i] = fast::roundBF16(row[i]);
  else if (dtype == DType::F16)
    for (int64_t i = 0; i < k; ++i)
      row[i] = fast::roundF16(row[i]);
}

} // namespace comfyquant::rt
