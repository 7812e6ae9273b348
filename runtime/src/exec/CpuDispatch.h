//===- CpuDispatch.h - which variant's entry a CPU call runs ----*- C++ -*-===//
//
// An artifact holds every module's kernels for several CPU variants. The
// session runs the most specific one the CPU supports, except where that
// variant's entry is meant for more rows than a call has (its manifest
// `min_rows`: AMX pads every call to 16-row tiles): such a call runs the
// entry of the next variant down that has no such floor. The choice is
// per call, by M, and depends only on the artifact and the CPU, so a
// session's outputs do not depend on timing.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_EXEC_CPUDISPATCH_H
#define COMFYQUANT_RUNTIME_EXEC_CPUDISPATCH_H

#include "comfyquant/runtime/Manifest.h"

#include <cstdint>
#include <string>
#include <vector>

namespace comfyquant::rt {

/// The entries of `module` for activation dtype `dtype` that calls choose
/// among, best first, for a session whose `variants` are ordered best
/// first: the first variant's entry, then, while every entry so far has a
/// floor on rows, the next variant's that the module has, ending with the
/// first entry without a floor. Empty when the first variant has none.
std::vector<const CpuEntry *>
dispatchEntries(const ManifestModule &module, const std::string &dtype,
                const std::vector<std::string> &variants);

/// The index into `entries` (dispatchEntries') of the entry a call of
/// `rows` rows runs: the first whose min_rows it reaches, else the first
/// (the only kernels there are).
size_t entryForRows(const std::vector<const CpuEntry *> &entries,
                    int64_t rows);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_EXEC_CPUDISPATCH_H
