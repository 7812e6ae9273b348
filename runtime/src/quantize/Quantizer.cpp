//===- Quantizer.cpp - the write step: encode, measure, stream out --------===//
//
// Layer by layer in source order. Every output tensor of a layer is written
// at the current offset of the data section of a temporary file (pwrite),
// so the data section has no holes whatever each layer turns out to be
// (quantized, or kept because it is over its error bound / not finite). The
// header goes last into space reserved for the largest header any outcome
// could need, padded with spaces (valid safetensors); then the temporary
// file is renamed over the output.
//===----------------------------------------------------------------------===//

#include "comfyquant/runtime/quantize/Quantizer.h"

#include "Encoders.h"
#include "QuantizeInternal.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/Json.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/OutputFile.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/ThreadPool.h"
#include "comfyquant/version.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace comfyquant::rt {

uint64_t currentRssAnonBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssAnon:", 0) == 0)
      return std::stoull(line.substr(8)) * 1024;
  return 0;
}

bool widenRows(const TensorInfo &t, int64_t r0, int64_t rows, float *out) {
  const int64_t k = t.shape[1];
  const int64_t count = rows * k;
  const size_t es = dtypeSize(t.dtype);
  const uint8_t *p = t.data + uint64_t(r0 * k) * es;
  bool finite = true;
  switch (t.dtype) {
  case DType::BF16:
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      uint32_t u = uint32_t(h) << 16;
      std::memcpy(out + i, &u, 4);
      finite &= (u & 0x7f800000u) != 0x7f800000u;
    }
    break;
  case DType::F16:
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = halfToFloat(h);
      finite &= (h & 0x7c00u) != 0x7c00u;
    }
    break;
  default:
    std::memcpy(out, p, size_t(count) * 4);
    for (int64_t i = 0; i < count; ++i)
      finite &= std::isfinite(out[i]);
  }
  return finite;
}

ResolvedModule inMemoryModule(const std::string &name,
                              const WeightEncoder &enc,
                              const std::vector<std::vector<uint8_t>> &bytes,
                              std::vector<TensorInfo> &storage) {
  ResolvedModule m;
  ModuleDesc &d = m.desc;
  const EncodeOptions &e = enc.options();
  d.name = name;
  d.kind = ModuleKind::Linear;
  d.format = e.format;
  d.outFeatures = enc.rows();
  d.inFeatures = enc.cols();
  d.groupSize = e.groupSize;
  d.rotationGroup = e.rotationGroup;
  d.linearDtype = e.format == Format::ConvRotW4A4
                      ? (e.linearDtype.empty() ? "int4" : e.linearDtype)
                      : "";
  storage.clear();
  storage.reserve(enc.outputs().size());
  for (size_t i = 0; i < enc.outputs().size(); ++i) {
    const EncodedTensorSpec &s = enc.outputs()[i];
    TensorInfo t;
    t.name = name + "." + s.key;
    t.dtype = s.dtype;
    t.shape = s.shape;
    t.begin = 0;
    t.end = s.nbytes;
    t.data = bytes[i].data();
    storage.push_back(std::move(t));
    d.tensors[s.key] = TensorDesc{s.dtype, s.shape};
  }
  for (auto &t : storage)
    m.tensors[t.name.substr(name.size() + 1)] = &t;
  if (auto rule = inferLogicalShape(d))
    throw Error("", moduleSubject(name),
                std::string("encoded ") + formatName(e.format) +
                    " breaks the registry: " + *rule);
  if (auto rule = verifyModule(d))
    throw Error("", moduleSubject(name),
                std::string("encoded ") + formatName(e.format) +
                    " breaks the registry: " + *rule);
  return m;
}

void ErrorAccumulator::add(const float *ref, const float *q, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    double r = ref[i], v = q[i], d = v - r;
    sumSq += r * r;
    errSq += d * d;
    dot += r * v;
    qSq += v * v;
    maxAbs = std::max(maxAbs, std::fabs(d));
  }
}
void ErrorAccumulator::merge(const ErrorAccumulator &o) {
  outSq += o.outSq;
  outErrSq += o.outErrSq;
  sumSq += o.sumSq;
  errSq += o.errSq;
  dot += o.dot;
  qSq += o.qSq;
  maxAbs = std::max(maxAbs, o.maxAbs);
}
ErrorStats ErrorAccumulator::stats() const {
  ErrorStats s;
  s.relRmse = sumSq > 0 ? std::sqrt(errSq / sumSq) : (errSq > 0 ? INFINITY : 0);
  s.maxAbs = maxAbs;
  if (measuredOutput)
    s.outputRelRmse = outSq > 0 ? std::sqrt(outErrSq / outSq) : 0.0;
  s.cosine = (sumSq > 0 && qSq > 0) ? dot / std::sqrt(sumSq * qSq)
             : (sumSq == 0 && qSq == 0) ? 1.0
                                        : 0.0;
  return s;
}

