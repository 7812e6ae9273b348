//===- CpuDispatch.cpp - which variant's entry a CPU call runs ------------===//
#include "exec/CpuDispatch.h"

namespace comfyquant::rt {

std::vector<const CpuEntry *>
dispatchEntries(const ManifestModule &module, const std::string &dtype,
                const std::vector<std::string> &variants) {
  std::vector<const CpuEntry *> out;
  for (const std::string &v : variants) {
    const CpuEntry *e = module.findCpuEntry(dtype, v);
    if (!e) {
      if (out.empty())
        return out; // the session's own variant must have it
      continue;
    }
    out.push_back(e);
    if (e->minRows <= 1)
      break;
  }
  return out;
}

size_t entryForRows(const std::vector<const CpuEntry *> &entries,
                    int64_t rows) {
  for (size_t i = 0; i < entries.size(); ++i)
    if (rows >= entries[i]->minRows)
      return i;
  return 0;
}

} // namespace comfyquant::rt
