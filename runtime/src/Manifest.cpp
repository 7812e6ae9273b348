//===- Manifest.cpp - manifest.json reader and writer ---------------------===//
#include "comfyquant/runtime/Manifest.h"

#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Json.h"
#include "comfyquant/runtime/Targets.h"

#include <algorithm>
#include <initializer_list>
#include <set>

namespace comfyquant::rt {

const CpuEntry *ManifestModule::findCpuEntry(const std::string &dtype,
                                             const std::string &variant) const {
  for (const CpuEntry &e : cpuEntries)
    if (e.modules.empty() && e.dtype == dtype && e.variant == variant)
      return &e;
  return nullptr;
}

const CudaEntry *ManifestModule::findCudaEntry(const std::string &dtype,
                                               const std::string &arch) const {
  for (const CudaEntry &e : cudaEntries)
    if (e.modules.empty() && e.dtype == dtype && e.arch == arch)
      return &e;
  return nullptr;
}

namespace {
template <typename Entry>
std::vector<std::string> ownDTypes(const std::vector<Entry> &entries) {
  std::vector<std::string> dtypes;
  for (const Entry &e : entries)
    if (e.modules.empty() &&
        std::find(dtypes.begin(), dtypes.end(), e.dtype) == dtypes.end())
      dtypes.push_back(e.dtype);
  return dtypes;
}
} // namespace

std::vector<std::string> ManifestModule::cpuDTypes() const {
  return ownDTypes(cpuEntries);
}

std::vector<std::string> ManifestModule::cudaDTypes() const {
  return ownDTypes(cudaEntries);
}

const CudaImage *CudaBackend::findImage(const std::string &arch) const {
  for (const CudaImage &i : images)
    if (i.arch == arch)
      return &i;
  return nullptr;
}

const ManifestModule *Manifest::find(const std::string &name) const {
  for (const ManifestModule &m : modules)
    if (m.name == name)
      return &m;
  return nullptr;
}

namespace {

using json = nlohmann::json;

/// A name or value from the file, quoted for a message: 'name'.
std::string q(const std::string &s) { return "'" + printable(s) + "'"; }

/// Field access with errors "<file>: <where>: <rule>", where `where` is
/// "manifest", then the module and the field's path in it.
class Reader {
public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(file_, "", what);
  }
  const json &field(const json &obj, const char *key,
                    const std::string &where) const {
    if (!obj.is_object())
      fail(where + ": must be an object");
    if (!obj.contains(key))
      fail(where + ": missing \"" + key + "\"");
    return obj.at(key);
  }
  const json &object(const json &obj, const char *key,
                     const std::string &where) const {
    const json &v = field(obj, key, where);
    if (!v.is_object())
      fail(where + ": \"" + key + "\" must be an object");
    return v;
  }
  const json &array(const json &obj, const char *key,
                    const std::string &where) const {
    const json &v = field(obj, key, where);
    if (!v.is_array())
      fail(where + ": \"" + key + "\" must be an array");
    return v;
  }
  std::string str(const json &obj, const char *key, const std::string &where,
                  bool nonEmpty = false) const {
    const json &v = field(obj, key, where);
    if (!v.is_string() || (nonEmpty && v.get_ref<const std::string &>().empty()))
      fail(where + ": \"" + key + "\" must be a" +
           (nonEmpty ? " non-empty" : "") + " string");
    return v.get<std::string>();
  }
  int64_t integer(const json &obj, const char *key, const std::string &where,
                  int64_t min = 0) const {
    const json &v = field(obj, key, where);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() &&
         v.get<uint64_t>() > uint64_t(INT64_MAX)) ||
        v.get<int64_t>() < min)
      fail(where + ": \"" + key + "\" must be an integer >= " +
           std::to_string(min));
    return v.get<int64_t>();
  }
  bool boolean(const json &obj, const char *key,
               const std::string &where) const {
    const json &v = field(obj, key, where);
    if (!v.is_boolean())
      fail(where + ": \"" + key + "\" must be a boolean");
    return v.get<bool>();
  }
  /// A non-empty array of distinct non-empty strings.
  std::vector<std::string> names(const json &obj, const char *key,
                                 const std::string &where) const {
    const json &v = field(obj, key, where);
    const std::string rule = std::string("\"") + key +
                             "\" must be an array of distinct non-empty "
                             "strings";
    if (!v.is_array() || v.empty())
      fail(where + ": " + rule + ", at least one");
    std::vector<std::string> out;
    for (const json &e : v) {
      if (!e.is_string() || e.get_ref<const std::string &>().empty())
        fail(where + ": " + rule);
      std::string s = e.get<std::string>();
      if (std::find(out.begin(), out.end(), s) != out.end())
        fail(where + ": \"" + key + "\" lists " + q(s) + " twice");
      out.push_back(std::move(s));
    }
    return out;
  }
  /// Version 3 names every field it knows: anything else is a typo or a
  /// newer producer's field whose meaning this reader would drop.
  void onlyKeys(const json &obj, std::initializer_list<const char *> keys,
                const std::string &where) const {
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (std::none_of(keys.begin(), keys.end(),
                       [&](const char *k) { return it.key() == k; }))
        fail(where + ": unknown field \"" + printable(it.key()) + "\"");
  }
  /// A path inside the artifact directory.
  std::string relativePath(const json &obj, const char *key,
                           const std::string &where, bool mayBeEmpty) const {
    std::string p = str(obj, key, where);
    if (p.empty() && mayBeEmpty)
      return p;
    bool escapes = p.empty() || p.front() == '/';
    for (size_t b = 0; !escapes && b <= p.size();) {
      size_t e = std::min(p.find('/', b), p.size());
      escapes = p.compare(b, e - b, "..") == 0;
      b = e + 1;
    }
    if (escapes)
      fail(where + ": \"" + key + "\" " + q(p) +
           " must be a path inside the artifact directory");
    return p;
  }

