//===- EncodeGrouped.cpp - W4A8 and W6A8 weight encoders ------------------===//
//
// comfy-kitchen's eager grouped quantizer (docs/Quantize.md §3.6), per row
// of the weight rotated in its dtype (ConvRot, always), in f32, per group w
// of G values:
//   levels    4-bit codebook c[16] (the frozen Lloyd-Max table, or one fitted
//             to the tensor), 4-bit uniform (code − 8), or 6-bit −31..31;
//   scale     g = amax (codebook) or amax/31 (6-bit), then two ALS passes
//             g = max(Σ w·c[q] / max(Σ c[q]², 1e-8), 1e-8), q re-picked as
//             the nearest level of w/g (ties: the lower index);
//   s_channel max over the row of |c[q]·g| / 127 (at least 1e-8);
//   s_rel     e4m3(g / s_channel);
//   codes     the level whose int8 grid value clamp(RNE(c·s_rel), ±127) is
//             nearest to w / s_channel; 6-bit first tries the two e4m3
//             neighbours of each s_rel and keeps the best fitting one.
// Codes pack low nibble first; 6-bit adds a plane of the top two bits.
//===----------------------------------------------------------------------===//

#include "Encoders.h"
#include "FastRound.h"
#include "TorchSum.h"

#include "comfyquant/runtime/Numerics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