namespace {

/// Work split for one layer.
struct Bands {
  int64_t rows = 1; ///< rows per band
  int threads = 1;
  uint64_t working = 0; ///< bytes this layer holds at once
};

struct Encoded {
  std::unique_ptr<WeightEncoder> encoder;
  std::vector<std::vector<uint8_t>> bytes;
  bool finite = true;
};

class Writer {
public:
  Writer(const QuantizeOptions &o, const Checkpoint &ckpt, QuantizePlan &plan)
      : o_(o), ckpt_(ckpt), plan_(plan) {
    threads_ = o.threads > 0 ? o.threads : availableCores();
    baseline_ = currentRssAnonBytes();
    if (!o.calibrationSource.empty())
      calib_ = Checkpoint::open(o.calibrationSource);
  }

  QuantizeReport run(const std::string &outputPath);

private:
  Bands bandsFor(const std::string &module, int64_t n, int64_t k,
                 int64_t align, uint64_t fixed, int perRowCopies) const;
  Encoded encode(const TensorInfo &t, const std::string &module,
                 const EncodeOptions &e, const Bands &b,
                 const std::vector<float> *columnScale = nullptr) const;
  ErrorAccumulator measure(const TensorInfo &t, const std::string &module,
                           const Encoded &enc, const Bands &b,
                           const TensorInfo *calib, double *actErr,
                           const std::vector<float> *preQuantScale = nullptr,
                           bool rotatedBasis = false) const;
  const TensorInfo *calibrationFor(const TensorPlan &tp, int64_t k) const;
  std::vector<float> awqScales(const TensorPlan &tp, const TensorInfo &t,
                               const TensorInfo &calib, const Bands &b,
                               Encoded &best, ErrorStats &bestStats,
                               double &bestAct, std::string &note) const;
  void quantizeTensor(TensorPlan &tp, const TensorInfo &t, AtomicFile &out);
  void copyTensor(const TensorInfo &t, AtomicFile &out);
  void castTensor(const TensorInfo &t, DType to, AtomicFile &out);
  void put(const std::string &name, DType dtype, std::vector<int64_t> shape,
           const void *data, uint64_t n, AtomicFile &out);
  void note(uint64_t working) {
    peakWorking_ = std::max(peakWorking_, working);
    peakRss_ = std::max(peakRss_, currentRssAnonBytes());
  }
  std::string metadataJson() const;

  const QuantizeOptions &o_;
  const Checkpoint &ckpt_;
  QuantizePlan &plan_;
  std::unique_ptr<Checkpoint> calib_;
  int threads_ = 1;
  uint64_t baseline_ = 0, reserved_ = 0, offset_ = 0;
  uint64_t peakWorking_ = 0, peakRss_ = 0;
  mutable double encodeSeconds_ = 0; ///< time inside encode(): no I/O
  std::vector<TensorLayout> entries_;
  mutable WorkerPool pool_;
};

Bands Writer::bandsFor(const std::string &module, int64_t n, int64_t k,
                       int64_t align, uint64_t fixed, int perRowCopies) const {
  Bands b;
  const uint64_t rowBytes = uint64_t(k) * 4 * uint64_t(perRowCopies);
  b.threads = threads_;
  if (o_.maxMemory == 0) {
    int64_t rows = std::max<int64_t>(1, (64ll << 20) / int64_t(rowBytes));
    rows = std::min<int64_t>(rows, (n + b.threads * 4 - 1) / (b.threads * 4));
    b.rows = std::max<int64_t>(align, (rows + align - 1) / align * align);
    b.working = fixed + uint64_t(b.threads) * uint64_t(b.rows) * rowBytes;
    return b;
  }
  const uint64_t budget = o_.maxMemory;
  const uint64_t minBand = uint64_t(align) * rowBytes;
  if (fixed + minBand > budget)
    throw Error(ckpt_.path(), moduleSubject(module),
                "needs " + std::to_string(fixed + minBand) +
                    " bytes of working memory (" + std::to_string(fixed) +
                    " for its encoded tensors, " + std::to_string(minBand) +
                    " for one band of " + std::to_string(align) +
                    " rows), more than --max-memory " +
                    std::to_string(budget));
  uint64_t left = budget - fixed;
  int threads = threads_;
  while (threads > 1 && uint64_t(threads) * minBand > left)
    --threads;
  b.threads = threads;
  int64_t rows = int64_t(left / (uint64_t(threads) * rowBytes));
  rows = std::min<int64_t>(rows, (n + threads - 1) / threads);
  b.rows = std::max<int64_t>(align, rows / align * align);
  b.working = fixed + uint64_t(threads) * uint64_t(b.rows) * rowBytes;
  return b;
}

/// Rows of `t` widened to f32; with `columnScale`, each value times its
/// column's factor, rounded to t's dtype (the scaled weight W·diag(s) as a
/// tensor of the source dtype).
static bool sourceRows(const TensorInfo &t, int64_t r0, int64_t rows,
                       float *out, const std::vector<float> *columnScale) {
  bool finite = widenRows(t, r0, rows, out);
  if (columnScale) {
    const int64_t k = t.shape[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k; ++c)
        out[r * k + c] =
            roundToActivation(out[r * k + c] * (*columnScale)[size_t(c)], t.dtype);
  }
  return finite;
}

/// Whether rows [r0, r0 + rows) of a 2-D BF16/F16/F32 tensor are finite,
/// read from the stored bytes (an exponent of all ones is inf or NaN).
CQ_VECTOR_CLONES
static bool rawFinite(const TensorInfo &t, int64_t r0, int64_t rows) {
  const int64_t count = rows * t.shape[1];
  const size_t es = dtypeSize(t.dtype);
  const uint8_t *p = t.data + uint64_t(r0 * t.shape[1]) * es;
  bool bad = false;
  if (es == 2) {
    const uint16_t expMask = t.dtype == DType::BF16 ? 0x7F80 : 0x7C00;
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      bad |= (h & expMask) == expMask;
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      uint32_t u;
      std::memcpy(&u, p + 4 * i, 4);
      bad |= (u & 0x7F800000u) == 0x7F800000u;
    }
  }
  return !bad;
}

