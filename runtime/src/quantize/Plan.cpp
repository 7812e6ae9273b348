//===- Plan.cpp - what the quantizer does to each tensor, and why ---------===//

#include "comfyquant/runtime/quantize/Quantizer.h"

#include "QuantizeInternal.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Json.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/quantize/Policy.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

namespace comfyquant::rt {

namespace {

struct FormatChoice {
  enum class Kind { Quantize, Cast, Mixed } kind = Kind::Quantize;
  EncodeOptions encode;
  DType castTo = DType::F16;
  bool w4a4LargestGroup = false; ///< W4A4: the largest of 256/64/16 dividing K
};

const std::map<std::string, std::string> &aliases() {
  static const std::map<std::string, std::string> a = {
      {"int8_convrot", "int8-convrot"},   {"int4_convrot", "int4-convrot"},
      {"int8_tensorwise", "int8"},        {"convrot_w4a4", "w4a4"},
      {"asym_w4a8_int8", "w4a8"},         {"w6a8_int8", "w6a8"},
      {"float8_e4m3fn", "fp8-e4m3"},      {"float8_e5m2", "fp8-e5m2"},
      {"fp8", "fp8-e4m3"},
  };
  return a;
}

FormatChoice parseFormatChoice(const QuantizeOptions &o) {
  std::string f = o.format;
  if (auto it = aliases().find(f); it != aliases().end())
    f = it->second;
  FormatChoice c;
  EncodeOptions &e = c.encode;
  if (f == "int8") {
    e.format = Format::Int8Tensorwise;
    e.perRow = true;
  } else if (f == "int8-tensor") {
    e.format = Format::Int8Tensorwise;
  } else if (f == "int8-convrot") {
    e.format = Format::Int8Tensorwise;
    e.perRow = true;
    e.rotationGroup = o.convrotGroup ? o.convrotGroup : kDefaultRotationGroup;
  } else if (f == "w4a4" || f == "int4-convrot") {
    e.format = Format::ConvRotW4A4;
    e.rotationGroup = o.convrotGroup;
    c.w4a4LargestGroup = o.convrotGroup == 0;
    e.linearDtype = !o.w4a4LinearDtype.empty() ? o.w4a4LinearDtype
                    : f == "w4a4"               ? "int8"
                                                : "int4";
    if (e.linearDtype != "int4" && e.linearDtype != "int8")
      throw Error("", "--w4a4-linear-dtype", "must be int4 or int8");
  } else if (f == "w4a8" || f == "w6a8") {
    e.format = f == "w4a8" ? Format::AsymW4A8Int8 : Format::W6A8Int8;
    e.groupSize = o.groupSize ? o.groupSize
                              : formatInfo(e.format).defaultGroupSize;
    e.rotationGroup = o.convrotGroup ? o.convrotGroup : kDefaultRotationGroup;
    if (o.codebook == "auto")
      e.codebook = CodebookChoice::Auto;
    else if (o.codebook == "fixed")
      e.codebook = CodebookChoice::Fixed;
    else if (o.codebook == "fit")
      e.codebook = CodebookChoice::Fit;
    else if (o.codebook == "none")
      e.codebook = CodebookChoice::None;
    else
      throw Error("", "--codebook", "must be auto, fixed, fit or none");
    if (f == "w6a8")
      e.codebook = CodebookChoice::None;
    if (o.sRelDtype == "f32")
      e.sRelF32 = true;
    else if (!o.sRelDtype.empty() && o.sRelDtype != "e4m3")
      throw Error("", "--s-rel-dtype", "must be e4m3 or f32");
  } else if (f == "fp8-e4m3") {
    e.format = Format::Float8E4M3FN;
  } else if (f == "fp8-e5m2") {
    e.format = Format::Float8E5M2;
  } else if (f == "nvfp4") {
    e.format = Format::NVFP4;
  } else if (f == "mxfp8") {
    e.format = Format::MXFP8;
  } else if (f == "fp16" || f == "bf16") {
    c.kind = FormatChoice::Kind::Cast;
    c.castTo = f == "fp16" ? DType::F16 : DType::BF16;
  } else if (f == "mixed") {
    c.kind = FormatChoice::Kind::Mixed;
  } else {
    std::string names;
    for (const auto &[n, _] : quantizeFormatNames())
      names += (names.empty() ? "" : ", ") + n;
    throw Error("", "--format",
                (o.format.empty() ? std::string("is required")
                                  : "unknown format " + quotedStr(o.format)) +
                    " (one of: " + names + ")");
  }
  const bool grouped = c.kind == FormatChoice::Kind::Quantize &&
                       (e.format == Format::AsymW4A8Int8 ||
                        e.format == Format::W6A8Int8);
  if (o.groupSize && !grouped)
    throw Error("", "--group-size", "applies only to w4a8 and w6a8");
  if (!o.sRelDtype.empty() && !grouped)
    throw Error("", "--s-rel-dtype", "applies only to w4a8 and w6a8");
  if (o.codebook != "auto" && !(grouped && e.format == Format::AsymW4A8Int8))
    throw Error("", "--codebook", "applies only to w4a8");
  if (!o.w4a4LinearDtype.empty() &&
      !(c.kind == FormatChoice::Kind::Quantize &&
        e.format == Format::ConvRotW4A4))
    throw Error("", "--w4a4-linear-dtype", "applies only to w4a4 and int4-convrot");
  if (o.convrotGroup && c.kind == FormatChoice::Kind::Quantize &&
      !e.rotationGroup && e.format != Format::ConvRotW4A4)
    throw Error("", "--convrot-group",
                std::string("does not apply to ") + o.format +
                    " (no rotation)");
  if (o.convrotGroup && !isPowerOf4(o.convrotGroup))
    throw Error("", "--convrot-group",
                std::to_string(o.convrotGroup) + " is not a power of 4 >= 4");
  if (o.mixedProfile != "balanced" && c.kind != FormatChoice::Kind::Mixed)
    throw Error("", "--mixed-profile", "applies only to --format mixed");
  return c;
}

/// Mixed profiles: candidates in order of preference, each with the
/// relative-RMSE bound under which it is taken (docs/Quantize.md §5).
std::vector<std::pair<EncodeOptions, double>>
mixedCandidates(const std::string &profile) {
  EncodeOptions w4a4;
  w4a4.format = Format::ConvRotW4A4;
  w4a4.linearDtype = "int8";
  EncodeOptions int8c;
  int8c.format = Format::Int8Tensorwise;
  int8c.perRow = true;
  int8c.rotationGroup = kDefaultRotationGroup;
  EncodeOptions int8r;
  int8r.format = Format::Int8Tensorwise;
  int8r.perRow = true;
  EncodeOptions fp8;
  fp8.format = Format::Float8E4M3FN;
  if (profile == "size")
    return {{w4a4, 0.20}, {int8c, 0.05}, {int8r, 0.05}};
  if (profile == "balanced")
    return {{int8c, 0.03}, {int8r, 0.03}, {fp8, 0.06}};
  if (profile == "quality")
    return {{int8r, 0.015}, {fp8, 0.04}};
  throw Error("", "--mixed-profile", "must be size, balanced or quality");
}

bool globMatch(const std::vector<std::string> &globs, const std::string &s) {
  for (const auto &g : globs)
    if (fnmatch(g.c_str(), s.c_str(), 0) == 0)
      return true;
  return false;
}

uint64_t bytesOf(const std::vector<EncodedTensorSpec> &outs,
                 const std::string &marker) {
  uint64_t b = marker.size();
  for (const auto &o : outs)
    b += o.nbytes;
  return b;
}

} // namespace

const std::vector<std::pair<std::string, std::string>> &quantizeFormatNames() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"int8", "int8_tensorwise, one F32 scale per row [N,1]"},
      {"int8-tensor", "int8_tensorwise, one F32 scale per tensor"},
      {"int8-convrot", "int8_tensorwise with ConvRot (group 256; "
                       "--convrot-group 16|64|256), per-row scales"},
      {"w4a4", "convrot_w4a4 (signed int4, per-row scale; ConvRot group: the "
               "largest of 256/64/16 dividing K), linear_dtype int8"},
      {"int4-convrot", "convrot_w4a4 as w4a4, linear_dtype int4"},
      {"w4a8", "asym_w4a8_int8: 4-bit codebook codes, group 16, ConvRot 256 "
               "(--codebook auto|fixed|fit|none, --group-size)"},
      {"w6a8", "w6a8_int8: 6-bit codes, group 16, ConvRot 256"},
      {"fp8-e4m3", "float8_e4m3fn, one F32 scale per tensor"},
      {"fp8-e5m2", "float8_e5m2, one F32 scale per tensor"},
      {"nvfp4", "nvfp4: E2M1 codes, E4M3 scale per 16, F32 global scale"},
      {"mxfp8", "mxfp8: E4M3 codes, E8M0 scale per 32"},
      {"fp16", "cast the selected weights to F16"},
      {"bf16", "cast the selected weights to BF16"},
      {"mixed", "per layer, the first of a profile's candidates within its "
                "error bound (--mixed-profile size|balanced|quality)"},
  };
  return names;
}