namespace comfyquant::rt {
namespace {

/// kitchen's frozen table (w4a8_packed._FIXED_LUT), in code order.
constexpr std::array<float, 16> kFixedCodebook = {
    -0.980602f, -0.794529f, -0.638165f, -0.500986f, -0.377321f, -0.263187f,
    -0.155210f, -0.050720f, 0.052541f,  0.156985f,  0.265284f,  0.379533f,
    0.502636f,  0.638953f,  0.794876f,  0.980671f};
constexpr double kKurtosisGate = -0.1;
constexpr int kAlsIterations = 2;
constexpr int kW6Levels = 31;
constexpr int64_t kCodebookSampleElems = int64_t(1) << 22;

/// Nearest entry of `lv[0..count)` to t, as kitchen: searchsorted's binary
/// search (std::lower_bound takes the same steps, also on a fitted codebook
/// that is not sorted), then the upper neighbour only when strictly nearer.
inline int nearestSorted(const float *lv, int count, float t,
                         bool sorted = true) {
  int pos;
  if (sorted) {
    // On a sorted table lower_bound is the number of entries below t: a
    // count the compiler vectorises.
    pos = 0;
    for (int i = 0; i < count; ++i)
      pos += lv[i] < t;
  } else {
    // A fitted codebook may be unsorted: std::lower_bound's own steps.
    int first = 0, len = count;
    while (len > 0) {
      const int half = len >> 1;
      const bool right = lv[first + half] < t;
      first = right ? first + half + 1 : first;
      len = right ? len - half - 1 : half;
    }
    pos = first;
  }
  int lo = std::clamp(pos - 1, 0, count - 1), hi = std::clamp(pos, 0, count - 1);
  float dlo = std::fabs(t - lv[lo]), dhi = std::fabs(t - lv[hi]);
  return dhi < dlo ? hi : lo;
}

/// Nearest level indices of x[j] / gs over `table` (kitchen's assign).
CQ_VECTOR_CLONES
void assignLevels(const float *table, int count, bool sorted, bool uniform6,
                  const float *x, int64_t g, float gs, int *qi) {
  for (int64_t j = 0; j < g; ++j) {
    const float v = x[j] / gs;
    if (uniform6) {
      // 6-bit: round(v) clamped to ±31, as an index 0..62. Clamping to ±32
      // first keeps rintSmall's argument small and changes nothing.
      const float c = std::min(std::max(v, -float(kW6Levels + 1)),
                               float(kW6Levels + 1));
      qi[j] = int(std::min(std::max(fast::rintSmall(c), -float(kW6Levels)),
                           float(kW6Levels))) +
              kW6Levels;
    } else {
      qi[j] = nearestSorted(table, count, v, sorted);
    }
  }
}

/// The int8 grid of s_rel value `s` (clamp(RNE(level·s), ±127)) into
/// `levels`, the nearest grid level of each target into qi, and the squared
/// error of the choice summed in torch's order (kitchen's score).
CQ_VECTOR_CLONES
float gridNearest(const float *table, int count, bool sorted, float s,
                  const float *target, int64_t g, int *qi, float *levels) {
  for (int i = 0; i < count; ++i) {
    // |level·s| <= 448 · 31: within rintSmall's range.
    const float v = fast::rintSmall(table[i] * s);
    levels[i] = std::min(std::max(v, -127.f), 127.f);
  }
  for (int64_t j = 0; j < g; ++j)
    qi[j] = nearestSorted(levels, count, target[j], sorted);
  return torchSumF32(g, [&](int64_t j) {
    const float d = levels[qi[j]] - target[j];
    return d * d;
  });
}

class GroupedEncoder final : public WeightEncoder {
public:
  GroupedEncoder(const EncodeOptions &o, int64_t n, int64_t k, DType s)
      : WeightEncoder(o, n, k, s) {
    six_ = o.format == Format::W6A8Int8;
    g_ = o.groupSize;
    addOutput("weight", DType::I8, {n, six_ ? k / 2 + k / 4 : k / 2});
    addOutput("weight_s_rel", o.sRelF32 ? DType::F32 : DType::F8_E4M3,
              {n, k / g_});
    addOutput("weight_s_channel", DType::F32, {n});
    if (!six_ && o.codebook != CodebookChoice::None)
      addOutput("weight_codebook", DType::F32, {16});
    if (needsObserve()) {
      int64_t maxRows = std::max<int64_t>(1, kCodebookSampleElems / k);
      if (n > maxRows && maxRows == 1) {
        sampleRows_.push_back(0); // torch.linspace(0, n-1, 1) is [0]
      } else if (n > maxRows) {
        // torch.linspace(0, n-1, maxRows) in f32 (its FMA form), truncated.
        const float end = float(n - 1);
        const float step = end / float(maxRows - 1);
        for (int64_t i = 0; i < maxRows; ++i) {
          float v = i < maxRows / 2
                        ? std::fma(step, float(i), 0.0f)
                        : std::fma(-step, float(maxRows - 1 - i), end);
          sampleRows_.push_back(int64_t(v));
        }
      }
    }
    if (six_) {
      for (int i = -kW6Levels; i <= kW6Levels; ++i)
        table_.push_back(float(i));
    } else if (o.codebook == CodebookChoice::Fixed) {
      table_.assign(kFixedCodebook.begin(), kFixedCodebook.end());
    }
  }