Encoded Writer::encode(const TensorInfo &t, const std::string &module,
                       const EncodeOptions &e, const Bands &b,
                       const std::vector<float> *columnScale) const {
  const auto started = std::chrono::steady_clock::now();
  struct AddTime {
    std::chrono::steady_clock::time_point from;
    double &to;
    ~AddTime() {
      to += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          from)
                .count();
    }
  } addTime{started, encodeSeconds_};
  Encoded r;
  const int64_t n = t.shape[0], k = t.shape[1];
  r.encoder = WeightEncoder::create(e, n, k, t.dtype, module);
  WeightEncoder &enc = *r.encoder;
  // Encoders that read the stored bytes skip the f32 rows; finiteness is
  // then checked on the bytes.
  const bool rawOnly = enc.rawOnly() && !columnScale;
  const size_t es = dtypeSize(t.dtype);
  auto rawAt = [&](int64_t r0) {
    return columnScale ? nullptr : t.data + uint64_t(r0 * k) * es;
  };
  std::vector<float> buf;
  if (enc.needsObserve()) {
    if (!rawOnly)
      buf.resize(size_t(b.rows * k));
    for (int64_t r0 = 0; r0 < n; r0 += b.rows) {
      int64_t rows = std::min(b.rows, n - r0);
      bool finite = rawOnly ? rawFinite(t, r0, rows)
                            : sourceRows(t, r0, rows, buf.data(), columnScale);
      if (!finite) {
        r.finite = false;
        return r;
      }
      enc.observe({rawOnly ? nullptr : buf.data(), r0, rows, k, rawAt(r0)});
    }
    buf.clear();
    buf.shrink_to_fit();
  }
  enc.finishObserve();
  for (const auto &s : enc.outputs())
    r.bytes.emplace_back(s.nbytes, 0);
  const int64_t bands = (n + b.rows - 1) / b.rows;
  std::atomic<int64_t> next{0};
  std::atomic<bool> finite{true};
  pool_.parallelFor(std::min<int64_t>(b.threads, bands), [&](int) {
    std::vector<float> rowsBuf(rawOnly ? 0 : size_t(b.rows * k));
    for (int64_t i; (i = next++) < bands;) {
      int64_t r0 = i * b.rows, rows = std::min(b.rows, n - r0);
      if (rawOnly ? !rawFinite(t, r0, rows)
                  : !sourceRows(t, r0, rows, rowsBuf.data(), columnScale)) {
        // The layer is kept; encoders are never handed NaN or infinity.
        finite = false;
        continue;
      }
      enc.encode({rawOnly ? nullptr : rowsBuf.data(), r0, rows, k, rawAt(r0)},
                 r.bytes);
    }
  });
  r.finite = finite;
  enc.finish(r.bytes);
  return r;
}

ErrorAccumulator Writer::measure(const TensorInfo &t, const std::string &module,
                                 const Encoded &enc, const Bands &b,
                                 const TensorInfo *calib, double *actErr,
                                 const std::vector<float> *preQuantScale,
                                 bool rotatedBasis) const {
  std::vector<TensorInfo> storage;
  ResolvedModule m = inMemoryModule(module, *enc.encoder, enc.bytes, storage);
  const int64_t n = t.shape[0], k = t.shape[1];
  const int64_t bands = (n + b.rows - 1) / b.rows;
  std::vector<ErrorAccumulator> acc(size_t(std::max(1, b.threads)));
  std::vector<double> act(acc.size(), 0.0);
  std::vector<float> x;
  int64_t calibRows = 0;
  if (calib) {
    calibRows = calib->shape[0];
    x.resize(size_t(calibRows * k));
    widenRows(*calib, 0, calibRows, x.data());
  }
  std::atomic<int64_t> next{0};
  pool_.parallelFor(std::min<int64_t>(b.threads, bands), [&](int w) {
    std::vector<float> ref(static_cast<size_t>(b.rows * k)), q(size_t(b.rows * k));
    for (int64_t i; (i = next++) < bands;) {
      int64_t r0 = i * b.rows, rows = std::min(b.rows, n - r0);
      widenRows(t, r0, rows, ref.data());
      if (rotatedBasis)
        for (int64_t r = 0; r < rows; ++r)
          rotateRowInDType(ref.data() + r * k, k, m.desc.rotationGroup,
                           DType::F32);
      dequantizeRows(m, 0, r0, r0 + rows, q.data(), !rotatedBasis);
      if (preQuantScale) // the weight the forward applies: W'·diag(pqs)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < k; ++c)
            q[size_t(r * k + c)] *= (*preQuantScale)[size_t(c)];
      acc[size_t(w)].add(ref.data(), q.data(), rows * k);
      for (int64_t c = 0; calib && c < calibRows; ++c)
        for (int64_t r = 0; r < rows; ++r) {
          double y = 0, y0 = 0;
          const float *xr = x.data() + c * k;
          for (int64_t j = 0; j < k; ++j) {
            y += double(xr[j]) * (q[size_t(r * k + j)] - ref[size_t(r * k + j)]);
            y0 += double(xr[j]) * ref[size_t(r * k + j)];
          }
          act[size_t(w)] += y * y;
          acc[size_t(w)].outSq += y0 * y0;
        }
    }
  });
  ErrorAccumulator total;
  for (const auto &a : acc)
    total.merge(a);
  for (double v : act)
    total.outErrSq += v;
  total.measuredOutput = calib != nullptr;
  if (actErr)
    *actErr = total.outErrSq;
  return total;
}

