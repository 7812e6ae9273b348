//===- FormatRegistry.cpp - Comfy quant format table and rules ------------===//
#include "comfyquant/runtime/FormatRegistry.h"

#include "comfyquant/runtime/Error.h"

#include "comfyquant/runtime/Numerics.h"

#include <sstream>

namespace {
// The NVFP4 global scale maps amax onto the largest E2M1 code times the
// largest E4M3 block scale.
static_assert(comfyquant::rt::ActQuant::kNvfp4GlobalDivisor ==
              comfyquant::rt::kE2M1Max * comfyquant::rt::kE4M3Max);
} // namespace

namespace comfyquant::rt {

namespace {

using D = DType;
const std::vector<DType> kFloat = {D::F32, D::F16, D::BF16, D::F64};

std::vector<FormatInfo> buildTable() {
  std::vector<FormatInfo> t;
  auto fp8 = [&](Format f, const char *name, DType w) {
    t.push_back({f, name, w, 8, NibbleOrder::None, ScaleGranularity::Tensor, 0,
                 D::F32, 1, /*quantizeInput=*/true, RotationUse::Never, 0,
                 /*embedding=*/true, /*moe=*/true, /*flattened=*/false,
                 {{"weight", true, {w}, "[N, K]"},
                  {"weight_scale", true, kFloat, "scalar (MoE: scalar or [E])"},
                  {"input_scale", false, kFloat, "scalar"},
                  {"bias", false, kFloat, "[N]"}}});
  };
  fp8(Format::Float8E4M3FN, "float8_e4m3fn", D::F8_E4M3);
  fp8(Format::Float8E5M2, "float8_e5m2", D::F8_E5M2);
  t.push_back({Format::NVFP4, "nvfp4", D::U8, 4, NibbleOrder::HighFirst,
               ScaleGranularity::Block, 16, D::F8_E4M3, 16, true,
               RotationUse::Never, 0, false, true, false,
               {{"weight", true, {D::U8}, "[Np16, Kp16/2]"},
                {"weight_scale", true, {D::F8_E4M3, D::U8},
                 "swizzled, roundup(Np16,128) x roundup(Kp16/16,4) entries"},
                {"weight_scale_2", true, kFloat, "scalar (MoE: scalar or [E])"},
                {"input_scale", false, kFloat, "scalar"},
                {"pre_quant_scale", false, kFloat, "[K]"},
                {"bias", false, kFloat, "[N]"}}});
  t.push_back({Format::MXFP8, "mxfp8", D::F8_E4M3, 8, NibbleOrder::None,
               ScaleGranularity::Block, 32, D::F8_E8M0, 32, true,
               RotationUse::Never, 0, false, true, false,
               {{"weight", true, {D::F8_E4M3}, "[Np32, Kp32]"},
                {"weight_scale", true, {D::F8_E8M0, D::U8},
                 "swizzled, roundup(Np32,128) x roundup(Kp32/32,4) entries"},
                {"input_scale", false, kFloat, "scalar (ignored)"},
                {"bias", false, kFloat, "[N]"}}});
  t.push_back({Format::Int8Tensorwise, "int8_tensorwise", D::I8, 8,
               NibbleOrder::None, ScaleGranularity::Tensor, 0, D::F32, 1,
               false, RotationUse::Optional, 0, true, true, true,
               {{"weight", true, {D::I8}, "[N, K]"},
                {"weight_scale", true, kFloat,
                 "scalar or [N, 1] (ConvRot: [N, 1])"},
                {"bias", false, kFloat, "[N]"}}});
  t.push_back({Format::ConvRotW4A4, "convrot_w4a4", D::I8, 4,
               NibbleOrder::LowFirst, ScaleGranularity::Row, 0, D::F32, 1,
               false, RotationUse::Always, 0, false, true, false,
               {{"weight", true, {D::I8}, "[N, K/2]"},
                {"weight_scale", true, {D::F32}, "[N]"},
                {"bias", false, kFloat, "[N]"}}});
  auto grouped = [&](Format f, const char *name, int bits, const char *wshape) {
    std::vector<TensorRole> roles = {
        {"weight", true, {D::I8}, wshape},
        {"weight_s_rel", true, {D::F8_E4M3, D::U8, D::F32}, "[N, K/G]"},
        {"weight_s_channel", true, {D::F32}, "[N]"}};
    if (bits == 4)
      roles.push_back({"weight_codebook", false, {D::F32}, "[16]"});
    roles.push_back({"bias", false, kFloat, "[N]"});
    // 6-bit codes keep their low nibbles in a low-first 4-bit plane.
    t.push_back({f, name, D::I8, bits, NibbleOrder::LowFirst,
                 ScaleGranularity::Group, 0, D::F8_E4M3, 1, false,
                 RotationUse::Always, 16, false, true, true, roles});
  };
  grouped(Format::AsymW4A8Int8, "asym_w4a8_int8", 4, "[N, K/2]");
  grouped(Format::W6A8Int8, "w6a8_int8", 6, "[N, 3K/4]");
  return t;
}


std::string descStr(const TensorDesc &t) {
  return std::string(dtypeName(t.dtype)) + " " + shapeString(t.shape);
}

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Sizes far beyond any real checkpoint, chosen so that every product the
/// rules form (N·K, E·N·K, swizzled scale counts) fits in int64. The rule
/// checkers run on arbitrary IR, not only on files the reader bounded.
constexpr int64_t kMaxDim = int64_t(1) << 31;
constexpr int64_t kMaxElements = int64_t(1) << 48;

std::optional<std::string> checkLimits(const ModuleDesc &m) {
  auto bad = [](int64_t v) { return v < 0 || v > kMaxDim; };
  const std::pair<const char *, int64_t> sizes[] = {
      {"out_features", m.outFeatures}, {"in_features", m.inFeatures},
      {"experts", m.experts},          {"group_size", m.groupSize},
      {"convrot_groupsize", m.rotationGroup}};
  for (const auto &[name, v] : sizes)
    if (bad(v))
      return std::string(name) + " " + std::to_string(v) +
             " is out of range [0, 2^31]";
  int64_t perExpert = 0, all = 0;
  if (__builtin_mul_overflow(m.outFeatures, m.inFeatures, &perExpert) ||
      __builtin_mul_overflow(perExpert, std::max<int64_t>(m.experts, 1), &all) ||
      all > kMaxElements)
    return "logical weight of " + std::to_string(m.experts) + " x " +
           std::to_string(m.outFeatures) + " x " +
           std::to_string(m.inFeatures) + " elements is too large";
  for (const auto &[key, t] : m.tensors) {
    if (t.shape.size() > 4)
      return key + " has rank " + std::to_string(t.shape.size()) + " > 4";
    int64_t n = 1;
    for (int64_t d : t.shape)
      if (bad(d) || __builtin_mul_overflow(n, d, &n) || n > kMaxElements)
        return key + " " + shapeString(t.shape) + " is too large";
  }
  return std::nullopt;
}

/// Rule checking for one module; `fail` records the first violation.
class Checker {
public:
  Checker(const ModuleDesc &m) : m(m), f(formatInfo(m.format)) {}

