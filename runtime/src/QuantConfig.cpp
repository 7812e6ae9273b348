//===- QuantConfig.cpp - comfy_quant configuration decoding ---------------===//
#include "comfyquant/runtime/QuantConfig.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Json.h"
#include "comfyquant/runtime/Safetensors.h"
#include "comfyquant/runtime/TensorAccess.h"

#include <nlohmann/json.hpp>

using json = nlohmann::json;

namespace comfyquant::rt {

namespace {

constexpr std::string_view kQuantSuffix = ".comfy_quant";
constexpr std::string_view kAttentionSuffix = ".comfy_attention.config";
constexpr std::string_view kScaledFp8Marker = "scaled_fp8";

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}
bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

/// Python truthiness of a JSON value, as ComfyUI's `if conf.get(...)`.
bool truthy(const json &v) {
  switch (v.type()) {
  case json::value_t::null:
    return false;
  case json::value_t::boolean:
    return v.get<bool>();
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
  case json::value_t::number_float:
    return v.get<double>() != 0.0;
  case json::value_t::string:
    return !v.get_ref<const std::string &>().empty();
  case json::value_t::array:
  case json::value_t::object:
    return !v.empty();
  default:
    return true;
  }
}

/// Configuration JSON nests a couple of levels; anything deeper than this is
/// hostile (and would recurse deeply in nlohmann's dump / destructor paths).
constexpr int kMaxConfigDepth = 32;

/// Python's json.loads keeps the last of duplicate keys, and so does ComfyUI:
/// duplicates are accepted here too.
json parseJson(std::string_view text, const std::string &file,
               const std::string &subject, const char *what) {
  return parseStrictJson(text, file, subject, what, kMaxConfigDepth,
                         /*rejectDuplicateKeys=*/false);
}

/// Reads an integer option; JSON integers only (ComfyUI passes it on to
/// integer arithmetic, a float or string would fail there). A bad value is
/// recorded, not thrown: it only matters to formats that read the key.
std::optional<int64_t> intOption(const json &v, const char *key,
                                 QuantConfig &c) {
  if (v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)))
    return v.get<int64_t>();
  c.optionErrors[key] =
      std::string(key) + " must be an integer, got " + jsonSnippet(v);
  return std::nullopt;
}

std::string tensorText(const TensorInfo &t, const std::string &what) {
  if (t.dtype != DType::U8 || t.rank() != 1)
    throw Error(*t.file, tensorSubject(t.name),
                what + " must be a rank-1 U8 tensor of UTF-8 JSON, got " +
                    dtypeName(t.dtype) + " of rank " + std::to_string(t.rank()));
  return std::string(reinterpret_cast<const char *>(t.data), t.nbytes());
}

} // namespace

const char *configSourceName(ConfigSource s) {
  switch (s) {
  case ConfigSource::Tensor:
    return "comfy_quant";
  case ConfigSource::QuantizationMetadata:
    return "_quantization_metadata";
  case ConfigSource::ScaledFp8:
    return "scaled_fp8";
  }
  return "?";
}