const TensorInfo *Writer::calibrationFor(const TensorPlan &tp,
                                         int64_t k) const {
  if (!calib_)
    return nullptr;
  for (const char *suffix : {"", ".input", ".x"}) {
    const TensorInfo *c = calib_->find(tp.module + suffix);
    if (c && c->rank() == 2 && c->shape[0] > 0 && c->shape[1] == k &&
        (c->dtype == DType::F32 || c->dtype == DType::BF16 ||
         c->dtype == DType::F16)) {
      std::vector<float> rows(static_cast<size_t>(c->numel()));
      if (!widenRows(*c, 0, c->shape[0], rows.data()))
        throw Error(o_.calibrationSource, tensorSubject(c->name),
                    "calibration rows must be finite");
      return c;
    }
  }
  return nullptr;
}

/// AWQ for NVFP4 (docs/Quantize.md §7.2): per column k, a_k = mean |x_k| over
/// the calibration rows; for α on a grid of --awq-steps + 1 points in
/// [0, 1], s = a^α normalised by sqrt(max s · min s), the weight W·diag(s)
/// (in the source dtype) is encoded and the forward's weight
/// Ŵ'·diag(1/s) scored by Σ_rows |x (Ŵ'·diag(1/s) − W)ᵀ|². α = 0 is kitchen's
/// plain encoding and is kept unless another α is strictly better; then no
/// pre_quant_scale is written. Returns the pre_quant_scale (1/s) or {}.
std::vector<float> Writer::awqScales(const TensorPlan &tp, const TensorInfo &t,
                                     const TensorInfo &calib, const Bands &b,
                                     Encoded &best, ErrorStats &bestStats,
                                     double &bestAct, std::string &note) const {
  const int64_t k = t.shape[1], m = calib.shape[0];
  std::vector<float> x(static_cast<size_t>(m * k));
  widenRows(calib, 0, m, x.data());
  std::vector<double> a(size_t(k), 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c)
      a[size_t(c)] += std::fabs(double(x[size_t(r * k + c)]));
  double smallest = 0;
  for (auto &v : a) {
    v /= double(m);
    if (v > 0 && (smallest == 0 || v < smallest))
      smallest = v;
  }
  for (auto &v : a)
    if (v <= 0)
      v = smallest > 0 ? smallest : 1.0;
  best = encode(t, tp.module, tp.encode, b);
  if (!best.finite)
    return {};
  bestStats = measure(t, tp.module, best, b, &calib, &bestAct).stats();
  std::vector<float> chosen;
  const int steps = o_.awqSteps;
  for (int i = 1; i <= steps; ++i) {
    const double alpha = double(i) / steps;
    std::vector<double> sd(static_cast<size_t>(k));
    double mx = 0, mn = 0;
    for (int64_t c = 0; c < k; ++c) {
      sd[size_t(c)] = std::pow(a[size_t(c)], alpha);
      mx = c == 0 ? sd[0] : std::max(mx, sd[size_t(c)]);
      mn = c == 0 ? sd[0] : std::min(mn, sd[size_t(c)]);
    }
    const double normal = std::sqrt(mx * mn);
    std::vector<float> s(static_cast<size_t>(k)),
        pqs(static_cast<size_t>(k));
    for (int64_t c = 0; c < k; ++c) {
      s[size_t(c)] = float(sd[size_t(c)] / normal);
      pqs[size_t(c)] = 1.0f / s[size_t(c)];
    }
    Encoded cand = encode(t, tp.module, tp.encode, b, &s);
    double act = 0;
    ErrorStats st = measure(t, tp.module, cand, b, &calib, &act, &pqs).stats();
    if (act < bestAct) {
      bestAct = act;
      bestStats = st;
      best = std::move(cand);
      chosen = pqs;
      char buf[64];
      std::snprintf(buf, sizeof buf, "awq: alpha %.2f", alpha);
      note = buf;
    }
  }
  return chosen;
}