  std::optional<std::string> run();

private:
  const ModuleDesc &m;
  const FormatInfo &f;
  std::optional<std::string> err;

  bool fail(std::string msg) {
    if (!err)
      err = std::move(msg);
    return false;
  }
  const TensorDesc *get(const std::string &role) const {
    auto it = m.tensors.find(role);
    return it == m.tensors.end() ? nullptr : &it->second;
  }
  const TensorRole *roleOf(const std::string &key) const {
    for (const TensorRole &r : f.roles)
      if (key == r.key)
        return &r;
    return nullptr;
  }
  bool moe() const { return m.kind == ModuleKind::MoE; }
  int64_t E() const { return m.experts; }

  /// Per-expert shape `s` of tensor `role`: MoE banks prefix E; formats with
  /// flattened banks may also store [E·s0, s1...].
  bool expertShape(const std::string &role, std::vector<int64_t> s,
                   const std::string &rule) {
    const TensorDesc *t = get(role);
    if (!t)
      return true;
    if (!moe()) {
      if (t->shape == s)
        return true;
      return fail(role + " must be " + rule + " = " + shapeString(s) + ", got " +
                  descStr(*t));
    }
    std::vector<int64_t> banked = s;
    banked.insert(banked.begin(), E());
    if (t->shape == banked)
      return true;
    if (f.flattenedBank && !s.empty()) {
      std::vector<int64_t> flat = s;
      flat[0] *= E();
      if (t->shape == flat)
        return true;
    }
    return fail(role + " must be " + rule + " per expert = " +
                shapeString(banked) + ", got " + descStr(*t));
  }