QuantConfig parseQuantConfig(std::string_view text, const std::string &module,
                             const std::string &file, ConfigSource source) {
  const std::string subject = moduleSubject(module);
  json j = parseJson(text, file, subject, "comfy_quant");
  if (!j.is_object())
    throw Error(file, subject,
                "comfy_quant must be a JSON object, got " +
                    std::string(j.type_name()));

  QuantConfig c;
  c.module = module;
  c.rawJson = std::string(text);
  c.source = source;

  // Nested `params` fallback: top level first, then params (non-object
  // params is treated as {}).
  const json *params = nullptr;
  if (auto it = j.find("params"); it != j.end() && it->is_object())
    params = &*it;
  auto lookup = [&](const char *key) -> const json * {
    if (auto it = j.find(key); it != j.end())
      return &*it;
    if (params)
      if (auto it = params->find(key); it != params->end())
        return &*it;
    return nullptr;
  };

  if (auto it = j.find("format"); it != j.end()) {
    if (!it->is_string())
      throw Error(file, subject,
                  "\"format\" must be a string, got " + jsonSnippet(*it));
    c.format = it->get<std::string>();
  } else if (j.contains("per_row") || j.contains("convrot")) {
    // Comfy-Org's exporter writes INT8 W8A8 markers without "format"
    // (docs/Formats.md §9 item 13); the tensors are native int8_tensorwise.
    c.format = "int8_tensorwise";
    c.warnings.push_back("comfy_quant has no \"format\"; treated as "
                         "int8_tensorwise (Comfy-Org INT8 exporter marker)");
  } else {
    throw Error(file, subject,
                "comfy_quant has no \"format\" key (ComfyUI: Unknown "
                "quantization format)");
  }

  if (auto it = j.find("full_precision_matrix_mult"); it != j.end())
    c.fullPrecisionMatrixMult = truthy(*it);
  if (const json *v = lookup("convrot"))
    c.convrot = truthy(*v);
  if (const json *v = lookup("convrot_groupsize"))
    c.convrotGroupSize = intOption(*v, "convrot_groupsize", c);
  if (auto it = j.find("convrot"); it != j.end())
    c.convrotTopLevel = truthy(*it);
  if (auto it = j.find("convrot_groupsize"); it != j.end())
    c.convrotGroupSizeTopLevel = intOption(*it, "convrot_groupsize", c);
  if (const json *v = lookup("linear_dtype")) {
    if (v->is_string())
      c.linearDtype = v->get<std::string>();
    else
      c.optionErrors["linear_dtype"] =
          "linear_dtype must be a string, got " + jsonSnippet(*v);
  }
  if (const json *v = lookup("group_size"))
    c.groupSize = intOption(*v, "group_size", c);
  // Informational (ComfyUI never reads it on load); a bad value is ignored.
  if (auto it = j.find("num_experts"); it != j.end())
    if (std::optional<int64_t> e = intOption(*it, "num_experts", c); e && *e > 0)
      c.numExperts = e;
  c.optionErrors.erase("num_experts");
  return c;
}

AttentionPreference
parseAttentionPreference(std::string_view text, const std::string &module,
                         const std::string &file,
                         std::vector<std::string> &warnings) {
  const std::string subject = "attention module '" + module + "'";
  json j = parseJson(text, file, subject, "comfy_attention.config");
  AttentionPreference p;
  p.module = module;
  p.rawJson = std::string(text);
  std::vector<const json *> items;
  if (j.is_object()) {
    items.push_back(&j);
  } else if (j.is_array()) {
    for (const json &e : j)
      items.push_back(&e);
  } else {
    throw Error(file, subject,
                "comfy_attention.config must be an object or an array of "
                "objects, got " +
                    std::string(j.type_name()));
  }
  for (const json *e : items) {
    if (!e->is_object())
      throw Error(file, subject,
                  "comfy_attention.config entries must be objects, got " +
                      jsonSnippet(*e));
    AttentionEntry entry;
    entry.optionsJson = e->dump();
    // ComfyUI reads entry.get("attention"): a missing or non-string method
    // is an unknown one, skipped with a warning.
    auto m = e->find("attention");
    entry.method = m != e->end() && m->is_string() ? m->get<std::string>()
                                                   : jsonSnippet(e->value(
                                                         "attention", json()));
    entry.known = entry.method == "comfy_kitchen_int8" ||
                  entry.method == "comfy_kitchen_sol";
    if (!entry.known)
      warnings.push_back(subject + ": unknown attention method '" +
                         entry.method + "' (ComfyUI skips it)");
    if (entry.method == "comfy_kitchen_sol")
      if (auto tau = e->find("tau"); tau != e->end() && !tau->is_number())
        throw Error(file, subject,
                    "comfy_kitchen_sol option tau must be a number, got " +
                        jsonSnippet(*tau));
    p.entries.push_back(std::move(entry));
  }
  return p;
}