void Writer::put(const std::string &name, DType dtype,
                 std::vector<int64_t> shape, const void *data, uint64_t n,
                 AtomicFile &out) {
  if (n)
    out.writeAt(reserved_ + offset_, data, n);
  offset_ += n;
  entries_.push_back({name, dtype, std::move(shape), n});
}

void Writer::copyTensor(const TensorInfo &t, AtomicFile &out) {
  // Straight from the mapping: no buffer.
  const uint64_t n = t.nbytes();
  for (uint64_t done = 0; done < n;) {
    uint64_t chunk = std::min<uint64_t>(n - done, 64ull << 20);
    out.writeAt(reserved_ + offset_ + done, t.data + done, chunk);
    done += chunk;
  }
  offset_ += n;
  entries_.push_back({t.name, t.dtype, t.shape, n});
}

void Writer::castTensor(const TensorInfo &t, DType to, AtomicFile &out) {
  const int64_t total = t.numel();
  const int64_t chunk = 1 << 20;
  std::vector<float> f(size_t(std::min<int64_t>(total, chunk)));
  std::vector<uint16_t> h(f.size());
  const uint64_t start = offset_;
  TensorInfo flat = t;
  flat.shape = {total, 1};
  for (int64_t i = 0; i < total; i += chunk) {
    int64_t c = std::min(chunk, total - i);
    widenRows(flat, i, c, f.data());
    for (int64_t j = 0; j < c; ++j)
      h[size_t(j)] = to == DType::F16 ? floatToHalf(f[size_t(j)])
                                      : floatToBFloat16(f[size_t(j)]);
    out.writeAt(reserved_ + start + uint64_t(i) * 2, h.data(), size_t(c) * 2);
  }
  note(f.size() * 6);
  offset_ += uint64_t(total) * 2;
  entries_.push_back({t.name, to, t.shape, uint64_t(total) * 2});
}