double defaultErrorBound(const EncodeOptions &e) {
  switch (e.format) {
  case Format::Float8E4M3FN:
    return 0.10;
  case Format::Float8E5M2:
    return 0.20;
  case Format::NVFP4:
    return 0.25;
  case Format::MXFP8:
    return 0.10;
  case Format::Int8Tensorwise:
    return e.perRow || e.rotationGroup ? 0.05 : 0.10;
  case Format::ConvRotW4A4:
    return 0.25;
  case Format::AsymW4A8Int8:
    return 0.25;
  case Format::W6A8Int8:
    return 0.10;
  }
  return 0.25;
}

std::vector<SourceFile> sourceFiles(const std::string &input) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto refusePickle = [](const std::string &p) {
    static const char *exts[] = {".ckpt", ".pt", ".pth", ".bin", ".pkl",
                                 ".pickle"};
    for (const char *e : exts) {
      std::string s(e);
      if (p.size() >= s.size() && p.compare(p.size() - s.size(), s.size(), s) == 0)
        throw Error(p, "input",
                    "pickle checkpoints are refused (loading one can run "
                    "code); convert it to .safetensors first");
    }
    std::FILE *f = std::fopen(p.c_str(), "rb");
    if (f) {
      // A safetensors file has its JSON header's '{' at byte 8; its first
      // bytes (the header length) may look like a pickle header.
      unsigned char m[9] = {0};
      size_t got = std::fread(m, 1, 9, f);
      std::fclose(f);
      const bool safetensors = got == 9 && m[8] == '{';
      if (!safetensors && got >= 2 &&
          ((m[0] == 0x80 && m[1] <= 5) || (m[0] == 'P' && m[1] == 'K')))
        throw Error(p, "input",
                    "this is a pickle or zip (torch.save) file, refused: "
                    "convert it to .safetensors first");
    }
  };
  if (fs::is_directory(input, ec)) {
    std::vector<std::string> index, files;
    fs::directory_iterator it(input, ec), end;
    if (ec)
      throw Error(input, "input", "cannot list the directory: " + ec.message(),
                  ErrorKind::Io);
    for (; it != end; it.increment(ec)) {
      if (ec)
        throw Error(input, "input",
                    "cannot list the directory: " + ec.message(), ErrorKind::Io);
      const auto &e = *it;
      std::string p = e.path().string();
      if (p.size() > 17 && p.compare(p.size() - 17, 17, ".safetensors.json") == 0)
        continue;
      if (p.size() > 11 && p.compare(p.size() - 11, 11, ".index.json") == 0)
        index.push_back(p);
      else if (p.size() > 12 && p.compare(p.size() - 12, 12, ".safetensors") == 0)
        files.push_back(p);
    }
    std::sort(index.begin(), index.end());
    std::sort(files.begin(), files.end());
    if (index.size() > 1)
      throw Error(input, "input",
                  "the directory holds several *.index.json files; name one");
    if (index.size() == 1)
      return {{index[0], ""}};
    if (files.empty())
      throw Error(input, "input", "the directory holds no .safetensors file");
    std::vector<SourceFile> out;
    for (const auto &f : files)
      out.push_back({f, fs::path(f).filename().string()});
    if (out.size() == 1)
      out[0].relativeOutput.clear();
    return out;
  }
  if (!fs::exists(input, ec))
    throw Error(input, "input", "does not exist", ErrorKind::Io);
  refusePickle(input);
  return {{input, ""}};
}

