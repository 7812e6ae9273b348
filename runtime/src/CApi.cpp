//===- CApi.cpp - C API of the comfyquant runtime -------------------------===//
#include "comfyquant/comfyquant.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Reference.h"

#include <memory>
#include <string>

using namespace comfyquant::rt;

struct cq_checkpoint {
  std::unique_ptr<Checkpoint> checkpoint;
  ResolvedCheckpoint resolved;
};

namespace {
thread_local std::string lastError;

/// Runs `fn`, turning any exception into cq_last_error() and `failure`.
template <typename R, typename Fn> R guarded(R failure, Fn &&fn) {
  try {
    lastError.clear();
    return fn();
  } catch (const std::exception &e) {
    lastError = e.what();
  } catch (...) {
    lastError = "unknown error";
  }
  return failure;
}
} // namespace

extern "C" {

const char *cq_last_error(void) { return lastError.c_str(); }

cq_checkpoint *cq_checkpoint_open(const char *path) {
  return guarded<cq_checkpoint *>(nullptr, [&]() -> cq_checkpoint * {
    if (!path)
      throw Error("", "", "path is NULL");
    auto c = std::make_unique<cq_checkpoint>();
    c->checkpoint = Checkpoint::open(path);
    c->resolved = resolveCheckpoint(*c->checkpoint);
    return c.release();
  });
}

void cq_checkpoint_close(cq_checkpoint *ckpt) { delete ckpt; }

size_t cq_module_count(const cq_checkpoint *ckpt) {
  return ckpt ? ckpt->resolved.modules.size() : 0;
}

int cq_module_info_at(const cq_checkpoint *ckpt, size_t index,
                      cq_module_info *info) {
  return guarded(1, [&] {
    if (!ckpt || !info || index >= ckpt->resolved.modules.size())
      throw Error("", "", "invalid checkpoint, info pointer or module index");
    const ModuleDesc &d = ckpt->resolved.modules[index].desc;
    info->name = d.name.c_str();
    info->format = formatName(d.format);
    info->kind = static_cast<int>(d.kind);
    info->out_features = d.outFeatures;
    info->in_features = d.inFeatures;
    info->experts = d.experts;
    info->rotation_group = d.rotationGroup;
    info->group_size = d.groupSize;
    info->full_precision_matrix_mult = d.fullPrecision;
    return 0;
  });
}

int64_t cq_module_find(const cq_checkpoint *ckpt, const char *name) {
  if (!ckpt || !name)
    return -1;
  const auto &mods = ckpt->resolved.modules;
  for (size_t i = 0; i < mods.size(); ++i)
    if (mods[i].desc.name == name)
      return static_cast<int64_t>(i);
  return -1;
}

int cq_dequantize_rows(const cq_checkpoint *ckpt, size_t index, int64_t expert,
                       int64_t row_begin, int64_t row_end, float *out,
                       size_t out_count) {
  return guarded(1, [&] {
    if (!ckpt || !out || index >= ckpt->resolved.modules.size())
      throw Error("", "", "invalid checkpoint, output or module index");
    const ResolvedModule &m = ckpt->resolved.modules[index];
    if (row_end < row_begin ||
        static_cast<uint64_t>(row_end - row_begin) *
                static_cast<uint64_t>(m.desc.inFeatures) >
            out_count)
      throw Error("", moduleSubject(m.desc.name),
                  "output buffer too small for the requested rows");
    dequantizeRows(m, expert, row_begin, row_end, out);
    return 0;
  });
}

} // extern "C"