void Writer::quantizeTensor(TensorPlan &tp, const TensorInfo &t,
                            AtomicFile &out) {
  const int64_t n = t.shape[0], k = t.shape[1];
  const bool mixed = tp.candidates.size() > 1 ||
                     (!tp.candidateBounds.empty() && tp.candidateBounds[0] >= 0);
  const bool mse = o_.optimizer == "mse";
  const bool measureAll = o_.validate || mixed || mse;
  const TensorInfo *calib = nullptr;
  if (mse && o_.mseObjective != "weight") {
    calib = calibrationFor(tp, k);
    if (!calib && o_.mseObjective == "activation")
      throw Error(o_.calibrationSource, moduleSubject(tp.module),
                  "--mse-objective activation: no calibration rows [M, " +
                      std::to_string(k) + "] named '" + tp.module +
                      "' (or '.input', '.x')");
  }
  const bool awq = o_.awq && tp.encode.format == Format::NVFP4;
  const TensorInfo *awqCalib = awq ? calibrationFor(tp, k) : nullptr;
  if (awq && !awqCalib)
    throw Error(o_.calibrationSource, moduleSubject(tp.module),
                "--awq: no calibration rows [M, " + std::to_string(k) +
                    "] named '" + tp.module + "' (or '.input', '.x')");

  auto keepSource = [&](const std::string &why) {
    if (o_.strict)
      throw Error(ckpt_.path(), moduleSubject(tp.module), why + " (--strict)");
    tp.outcome = "kept: " + why;
    copyTensor(t, out);
  };

  Encoded best;
  std::string chosenNote;
  std::vector<float> preQuantScale;
  if (awq) {
    auto probe = WeightEncoder::create(tp.encode, n, k, t.dtype, tp.module);
    uint64_t fixed = 0;
    for (const auto &s : probe->outputs())
      fixed += 2 * s.nbytes;
    // The calibration rows, held by the search and by each measurement.
    fixed += 2 * uint64_t(awqCalib->numel()) * 4;
    Bands b = bandsFor(tp.module, n, k, probe->bandAlign(), fixed, 3);
    note(b.working);
    ErrorStats st;
    double act = 0;
    preQuantScale = awqScales(tp, t, *awqCalib, b, best, st, act, chosenNote);
    if (!best.finite) {
      keepSource("source values are not all finite");
      return;
    }
    tp.measured = true;
    tp.error = st;
    double bound = o_.errorBound >= 0 ? o_.errorBound
                                      : defaultErrorBound(tp.encode);
    if (o_.validate && !(st.relRmse <= bound)) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "relative RMSE %.4g over the bound %.4g of nvfp4",
                    st.relRmse, bound);
      keepSource(buf);
      return;
    }
  }
  for (size_t ci = 0; !awq && ci < tp.candidates.size(); ++ci) {
    EncodeOptions e = tp.candidates[ci];
    auto probe = WeightEncoder::create(e, n, k, t.dtype, tp.module);
    uint64_t fixed = 0;
    for (const auto &s : probe->outputs())
      fixed += s.nbytes;
    if (mse)
      fixed *= 2; // the best encoding so far and the one being tried
    fixed += probe->observeBytes();
    if (calib)
      fixed += uint64_t(calib->numel()) * 4;
    Bands b = bandsFor(tp.module, n, k, probe->bandAlign(), fixed,
                       measureAll ? 2 : 1);
    note(b.working);
    Encoded enc = encode(t, tp.module, e, b);
    if (!enc.finite) {
      keepSource("source values are not all finite");
      return;
    }
    if (!measureAll) {
      best = std::move(enc);
      break;
    }
    // ConvRot layers are measured in the rotated basis: the rotation is
    // orthogonal, so the relative RMSE and the cosine are the same there,
    // and the reference un-rotation would cost G products per value
    // (docs/Quantize.md §6.2). --verify-output measures un-rotated.
    const bool rankRotated = e.rotationGroup > 0 && !calib;
    double actErr = 0;
    ErrorStats st = measure(t, tp.module, enc, b, calib, &actErr, nullptr,
                            rankRotated)
                        .stats();
    note(b.working);
    if (mse) {
      // Scale search on the format's real grid: shrink the scale (clip
      // outliers) in steps; kitchen's scale (x1) is always a candidate and
      // is kept unless another strictly lowers the objective.
      const bool hasScale = e.format != Format::AsymW4A8Int8 &&
                            e.format != Format::W6A8Int8;
      double bestObj = calib ? actErr : st.relRmse;
      for (int s = 1; hasScale && s <= o_.mseSteps; ++s) {
        EncodeOptions ex = e;
        ex.scaleMultiplier = float(1.0 - 0.25 * s / o_.mseSteps);
        Encoded cand = encode(t, tp.module, ex, b);
        double ae = 0;
        ErrorStats cs = measure(t, tp.module, cand, b, calib, &ae, nullptr,
                                rankRotated)
                            .stats();
        double obj = calib ? ae : cs.relRmse;
        if (obj < bestObj) {
          bestObj = obj;
          enc = std::move(cand);
          st = cs;
          chosenNote = "mse: scale x" + std::to_string(ex.scaleMultiplier);
        }
      }
    }
    double bound = mixed ? tp.candidateBounds[ci]
                   : o_.errorBound >= 0 ? o_.errorBound
                                        : defaultErrorBound(e);
    tp.measured = true;
    tp.error = st;
    // Bounds apply with --validate and to mixed candidates; the MSE search
    // alone measures without gating.
    if (st.relRmse <= bound || (!o_.validate && !mixed)) {
      best = std::move(enc);
      if (mixed)
        tp.format = formatName(e.format);
      tp.encode = e;
      break;
    }
    if (!mixed || ci + 1 == tp.candidates.size()) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "relative RMSE %.4g over the bound %.4g of %s",
                    st.relRmse, bound, formatName(e.format));
      keepSource(buf);
      return;
    }
  }
  if (!best.encoder) {
    keepSource("no candidate format encodes it");
    return;
  }
  const WeightEncoder &enc = *best.encoder;
  const std::string marker = enc.marker();
  put(tp.module + ".comfy_quant", DType::U8,
      {int64_t(marker.size())}, marker.data(), marker.size(), out);
  for (size_t i = 0; i < enc.outputs().size(); ++i) {
    const auto &s = enc.outputs()[i];
    put(tp.module + "." + s.key, s.dtype, s.shape, best.bytes[i].data(),
        s.nbytes, out);
  }
  if (!preQuantScale.empty())
    put(tp.module + ".pre_quant_scale", DType::F32, {k},
        preQuantScale.data(), preQuantScale.size() * 4, out);
  tp.outcome = chosenNote.empty() ? "quantized" : "quantized (" + chosenNote + ")";
}

std::string Writer::metadataJson() const {
  nlohmann::ordered_json j;
  j["tool"] = "comfyquant-quantize";
  j["version"] = CQ_VERSION_STRING;
  j["format"] = o_.format;
  j["architecture"] = plan_.policy;
  j["policy_origin"] = plan_.policyOrigin;
  nlohmann::ordered_json opt;
  if (o_.convrotGroup)
    opt["convrot_group"] = o_.convrotGroup;
  if (o_.groupSize)
    opt["group_size"] = o_.groupSize;
  if (!o_.w4a4LinearDtype.empty())
    opt["w4a4_linear_dtype"] = o_.w4a4LinearDtype;
  opt["codebook"] = o_.codebook;
  if (o_.format == "mixed")
    opt["mixed_profile"] = o_.mixedProfile;
  opt["validate"] = o_.validate;
  opt["strict"] = o_.strict;
  if (o_.errorBound >= 0)
    opt["error_bound"] = o_.errorBound;
  opt["optimizer"] = o_.optimizer;
  if (o_.awq) {
    opt["awq"] = true;
    opt["awq_steps"] = o_.awqSteps;
  }
  if (o_.optimizer == "mse") {
    opt["mse_objective"] = o_.mseObjective;
    opt["mse_steps"] = o_.mseSteps;
  }
  if (!o_.include.empty())
    opt["include"] = o_.include;
  if (!o_.exclude.empty())
    opt["exclude"] = o_.exclude;
  j["options"] = opt;
  return j.dump();
}