private:
  std::string file_;
};

bool isActivationDType(const std::string &d) {
  return d == "f32" || d == "bf16" || d == "f16";
}

bool isArchName(const std::string &a) {
  CudaArchName parsed;
  return parseCudaArchName(a, parsed);
}

/// "<major>.<minor>", both decimal.
bool isPtxVersion(const std::string &v) {
  size_t dot = v.find('.');
  auto digits = [&](size_t b, size_t e) {
    return e > b && std::all_of(v.begin() + b, v.begin() + e, [](char c) {
             return c >= '0' && c <= '9';
           });
  };
  return dot != std::string::npos && digits(0, dot) &&
         digits(dot + 1, v.size());
}

void readCheckpoint(const Reader &r, const json &j, Manifest &m, bool strict) {
  const std::string at = "manifest: checkpoint";
  const json &ck = r.object(j, "checkpoint", "manifest");
  if (strict)
    r.onlyKeys(ck, {"path", "size", "hash", "relative_path"}, at);
  m.checkpointPath = r.str(ck, "path", at, /*nonEmpty=*/true);
  if (strict || ck.contains("relative_path"))
    m.checkpointRelativePath = r.str(ck, "relative_path", at);
  m.checkpointSize = static_cast<uint64_t>(r.integer(ck, "size", at));
  m.checkpointHash = r.str(ck, "hash", at, /*nonEmpty=*/true);
}

void readDTypes(const Reader &r, const json &j, Manifest &m) {
  m.dtypes = r.names(j, "dtypes", "manifest");
  for (const std::string &d : m.dtypes)
    if (!isActivationDType(d))
      r.fail("manifest: \"dtypes\": unknown dtype " + q(d) +
             " (f32, bf16, f16)");
}

