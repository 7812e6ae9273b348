//===- ModuleResolver.cpp - checkpoint -> validated modules ---------------===//
#include "comfyquant/runtime/ModuleResolver.h"

#include "comfyquant/runtime/Error.h"

#include <algorithm>
#include <set>

namespace comfyquant::rt {

namespace {

/// Keys some producer writes beside a module that no supported format reads.
const char *const kUnsupportedKeys[] = {"weight_correction", "weight_zeros",
                                        "weight_zero"};

/// Every role key of every format.
const std::set<std::string> &allRoleKeys() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> s;
    for (const FormatInfo &f : allFormats())
      for (const TensorRole &r : f.roles)
        s.insert(r.key);
    return s;
  }();
  return keys;
}

bool hasRole(const FormatInfo &f, const std::string &key) {
  for (const TensorRole &r : f.roles)
    if (key == r.key)
      return true;
  return false;
}

std::string fileOf(const Checkpoint &ckpt, const TensorInfo *t) {
  return t && t->file ? *t->file : ckpt.path();
}

/// Rules on stored values rather than shapes. E8M0 block scales: 255 is NaN
/// and no producer writes it (docs/Formats.md §4.0); the scan touches only the
/// scale tensor (1/32 of the weight).
void checkValues(const ResolvedModule &r) {
  if (r.desc.format != Format::MXFP8)
    return;
  const TensorInfo &s = *r.tensor("weight_scale");
  for (int64_t i = 0; i < s.numel(); ++i)
    if (s.data[i] == 0xFF)
      throw Error(*s.file, moduleSubject(r.desc.name),
                  "format 'mxfp8': weight_scale entry " + std::to_string(i) +
                      " is E8M0 255 (NaN), which is invalid");
}

