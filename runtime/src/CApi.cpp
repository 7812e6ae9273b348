//===- CApi.cpp - C API of the comfyquant runtime -------------------------===//
#include "comfyquant/comfyquant.h"

#include "comfyquant/runtime/CpuFeatures.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/Session.h"
#include "comfyquant/runtime/Reference.h"

#include <cstring>
#include <memory>
#include <string>

using namespace comfyquant::rt;

struct cq_session {
  std::unique_ptr<Session> session;
};

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

namespace {
DType dtypeOf(int dtype) {
  switch (dtype) {
  case CQ_DTYPE_F32:
    return DType::F32;
  case CQ_DTYPE_BF16:
    return DType::BF16;
  case CQ_DTYPE_F16:
    return DType::F16;
  default:
    throw Error("", "", "unknown dtype " + std::to_string(dtype) +
                            " (CQ_DTYPE_F32, CQ_DTYPE_BF16, CQ_DTYPE_F16)");
  }
}

int kindOf(const std::string &k) {
  if (k == "embedding")
    return CQ_KIND_EMBEDDING;
  if (k == "moe")
    return CQ_KIND_MOE;
  return CQ_KIND_LINEAR;
}
} // namespace

extern "C" {

int cq_reference_linear(const cq_checkpoint *ckpt, size_t index,
                        int64_t expert, int dtype, const void *x, int64_t m,
                        void *y) {
  return guarded(1, [&] {
    if (!ckpt || index >= ckpt->resolved.modules.size() || m < 0 ||
        (m > 0 && (!x || !y)))
      throw Error("", "", "invalid checkpoint, module index or buffers");
    const ResolvedModule &mod = ckpt->resolved.modules[index];
    ActivationView view;
    view.dtype = dtypeOf(dtype);
    view.rows = m;
    view.cols = mod.desc.inFeatures;
    view.data = x;
    std::vector<uint8_t> out = referenceLinear(mod, view, expert);
    if (!out.empty())
      std::memcpy(y, out.data(), out.size());
    return 0;
  });
}

cq_session *cq_session_open(const char *artifact_dir, const char *checkpoint,
                            const char *variant, int threads) {
  return guarded<cq_session *>(nullptr, [&]() -> cq_session * {
    if (!artifact_dir)
      throw Error("", "", "artifact directory is NULL");
    SessionOptions o;
    if (checkpoint)
      o.checkpoint = checkpoint;
    if (variant)
      o.variant = variant;
    o.threads = threads;
    auto s = std::make_unique<cq_session>();
    s->session = Session::open(artifact_dir, o);
    return s.release();
  });
}

void cq_session_close(cq_session *session) { delete session; }

const char *cq_session_variant(const cq_session *session) {
  return session ? session->session->variant().c_str() : "";
}

int cq_session_set_threads(cq_session *session, int threads) {
  return guarded(1, [&] {
    if (!session || threads < 1)
      throw Error("", "", "invalid session or thread count");
    session->session->setThreads(threads);
    return 0;
  });
}

size_t cq_session_module_count(const cq_session *session) {
  return session ? session->session->moduleCount() : 0;
}

int cq_session_module_info_at(const cq_session *session, size_t index,
                              cq_session_module_info *info) {
  return guarded(1, [&] {
    if (!session || !info || index >= session->session->moduleCount())
      throw Error("", "", "invalid session, info pointer or module index");
    const ArtifactModule &m = session->session->module(index);
    info->name = m.name.c_str();
    info->format = m.format.c_str();
    info->kind = kindOf(m.kind);
    info->out_features = m.outFeatures;
    info->in_features = m.inFeatures;
    info->experts = m.experts;
    return 0;
  });
}

int64_t cq_session_module_find(const cq_session *session, const char *name) {
  if (!session || !name)
    return -1;
  return session->session->findModule(name);
}

int cq_session_run(const cq_session *session, size_t index, int dtype,
                   const void *x, int64_t m, void *y) {
  return cq_session_run_expert(session, index, 0, dtype, x, m, y);
}

int cq_session_run_expert(const cq_session *session, size_t index,
                          int64_t expert, int dtype, const void *x, int64_t m,
                          void *y) {
  return guarded(1, [&] {
    if (!session)
      throw Error("", "", "session is NULL");
    session->session->run(index, dtypeOf(dtype), x, m, y, expert);
    return 0;
  });
}

int cq_session_lookup(const cq_session *session, size_t index, int dtype,
                      const int64_t *indices, int64_t m, void *y) {
  return guarded(1, [&] {
    if (!session)
      throw Error("", "", "session is NULL");
    session->session->lookup(index, dtypeOf(dtype), indices, m, y);
    return 0;
  });
}

const char *cq_cpu_features(void) {
  static const std::string s = cpuFeatures().describe();
  return s.c_str();
}

int cq_cpu_supports(const char *variant) {
  return variant && cpuSupportsVariant(variant) ? 1 : 0;
}

} // extern "C"
