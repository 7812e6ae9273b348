//===- Artifact.cpp - manifest parsing and kernels.so loading -------------===//
#include "comfyquant/runtime/Artifact.h"

#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Json.h"

#include <dlfcn.h>
#include <fstream>
#include <sstream>

namespace comfyquant::rt {

namespace {

using json = nlohmann::json;

class Reader {
public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(file_, "manifest", what);
  }
  const json &field(const json &obj, const char *key,
                    const std::string &where) const {
    if (!obj.is_object() || !obj.contains(key))
      fail(where + ": missing \"" + key + "\"");
    return obj.at(key);
  }
  std::string str(const json &obj, const char *key,
                  const std::string &where) const {
    const json &v = field(obj, key, where);
    if (!v.is_string())
      fail(where + ": \"" + key + "\" must be a string");
    return v.get<std::string>();
  }
  int64_t integer(const json &obj, const char *key, const std::string &where,
                  int64_t min = 0) const {
    const json &v = field(obj, key, where);
    if (!v.is_number_integer() || v.get<int64_t>() < min)
      fail(where + ": \"" + key + "\" must be an integer >= " +
           std::to_string(min));
    return v.get<int64_t>();
  }
  std::vector<std::string> strings(const json &obj, const char *key,
                                   const std::string &where) const {
    const json &v = field(obj, key, where);
    if (!v.is_array())
      fail(where + ": \"" + key + "\" must be an array of strings");
    std::vector<std::string> out;
    for (const json &e : v) {
      if (!e.is_string())
        fail(where + ": \"" + key + "\" must be an array of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }

private:
  std::string file_;
};

} // namespace

Manifest parseManifest(const std::string &text, const std::string &file) {
  json j = parseStrictJson(text, file, "manifest", "manifest.json", 64,
                           /*rejectDuplicateKeys=*/true);
  Reader r(file);
  Manifest m;
  m.version = static_cast<int>(r.integer(j, "version", "manifest"));
  // Version 2: entries take the column range [begin, end) after the weights.
  if (m.version != 2)
    r.fail("unsupported manifest version " + std::to_string(m.version));
  m.target = r.str(j, "target", "manifest");
  if (m.target != "cpu")
    r.fail("target '" + m.target + "' is not cpu");
  const json &ck = r.field(j, "checkpoint", "manifest");
  m.checkpointPath = r.str(ck, "path", "checkpoint");
  if (ck.contains("relative_path"))
    m.checkpointRelativePath = r.str(ck, "relative_path", "checkpoint");
  m.checkpointSize = static_cast<uint64_t>(r.integer(ck, "size", "checkpoint"));
  m.checkpointHash = r.str(ck, "hash", "checkpoint");
  m.variants = r.strings(j, "variants", "manifest");
  m.dtypes = r.strings(j, "dtypes", "manifest");
  for (const std::string &d : m.dtypes)
    if (d != "f32" && d != "bf16" && d != "f16")
      r.fail("unknown dtype '" + d + "'");
  const json &mods = r.field(j, "modules", "manifest");
  if (!mods.is_array())
    r.fail("\"modules\" must be an array");
  for (const json &mj : mods) {
    ArtifactModule a;
    a.name = r.str(mj, "name", "module");
    std::string where = "module '" + a.name + "'";
    a.kind = r.str(mj, "kind", where);
    if (a.kind != "linear" && a.kind != "moe" && a.kind != "embedding")
      r.fail(where + ": unknown kind '" + a.kind + "'");
    a.format = r.str(mj, "format", where);
    a.outFeatures = r.integer(mj, "out_features", where, 1);
    a.inFeatures = r.integer(mj, "in_features", where, 1);
    const json &e = r.field(mj, "experts", where);
    if (e.is_null())
      a.experts = 0;
    else
      a.experts = r.integer(mj, "experts", where, 1);
    if ((a.kind == "moe") != (a.experts > 0))
      r.fail(where + ": \"experts\" must be set exactly for moe modules");
    if (mj.contains("rotation_group"))
      a.rotationGroup = r.integer(mj, "rotation_group", where);
    if (mj.contains("row_independent")) {
      if (!mj["row_independent"].is_boolean())
        r.fail(where + ": \"row_independent\" must be a boolean");
      a.rowIndependent = mj["row_independent"].get<bool>();
    }
    const json &entries = r.field(mj, "entry", where);
    if (!entries.is_object())
      r.fail(where + ": \"entry\" must map dtypes to {variant: symbol}");
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (!it.value().is_object())
        r.fail(where + ": \"entry\" must map dtypes to {variant: symbol}");
      for (auto v = it.value().begin(); v != it.value().end(); ++v) {
        if (!v.value().is_string())
          r.fail(where + ": entry symbols must be strings");
        a.entries[it.key()][v.key()] = v.value().get<std::string>();
      }
    }
    if (mj.contains("column_split")) {
      const json &cs = mj["column_split"];
      if (!cs.is_array())
        r.fail(where + ": \"column_split\" must be an array of entry symbols");
      for (const json &c : cs) {
        if (!c.is_string())
          r.fail(where + ": \"column_split\" must be an array of entry symbols");
        std::string sym = c.get<std::string>();
        bool known = false;
        for (const auto &[dt, byVariant] : a.entries)
          for (const auto &[v, s] : byVariant)
            known = known || s == sym;
        if (!known)
          r.fail(where + ": \"column_split\" names '" + sym +
                 "', which is not an entry of this module");
        a.columnSplit.insert(sym);
      }
    }
    const json &ws = r.field(mj, "weights", where);
    if (!ws.is_array())
      r.fail(where + ": \"weights\" must be an array");
    for (const json &wj : ws) {
      ArtifactWeight w;
      w.tensor = r.str(wj, "tensor", where);
      w.dtype = r.str(wj, "dtype", where);
      if (!parseDType(w.dtype))
        r.fail(where + ": tensor '" + w.tensor + "' has unknown dtype '" +
               w.dtype + "'");
      w.offset = static_cast<uint64_t>(r.integer(wj, "offset", where));
      const json &shape = r.field(wj, "shape", where);
      if (!shape.is_array())
        r.fail(where + ": tensor '" + w.tensor + "': shape must be an array");
      for (const json &d : shape) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          r.fail(where + ": tensor '" + w.tensor + "': bad shape");
        w.shape.push_back(d.get<int64_t>());
      }
      if (wj.contains("shard"))
        w.shard = r.str(wj, "shard", where);
      a.weights.push_back(std::move(w));
    }
    if (mj.contains("compile_seconds") && mj["compile_seconds"].is_number())
      a.compileSeconds = mj["compile_seconds"].get<double>();
    m.modules.push_back(std::move(a));
  }
  return m;
}

std::unique_ptr<Artifact> Artifact::open(const std::string &dir) {
  std::string manifestPath = dir + "/manifest.json";
  std::ifstream in(manifestPath, std::ios::binary);
  if (!in)
    throw Error(manifestPath, "", "cannot read the artifact manifest",
                ErrorKind::Io);
  std::stringstream ss;
  ss << in.rdbuf();
  std::unique_ptr<Artifact> a(new Artifact());
  a->dir_ = dir;
  a->manifest_ = parseManifest(ss.str(), manifestPath);
  std::string so = dir + "/kernels.so";
  a->handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!a->handle_) {
    const char *e = dlerror();
    throw Error(so, "",
                std::string("cannot load the kernels: ") +
                    (e ? e : "dlopen failed"),
                ErrorKind::Io);
  }
  return a;
}

Artifact::~Artifact() {
  if (handle_)
    dlclose(handle_);
}

const ArtifactModule *Artifact::find(const std::string &name) const {
  for (const ArtifactModule &m : manifest_.modules)
    if (m.name == name)
      return &m;
  return nullptr;
}

KernelEntry Artifact::entry(const std::string &symbol) const {
  dlerror();
  void *p = dlsym(handle_, symbol.c_str());
  if (!p)
    throw Error(dir_ + "/kernels.so", "",
                "entry point '" + symbol + "' is missing");
  KernelEntry fn;
  static_assert(sizeof(fn) == sizeof(p), "function pointer size");
  __builtin_memcpy(&fn, &p, sizeof(fn));
  return fn;
}

} // namespace comfyquant::rt
