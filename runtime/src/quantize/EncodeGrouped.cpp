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

#include "comfyquant/runtime/Numerics.h"

#include <algorithm>
#include <array>
#include <cmath>

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

/// Nearest entry of sorted `lv[0..count)` to t, as kitchen: searchsorted
/// (first index with lv[i] >= t), then the upper neighbour only when
/// strictly nearer.
inline int nearestSorted(const float *lv, int count, float t) {
  int pos = int(std::lower_bound(lv, lv + count, t) - lv);
  int lo = std::clamp(pos - 1, 0, count - 1), hi = std::clamp(pos, 0, count - 1);
  float dlo = std::fabs(t - lv[lo]), dhi = std::fabs(t - lv[hi]);
  return dhi < dlo ? hi : lo;
}

class GroupedEncoder final : public WeightEncoder {
public:
  GroupedEncoder(const EncodeOptions &o, int64_t n, int64_t k, DType s)
      : WeightEncoder(o, n, k, s) {
    six_ = o.format == Format::W6A8Int8;
    g_ = o.groupSize;
    addOutput("weight", DType::I8, {n, six_ ? k / 2 + k / 4 : k / 2});
    addOutput("weight_s_rel", DType::F8_E4M3, {n, k / g_});
    addOutput("weight_s_channel", DType::F32, {n});
    if (!six_ && o.codebook != CodebookChoice::None)
      addOutput("weight_codebook", DType::F32, {16});
    if (needsObserve()) {
      int64_t maxRows = std::max<int64_t>(1, kCodebookSampleElems / k);
      if (n > maxRows) {
        // torch.linspace(0, n-1, maxRows) in f32, truncated.
        float step = float(n - 1) / float(maxRows - 1);
        for (int64_t i = 0; i < maxRows; ++i) {
          float v = i < maxRows / 2 ? float(i) * step
                                    : float(n - 1) - float(maxRows - 1 - i) * step;
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

  void observe(const SourceBand &b) override {
    std::vector<float> row(static_cast<size_t>(k_));
    for (int64_t r = 0; r < b.rows; ++r) {
      int64_t global = b.rowBegin + r;
      if (!sampleRows_.empty() &&
          !std::binary_search(sampleRows_.begin(), sampleRows_.end(), global))
        continue;
      // A row may be sampled twice (linspace repeats); count it each time.
      int64_t times = sampleRows_.empty()
                          ? 1
                          : std::count(sampleRows_.begin(), sampleRows_.end(),
                                       global);
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
      // Excess kurtosis of the normalized values (kitchen samples 2^19 of
      // them with torch's generator when there are more; all are used here).
      double mean = 0;
      for (float v : normalized_)
        mean += v;
      const double count = double(normalized_.size());
      mean /= count;
      double var = 0;
      for (float v : normalized_)
        var += (v - mean) * (v - mean);
      double sd = std::sqrt(var / std::max(1.0, count - 1));
      double m4 = 0;
      for (float v : normalized_) {
        double z = (v - mean) / (sd + 1e-9);
        m4 += z * z * z * z;
      }
      fit = m4 / count - 3.0 > kKurtosisGate;
    }
    if (fit)
      table_ = fitCodebook(normalized_);
    else
      table_.assign(kFixedCodebook.begin(), kFixedCodebook.end());
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
    const int nl = int(table_.size());
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
          float num = 0.f, den = 0.f;
          for (int64_t j = 0; j < g_; ++j) {
            float l = table_[size_t(qi[j])];
            num += x[j] * l;
            den += l * l;
          }
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
      uint8_t *sRel = out[1].data() + row * groups;
      for (int64_t gi = 0; gi < groups; ++gi) {
        uint8_t code = encodeE4M3(scale[size_t(gi)] / sChannel);
        if (table_.empty()) {
          sRel[gi] = code;
          continue;
        }
        const float *x = w.data() + gi * g_;
        int *qi = q.data() + gi * g_;
        for (int64_t j = 0; j < g_; ++j)
          target[size_t(j)] = x[j] / sChannel;
        double bestErr = gridAssign(code, target.data(), qi, levels);
        if (six_) {
          // The ALS scale's two e4m3 neighbours (code ±1, kept finite and
          // positive); a neighbour wins only when strictly better.
          std::vector<int> cand(static_cast<size_t>(g_));
          for (int d : {-1, +1}) {
            int c = std::clamp(int(code) + d, 1, 0x7E);
            double err = gridAssign(uint8_t(c), target.data(), cand.data(),
                                    levels);
            if (err < bestErr) {
              bestErr = err;
              code = uint8_t(c);
              std::copy(cand.begin(), cand.end(), qi);
            }
          }
        }
        sRel[gi] = code;
      }
      pack(out[0].data() + row * (six_ ? k_ / 2 + k_ / 4 : k_ / 2), q);
      (void)nl;
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
    for (int64_t j = 0; j < g_; ++j) {
      float v = x[j] / gs;
      if (six_)
        qi[j] = int(std::clamp(std::nearbyint(v), -float(kW6Levels),
                               float(kW6Levels))) + kW6Levels;
      else
        qi[j] = nearestSorted(table_.data(), int(table_.size()), v);
    }
  }

  /// Codes nearest on the int8 grid of s_rel `code`; returns the squared
  /// error of the chosen grid values (f32 sum, as kitchen scores it).
  double gridAssign(uint8_t code, const float *target, int *qi,
                    std::vector<float> &levels) const {
    const float s = decodeE4M3(code);
    for (size_t i = 0; i < table_.size(); ++i)
      levels[i] = std::clamp(std::nearbyint(table_[i] * s), -127.f, 127.f);
    float err = 0.f;
    for (int64_t j = 0; j < g_; ++j) {
      qi[j] = nearestSorted(levels.data(), int(levels.size()), target[j]);
      float d = levels[size_t(qi[j])] - target[j];
      err += d * d;
    }
    return err;
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

  /// Lloyd-Max: 16 quantiles (linear interpolation), 25 iterations of
  /// nearest assignment (first minimum) and means.
  static std::vector<float> fitCodebook(std::vector<float> samples) {
    const int levels = 16;
    std::vector<float> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    std::vector<float> cb(levels, 0.f);
    const size_t n = sorted.size();
    for (int i = 0; i < levels && n; ++i) {
      double pos = double(i) / (levels - 1) * double(n - 1);
      size_t lo = size_t(std::floor(pos));
      size_t hi = std::min(lo + 1, n - 1);
      float frac = float(pos - double(lo));
      cb[size_t(i)] = sorted[lo] + frac * (sorted[hi] - sorted[lo]);
    }
    for (int it = 0; it < 25; ++it) {
      std::vector<double> sum(levels, 0.0);
      std::vector<int64_t> count(levels, 0);
      for (float s : samples) {
        int best = 0;
        float bd = std::fabs(s - cb[0]);
        for (int l = 1; l < levels; ++l) {
          float d = std::fabs(s - cb[size_t(l)]);
          if (d < bd) {
            bd = d;
            best = l;
          }
        }
        sum[size_t(best)] += s;
        ++count[size_t(best)];
      }
      for (int l = 0; l < levels; ++l)
        if (count[size_t(l)])
          cb[size_t(l)] = float(sum[size_t(l)] / double(count[size_t(l)]));
    }
    // Nearest-level search needs ascending order (Lloyd keeps it).
    std::sort(cb.begin(), cb.end());
    return cb;
  }

  bool six_ = false;
  int64_t g_ = 16;
  std::vector<int64_t> sampleRows_;
  std::vector<float> normalized_;
  std::vector<float> table_;
};

} // namespace

std::unique_ptr<WeightEncoder> createGroupedEncoder(const EncodeOptions &opts,
                                                    int64_t n, int64_t k,
                                                    DType source) {
  return std::make_unique<GroupedEncoder>(opts, n, k, source);
}

} // namespace comfyquant::rt