  /// A scalar (or one per expert for MoE banks).
  bool scalarShape(const std::string &role) {
    const TensorDesc *t = get(role);
    if (!t)
      return true;
    if (t->numel() == 1) // any shape that broadcasts as a scalar
      return true;
    if (moe() && t->shape == std::vector<int64_t>{E()})
      return true;
    return fail(role + (moe() ? " must be a scalar or [E] = [" +
                                    std::to_string(E()) + "]"
                              : " must be a scalar") +
                ", got " + descStr(*t));
  }

  bool checkDTypes() {
    for (const auto &[key, t] : m.tensors) {
      const TensorRole *r = roleOf(key);
      if (!r)
        return fail("tensor '" + key + "' is not part of format '" + f.name +
                    "'");
      bool ok = false;
      for (DType d : r->dtypes)
        ok |= d == t.dtype;
      if (!ok) {
        std::string names;
        for (DType d : r->dtypes)
          names += (names.empty() ? "" : " or ") + std::string(dtypeName(d));
        return fail(key + " must be " + names + ", got " + descStr(t));
      }
    }
    for (const TensorRole &r : f.roles) {
      bool required = r.required;
      // Embedding tables may omit the scale (1.0, docs/Formats.md §7.1).
      if (m.kind == ModuleKind::Embedding && std::string(r.key) == "weight_scale")
        required = false;
      if (required && !get(r.key))
        return fail(std::string("missing required tensor ") + r.key + " " +
                    r.shape);
    }
    return true;
  }

  bool checkRotation() {
    if (m.rotationGroup == 0)
      return f.rotation != RotationUse::Always ||
             fail("format requires a ConvRot group size");
    if (f.rotation == RotationUse::Never)
      return fail("format does not take a ConvRot rotation");
    if (!isPowerOf4(m.rotationGroup))
      return fail("convrot_groupsize " + std::to_string(m.rotationGroup) +
                  " must be a power of 4 >= 4");
    if (m.inFeatures % m.rotationGroup)
      return fail("K = " + std::to_string(m.inFeatures) +
                  " must be divisible by convrot_groupsize " +
                  std::to_string(m.rotationGroup));
    return true;
  }

