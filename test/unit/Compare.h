//===- Compare.h - element-wise comparison for the unit tests ---*- C++ -*-===//
//
// The C++ twin of test/tools/compare.py: every float comparison of the unit
// tests goes through compareValues, so that element counts are checked
// first, a NaN or an infinity on one side fails unless the other side holds
// the same value (NaN vs NaN only where the caller expects NaN), and the
// bound per element is ulps * ulp_T(want) + c * 2^-24 * S with (ulps, c) read
// from test/tools/tolerances.json (docs/Testing.md).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_TEST_UNIT_COMPARE_H
#define COMFYQUANT_TEST_UNIT_COMPARE_H

#include "comfyquant/runtime/DType.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace comfyquant::test {

struct Tolerance {
  double ulps = 0; ///< roundings to the output dtype
  double c = 0;    ///< multiples of 2^-24 * S (f32 summation order)
};

inline const char *dtypeKey(rt::DType t) {
  return t == rt::DType::F32 ? "F32" : t == rt::DType::BF16 ? "BF16" : "F16";
}

/// The bound of `check` ("vs_kitchen", "unrotation_vs_kitchen",
/// "compiled_vs_reference") for a format and output dtype; "DTYPE+bias" and
/// "DTYPE+embedding" entries win for modules with a bias and embeddings.
inline Tolerance tolerance(const std::string &check, const std::string &format,
                           rt::DType dtype, bool hasBias = false,
                           bool embedding = false) {
  static const nlohmann::json table = [] {
    std::ifstream in(COMFYQUANT_TOLERANCES);
    return nlohmann::json::parse(in);
  }();
  const nlohmann::json &byFormat = table.at(check);
  const nlohmann::json &entry =
      byFormat.contains(format) ? byFormat.at(format) : byFormat.at("*");
  std::string key = dtypeKey(dtype);
  std::string special = hasBias ? key + "+bias"
                        : embedding ? key + "+embedding"
                                    : std::string();
  const nlohmann::json &pair = !special.empty() && entry.contains(special)
                                   ? entry.at(special)
                                   : entry.at(key);
  return {pair.at(0).get<double>(), pair.at(1).get<double>()};
}

/// Spacing of `dtype` values at |v| (the subnormal spacing near zero).
inline double ulpOf(rt::DType dtype, double v) {
  int mant = dtype == rt::DType::F32 ? 23 : dtype == rt::DType::BF16 ? 7 : 10;
  int emin = dtype == rt::DType::F16 ? -14 : -126;
  if (v == 0 || !std::isfinite(v))
    return std::ldexp(1.0, emin - mant);
  int e;
  std::frexp(std::fabs(v), &e);
  return std::ldexp(1.0, std::max(e - 1, emin) - mant);
}

struct CompareResult {
  int64_t count = 0, bad = 0;
  double worst = 0; ///< max err / bound where the bound is > 0
  std::string first;

  bool ok() const { return bad == 0; }
  std::string summary() const {
    std::ostringstream os;
    os << bad << " of " << count << " elements out of bound (worst " << worst
       << " of bound)";
    if (!first.empty())
      os << "; first: " << first;
    return os.str();
  }
};

struct CompareOptions {
  Tolerance tol;
  const std::vector<double> *sAbs = nullptr; ///< S per element
  const std::vector<double> *bias = nullptr; ///< bias per element
  std::function<bool(size_t)> nanExpected;   ///< where NaN vs NaN is right
};

/// |got - want| <= ulps * U + c * 2^-24 * S per element, U the larger
/// spacing at want and at want - bias (a rounding before the bias add).
inline CompareResult compareValues(const std::vector<double> &got,
                                   const std::vector<double> &want,
                                   rt::DType dtype,
                                   const CompareOptions &opts = {}) {
  CompareResult r;
  r.count = static_cast<int64_t>(want.size());
  auto fail = [&](size_t i, const std::string &why) {
    if (r.bad++ == 0) {
      std::ostringstream os;
      os << "element " << i << ": got " << got[i] << ", want " << want[i]
         << " (" << why << ")";
      r.first = os.str();
    }
  };
  if (got.size() != want.size()) {
    r.bad = 1;
    r.first = std::to_string(got.size()) + " elements, expected " +
              std::to_string(want.size());
    return r;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    double a = got[i], b = want[i];
    if (std::isnan(a) || std::isnan(b)) {
      if (!(std::isnan(a) && std::isnan(b) && opts.nanExpected &&
            opts.nanExpected(i)))
        fail(i, "NaN");
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b)
        fail(i, "infinity");
      continue;
    }
    double s = opts.sAbs ? (*opts.sAbs)[i] : 0.0;
    if (!std::isfinite(s)) {
      fail(i, "S is not finite");
      continue;
    }
    double u = ulpOf(dtype, b);
    if (opts.bias)
      u = std::max(u, ulpOf(dtype, b - (*opts.bias)[i]));
    double bound = opts.tol.ulps * u + opts.tol.c * std::ldexp(1.0, -24) * s;
    double err = std::fabs(a - b);
    if (bound > 0)
      r.worst = std::max(r.worst, err / bound);
    if (err > bound)
      fail(i, "|diff| " + std::to_string(err) + " > " + std::to_string(bound));
  }
  return r;
}

/// Bit-identical floats (so -0 differs from +0 and NaN payloads count);
/// `worst` is the largest distance in ulps among differing finite pairs.
inline CompareResult compareBits(const std::vector<float> &got,
                                 const std::vector<float> &want) {
  CompareResult r;
  r.count = static_cast<int64_t>(want.size());
  if (got.size() != want.size()) {
    r.bad = 1;
    r.first = std::to_string(got.size()) + " elements, expected " +
              std::to_string(want.size());
    return r;
  }
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  for (size_t i = 0; i < want.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a == b)
      continue;
    if (r.bad++ == 0) {
      std::ostringstream os;
      os << "element " << i << ": got " << got[i] << ", want " << want[i];
      r.first = os.str();
    }
    if (std::isfinite(got[i]) && std::isfinite(want[i]))
      r.worst = std::max(r.worst, static_cast<double>(std::llabs(
                                      ordered(got[i]) - ordered(want[i]))));
  }
  return r;
}

} // namespace comfyquant::test

#endif // COMFYQUANT_TEST_UNIT_COMPARE_H
