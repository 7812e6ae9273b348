//===- BenchCommon.h - shared by the bench tools ---------------*- C++ -*-===//
//
// The format variants the benchmark checkpoint holds, their module names,
// a deterministic PRNG and small parsing helpers. Header-only.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_BENCH_BENCHCOMMON_H
#define COMFYQUANT_BENCH_BENCHCOMMON_H

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cqbench {

/// One benchmarked variant: a comfy_quant format plus the options that
/// change the forward path (ConvRot for int8_tensorwise).
struct Variant {
  const char *label;  ///< column label and module-name component
  const char *format; ///< comfy_quant "format"
  bool integer;       ///< integer GEMM (target peer: oneDNN int8)
};

/// Every variant, in table order.
inline const std::vector<Variant> &allVariants() {
  static const std::vector<Variant> v = {
      {"float8_e4m3fn", "float8_e4m3fn", false},
      {"float8_e5m2", "float8_e5m2", false},
      {"nvfp4", "nvfp4", false},
      {"mxfp8", "mxfp8", false},
      {"int8_tensorwise", "int8_tensorwise", true},
      {"int8_tensorwise_convrot256", "int8_tensorwise", true},
      {"convrot_w4a4", "convrot_w4a4", true},
      {"asym_w4a8_int8", "asym_w4a8_int8", true},
      {"w6a8_int8", "w6a8_int8", true},
  };
  return v;
}

inline const Variant *findVariant(const std::string &label) {
  for (const Variant &v : allVariants())
    if (label == v.label)
      return &v;
  return nullptr;
}

/// Module prefix of a (variant, N, K): "bench.<label>.n<N>_k<K>".
inline std::string moduleName(const Variant &v, int64_t n, int64_t k) {
  return std::string("bench.") + v.label + ".n" + std::to_string(n) + "_k" +
         std::to_string(k);
}

/// Inverse of moduleName for this checkpoint's modules; false otherwise.
inline bool parseModuleName(const std::string &name, std::string &label,
                            int64_t &n, int64_t &k) {
  const std::string pre = "bench.";
  if (name.compare(0, pre.size(), pre) != 0)
    return false;
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot < pre.size())
    return false;
  label = name.substr(pre.size(), dot - pre.size());
  std::string shape = name.substr(dot + 1);
  long long nn = 0, kk = 0;
  if (std::sscanf(shape.c_str(), "n%lld_k%lld", &nn, &kk) != 2)
    return false;
  n = nn;
  k = kk;
  return findVariant(label) != nullptr;
}

/// SplitMix64: deterministic, fast, good enough for synthetic codes.
class Rng {
public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n).
  uint32_t below(uint32_t n) {
    return static_cast<uint32_t>(((next() >> 32) * n) >> 32);
  }

private:
  uint64_t s_;
};

/// "3072,12288" -> {3072, 12288}.
inline std::vector<int64_t> parseIntList(const std::string &s) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos)
      j = s.size();
    std::string item = s.substr(i, j - i);
    if (!item.empty()) {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0)
        throw std::invalid_argument("not a positive integer: '" + item + "'");
      out.push_back(v);
    }
    i = j + 1;
  }
  return out;
}

/// "a,b,c" -> {"a","b","c"}.
inline std::vector<std::string> parseStringList(const std::string &s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos)
      j = s.size();
    if (j > i)
      out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

/// "3072x12288,12288x3072" -> {(3072,12288), (12288,3072)} as (N, K).
inline std::vector<std::pair<int64_t, int64_t>>
parseShapeList(const std::string &s) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const std::string &item : parseStringList(s)) {
    long long n = 0, k = 0;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%lldx%lld%c", &n, &k, &tail) != 2 ||
        n <= 0 || k <= 0)
      throw std::invalid_argument("not a shape NxK: '" + item + "'");
    out.push_back({n, k});
  }
  return out;
}

} // namespace cqbench

#endif // COMFYQUANT_BENCH_BENCHCOMMON_H