/// Length of one header entry `"name":{...}` with offsets of `maxOffset`.
uint64_t entryLength(const std::string &name, DType dtype,
                     const std::vector<int64_t> &shape, uint64_t maxOffset) {
  nlohmann::ordered_json e;
  e["dtype"] = dtypeName(dtype);
  e["shape"] = shape;
  e["data_offsets"] = {maxOffset, maxOffset};
  nlohmann::ordered_json o;
  o[name] = e;
  return o.dump().size() - 2 + 1; // without braces, with a comma
}

QuantizeReport Writer::run(const std::string &outputPath) {
  auto start = std::chrono::steady_clock::now();
  std::map<std::string, std::string> metadata = ckpt_.metadata();
  metadata["comfyquant_quantize"] = metadataJson();

  // Room for the largest header any outcome could need.
  uint64_t maxTotal = 0;
  for (const auto &tp : plan_.tensors)
    maxTotal += std::max<uint64_t>(tp.bytesBefore, tp.bytesAfter) + 4096 +
                (o_.awq && tp.shape.size() == 2 ? uint64_t(tp.shape[1]) * 4 : 0);
  uint64_t bound = 64;
  {
    nlohmann::ordered_json md;
    for (const auto &[k, v] : metadata)
      md[k] = v;
    nlohmann::ordered_json o;
    o["__metadata__"] = md;
    bound += o.dump().size();
  }
  for (const auto &tp : plan_.tensors) {
    uint64_t keepLen = entryLength(tp.name, tp.dtype, tp.shape, maxTotal);
    uint64_t best = keepLen;
    if (tp.action == TensorPlan::Action::Cast)
      best = std::max(best, entryLength(tp.name, tp.castTo, tp.shape, maxTotal));
    for (const auto &e : tp.candidates) {
      auto enc = WeightEncoder::create(e, tp.shape[0], tp.shape[1], tp.dtype,
                                       tp.module);
      uint64_t len = entryLength(tp.module + ".comfy_quant", DType::U8,
                                 {int64_t(enc->marker().size())}, maxTotal);
      for (const auto &s : enc->outputs())
        len += entryLength(tp.module + "." + s.key, s.dtype, s.shape, maxTotal);
      if (o_.awq && e.format == Format::NVFP4)
        len += entryLength(tp.module + ".pre_quant_scale", DType::F32,
                           {tp.shape[1]}, maxTotal);
      best = std::max(best, len);
    }
    bound += best;
  }
  reserved_ = 8 + (bound + 7) / 8 * 8;
  if (reserved_ > kMaxHeaderBytes)
    throw Error(outputPath, "header", "would exceed the safetensors limit");

  AtomicFile out(outputPath);
  std::map<std::string, const TensorInfo *> byName;
  for (const TensorInfo *t : ckpt_.tensors())
    byName[t->name] = t;
  QuantizeReport rep;
  const size_t total = plan_.tensors.size();
  uint64_t doneBytes = 0;
  size_t index = 0;
  for (auto &tp : plan_.tensors) {
    ++index;
    const TensorInfo &t = *byName.at(tp.name);
    switch (tp.action) {
    case TensorPlan::Action::Keep:
      copyTensor(t, out);
      ++rep.kept;
      break;
    case TensorPlan::Action::Cast:
      castTensor(t, tp.castTo, out);
      tp.outcome = "cast";
      ++rep.quantized;
      break;
    case TensorPlan::Action::Quantize:
      quantizeTensor(tp, t, out);
      if (tp.outcome.rfind("kept", 0) == 0)
        ++rep.fellBack;
      else
        ++rep.quantized;
      break;
    }
    doneBytes += tp.bytesBefore;
    if (o_.progress && tp.action != TensorPlan::Action::Keep) {
      double secs = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
      double eta = doneBytes ? secs * double(plan_.bytesBefore - doneBytes) /
                                   double(doneBytes)
                             : 0;
      char buf[256];
      std::snprintf(buf, sizeof buf, "[%zu/%zu] %s %s (%.1f/%.1f MB, ETA %.0f s)",
                    index, total, tp.name.c_str(), tp.outcome.c_str(),
                    doneBytes / 1e6, plan_.bytesBefore / 1e6, eta);
      o_.progress(buf);
    }
  }
  std::string header = safetensorsHeader(outputPath, entries_, metadata);
  if (header.size() > reserved_)
    throw Error(outputPath, "header",
                "needs " + std::to_string(header.size()) + " bytes, " +
                    std::to_string(reserved_) + " were reserved (a defect)");
  header.append(reserved_ - header.size(), ' ');
  uint64_t len = reserved_ - 8;
  for (int i = 0; i < 8; ++i)
    header[size_t(i)] = char(len >> (8 * i));
  out.writeAt(0, header.data(), header.size());
  out.commit();
  rep.output = outputPath;
  rep.outputBytes = reserved_ + offset_;
  rep.peakWorkingBytes = peakWorking_;
  rep.peakRssAnonBytes = peakRss_ > baseline_ ? peakRss_ - baseline_ : 0;
  rep.seconds = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  rep.encodeSeconds = encodeSeconds_;
  rep.plan = plan_;
  return rep;
}

} // namespace

