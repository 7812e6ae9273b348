//===- Verify.cpp - re-read a written Comfy quant checkpoint --------------===//
//
// What --verify-output checks, independent of how the file was made: the
// reader's header rules (Safetensors.h), every module valid by the format
// registry (ModuleResolver.h), finite scales (MXFP8: no E8M0 byte 255), and
// with a source the error of the reference dequantization against the
// source weight of the same name.
//===----------------------------------------------------------------------===//

#include "comfyquant/runtime/quantize/Quantizer.h"

#include "QuantizeInternal.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/TensorAccess.h"
#include "comfyquant/runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace comfyquant::rt {

nlohmann::json VerifyReport::toJson() const {
  return {{"schema", "comfyquant-quantize-verify"},
          {"schema_version", 1},
          {"ok", ok},
          {"problems", problems},
          {"modules", modules}};
}

namespace {

/// Scale roles whose values must be finite (and, but for block scales,
/// non-negative).
bool isScaleRole(const std::string &k) {
  return k == "weight_scale" || k == "weight_scale_2" || k == "input_scale" ||
         k == "weight_s_rel" || k == "weight_s_channel" ||
         k == "pre_quant_scale" || k == "weight_codebook";
}

} // namespace

VerifyReport verifyQuantizedOutput(const std::string &output,
                                   const std::string &source,
                                   double errorBound, int threads) {
  VerifyReport rep;
  auto ckpt = Checkpoint::open(output); // header integrity: throws
  ResolvedCheckpoint rc;
  try {
    rc = resolveCheckpoint(*ckpt);
  } catch (const Error &e) {
    rep.ok = false;
    rep.problems.push_back(e.what());
    return rep;
  }
  std::unique_ptr<Checkpoint> src;
  if (!source.empty())
    src = Checkpoint::open(source);
  WorkerPool pool;
  const int nThreads = threads > 0 ? threads : availableCores();
  for (const ResolvedModule &m : rc.modules) {
    nlohmann::json mj;
    mj["module"] = m.desc.name;
    mj["format"] = formatName(m.desc.format);
    mj["shape"] = {m.desc.outFeatures, m.desc.inFeatures};
    for (const auto &[role, t] : m.tensors) {
      if (!isScaleRole(role))
        continue;
      const bool e8m0 = m.desc.format == Format::MXFP8 && role == "weight_scale";
      for (int64_t i = 0; i < t->numel(); ++i) {
        if (e8m0) {
          if (loadByte(*t, i) == 255) {
            rep.problems.push_back(output + ": " + moduleSubject(m.desc.name) +
                                   ": " + role + " holds the E8M0 NaN code 255");
            break;
          }
          continue;
        }
        float v = loadF32(*t, i);
        if (!std::isfinite(v)) {
          rep.problems.push_back(output + ": " + moduleSubject(m.desc.name) +
                                 ": " + role + " is not finite at " +
                                 std::to_string(i));
          break;
        }
      }
    }
    if (src && m.desc.kind == ModuleKind::Linear) {
      const TensorInfo *w = src->find(m.desc.name + ".weight");
      if (!w || w->rank() != 2 || w->shape[0] != m.desc.outFeatures ||
          w->shape[1] != m.desc.inFeatures ||
          (w->dtype != DType::BF16 && w->dtype != DType::F16 &&
           w->dtype != DType::F32)) {
        rep.problems.push_back(source + ": " + moduleSubject(m.desc.name) +
                               ": no float source weight of shape [" +
                               std::to_string(m.desc.outFeatures) + ", " +
                               std::to_string(m.desc.inFeatures) + "]");
      } else {
        const int64_t n = w->shape[0], k = w->shape[1];
        const int64_t rows = std::max<int64_t>(1, (16 << 20) / (k * 8));
        const int64_t bands = (n + rows - 1) / rows;
        std::vector<ErrorAccumulator> acc(static_cast<size_t>(nThreads));
        std::atomic<int64_t> next{0};
        pool.parallelFor(int(std::min<int64_t>(nThreads, bands)), [&](int t) {
          std::vector<float> ref(static_cast<size_t>(rows * k)), q(size_t(rows * k));
          for (int64_t i; (i = next++) < bands;) {
            int64_t r0 = i * rows, r = std::min(rows, n - r0);
            widenRows(*w, r0, r, ref.data());
            dequantizeRows(m, 0, r0, r0 + r, q.data(), true);
            // The forward multiplies x by pre_quant_scale: the weight it
            // applies is W'·diag(pre_quant_scale).
            if (const TensorInfo *pqs = m.tensor("pre_quant_scale"))
              for (int64_t i = 0; i < r; ++i)
                for (int64_t c = 0; c < k; ++c)
                  q[size_t(i * k + c)] *= loadF32(*pqs, c);
            acc[size_t(t)].add(ref.data(), q.data(), r * k);
          }
        });
        ErrorAccumulator total;
        for (auto &a : acc)
          total.merge(a);
        ErrorStats st = total.stats();
        mj["error"] = st.toJson();
        if (errorBound >= 0 && !(st.relRmse <= errorBound))
          rep.problems.push_back(output + ": " + moduleSubject(m.desc.name) +
                                 ": relative RMSE " + std::to_string(st.relRmse) +
                                 " over the bound " + std::to_string(errorBound));
      }
    }
    rep.modules.push_back(std::move(mj));
  }
  rep.ok = rep.problems.empty();
  return rep;
}

} // namespace comfyquant::rt