  bool checkGroup() {
    int64_t g = m.groupSize, k = m.inFeatures;
    if (f.granularity != ScaleGranularity::Group)
      return g == 0 || fail("format does not take a group_size");
    if (auto e = verifyGroupSize(m.format, g))
      return fail(*e);
    if (k % 16)
      return fail("K = " + std::to_string(k) + " must be divisible by 16");
    if (k % g)
      return fail("K = " + std::to_string(k) +
                  " must be divisible by group_size " + std::to_string(g));
    if (m.format == Format::W6A8Int8 && k % 32)
      return fail("w6a8_int8 K = " + std::to_string(k) +
                  " must be divisible by 32");
    return true;
  }
};

std::optional<std::string> Checker::run() {
  if (auto e = checkLimits(m))
    return e;
  const int64_t N = m.outFeatures, K = m.inFeatures;
  if (N <= 0 || K <= 0)
    return "logical shape N = " + std::to_string(N) + ", K = " +
           std::to_string(K) + " must be positive";
  if (moe() != (m.experts > 0))
    return std::string("experts must be > 0 exactly for MoE banks, got ") +
           std::to_string(m.experts);
  if (m.kind == ModuleKind::Embedding && !f.embedding)
    return std::string("format '") + f.name +
           "' cannot be used by an embedding (not row-addressable; ComfyUI "
           "loads such a table as a plain tensor)";
  if (moe() && !f.moe)
    return std::string("format '") + f.name + "' cannot be used by a MoE bank";
  if (m.kind != ModuleKind::Linear)
    for (const char *k : {"input_scale", "pre_quant_scale"})
      if (get(k))
        return std::string(k) + " is only valid on Linear modules";
  if (m.kind == ModuleKind::Embedding && get("bias"))
    return std::string("bias is not valid on an embedding");
  if (m.format == Format::ConvRotW4A4) {
    if (m.linearDtype != "int4" && m.linearDtype != "int8")
      return "linear_dtype '" + m.linearDtype + "' must be \"int4\" or \"int8\"";
  } else if (!m.linearDtype.empty()) {
    return std::string("linear_dtype is only valid for convrot_w4a4");
  }
  if (!checkDTypes() || !checkRotation() || !checkGroup())
    return err;

  const int64_t Ns = storageRows(f, N), Ks = storageCols(f, K);
  expertShape("weight", {Ns, Ks}, std::string("storage ") + f.roles[0].shape);
  expertShape("bias", {N}, "[N]");
  switch (m.format) {
  case Format::Float8E4M3FN:
  case Format::Float8E5M2:
    scalarShape("weight_scale");
    scalarShape("input_scale");
    break;
  case Format::NVFP4:
  case Format::MXFP8: {
    int64_t blocks = roundUp(K, f.pad) / f.blockSize;
    int64_t count =
        static_cast<int64_t>(swizzledScaleCount(roundUp(N, f.pad), blocks));
    if (const TensorDesc *s = get("weight_scale")) {
      int64_t want = count * (moe() ? E() : 1);
      bool leadingOk = !moe() || (!s->shape.empty() && s->shape[0] == E());
      if (s->numel() != want || !leadingOk)
        fail("weight_scale must hold the swizzled block scales: " +
             std::to_string(want) + " entries (" +
             (moe() ? std::to_string(E()) + " x " : std::string()) +
             std::to_string(roundUp(roundUp(N, f.pad), 128)) + " x " +
             std::to_string(roundUp(blocks, 4)) + "), got " + descStr(*s));
    }
    scalarShape("weight_scale_2");
    scalarShape("input_scale");
    if (const TensorDesc *p = get("pre_quant_scale"))
      if (p->shape != std::vector<int64_t>{K})
        fail("pre_quant_scale must be [K] = [" + std::to_string(K) +
             "], got " + descStr(*p));
    break;
  }
  case Format::Int8Tensorwise: {
    const TensorDesc *s = get("weight_scale");
    if (!s)
      break;
    bool scalar = s->numel() == 1;
    bool perRow = s->shape == std::vector<int64_t>{N, 1};
    if (moe()) {
      // A 3-D [E, N, 1] scale makes the bank flattened (docs/Formats.md §7.2);
      // [E·N, 1] only fits storage that is already flat. A 3-D bank with
      // a 2-D scale would give expert i the single value scale[i].
      const TensorDesc *w = get("weight");
      bool flatWeight = w && w->shape.size() == 2;
      perRow = s->shape == std::vector<int64_t>{E(), N, 1} ||
               (flatWeight && s->shape == std::vector<int64_t>{E() * N, 1});
      scalar |= s->shape == std::vector<int64_t>{E()};
    }
    if (m.rotationGroup && !perRow)
      fail("ConvRot int8 weight_scale must be per-row " +
           std::string(moe() ? "[E, N, 1]" : "[N, 1]") + ", got " +
           descStr(*s));
    else if (!scalar && !perRow)
      fail("weight_scale must be a scalar or per-row " +
           std::string(moe() ? "[E] / [E, N, 1] = [" + std::to_string(E()) +
                                   ", " + std::to_string(N) + ", 1]"
                             : "[N, 1] = [" + std::to_string(N) + ", 1]") +
           (s->shape.size() == 1 && !moe()
                ? " (a 1-D [N] scale broadcasts along K in ComfyUI's dequant)"
                : "") +
           ", got " + descStr(*s));
    break;
  }
  case Format::ConvRotW4A4:
    if (K % kW4A4KMultiple)
      fail("K = " + std::to_string(K) + " must be divisible by 64 "
           "(convrot_w4a4 quant_group_size)");
    expertShape("weight_scale", {N}, "[N]");
    break;
  case Format::AsymW4A8Int8:
  case Format::W6A8Int8:
    expertShape("weight_s_rel", {N, K / m.groupSize}, "[N, K/G]");
    expertShape("weight_s_channel", {N}, "[N]");
    if (const TensorDesc *c = get("weight_codebook"))
      if (c->shape != std::vector<int64_t>{16})
        fail("weight_codebook must be F32 [16], got " + descStr(*c));
    break;
  }
  return err;
}

} // namespace

const std::vector<FormatInfo> &allFormats() {
  static const std::vector<FormatInfo> table = buildTable();
  return table;
}

const FormatInfo &formatInfo(Format f) {
  return allFormats()[static_cast<size_t>(f)];
}

std::optional<Format> parseFormat(std::string_view name) {
  for (const FormatInfo &f : allFormats())
    if (name == f.name)
      return f.format;
  return std::nullopt;
}

const char *formatName(Format f) { return formatInfo(f).name; }

std::string knownFormatList() {
  std::string s;
  for (const FormatInfo &f : allFormats())
    s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

const char *moduleKindName(ModuleKind k) {
  switch (k) {
  case ModuleKind::Linear:
    return "linear";
  case ModuleKind::Embedding:
    return "embedding";
  case ModuleKind::MoE:
    return "moe";
  }
  return "?";
}

std::optional<ModuleKind> parseModuleKind(std::string_view name) {
  for (ModuleKind k :
       {ModuleKind::Linear, ModuleKind::Embedding, ModuleKind::MoE})
    if (name == moduleKindName(k))
      return k;
  return std::nullopt;
}

const char *granularityName(ScaleGranularity g) {
  switch (g) {
  case ScaleGranularity::Tensor:
    return "tensor";
  case ScaleGranularity::Row:
    return "row";
  case ScaleGranularity::Group:
    return "group";
  case ScaleGranularity::Block:
    return "block";
  }
  return "?";
}

const char *nibbleOrderName(NibbleOrder n) {
  switch (n) {
  case NibbleOrder::None:
    return "none";
  case NibbleOrder::HighFirst:
    return "high_first";
  case NibbleOrder::LowFirst:
    return "low_first";
  }
  return "?";
}

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

ScaleGranularity int8ScaleGranularity(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return shape.size() >= 2 && n > 1 ? ScaleGranularity::Row
                                    : ScaleGranularity::Tensor;
}

int64_t storageRows(const FormatInfo &f, int64_t n) { return roundUp(n, f.pad); }

int64_t storageCols(const FormatInfo &f, int64_t k) {
  int64_t kp = roundUp(k, f.pad);
  return kp * f.codeBits / 8;
}

std::optional<std::string> verifyGroupSize(Format f, int64_t g) {
  if (formatInfo(f).granularity != ScaleGranularity::Group)
    return std::nullopt;
  if (g < 4)
    return "group_size " + std::to_string(g) + " must be >= 4";
  if (!(16 % g == 0 || g % 16 == 0))
    return "group_size " + std::to_string(g) +
           " must divide 16 or be a multiple of 16";
  if (f == Format::W6A8Int8 && g % 16)
    return "w6a8_int8 group_size " + std::to_string(g) +
           " must be a multiple of 16";
  return std::nullopt;
}

FormatParams defaultFormatParams(Format fmt) {
  const FormatInfo &f = formatInfo(fmt);
  FormatParams p;
  p.granularity = f.granularity;
  p.group = f.blockSize ? f.blockSize : f.defaultGroupSize;
  if (f.granularity == ScaleGranularity::Block ||
      f.granularity == ScaleGranularity::Group)
    p.scaleDType = f.blockScaleDType;
  p.nibbles = f.nibbles;
  return p;
}

std::optional<std::string> verifyFormatParams(Format fmt,
                                              const FormatParams &p) {
  const FormatInfo &f = formatInfo(fmt);
  std::string name = f.name;
  bool granularityOk = p.granularity == f.granularity;
  // int8_tensorwise scales are a scalar or per row ([N, 1]).
  if (fmt == Format::Int8Tensorwise)
    granularityOk = p.granularity == ScaleGranularity::Tensor ||
                    p.granularity == ScaleGranularity::Row;
  if (!granularityOk)
    return name + " scales have granularity " +
           granularityName(f.granularity) + ", not " +
           granularityName(p.granularity);
  if (p.nibbles != f.nibbles)
    return name + " packs nibbles " + nibbleOrderName(f.nibbles) + ", not " +
           nibbleOrderName(p.nibbles);
  if (f.blockSize) {
    if (p.group != f.blockSize)
      return name + " block size is " + std::to_string(f.blockSize) +
             ", not " + std::to_string(p.group);
  } else if (f.granularity == ScaleGranularity::Group) {
    if (auto e = verifyGroupSize(fmt, p.group))
      return e;
  } else if (p.group != 0) {
    return name + " takes no group size";
  }
  if (f.granularity == ScaleGranularity::Block) {
    if (p.scaleDType != f.blockScaleDType)
      return name + " block scales are " + dtypeName(f.blockScaleDType);
  } else if (f.granularity == ScaleGranularity::Group) {
    if (p.scaleDType != DType::F8_E4M3 && p.scaleDType != DType::F32)
      return name + " group scales (weight_s_rel) are F8_E4M3 or F32";
  } else if (p.scaleDType && *p.scaleDType != DType::F32) {
    return name + " scales are f32";
  }
  return std::nullopt;
}

std::optional<std::string> verifyModule(const ModuleDesc &m) {
  return Checker(m).run();
}

std::optional<std::string> inferLogicalShape(ModuleDesc &m) {
  const FormatInfo &f = formatInfo(m.format);
  if (auto e = checkLimits(m))
    return e;
  auto w = m.tensors.find("weight");
  if (w == m.tensors.end())
    return std::string("missing required tensor weight ") + f.roles[0].shape;
  std::vector<int64_t> s = w->second.shape;
  if (m.kind == ModuleKind::MoE) {
    if (s.size() == 3) {
      if (m.experts > 0 && m.experts != s[0])
        return "weight " + descStr(w->second) + " holds " +
               std::to_string(s[0]) + " experts, expected " +
               std::to_string(m.experts);
      m.experts = s[0];
      s.erase(s.begin());
    } else if (s.size() == 2 && f.flattenedBank && m.experts > 0) {
      if (s[0] % m.experts)
        return "flattened bank weight rows " + std::to_string(s[0]) +
               " are not divisible by num_experts " + std::to_string(m.experts);
      s[0] /= m.experts;
    } else {
      return "MoE bank weight must be [E, rows, cols]" +
             std::string(f.flattenedBank ? " or [E*rows, cols] with num_experts"
                                         : "") +
             ", got " + descStr(w->second);
    }
  } else if (s.size() != 2) {
    return "weight must be 2-D " + std::string(f.roles[0].shape) + ", got " +
           descStr(w->second);
  }
  const int64_t rows = s[0], cols = s[1];
  if (rows <= 0 || cols <= 0)
    return "weight " + descStr(w->second) + " is empty";
  // Storage columns -> storage K.
  int64_t ks;
  if (f.codeBits == 8) {
    ks = cols;
  } else if (f.codeBits == 4) {
    ks = cols * 2;
  } else {
    if (cols % 3)
      return "6-bit weight row width " + std::to_string(cols) +
             " bytes must be 3K/4 (divisible by 3)";
    ks = cols / 3 * 4;
  }
  if (f.pad > 1) {
    if (rows % f.pad || ks % f.pad)
      return "weight " + descStr(w->second) + " storage must be padded to " +
             std::to_string(f.pad) + " in N and K (" + f.roles[0].shape + ")";
  }
  // Logical N / K: explicit override, else bias / pre_quant_scale, else
  // storage.
  auto fromVec = [&](const char *role) -> int64_t {
    auto t = m.tensors.find(role);
    if (t == m.tensors.end() || t->second.shape.empty())
      return 0;
    return t->second.shape.back();
  };
  int64_t n = m.outFeatures, k = m.inFeatures;
  if (n <= 0)
    n = f.pad > 1 && fromVec("bias") ? fromVec("bias") : rows;
  if (k <= 0)
    k = f.pad > 1 && fromVec("pre_quant_scale") ? fromVec("pre_quant_scale")
                                                 : ks;
  if (storageRows(f, n) != rows || (f.pad > 1 ? roundUp(k, f.pad) : k) != ks) {
    std::string from;
    if (m.outFeatures <= 0 && n != rows)
      from += ", N from bias";
    if (m.inFeatures <= 0 && k != ks)
      from += ", K from pre_quant_scale";
    return "logical shape [" + std::to_string(n) + ", " + std::to_string(k) +
           "] does not match weight storage " + descStr(w->second) + " (" +
           f.roles[0].shape + from + ")";
  }
  m.outFeatures = n;
  m.inFeatures = k;
  return std::nullopt;
}

int64_t moduleBytes(const ModuleDesc &m) {
  int64_t b = 0;
  for (const auto &[k, t] : m.tensors)
    b += t.numel() * static_cast<int64_t>(dtypeSize(t.dtype));
  return b;
}

} // namespace comfyquant::rt