QuantizePlan planFor(const Checkpoint &ckpt, const QuantizeOptions &o,
                     const PolicySet &policies) {
  QuantizePlan plan;
  plan.input = ckpt.path();
  plan.format = o.format;
  FormatChoice choice = parseFormatChoice(o);

  // A checkpoint that is already Comfy quant is refused, not re-quantized.
  for (const TensorInfo *t : ckpt.tensors()) {
    const std::string &n = t->name;
    if (n.size() > 12 && n.compare(n.size() - 12, 12, ".comfy_quant") == 0)
      throw Error(ckpt.path(), tensorSubject(n),
                  "the input is already a Comfy quant checkpoint (it has "
                  "comfy_quant markers); quantize its source instead");
  }
  if (ckpt.metadata().count("_quantization_metadata"))
    throw Error(ckpt.path(), "__metadata__",
                "the input is already a Comfy quant checkpoint "
                "(_quantization_metadata); quantize its source instead");

  std::vector<std::string> names;
  for (const TensorInfo *t : ckpt.tensors())
    names.push_back(t->name);
  const ArchitecturePolicy *policy = nullptr;
  if (!o.architecture.empty()) {
    policy = policies.find(o.architecture);
    if (!policy) {
      std::string known;
      for (auto *p : policies.policies())
        known += (known.empty() ? "" : ", ") + p->name;
      throw Error("", "--architecture",
                  "unknown architecture " + quotedStr(o.architecture) +
                      " (one of: " + known + ")");
    }
    plan.detection = "named with --architecture";
  } else {
    try {
      policy = policies.detect(names, plan.detection);
    } catch (const Error &e) {
      throw Error(ckpt.path(), e.subject(), e.rule());
    }
  }
  if (!policy)
    throw Error("", "policy", "the generic policy is missing (a build defect)");
  if (!o.component.empty() && policy->component != o.component)
    throw Error(ckpt.path(), "--components",
                "the checkpoint is a " + policy->component + " (policy " +
                    policy->name + "), not a " + o.component);
  plan.policy = policy->name;
  plan.policyOrigin = policy->origin;

  std::vector<std::pair<EncodeOptions, double>> mixed;
  if (choice.kind == FormatChoice::Kind::Mixed)
    mixed = mixedCandidates(o.mixedProfile);

  for (const TensorInfo *t : ckpt.tensors()) {
    TensorPlan tp;
    tp.name = t->name;
    tp.dtype = t->dtype;
    tp.shape = t->shape;
    tp.bytesBefore = tp.bytesAfter = t->nbytes();
    auto keep = [&](std::string why) {
      tp.action = TensorPlan::Action::Keep;
      tp.reason = std::move(why);
    };
    // Policies match the prefix-stripped name; the checkpoint's own module
    // name (prefix kept) names the output tensors, beside the module's bias.
    auto module = policyModuleName(*policy, t->name);
    const std::string fullModule =
        module ? t->name.substr(0, t->name.size() - 7) : std::string();
    auto globbed = [&](const std::vector<std::string> &globs) {
      return globMatch(globs, *module) || globMatch(globs, fullModule);
    };
    const bool floatWeight = t->dtype == DType::BF16 ||
                             t->dtype == DType::F16 || t->dtype == DType::F32;
    if (!module) {
      keep("not a weight");
    } else if (t->rank() != 2) {
      tp.module = fullModule;
      keep(t->rank() == 1 ? "1-D (norm or bias-like) weight"
                          : "not a 2-D linear weight (rank " +
                                std::to_string(t->rank()) + ")");
    } else if (!floatWeight) {
      tp.module = fullModule;
      keep(std::string("source dtype ") + dtypeName(t->dtype) +
           " is not a float weight");
    } else {
      tp.module = fullModule;
      PolicyDecision d = policies.classify(*policy, t->name);
      bool selected = d.quantize;
      std::string why = d.reason;
      if (!o.include.empty() && globbed(o.include) && !selected &&
          !d.reason.empty() && d.reason.find("policy's quantize list") !=
                                   std::string::npos) {
        selected = true;
        why = "selected by --include";
      }
      if (!o.exclude.empty() && globbed(o.exclude)) {
        selected = false;
        why = "excluded by --exclude";
      }
      if (!o.include.empty() && !globbed(o.include) && selected) {
        selected = false;
        why = "not matched by --include";
      }
      if (!selected) {
        keep(why);
      } else if (choice.kind == FormatChoice::Kind::Cast) {
        tp.action = TensorPlan::Action::Cast;
        tp.castTo = choice.castTo;
        tp.format = dtypeName(choice.castTo);
        tp.reason = why;
        tp.bytesAfter = uint64_t(t->numel()) * dtypeSize(choice.castTo);
        if (t->dtype == choice.castTo)
          keep("already " + std::string(dtypeName(t->dtype)));
      } else {
        const int64_t n = t->shape[0], k = t->shape[1];
        std::vector<std::pair<EncodeOptions, double>> cands;
        if (choice.kind == FormatChoice::Kind::Mixed)
          cands = mixed;
        else
          cands.push_back({choice.encode, -1});
        std::string firstRule;
        for (auto &[e, bound] : cands) {
          if (e.format == Format::ConvRotW4A4 &&
              (choice.w4a4LargestGroup || choice.kind == FormatChoice::Kind::Mixed)) {
            e.rotationGroup = 0;
            for (int64_t g : {256, 64, 16})
              if (k % g == 0) {
                e.rotationGroup = g;
                break;
              }
            if (!e.rotationGroup)
              e.rotationGroup = 256;
          }
          if (d.convrotGroup && e.rotationGroup && !o.convrotGroup)
            e.rotationGroup = d.convrotGroup;
          std::string rule = encodeShapeRule(e, n, k);
          if (!rule.empty()) {
            if (firstRule.empty())
              firstRule = std::string(formatName(e.format)) + ": " + rule;
            continue;
          }
          tp.candidates.push_back(e);
          tp.candidateBounds.push_back(bound);
        }
        if (tp.candidates.empty()) {
          keep("shape " + shapeString(t->shape) + " not allowed (" +
               firstRule + ")");
        } else {
          tp.action = TensorPlan::Action::Quantize;
          tp.encode = tp.candidates.front();
          tp.reason = why;
          tp.format = choice.kind == FormatChoice::Kind::Mixed
                          ? "mixed:" + std::string(formatName(tp.encode.format))
                          : formatName(tp.encode.format);
          auto enc = WeightEncoder::create(tp.encode, n, k, t->dtype, fullModule);
          tp.bytesAfter = bytesOf(enc->outputs(), enc->marker());
          // The tensors it writes must not exist in the input already.
          std::vector<std::string> keys{"comfy_quant", "pre_quant_scale"};
          for (const auto &cand : tp.candidates) {
            auto ce = WeightEncoder::create(cand, n, k, t->dtype, fullModule);
            for (const auto &spec : ce->outputs())
              if (spec.key != "weight")
                keys.push_back(spec.key);
          }
          for (const auto &key : keys)
            if (ckpt.find(fullModule + "." + key))
              throw Error(ckpt.path(), tensorSubject(fullModule + "." + key),
                          "the input already holds this tensor, which "
                          "quantizing '" + t->name + "' would write (a "
                          "quantized or partly converted checkpoint?)");
        }
      }
    }
    plan.bytesBefore += tp.bytesBefore;
    plan.bytesAfter += tp.bytesAfter;
    plan.tensors.push_back(std::move(tp));
  }
  return plan;
}