  std::string marker() const override {
    return R"({"convrot_groupsize":)" + std::to_string(opts_.rotationGroup) +
           R"(,"format":")" + formatName(opts_.format) +
           R"(","group_size":)" + std::to_string(g_) + "}";
  }

  bool needsObserve() const override {
    return !six_ && (opts_.codebook == CodebookChoice::Auto ||
                     opts_.codebook == CodebookChoice::Fit);
  }

  uint64_t observeBytes() const override {
    if (!needsObserve())
      return 0;
    // The normalized sample; the kurtosis draws (at most 2^19); while
    // fitting, the draws (at most 300000), a sorted copy and assignments.
    const uint64_t rows =
        sampleRows_.empty() ? uint64_t(n_) : uint64_t(sampleRows_.size());
    const uint64_t elems = rows * uint64_t(k_);
    return elems * 4 + std::min<uint64_t>(elems, 1u << 19) * 4 +
           std::min<uint64_t>(elems, 300000) * 12;
  }

  void observe(const SourceBand &b) override {
    std::vector<float> row(static_cast<size_t>(k_));
    for (int64_t r = 0; r < b.rows; ++r) {
      int64_t global = b.rowBegin + r;
      if (!sampleRows_.empty() &&
          !std::binary_search(sampleRows_.begin(), sampleRows_.end(), global))
        continue;
      // A row may be sampled twice (linspace repeats); count it each time.
      int64_t times = 1;
      if (!sampleRows_.empty()) {
        auto range = std::equal_range(sampleRows_.begin(), sampleRows_.end(),
                                      global);
        times = range.second - range.first;
      }
      std::copy_n(b.data + r * b.cols, k_, row.data());
      rotateRowInDType(row.data(), k_, opts_.rotationGroup, source_);
      for (int64_t t = 0; t < times; ++t)
        for (int64_t g0 = 0; g0 < k_; g0 += g_) {
          float amax = 0.f;
          for (int64_t j = 0; j < g_; ++j)
            amax = std::max(amax, std::fabs(row[size_t(g0 + j)]));
          amax = std::max(amax, 1e-8f);
          for (int64_t j = 0; j < g_; ++j)
            normalized_.push_back(row[size_t(g0 + j)] / amax);
        }
    }
  }

  void finishObserve() override {
    if (!needsObserve())
      return;
    bool fit = opts_.codebook == CodebookChoice::Fit;
    if (!fit) {
      // Excess kurtosis of the normalized values, as kitchen: 2^19 draws of
      // mt19937(0) % count when there are more; f32 mean in torch's order;
      // the standard deviation (unbiased) in double around that mean.
      std::vector<float> x = sampled(normalized_, int64_t(1) << 19);
      const int64_t count = int64_t(x.size());
      const float mean =
          torchSumF32(count, [&](int64_t i) { return x[size_t(i)]; }) /
          float(count);
      double var = 0;
      for (float v : x)
        var += (double(v) - mean) * (double(v) - mean);
      const float sd = float(std::sqrt(var / double(std::max<int64_t>(1, count - 1))));
      const float denom = sd + 1e-9f;
      const float m4 =
          torchSumF32(count,
                      [&](int64_t i) {
                        float z = (x[size_t(i)] - mean) / denom;
                        return float(std::pow(double(z), 4.0));
                      }) /
          float(count);
      fit = !(m4 - 3.0f <= float(kKurtosisGate));
    }
    if (fit)
      table_ = fitCodebook(normalized_);
    else
      table_.assign(kFixedCodebook.begin(), kFixedCodebook.end());
    tableSorted_ = std::is_sorted(table_.begin(), table_.end());
    normalized_.clear();
    normalized_.shrink_to_fit();
  }

  void encode(const SourceBand &b,
              std::vector<std::vector<uint8_t>> &out) const override {
    const int64_t groups = k_ / g_;
    std::vector<float> w(static_cast<size_t>(k_)), scale(static_cast<size_t>(groups)),
        target(static_cast<size_t>(k_));
    std::vector<int> q(static_cast<size_t>(k_));
    std::vector<float> levels(table_.size());
    for (int64_t r = 0; r < b.rows; ++r) {
      const int64_t row = b.rowBegin + r;
      std::copy_n(b.data + r * b.cols, k_, w.data());
      rotateRowInDType(w.data(), k_, opts_.rotationGroup, source_);
      float sChannelMax = 0.f;
      for (int64_t gi = 0; gi < groups; ++gi) {
        float *x = w.data() + gi * g_;
        int *qi = q.data() + gi * g_;
        float amax = 0.f;
        for (int64_t j = 0; j < g_; ++j)
          amax = std::max(amax, std::fabs(x[j]));
        float gs;
        if (table_.empty()) {
          // 4-bit uniform: signed = clamp(RNE(w / g), -8, 7), code = signed + 8.
          gs = std::max(amax / 7.0f, 1e-8f);
          for (int64_t j = 0; j < g_; ++j) {
            float s = std::clamp(std::nearbyint(x[j] / gs), -8.f, 7.f);
            qi[j] = int(s) + 8;
            sChannelMax = std::max(sChannelMax, std::fabs(s * gs));
          }
          scale[size_t(gi)] = gs;
          continue;
        }
        gs = six_ ? std::max(amax / float(kW6Levels), 1e-8f)
                  : std::max(amax, 1e-8f);
        assign(x, gs, qi);
        for (int it = 0; it < kAlsIterations; ++it) {
          float num = torchSumF32(g_, [&](int64_t j) {
            return x[j] * table_[size_t(qi[j])];
          });
          float den = torchSumF32(g_, [&](int64_t j) {
            float l = table_[size_t(qi[j])];
            return l * l;
          });
          gs = std::max(num / std::max(den, 1e-8f), 1e-8f);
          assign(x, gs, qi);
        }
        scale[size_t(gi)] = gs;
        for (int64_t j = 0; j < g_; ++j)
          sChannelMax = std::max(sChannelMax,
                                 std::fabs(table_[size_t(qi[j])] * gs));
      }
      const float sChannel = std::max(sChannelMax / 127.0f, 1e-8f);
      storeF32(out[2], uint64_t(row), sChannel);
      for (int64_t gi = 0; gi < groups; ++gi) {
        // s_rel as stored: an E4M3 code, or the f32 quotient itself.
        const float quotient = scale[size_t(gi)] / sChannel;
        uint8_t code = opts_.sRelF32 ? 0 : encodeE4M3(quotient);
        float value = opts_.sRelF32 ? quotient : decodeE4M3(code);
        if (!table_.empty()) {
          const float *x = w.data() + gi * g_;
          int *qi = q.data() + gi * g_;
          for (int64_t j = 0; j < g_; ++j)
            target[size_t(j)] = x[j] / sChannel;
          double bestErr = gridAssign(value, target.data(), qi, levels);
          if (six_) {
            // The ALS scale's two stored-dtype neighbours (E4M3 code ±1, kept
            // finite and positive; f32: x0.97 and x1.03); a neighbour wins
            // only when strictly better.
            std::vector<int> cand(static_cast<size_t>(g_));
            const uint8_t als = code;
            const float alsValue = value;
            for (int d : {-1, +1}) {
              float v;
              int c = 0;
              if (opts_.sRelF32) {
                v = alsValue * (d < 0 ? 0.97f : 1.03f);
              } else {
                // kitchen's uint8 code - 1 wraps to 255 (NaN) for code 0:
                // no candidate then.
                if (d < 0 && als == 0)
                  continue;
                c = std::clamp(int(als) + d, 1, 0x7E);
                v = decodeE4M3(uint8_t(c));
              }
              double err = gridAssign(v, target.data(), cand.data(), levels);
              if (err < bestErr) {
                bestErr = err;
                code = uint8_t(c);
                value = v;
                std::copy(cand.begin(), cand.end(), qi);
              }
            }
          }
        }
        if (opts_.sRelF32)
          storeF32(out[1], uint64_t(row * groups + gi), value);
        else
          out[1][size_t(row * groups + gi)] = code;
      }
      pack(out[0].data() + row * (six_ ? k_ / 2 + k_ / 4 : k_ / 2), q);
    }
  }

  void finish(std::vector<std::vector<uint8_t>> &out) const override {
    if (outputs_.size() > 3)
      for (int i = 0; i < 16; ++i)
        storeF32(out[3], uint64_t(i), table_[size_t(i)]);
  }