/// The fields a module has in both versions, except its entries.
void readModuleBody(const Reader &r, const json &mj, ManifestModule &a,
                    const std::string &where, bool strict) {
  const std::string kind = r.str(mj, "kind", where);
  std::optional<ModuleKind> parsedKind = parseModuleKind(kind);
  if (!parsedKind)
    r.fail(where + ": \"kind\": unknown kind " + q(kind));
  a.kind = *parsedKind;
  a.format = r.str(mj, "format", where, /*nonEmpty=*/true);
  a.outFeatures = r.integer(mj, "out_features", where, 1);
  a.inFeatures = r.integer(mj, "in_features", where, 1);
  const json &e = r.field(mj, "experts", where);
  a.experts = e.is_null() ? 0 : r.integer(mj, "experts", where, 1);
  if ((a.kind == ModuleKind::MoE) != (a.experts > 0))
    r.fail(where + ": \"experts\" must be set exactly for moe modules");
  if (strict || mj.contains("rotation_group"))
    a.rotationGroup = r.integer(mj, "rotation_group", where);
  if (strict || mj.contains("row_independent"))
    a.rowIndependent = r.boolean(mj, "row_independent", where);
  const json &ws = r.array(mj, "weights", where);
  for (size_t i = 0; i < ws.size(); ++i) {
    const json &wj = ws[i];
    const std::string at = where + ": weights[" + std::to_string(i) + "]";
    if (strict)
      r.onlyKeys(wj, {"tensor", "offset", "dtype", "shape", "shard"}, at);
    ManifestWeight w;
    w.tensor = r.str(wj, "tensor", at, /*nonEmpty=*/true);
    const std::string wat = where + ": " + tensorSubject(printable(w.tensor));
    w.dtype = r.str(wj, "dtype", wat);
    if (!parseDType(w.dtype))
      r.fail(wat + ": \"dtype\": unknown dtype " + q(w.dtype));
    w.offset = static_cast<uint64_t>(r.integer(wj, "offset", wat));
    const json &shape = r.array(wj, "shape", wat);
    for (const json &d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        r.fail(wat + ": \"shape\" must be an array of integers >= 0");
      w.shape.push_back(d.get<int64_t>());
    }
    if (wj.contains("shard"))
      w.shard = r.str(wj, "shard", wat, /*nonEmpty=*/true);
    a.weights.push_back(std::move(w));
  }
}

/// Version 2: {"target": "cpu", "variants", "entry": {dtype: {variant:
/// symbol}}, "column_split": [symbols]}; unknown fields were ignored.
Manifest readVersion2(const Reader &r, const json &j) {
  Manifest m;
  m.version = 2;
  std::string target = r.str(j, "target", "manifest");
  if (target != "cpu")
    r.fail("manifest: \"target\" " + q(target) + " is not cpu");
  readCheckpoint(r, j, m, /*strict=*/false);
  CpuBackend cpu;
  cpu.variants = r.names(j, "variants", "manifest");
  m.cpu = cpu;
  readDTypes(r, j, m);
  std::set<std::string> seen;
  for (const json &mj : r.array(j, "modules", "manifest")) {
    ManifestModule a;
    a.name = r.str(mj, "name", "manifest: module", /*nonEmpty=*/true);
    const std::string where = "manifest: " + moduleSubject(a.name);
    if (!seen.insert(a.name).second)
      r.fail(where + ": listed twice");
    readModuleBody(r, mj, a, where, /*strict=*/false);
    const json &entries = r.object(mj, "entry", where);
    for (auto dt = entries.begin(); dt != entries.end(); ++dt) {
      if (!isActivationDType(dt.key()))
        r.fail(where + ": \"entry\": unknown dtype " + q(dt.key()));
      if (!dt.value().is_object())
        r.fail(where + ": \"entry\" must map dtypes to {variant: symbol}");
      for (auto v = dt.value().begin(); v != dt.value().end(); ++v) {
        if (!v.value().is_string())
          r.fail(where + ": entry symbols must be strings");
        CpuEntry e;
        e.dtype = dt.key();
        e.variant = v.key();
        e.symbol = v.value().get<std::string>();
        a.cpuEntries.push_back(std::move(e));
      }
    }
    if (mj.contains("column_split")) {
      const json &cs = mj["column_split"];
      if (!cs.is_array())
        r.fail(where + ": \"column_split\" must be an array of entry symbols");
      for (const json &c : cs) {
        if (!c.is_string())
          r.fail(where + ": \"column_split\" must be an array of entry symbols");
        const std::string sym = c.get<std::string>();
        bool known = false;
        for (CpuEntry &e : a.cpuEntries)
          if (e.symbol == sym)
            known = e.columnSplit = true;
        if (!known)
          r.fail(where + ": \"column_split\" names " + q(sym) +
                 ", which is not an entry of this module");
      }
    }
    m.modules.push_back(std::move(a));
  }
  return m;
}