nlohmann::json QuantizeReport::toJson() const {
  nlohmann::json j = plan.toJson();
  j["schema"] = "comfyquant-quantize-report";
  j["output"] = output;
  j["output_bytes"] = outputBytes;
  j["peak_working_bytes"] = peakWorkingBytes;
  j["peak_rss_anon_bytes"] = peakRssAnonBytes;
  j["seconds"] = seconds;
  j["encode_seconds"] = encodeSeconds;
  j["quantized"] = quantized;
  j["kept"] = kept;
  j["fell_back"] = fellBack;
  if (!files.empty()) {
    nlohmann::json fs = nlohmann::json::array();
    for (const auto &f : files)
      fs.push_back(f.toJson());
    j["files"] = std::move(fs);
    j.erase("tensors");
    j["input"] = files.front().plan.input;
  }
  return j;
}

QuantizeReport quantizeCheckpoint(const QuantizeOptions &o) {
  if (o.output.empty())
    throw Error("", "--output", "is required");
  if (o.optimizer != "none" && o.optimizer != "mse")
    throw Error("", "--optimizer", "must be none or mse");
  if (o.mseObjective != "auto" && o.mseObjective != "weight" &&
      o.mseObjective != "activation")
    throw Error("", "--mse-objective", "must be weight, activation or auto");
  if (o.mseObjective == "activation" && o.calibrationSource.empty())
    throw Error("", "--mse-objective",
                "activation needs --calibration-source");
  if (o.mseSteps < 1 || o.mseSteps > 64)
    throw Error("", "--mse-steps", "must be 1..64");
  if (o.awq && o.calibrationSource.empty())
    throw Error("", "--awq", "needs --calibration-source (activation rows)");
  if (o.awq && o.format != "nvfp4")
    throw Error("", "--awq", "applies only to --format nvfp4");
  if (o.awqSteps < 1 || o.awqSteps > 100)
    throw Error("", "--awq-steps", "must be 1..100");
  if (o.threads < 0 || o.threads > 1024)
    throw Error("", "--threads", "must be 0 (every core) .. 1024");
  PolicySet policies = loadPolicies(o);
  auto files = sourceFiles(o.input);
  const bool toDirectory = !files.front().relativeOutput.empty();
  std::vector<std::string> inputs;
  std::vector<std::unique_ptr<Checkpoint>> ckpts;
  for (const auto &f : files) {
    ckpts.push_back(Checkpoint::open(f.path));
    for (auto &p : checkpointFiles(*ckpts.back()))
      inputs.push_back(p);
  }
  if (!o.calibrationSource.empty())
    inputs.push_back(o.calibrationSource);
  namespace fs = std::filesystem;
  QuantizeReport last;
  if (toDirectory) {
    checkNotAnInput(o.output, inputs, /*outputIsDirectory=*/true);
    std::error_code ec;
    fs::create_directories(o.output, ec);
    if (ec)
      throw Error(o.output, "--output",
                  "cannot create the output directory: " + ec.message(),
                  ErrorKind::Io);
  }
  std::vector<std::string> outPaths;
  for (const auto &f : files)
    outPaths.push_back(toDirectory
                           ? (fs::path(o.output) / f.relativeOutput).string()
                           : o.output);
  for (const auto &outPath : outPaths) {
    checkNotAnInput(outPath, inputs);
    checkOverwrite(outPath, o.overwrite);
  }
  if (!o.report.empty()) {
    // Before anything is written: the report may not replace an input or
    // an output, nor an existing file without --overwrite.
    std::vector<std::string> taken = inputs;
    taken.insert(taken.end(), outPaths.begin(), outPaths.end());
    checkNotAnInput(o.report, taken);
    if (toDirectory)
      checkNotAnInput(o.report, {o.output}, /*outputIsDirectory=*/false);
    checkOverwrite(o.report, o.overwrite);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string &outPath = outPaths[i];
    QuantizePlan plan = planFor(*ckpts[i], o, policies);
    Writer w(o, *ckpts[i], plan);
    QuantizeReport r = w.run(outPath);
    if (files.size() > 1) {
      QuantizeReport summary = r;
      summary.files = last.files;
      summary.files.push_back(r);
      summary.quantized = last.quantized + r.quantized;
      summary.kept = last.kept + r.kept;
      summary.fellBack = last.fellBack + r.fellBack;
      summary.outputBytes = last.outputBytes + r.outputBytes;
      summary.seconds = last.seconds + r.seconds;
      summary.encodeSeconds = last.encodeSeconds + r.encodeSeconds;
      summary.peakWorkingBytes = std::max(last.peakWorkingBytes, r.peakWorkingBytes);
      summary.peakRssAnonBytes = std::max(last.peakRssAnonBytes, r.peakRssAnonBytes);
      summary.output = o.output;
      last = std::move(summary);
    } else {
      last = std::move(r);
    }
  }
  if (!o.report.empty())
    writeFileAtomically(o.report, last.toJson().dump(2) + "\n");
  return last;
}

} // namespace comfyquant::rt
