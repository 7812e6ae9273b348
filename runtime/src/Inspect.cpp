//===- Inspect.cpp - checkpoint inspection report -------------------------===//
#include "comfyquant/runtime/Inspect.h"

#include "comfyquant/runtime/Error.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace comfyquant::rt {

namespace {


std::string humanBytes(int64_t b) {
  char buf[32];
  if (b < 1024)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  else if (b < (1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else if (b < (1ll << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  return buf;
}

std::string optionsStr(const ResolvedModule &m) {
  const ModuleDesc &d = m.desc;
  std::string s;
  auto add = [&](const std::string &x) { s += (s.empty() ? "" : ",") + x; };
  if (d.fullPrecision)
    add("full_precision_matrix_mult");
  if (!d.linearDtype.empty())
    add("linear_dtype=" + d.linearDtype);
  if (d.groupSize)
    add("group_size=" + std::to_string(d.groupSize));
  if (m.config.source != ConfigSource::Tensor)
    add(std::string("from ") + configSourceName(m.config.source));
  return s.empty() ? "-" : s;
}

} // namespace

nlohmann::ordered_json inspectJson(const ResolvedCheckpoint &ckpt) {
  using json = nlohmann::ordered_json;
  const Checkpoint &file = *ckpt.checkpoint;
  json out;
  out["checkpoint"] = {{"path", file.path()},
                       {"shards", file.shards().size()},
                       {"size", file.totalSize()},
                       {"tensors", file.tensors().size()}};
  json modules = json::array();
  std::map<std::string, std::pair<int64_t, int64_t>> totals; // count, bytes
  for (const ResolvedModule &m : ckpt.modules) {
    const ModuleDesc &d = m.desc;
    json j;
    j["name"] = d.name;
    j["kind"] = moduleKindName(d.kind);
    j["format"] = formatName(d.format);
    j["out_features"] = d.outFeatures;
    j["in_features"] = d.inFeatures;
    j["experts"] = d.kind == ModuleKind::MoE ? json(d.experts) : json(nullptr);
    j["convrot_groupsize"] =
        d.rotationGroup ? json(d.rotationGroup) : json(nullptr);
    j["group_size"] = d.groupSize ? json(d.groupSize) : json(nullptr);
    json opts = json::object();
    opts["full_precision_matrix_mult"] = d.fullPrecision;
    if (!d.linearDtype.empty())
      opts["linear_dtype"] = d.linearDtype;
    j["options"] = opts;
    j["config_source"] = configSourceName(m.config.source);
    int64_t bytes = moduleBytes(d);
    j["bytes"] = bytes;
    json tensors = json::object();
    for (const auto &[role, t] : m.tensors)
      tensors[role] = {{"key", t->name},
                       {"dtype", dtypeName(t->dtype)},
                       {"shape", t->shape},
                       {"offset", t->fileOffset}};
    j["tensors"] = tensors;
    modules.push_back(j);
    auto &tot = totals[formatName(d.format)];
    tot.first += 1;
    tot.second += bytes;
  }
  out["modules"] = modules;
  json totalsJ = json::object();
  for (const auto &[fmt, t] : totals)
    totalsJ[fmt] = {{"modules", t.first}, {"bytes", t.second}};
  out["totals"] = totalsJ;
  json unq = json::array();
  for (const TensorInfo *t : ckpt.unquantized)
    unq.push_back({{"name", t->name},
                   {"dtype", dtypeName(t->dtype)},
                   {"shape", t->shape},
                   {"bytes", t->nbytes()}});
  out["unquantized"] = unq;
  json att = json::array();
  for (const AttentionPreference &p : ckpt.config.attention) {
    json entries = json::array();
    for (const AttentionEntry &e : p.entries)
      entries.push_back(json::parse(e.optionsJson));
    att.push_back({{"module", p.module}, {"config", entries}});
  }
  out["attention"] = att;
  out["warnings"] = ckpt.warnings;
  return out;
}

std::string inspectText(const ResolvedCheckpoint &ckpt) {
  const Checkpoint &file = *ckpt.checkpoint;
  std::ostringstream os;
  os << "checkpoint: " << file.path() << " (" << file.shards().size()
     << (file.shards().size() == 1 ? " file, " : " shards, ")
     << humanBytes(static_cast<int64_t>(file.totalSize())) << ", "
     << file.tensors().size() << " tensors)\n\n";
  os << "quantized modules (" << ckpt.modules.size() << "):\n";
  int nameWidth = 4;
  for (const ResolvedModule &m : ckpt.modules)
    nameWidth = std::max(nameWidth, static_cast<int>(m.desc.name.size()));
  char line[1024];
  std::snprintf(line, sizeof line, "  %-*s  %-9s %-16s %-17s %-7s %-9s %s\n",
                nameWidth, "name", "kind", "format", "shape [E x] N x K",
                "convrot", "bytes", "options");
  os << line;
  std::map<std::string, std::pair<int64_t, int64_t>> totals;
  for (const ResolvedModule &m : ckpt.modules) {
    const ModuleDesc &d = m.desc;
    std::string shape = (d.kind == ModuleKind::MoE
                             ? std::to_string(d.experts) + " x "
                             : std::string()) +
                        std::to_string(d.outFeatures) + " x " +
                        std::to_string(d.inFeatures);
    int64_t bytes = moduleBytes(d);
    std::snprintf(line, sizeof line, "  %-*s  %-9s %-16s %-17s %-7s %-9s %s\n",
                  nameWidth, d.name.c_str(), moduleKindName(d.kind),
                  formatName(d.format),
                  shape.c_str(),
                  d.rotationGroup ? std::to_string(d.rotationGroup).c_str()
                                  : "-",
                  humanBytes(bytes).c_str(), optionsStr(m).c_str());
    os << line;
    auto &t = totals[formatName(d.format)];
    t.first += 1;
    t.second += bytes;
  }
  os << "\ntotals per format:\n";
  for (const auto &[fmt, t] : totals) {
    std::snprintf(line, sizeof line, "  %-16s %4lld modules  %s\n", fmt.c_str(),
                  static_cast<long long>(t.first), humanBytes(t.second).c_str());
    os << line;
  }
  os << "\nunquantized tensors (" << ckpt.unquantized.size() << "):\n";
  for (const TensorInfo *t : ckpt.unquantized)
    os << "  " << t->name << " " << dtypeName(t->dtype) << " "
       << shapeString(t->shape) << "\n";
  os << "\nattention preferences (" << ckpt.config.attention.size() << "):\n";
  for (const AttentionPreference &p : ckpt.config.attention) {
    os << "  " << p.module << ":";
    for (const AttentionEntry &e : p.entries)
      os << " " << e.method << (e.known ? "" : "(unknown)");
    os << "\n";
  }
  os << "\nwarnings (" << ckpt.warnings.size() << "):\n";
  for (const std::string &w : ckpt.warnings)
    os << "  warning: " << w << "\n";
  return os.str();
}

} // namespace comfyquant::rt