/// A block entry's "modules"; empty for the default (the owner alone).
std::vector<std::string> readEntryModules(const Reader &r, const json &ej,
                                          const std::string &owner,
                                          const std::set<std::string> &known,
                                          const std::string &at) {
  if (!ej.contains("modules"))
    return {};
  std::vector<std::string> mods = r.names(ej, "modules", at);
  for (const std::string &n : mods)
    if (!known.count(n))
      r.fail(at + ": \"modules\" names " + q(n) +
             ", which is not a module of the manifest");
  if (std::find(mods.begin(), mods.end(), owner) == mods.end())
    r.fail(at + ": \"modules\" must include the module " + q(owner));
  if (mods.size() == 1)
    return {}; // the default, spelled out
  return mods;
}

/// Versions 3 and 4 (4 adds a CPU entry's "min_rows").
Manifest readVersion3(const Reader &r, const json &j, int64_t version) {
  Manifest m;
  m.version = static_cast<int>(version);
  r.onlyKeys(j,
             {"schema", "version", "producer", "llvm_version", "checkpoint",
              "dtypes", "backends", "modules"},
             "manifest");
  std::string schema = r.str(j, "schema", "manifest");
  if (schema != "comfyquant-manifest")
    r.fail("manifest: \"schema\" " + q(schema) +
           " is not \"comfyquant-manifest\"");
  m.producer = r.str(j, "producer", "manifest", /*nonEmpty=*/true);
  m.llvmVersion = r.str(j, "llvm_version", "manifest");
  readCheckpoint(r, j, m, /*strict=*/true);
  readDTypes(r, j, m);

  const json &backends = r.object(j, "backends", "manifest");
  if (backends.empty())
    r.fail("manifest: \"backends\" must name at least one backend");
  for (auto it = backends.begin(); it != backends.end(); ++it)
    if (it.key() != "cpu" && it.key() != "cuda")
      r.fail("manifest: \"backends\": unknown backend " + q(it.key()) +
             " (cpu, cuda)");
  if (backends.contains("cpu")) {
    const std::string at = "manifest: backends.cpu";
    const json &cj = r.object(backends, "cpu", "manifest: \"backends\"");
    r.onlyKeys(cj, {"library", "variants"}, at);
    CpuBackend cpu;
    cpu.library = r.relativePath(cj, "library", at, /*mayBeEmpty=*/false);
    cpu.variants = r.names(cj, "variants", at);
    m.cpu = std::move(cpu);
  }
  if (backends.contains("cuda")) {
    const std::string at = "manifest: backends.cuda";
    const json &cj = r.object(backends, "cuda", "manifest: \"backends\"");
    r.onlyKeys(cj, {"host_library", "images"}, at);
    CudaBackend cuda;
    cuda.hostLibrary =
        r.relativePath(cj, "host_library", at, /*mayBeEmpty=*/false);
    const json &images = r.array(cj, "images", at);
    if (images.empty())
      r.fail(at + ": \"images\" must list at least one arch");
    for (size_t i = 0; i < images.size(); ++i) {
      const std::string iat = at + ".images[" + std::to_string(i) + "]";
      r.onlyKeys(images[i], {"arch", "cubin", "ptx", "ptx_version"}, iat);
      CudaImage img;
      img.arch = r.str(images[i], "arch", iat);
      if (!isArchName(img.arch))
        r.fail(iat + ": \"arch\" " + q(img.arch) +
               " is not an arch name (sm_80, sm_90a, ...)");
      if (cuda.findImage(img.arch))
        r.fail(iat + ": arch " + q(img.arch) + " is listed twice");
      img.cubin = r.relativePath(images[i], "cubin", iat, /*mayBeEmpty=*/true);
      img.ptx = r.relativePath(images[i], "ptx", iat, /*mayBeEmpty=*/false);
      img.ptxVersion = r.str(images[i], "ptx_version", iat);
      if (!isPtxVersion(img.ptxVersion))
        r.fail(iat + ": \"ptx_version\" " + q(img.ptxVersion) +
               " is not MAJOR.MINOR");
      cuda.images.push_back(std::move(img));
    }
    m.cuda = std::move(cuda);
  }

  const json &mods = r.array(j, "modules", "manifest");
  // Block entries may name modules listed after them.
  std::set<std::string> moduleNames;
  for (const json &mj : mods)
    if (mj.is_object() && mj.contains("name") && mj["name"].is_string())
      moduleNames.insert(mj["name"].get<std::string>());
  for (const json &mj : mods) {
    ManifestModule a;
    a.name = r.str(mj, "name", "manifest: module", /*nonEmpty=*/true);
    const std::string where = "manifest: " + moduleSubject(a.name);
    if (m.find(a.name))
      r.fail(where + ": listed twice");
    r.onlyKeys(mj,
               {"name", "kind", "format", "out_features", "in_features",
                "experts", "rotation_group", "row_independent", "weights",
                "entries"},
               where);
    readModuleBody(r, mj, a, where, /*strict=*/true);
    const json &entries = r.array(mj, "entries", where);
    for (size_t i = 0; i < entries.size(); ++i) {
      const json &ej = entries[i];
      std::string at = where + ": entries[" + std::to_string(i) + "]";
      const std::string backend = r.str(ej, "backend", at);
      const std::string dtype = r.str(ej, "dtype", at);
      if (std::find(m.dtypes.begin(), m.dtypes.end(), dtype) == m.dtypes.end())
        r.fail(at + ": \"dtype\" " + q(dtype) +
               " is not one of the manifest's \"dtypes\"");
      if (backend == "cpu") {
        if (version >= 4)
          r.onlyKeys(ej,
                     {"backend", "dtype", "variant", "symbol", "column_split",
                      "min_rows", "modules"},
                     at);
        else
          r.onlyKeys(ej,
                     {"backend", "dtype", "variant", "symbol", "column_split",
                      "modules"},
                     at);
        if (!m.cpu)
          r.fail(at + ": a cpu entry, but \"backends\" has no cpu");
        CpuEntry e;
        e.dtype = dtype;
        e.variant = r.str(ej, "variant", at);
        const std::vector<std::string> &vs = m.cpu->variants;
        if (std::find(vs.begin(), vs.end(), e.variant) == vs.end())
          r.fail(at + ": \"variant\" " + q(e.variant) +
                 " is not a variant of backends.cpu");
        e.symbol = r.str(ej, "symbol", at, /*nonEmpty=*/true);
        e.columnSplit = r.boolean(ej, "column_split", at);
        if (ej.contains("min_rows"))
          e.minRows = r.integer(ej, "min_rows", at, /*min=*/1);
        e.modules = readEntryModules(r, ej, a.name, moduleNames, at);
        if (e.modules.empty() && a.findCpuEntry(e.dtype, e.variant))
          r.fail(at + ": a second cpu entry for " + e.dtype + " and " +
                 q(e.variant));
        a.cpuEntries.push_back(std::move(e));
      } else if (backend == "cuda") {
        r.onlyKeys(ej,
                   {"backend", "dtype", "arch", "host", "kernels",
                    "workspace_per_row", "workspace_fixed", "modules"},
                   at);
        if (!m.cuda)
          r.fail(at + ": a cuda entry, but \"backends\" has no cuda");
        CudaEntry e;
        e.dtype = dtype;
        e.arch = r.str(ej, "arch", at);
        if (!m.cuda->findImage(e.arch))
          r.fail(at + ": \"arch\" " + q(e.arch) +
                 " has no image in backends.cuda");
        e.host = r.str(ej, "host", at, /*nonEmpty=*/true);
        e.kernels = r.names(ej, "kernels", at);
        e.workspacePerRow = r.integer(ej, "workspace_per_row", at);
        e.workspaceFixed = r.integer(ej, "workspace_fixed", at);
        e.modules = readEntryModules(r, ej, a.name, moduleNames, at);
        if (e.modules.empty() && a.findCudaEntry(e.dtype, e.arch))
          r.fail(at + ": a second cuda entry for " + e.dtype + " and " +
                 q(e.arch));
        a.cudaEntries.push_back(std::move(e));
      } else {
        r.fail(at + ": \"backend\": unknown backend " + q(backend) +
               " (cpu, cuda)");
      }
    }
    m.modules.push_back(std::move(a));
  }
  return m;
}

} // namespace