private:
  /// Nearest level index of x / gs for each element.
  void assign(const float *x, float gs, int *qi) const {
    assignLevels(table_.data(), int(table_.size()), tableSorted_, six_, x, g_,
                 gs, qi);
  }

  /// Codes nearest on the int8 grid of s_rel value `s`; returns the squared
  /// error of the chosen grid values (f32 sum, as kitchen scores it).
  double gridAssign(float s, const float *target, int *qi,
                    std::vector<float> &levels) const {
    return gridNearest(table_.data(), int(table_.size()), tableSorted_, s,
                       target, g_, qi, levels.data());
  }

  void pack(uint8_t *dst, const std::vector<int> &idx) const {
    // Stored code: the level index (4-bit), or index + 1 = q + 32 (6-bit).
    const int add = six_ ? 1 : 0;
    for (int64_t c = 0; c < k_; c += 2)
      dst[c / 2] = uint8_t(((idx[size_t(c)] + add) & 0xF) |
                           (((idx[size_t(c + 1)] + add) & 0xF) << 4));
    if (!six_)
      return;
    uint8_t *hi = dst + k_ / 2;
    for (int64_t c = 0; c < k_; c += 4) {
      uint8_t b = 0;
      for (int j = 0; j < 4; ++j)
        b |= uint8_t((((idx[size_t(c + j)] + add) >> 4) & 3) << (2 * j));
      hi[c / 4] = b;
    }
  }

  /// `values`, or `draws` of them picked by mt19937(0) % size (torch.randint
  /// with a generator seeded 0) when there are more.
  static std::vector<float> sampled(const std::vector<float> &values,
                                    int64_t draws) {
    if (int64_t(values.size()) <= draws)
      return values;
    std::mt19937 gen(0);
    std::vector<float> out(static_cast<size_t>(draws));
    for (auto &v : out)
      v = values[size_t(gen() % values.size())];
    return out;
  }

  /// kitchen's Lloyd-Max fit: 16 quantiles at torch.linspace(0, 1, 16)
  /// (torch.quantile: linear interpolation with one FMA), then 25 rounds of
  /// nearest assignment (first minimum) and f32 means in torch's order; a
  /// cell without samples keeps its value. The result is not sorted again:
  /// kitchen searches it as it is.
  static std::vector<float> fitCodebook(const std::vector<float> &all) {
    const int levels = 16;
    std::vector<float> samples = sampled(all, 300000);
    std::vector<float> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    std::vector<float> cb(levels, 0.f);
    const int64_t n = int64_t(sorted.size());
    const float step = 1.0f / float(levels - 1);
    for (int i = 0; i < levels && n; ++i) {
      float q = i < levels / 2 ? std::fma(step, float(i), 0.0f)
                               : std::fma(-step, float(levels - 1 - i), 1.0f);
      double rank = double(q) * double(n - 1);
      int64_t lo = int64_t(std::floor(rank)), hi = int64_t(std::ceil(rank));
      float w = float(rank - double(lo));
      float a = sorted[size_t(lo)], b = sorted[size_t(hi)], d = b - a;
      cb[size_t(i)] = w < 0.5f ? std::fma(w, d, a) : std::fma(w - 1.0f, d, b);
    }
    std::vector<int> assign(samples.size());
    std::vector<float> selected;
    for (int it = 0; it < 25; ++it) {
      for (size_t t = 0; t < samples.size(); ++t) {
        int best = 0;
        float bd = std::fabs(samples[t] - cb[0]);
        for (int l = 1; l < levels; ++l) {
          float d = std::fabs(samples[t] - cb[size_t(l)]);
          if (d < bd) {
            bd = d;
            best = l;
          }
        }
        assign[t] = best;
      }
      std::vector<float> next = cb;
      for (int l = 0; l < levels; ++l) {
        selected.clear();
        for (size_t t = 0; t < samples.size(); ++t)
          if (assign[t] == l)
            selected.push_back(samples[t]);
        if (selected.empty())
          continue;
        next[size_t(l)] =
            torchSumF32(int64_t(selected.size()),
                        [&](int64_t i) { return selected[size_t(i)]; }) /
            float(selected.size());
      }
      cb = next;
    }
    return cb;
  }

  bool six_ = false;
  int64_t g_ = 16;
  std::vector<int64_t> sampleRows_;
  std::vector<float> normalized_;
  std::vector<float> table_;
  bool tableSorted_ = true; ///< a fitted codebook may not be
};

} // namespace

std::unique_ptr<WeightEncoder> createGroupedEncoder(const EncodeOptions &opts,
                                                    int64_t n, int64_t k,
                                                    DType source) {
  return std::make_unique<GroupedEncoder>(opts, n, k, source);
}

} // namespace comfyquant::rt