ResolvedModule resolveOne(const Checkpoint &ckpt, const QuantConfig &config,
                          const ResolveOptions &opts,
                          std::set<std::string> &consumed) {
  const std::string &P = config.module;
  const std::string subject = moduleSubject(P);
  ResolvedModule r;
  r.config = config;
  r.warnings = config.warnings;
  ModuleDesc &d = r.desc;
  d.name = P;

  auto physical = [&](const std::string &role) {
    auto it = config.renamed.find(role);
    return it != config.renamed.end() ? it->second : P + "." + role;
  };
  const TensorInfo *weight = ckpt.find(physical("weight"));
  const std::string file = fileOf(ckpt, weight);

  std::optional<Format> fmt = parseFormat(config.format);
  if (!fmt)
    throw Error(file, subject,
                "unknown quantization format '" + config.format +
                    "' (known: " + knownFormatList() + ")");
  d.format = *fmt;
  const FormatInfo &f = formatInfo(d.format);
  if (!weight)
    throw Error(file, subject,
                "missing required tensor " + physical("weight") + " " +
                    f.roles[0].shape);

  // Module kind.
  if (auto k = opts.kinds.find(P); k != opts.kinds.end()) {
    d.kind = k->second;
  } else if (weight->rank() == 3 || config.numExperts) {
    d.kind = ModuleKind::MoE;
  } else if (looksLikeEmbedding(P)) {
    if (f.embedding)
      d.kind = ModuleKind::Embedding;
    else
      r.warnings.push_back(subject + ": named like an embedding but format '" +
                           f.name +
                           "' is not row-addressable; treated as Linear");
  }
  if (d.kind == ModuleKind::MoE && config.numExperts && weight->rank() == 2)
    d.experts = *config.numExperts;

  // Tensors: every role of the format, plus any other known role key present
  // beside the module (rejected or ignored below).
  for (const std::string &role : allRoleKeys()) {
    std::string key = physical(role);
    const TensorInfo *t = ckpt.find(key);
    if (!t || config.dropped.count(key))
      continue;
    if (!hasRole(f, role)) {
      if (role == "weight_codebook" && d.format == Format::W6A8Int8)
        throw Error(file, subject,
                    "w6a8_int8 takes no weight_codebook (6-bit codes are "
                    "uniform, docs/Formats.md §4.6)");
      r.warnings.push_back(subject + ": tensor " + key + " is not part of '" +
                           f.name + "' and is ignored (as ComfyUI does)");
      continue;
    }
    d.tensors[role] = TensorDesc{t->dtype, t->shape};
    r.tensors[role] = t;
    consumed.insert(key);
  }
  for (const std::string &key : config.dropped)
    consumed.insert(key);
  for (const char *role : kUnsupportedKeys)
    if (ckpt.find(P + "." + role))
      throw Error(file, subject,
                  "tensor " + P + "." + role + " is not loadable by ComfyUI's '" +
                      f.name +
                      "' (asymmetric / AWQ variant); dequantizing without it "
                      "would be wrong");

  // Options (docs/Formats.md §3). A mistyped option only matters to a format
  // that reads it.
  auto optionError = [&](const char *key) {
    if (auto e = config.optionErrors.find(key); e != config.optionErrors.end())
      throw Error(file, subject,
                  "format '" + std::string(f.name) + "': " + e->second);
  };
  if (f.granularity == ScaleGranularity::Group) {
    optionError("group_size");
    d.groupSize = config.groupSize.value_or(f.defaultGroupSize);
  }
  const bool embedding = d.kind == ModuleKind::Embedding;
  auto rotationGroup = [&](std::optional<int64_t> gr) {
    optionError("convrot_groupsize");
    int64_t g = gr.value_or(kDefaultRotationGroup);
    if (g < 4) // 0 would read as "no rotation" further on
      throw Error(file, subject,
                  "format '" + std::string(f.name) + "': convrot_groupsize " +
                      std::to_string(g) + " must be a power of 4 >= 4");
    return g;
  };
  switch (f.rotation) {
  case RotationUse::Always:
    d.rotationGroup = rotationGroup(config.convrotGroupSize);
    break;
  case RotationUse::Optional: {
    bool on = embedding ? config.convrotTopLevel : config.convrot;
    if (on)
      d.rotationGroup = rotationGroup(embedding ? config.convrotGroupSizeTopLevel
                                                : config.convrotGroupSize);
    break;
  }
  case RotationUse::Never:
    if (config.convrot)
      r.warnings.push_back(subject + ": convrot is ignored by format '" +
                           f.name + "'");
    break;
  }
  if (d.format == Format::ConvRotW4A4) {
    optionError("linear_dtype");
    d.linearDtype = config.linearDtype.value_or("int4");
  }
  d.fullPrecision = config.fullPrecisionMatrixMult;
  if (d.format == Format::MXFP8 && d.tensors.count("input_scale"))
    r.warnings.push_back(subject +
                         ": input_scale is ignored by mxfp8 (dynamic blocks)");

  if (auto s = opts.shapes.find(P); s != opts.shapes.end()) {
    d.outFeatures = s->second.first;
    d.inFeatures = s->second.second;
  }
  const int64_t expertsDeclared = d.experts;
  if (auto err = inferLogicalShape(d))
    throw Error(file, subject, "format '" + std::string(f.name) + "': " + *err);
  if (config.numExperts && d.kind == ModuleKind::MoE &&
      *config.numExperts != d.experts && !expertsDeclared)
    r.warnings.push_back(subject + ": num_experts " +
                         std::to_string(*config.numExperts) +
                         " differs from the " + std::to_string(d.experts) +
                         " experts of the weight (num_experts is "
                         "informational; the weight wins)");
  if (auto err = verifyModule(d))
    throw Error(file, subject, "format '" + std::string(f.name) + "': " + *err);
  checkValues(r);
  return r;
}

} // namespace