Manifest parseManifest(const std::string &text, const std::string &file) {
  json j = parseStrictJson(text, file, "manifest", "manifest.json", 64,
                           /*rejectDuplicateKeys=*/true);
  Reader r(file);
  if (!j.is_object())
    r.fail("manifest: must be a JSON object");
  const int64_t version = r.integer(j, "version", "manifest");
  if (version == 2)
    return readVersion2(r, j);
  if (version == 3 || version == Manifest::kVersion)
    return readVersion3(r, j, version);
  r.fail("manifest: unsupported manifest version " + std::to_string(version) +
         " (this runtime reads 2 to " + std::to_string(Manifest::kVersion) +
         ")");
}

std::string writeManifest(const Manifest &m) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["schema"] = "comfyquant-manifest";
  j["version"] = Manifest::kVersion;
  j["producer"] = m.producer;
  j["llvm_version"] = m.llvmVersion;
  j["checkpoint"] = {{"path", m.checkpointPath},
                     {"size", m.checkpointSize},
                     {"hash", m.checkpointHash},
                     {"relative_path", m.checkpointRelativePath}};
  j["dtypes"] = m.dtypes;
  ojson backends = ojson::object();
  if (m.cpu)
    backends["cpu"] = {{"library", m.cpu->library},
                       {"variants", m.cpu->variants}};
  if (m.cuda) {
    ojson images = ojson::array();
    for (const CudaImage &i : m.cuda->images)
      images.push_back({{"arch", i.arch},
                        {"cubin", i.cubin},
                        {"ptx", i.ptx},
                        {"ptx_version", i.ptxVersion}});
    backends["cuda"] = {{"host_library", m.cuda->hostLibrary},
                        {"images", images}};
  }
  j["backends"] = backends;
  ojson mods = ojson::array();
  for (const ManifestModule &a : m.modules) {
    ojson mj;
    mj["name"] = a.name;
    mj["kind"] = moduleKindName(a.kind);
    mj["format"] = a.format;
    mj["out_features"] = a.outFeatures;
    mj["in_features"] = a.inFeatures;
    mj["experts"] = a.experts > 0 ? ojson(a.experts) : ojson(nullptr);
    mj["rotation_group"] = a.rotationGroup;
    mj["row_independent"] = a.rowIndependent;
    ojson weights = ojson::array();
    for (const ManifestWeight &w : a.weights) {
      ojson wj;
      wj["tensor"] = w.tensor;
      wj["offset"] = w.offset;
      wj["dtype"] = w.dtype;
      wj["shape"] = w.shape;
      if (!w.shard.empty())
        wj["shard"] = w.shard;
      weights.push_back(std::move(wj));
    }
    mj["weights"] = std::move(weights);
    ojson entries = ojson::array();
    for (const CpuEntry &e : a.cpuEntries) {
      ojson ej;
      ej["backend"] = "cpu";
      ej["dtype"] = e.dtype;
      ej["variant"] = e.variant;
      ej["symbol"] = e.symbol;
      ej["column_split"] = e.columnSplit;
      ej["min_rows"] = e.minRows;
      if (!e.modules.empty())
        ej["modules"] = e.modules;
      entries.push_back(std::move(ej));
    }
    for (const CudaEntry &e : a.cudaEntries) {
      ojson ej;
      ej["backend"] = "cuda";
      ej["dtype"] = e.dtype;
      ej["arch"] = e.arch;
      ej["host"] = e.host;
      ej["kernels"] = e.kernels;
      ej["workspace_per_row"] = e.workspacePerRow;
      ej["workspace_fixed"] = e.workspaceFixed;
      if (!e.modules.empty())
        ej["modules"] = e.modules;
      entries.push_back(std::move(ej));
    }
    mj["entries"] = std::move(entries);
    mods.push_back(std::move(mj));
  }
  j["modules"] = std::move(mods);
  return j.dump(2) + "\n";
}

} // namespace comfyquant::rt