CheckpointConfig decodeCheckpointConfig(const Checkpoint &ckpt) {
  CheckpointConfig out;
  const std::string &file = ckpt.path();

  // 1. Per-module comfy_quant tensors and attention preferences.
  for (const TensorInfo *t : ckpt.tensors()) {
    const std::string &key = t->name;
    if (endsWith(key, kQuantSuffix)) {
      std::string module = key.substr(0, key.size() - kQuantSuffix.size());
      if (module.empty())
        throw Error(*t->file, tensorSubject(key),
                    "comfy_quant key has an empty module prefix");
      out.modules[module] = parseQuantConfig(tensorText(*t, "comfy_quant"),
                                             module, *t->file);
      out.configKeys.insert(key);
    } else if (endsWith(key, kAttentionSuffix)) {
      std::string module = key.substr(0, key.size() - kAttentionSuffix.size());
      if (module.empty())
        throw Error(*t->file, tensorSubject(key),
                    "comfy_attention.config key has an empty module prefix");
      out.attention.push_back(parseAttentionPreference(
          tensorText(*t, "comfy_attention.config"), module, *t->file,
          out.warnings));
      out.configKeys.insert(key);
    }
  }

  // 2. Legacy header metadata: converted into comfy_quant entries, replacing
  //    a tensor of the same module (ComfyUI's convert_old_quants).
  const auto &meta = ckpt.metadata();
  auto qm = meta.find("_quantization_metadata");
  if (qm != meta.end()) {
    const std::string subject = "__metadata__._quantization_metadata";
    json j = parseJson(qm->second, file, subject, "_quantization_metadata");
    if (!j.is_object())
      throw Error(file, subject, "must be a JSON object");
    auto layers = j.find("layers");
    if (layers == j.end() || !layers->is_object())
      throw Error(file, subject, "needs a \"layers\" object");
    for (auto &[name, conf] : layers->items()) {
      if (!conf.is_object())
        throw Error(file, moduleSubject(name),
                    "_quantization_metadata layer entry must be a JSON "
                    "object, got " +
                        jsonSnippet(conf));
      if (out.modules.count(name))
        out.warnings.push_back(moduleSubject(name) +
                               ": _quantization_metadata replaces the "
                               "module's comfy_quant tensor");
      out.modules[name] = parseQuantConfig(
          conf.dump(), name, file, ConfigSource::QuantizationMetadata);
    }
    return out;
  }

  // 3. Legacy scaled_fp8 checkpoints (only without _quantization_metadata).
  for (const TensorInfo *marker : ckpt.tensors()) {
    const std::string &key = marker->name;
    if (!(key == kScaledFp8Marker ||
          endsWith(key, std::string(".") + std::string(kScaledFp8Marker))))
      continue;
    std::string prefix = key.substr(0, key.size() - kScaledFp8Marker.size());
    bool fullPrecision = marker->numel() == 2;
    out.configKeys.insert(key);
    if (marker->dtype != DType::F8_E4M3 && marker->dtype != DType::F32)
      out.warnings.push_back(
          tensorSubject(key) + ": scaled_fp8 marker dtype " +
          dtypeName(marker->dtype) +
          " is ignored; layers are float8_e4m3fn as in ComfyUI");
    for (const TensorInfo *t : ckpt.tensors()) {
      static constexpr std::string_view kScaleWeight = ".scale_weight";
      if (!startsWith(t->name, prefix) || !endsWith(t->name, kScaleWeight))
        continue;
      std::string layer =
          t->name.substr(0, t->name.size() - kScaleWeight.size());
      if (out.modules.count(layer)) {
        out.warnings.push_back(moduleSubject(layer) +
                               ": has both comfy_quant and scale_weight; "
                               "comfy_quant wins");
        continue;
      }
      json conf = {{"format", "float8_e4m3fn"}};
      if (fullPrecision)
        conf["full_precision_matrix_mult"] = true;
      QuantConfig c =
          parseQuantConfig(conf.dump(), layer, file, ConfigSource::ScaledFp8);
      c.renamed["weight_scale"] = t->name;
      std::string scaleInput = layer + ".scale_input";
      if (const TensorInfo *si = ckpt.find(scaleInput)) {
        if (!isFloatDType(si->dtype) || si->numel() != 1)
          throw Error(*si->file, tensorSubject(scaleInput),
                      "scaled_fp8 scale_input must be a float scalar");
        if (loadF32(*si, 0) == 1.0f)
          c.dropped.insert(scaleInput); // ComfyUI drops a unit input scale.
        else
          c.renamed["input_scale"] = scaleInput;
      }
      out.modules[layer] = std::move(c);
    }
  }
  return out;
}

} // namespace comfyquant::rt