nlohmann::json ErrorStats::toJson() const {
  nlohmann::json j = {
      {"rel_rmse", relRmse}, {"max_abs", maxAbs}, {"cosine", cosine}};
  if (outputRelRmse >= 0)
    j["output_rel_rmse"] = outputRelRmse;
  return j;
}

nlohmann::json QuantizePlan::toJson() const {
  nlohmann::json j;
  j["schema"] = "comfyquant-quantize-plan";
  j["schema_version"] = 1;
  j["input"] = input;
  j["format"] = format;
  j["architecture"] = policy;
  j["policy_origin"] = policyOrigin;
  j["detection"] = detection;
  nlohmann::json ts = nlohmann::json::array();
  int quant = 0;
  for (const auto &t : tensors) {
    nlohmann::json e;
    e["name"] = t.name;
    if (!t.module.empty())
      e["module"] = t.module;
    e["action"] = t.action == TensorPlan::Action::Quantize ? "quantize"
                  : t.action == TensorPlan::Action::Cast   ? "cast"
                                                           : "keep";
    if (t.action != TensorPlan::Action::Keep) {
      e["format"] = t.format;
      ++quant;
    }
    if (t.action == TensorPlan::Action::Quantize && t.encode.rotationGroup)
      e["convrot_groupsize"] = t.encode.rotationGroup;
    e["reason"] = t.reason;
    e["dtype"] = dtypeName(t.dtype);
    e["shape"] = t.shape;
    e["bytes_before"] = t.bytesBefore;
    e["bytes_after"] = t.bytesAfter;
    if (!t.outcome.empty())
      e["outcome"] = t.outcome;
    if (t.measured)
      e["error"] = t.error.toJson();
    ts.push_back(std::move(e));
  }
  j["tensors"] = std::move(ts);
  j["totals"] = {{"tensors", tensors.size()},
                 {"selected", quant},
                 {"bytes_before", bytesBefore},
                 {"bytes_after", bytesAfter}};
  return j;
}