std::string addKindOverride(ResolveOptions &opts, const std::string &spec) {
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return "--kind expects NAME=linear|embedding|moe, got '" + spec + "'";
  std::optional<ModuleKind> k = parseModuleKind(spec.substr(eq + 1));
  if (!k)
    return "--kind: unknown module kind '" + spec.substr(eq + 1) +
           "' (linear, embedding, moe)";
  opts.kinds[spec.substr(0, eq)] = *k;
  return "";
}

std::string addShapeOverride(ResolveOptions &opts, const std::string &spec) {
  size_t eq = spec.rfind('=');
  std::string bad = "--shape expects NAME=NxK with positive N, K, got '" +
                    spec + "'";
  if (eq == std::string::npos || eq == 0)
    return bad;
  std::string dims = spec.substr(eq + 1);
  size_t x = dims.find('x');
  if (x == std::string::npos)
    return bad;
  try {
    size_t p1 = 0, p2 = 0;
    long long n = std::stoll(dims.substr(0, x), &p1);
    long long k = std::stoll(dims.substr(x + 1), &p2);
    if (p1 != x || p2 != dims.size() - x - 1 || n <= 0 || k <= 0)
      return bad;
    opts.shapes[spec.substr(0, eq)] = {n, k};
  } catch (const std::exception &) {
    return bad;
  }
  return "";
}

bool looksLikeEmbedding(const std::string &module) {
  static const char *const kNames[] = {
      "embed_tokens",  "embeddings",         "word_embeddings",
      "embedding",     "token_embedding",    "position_embedding",
      "tok_embeddings", "wte",               "wpe",
      "shared",        "embed",              "token_embd"};
  std::string last = module.substr(module.rfind('.') + 1);
  for (const char *n : kNames)
    if (last == n)
      return true;
  return false;
}

const ResolvedModule *ResolvedCheckpoint::find(const std::string &name) const {
  for (const ResolvedModule &m : modules)
    if (m.desc.name == name)
      return &m;
  return nullptr;
}

ResolvedCheckpoint resolveCheckpoint(const Checkpoint &ckpt,
                                     const ResolveOptions &opts) {
  ResolvedCheckpoint out;
  out.checkpoint = &ckpt;
  out.config = decodeCheckpointConfig(ckpt);
  out.warnings = out.config.warnings;
  for (const auto &[name, kind] : opts.kinds)
    if (!out.config.modules.count(name))
      throw Error(ckpt.path(), moduleSubject(name),
                  "--kind names a module that has no comfy_quant configuration");
  for (const auto &[name, shape] : opts.shapes)
    if (!out.config.modules.count(name))
      throw Error(ckpt.path(), moduleSubject(name),
                  "--shape names a module that has no comfy_quant "
                  "configuration");

  std::set<std::string> consumed = out.config.configKeys;
  for (const auto &[name, config] : out.config.modules) {
    out.modules.push_back(resolveOne(ckpt, config, opts, consumed));
    for (const std::string &w : out.modules.back().warnings)
      out.warnings.push_back(w);
  }
  for (const TensorInfo *t : ckpt.tensors()) {
    if (consumed.count(t->name))
      continue;
    out.unquantized.push_back(t);
    // ComfyUI value-casts an unmarked FP8/INT8 weight (docs/Formats.md §1.1);
    // other consumers (sglang) refuse it. Say so.
    static const std::string kWeight = ".weight";
    if ((t->dtype == DType::F8_E4M3 || t->dtype == DType::F8_E5M2 ||
         t->dtype == DType::I8) &&
        t->name.size() > kWeight.size() &&
        t->name.compare(t->name.size() - kWeight.size(), kWeight.size(),
                        kWeight) == 0)
      out.warnings.push_back(tensorSubject(t->name) + ": " +
                             dtypeName(t->dtype) +
                             " weight without comfy_quant; ComfyUI loads it "
                             "as a plain tensor (value cast, scale 1)");
  }
  return out;
}

} // namespace comfyquant::rt