std::string QuantizePlan::toText() const {
  std::string s = "input: " + input + "\narchitecture: " + policy + " (" +
                  policyOrigin + "; " + detection + ")\nformat: " + format +
                  "\n";
  int quant = 0;
  for (const auto &t : tensors) {
    const char *a = t.action == TensorPlan::Action::Quantize ? "quantize"
                    : t.action == TensorPlan::Action::Cast   ? "cast"
                                                             : "keep";
    if (t.action != TensorPlan::Action::Keep)
      ++quant;
    char line[64];
    std::snprintf(line, sizeof line, "%12llu -> %12llu  ",
                  (unsigned long long)t.bytesBefore,
                  (unsigned long long)t.bytesAfter);
    s += std::string(a) + (t.action == TensorPlan::Action::Keep ? "      " : " ") +
         (t.action != TensorPlan::Action::Keep ? t.format + "  " : "") +
         t.name + " " + dtypeName(t.dtype) + shapeString(t.shape) + "  " +
         line + t.reason;
    if (!t.outcome.empty() && t.outcome != "quantized")
      s += "  [" + t.outcome + "]";
    s += "\n";
  }
  char tot[160];
  std::snprintf(tot, sizeof tot,
                "total: %zu tensors, %d selected, %llu -> %llu bytes (%.1f%%)\n",
                tensors.size(), quant, (unsigned long long)bytesBefore,
                (unsigned long long)bytesAfter,
                bytesBefore ? 100.0 * double(bytesAfter) / double(bytesBefore)
                            : 100.0);
  return s + tot;
}

std::vector<QuantizePlan> planQuantization(const QuantizeOptions &o) {
  PolicySet policies = loadPolicies(o);
  std::vector<QuantizePlan> plans;
  for (const SourceFile &f : sourceFiles(o.input)) {
    auto ckpt = Checkpoint::open(f.path);
    plans.push_back(planFor(*ckpt, o, policies));
  }
  return plans;
}

PolicySet loadPolicies(const QuantizeOptions &o) {
  PolicySet set = PolicySet::builtin();
  for (const auto &f : o.policyFiles)
    set.addFile(f);
  return set;
}

} // namespace comfyquant::rt
