//===- CApi.cpp - C API of the comfyquant runtime -------------------------===//
#include "comfyquant/comfyquant.h"

#include "comfyquant/runtime/CpuFeatures.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/OutputFile.h"
#include "comfyquant/runtime/quantize/Quantizer.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/Session.h"
#include "comfyquant/runtime/ThreadPool.h"
#include "cuda/CudaDriver.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <sys/stat.h>

using namespace comfyquant::rt;

struct cq_session {
  std::unique_ptr<Session> session;
  /// cq_session_device's text, fixed at open.
  std::string device;
};

struct cq_checkpoint {
  std::unique_ptr<Checkpoint> checkpoint;
  ResolvedCheckpoint resolved;
};

namespace {
thread_local std::string lastError;

/// An error the C API finds itself, with its status.
struct ApiError {
  cq_status status;
  std::string message;
};

[[noreturn]] void fail(cq_status status, std::string message) {
  throw ApiError{status, std::move(message)};
}

cq_status statusOf(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::InvalidArgument:
    return CQ_ERROR_INVALID_ARGUMENT;
  case ErrorKind::Io:
    return CQ_ERROR_IO;
  case ErrorKind::Mismatch:
    return CQ_ERROR_MISMATCH;
  case ErrorKind::Unsupported:
    return CQ_ERROR_UNSUPPORTED;
  case ErrorKind::InvalidInput:
    break;
  }
  return CQ_ERROR_INVALID_INPUT;
}

/// Runs `fn`, turning any exception into a status and cq_last_error().
template <typename Fn> cq_status guarded(const char *function, Fn &&fn) {
  try {
    lastError.clear();
    fn();
    return CQ_OK;
  } catch (const ApiError &e) {
    lastError = std::string(function) + ": " + e.message;
    return e.status;
  } catch (const Error &e) {
    lastError = e.what();
    return statusOf(e.kind());
  } catch (const std::bad_alloc &) {
    lastError = std::string(function) + ": out of memory";
    return CQ_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    lastError = std::string(function) + ": " + e.what();
  } catch (...) {
    lastError = std::string(function) + ": unknown error";
  }
  return CQ_ERROR_INTERNAL;
}

template <typename T> void require(const T *p, const char *what) {
  if (!p)
    fail(CQ_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

/// A caller-allocated struct must be at least as large as this version's.
template <typename T> void requireStruct(const T *p, const char *what) {
  require(p, what);
  if (p->struct_size < sizeof(T))
    fail(CQ_ERROR_INVALID_ARGUMENT,
         std::string(what) + "->struct_size is " +
             std::to_string(p->struct_size) + ", expected at least " +
             std::to_string(sizeof(T)) + " (use the CQ_*_INIT initializer)");
}

void requireIndex(size_t index, size_t count, const char *what) {
  if (index >= count)
    fail(CQ_ERROR_INVALID_ARGUMENT, std::string(what) + " " +
                                        std::to_string(index) +
                                        " is out of range [0, " +
                                        std::to_string(count) + ")");
}

/// The getters a checkpoint and a session share: the number of warnings
/// (`warnings(owner)`) and one of them by index.
template <typename Owner, typename Warnings>
cq_status warningCount(const char *function, const Owner *owner,
                       const char *what, size_t *count, Warnings warnings) {
  return guarded(function, [&] {
    require(owner, what);
    require(count, "count");
    *count = warnings(*owner).size();
  });
}

template <typename Owner, typename Warnings>
cq_status warningAt(const char *function, const Owner *owner, const char *what,
                    size_t index, const char **text, Warnings warnings) {
  return guarded(function, [&] {
    require(owner, what);
    require(text, "text");
    const std::vector<std::string> &list = warnings(*owner);
    requireIndex(index, list.size(), "warning index");
    *text = list[index].c_str();
  });
}

DType dtypeOf(int dtype) {
  switch (dtype) {
  case CQ_DTYPE_F32:
    return DType::F32;
  case CQ_DTYPE_BF16:
    return DType::BF16;
  case CQ_DTYPE_F16:
    return DType::F16;
  default:
    fail(CQ_ERROR_INVALID_ARGUMENT,
         "unknown dtype " + std::to_string(dtype) +
             " (CQ_DTYPE_F32, CQ_DTYPE_BF16, CQ_DTYPE_F16)");
  }
}

/// Rows x cols elements of `dtype` must fit in `bytes`.
void requireCapacity(int64_t rows, int64_t cols, DType dtype, size_t bytes,
                     const char *what) {
  const uint64_t need = static_cast<uint64_t>(rows) *
                        static_cast<uint64_t>(cols) * dtypeSize(dtype);
  if (need > bytes)
    fail(CQ_ERROR_BUFFER_TOO_SMALL,
         std::string(what) + " holds " + std::to_string(bytes) +
             " bytes; the result needs " + std::to_string(need));
}

int kindOf(ModuleKind k) {
  switch (k) {
  case ModuleKind::Embedding:
    return CQ_KIND_EMBEDDING;
  case ModuleKind::MoE:
    return CQ_KIND_MOE;
  case ModuleKind::Linear:
    break;
  }
  return CQ_KIND_LINEAR;
}

/// The header's version `header` can be served by this library: same major
/// (and, before 1.0, same minor), and not newer than the library.
bool compatible(int header) {
  const int major = header / 10000, minor = header / 100 % 100;
  if (major != CQ_VERSION_MAJOR || header > CQ_VERSION)
    return false;
  return major != 0 || minor == CQ_VERSION_MINOR;
}

std::string versionText(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
         "." + std::to_string(v % 100);
}
} // namespace

extern "C" {

int cq_version(void) { return CQ_VERSION; }

const char *cq_version_string(void) { return CQ_VERSION_STRING; }

const char *cq_status_string(int status) {
  switch (status) {
  case CQ_OK:
    return "CQ_OK";
  case CQ_ERROR_INVALID_ARGUMENT:
    return "CQ_ERROR_INVALID_ARGUMENT";
  case CQ_ERROR_NOT_FOUND:
    return "CQ_ERROR_NOT_FOUND";
  case CQ_ERROR_IO:
    return "CQ_ERROR_IO";
  case CQ_ERROR_INVALID_INPUT:
    return "CQ_ERROR_INVALID_INPUT";
  case CQ_ERROR_MISMATCH:
    return "CQ_ERROR_MISMATCH";
  case CQ_ERROR_UNSUPPORTED:
    return "CQ_ERROR_UNSUPPORTED";
  case CQ_ERROR_BUFFER_TOO_SMALL:
    return "CQ_ERROR_BUFFER_TOO_SMALL";
  case CQ_ERROR_VERSION:
    return "CQ_ERROR_VERSION";
  case CQ_ERROR_OUT_OF_MEMORY:
    return "CQ_ERROR_OUT_OF_MEMORY";
  case CQ_ERROR_INTERNAL:
    return "CQ_ERROR_INTERNAL";
  }
  return "CQ_UNKNOWN_STATUS";
}

const char *cq_last_error(void) { return lastError.c_str(); }

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

cq_status cq_checkpoint_open(const char *path, cq_checkpoint **out) {
  if (out)
    *out = nullptr;
  return guarded("cq_checkpoint_open", [&] {
    require(out, "out");
    require(path, "path");
    // A path that cannot be opened at all is an I/O failure; everything the
    // reader rejects after that is the file's content.
    struct stat st;
    if (::stat(path, &st) != 0)
      fail(CQ_ERROR_IO, std::string(path) + ": cannot open for reading: " +
                            std::strerror(errno));
    auto c = std::make_unique<cq_checkpoint>();
    c->checkpoint = Checkpoint::open(path);
    c->resolved = resolveCheckpoint(*c->checkpoint);
    *out = c.release();
  });
}

void cq_checkpoint_close(cq_checkpoint *ckpt) { delete ckpt; }

/// A checkpoint's resolution warnings.
static const std::vector<std::string> &checkpointWarnings(const cq_checkpoint &c) {
  return c.resolved.warnings;
}

cq_status cq_checkpoint_warning_count(const cq_checkpoint *ckpt,
                                      size_t *count) {
  return warningCount("cq_checkpoint_warning_count", ckpt, "checkpoint", count,
                      checkpointWarnings);
}

cq_status cq_checkpoint_warning_at(const cq_checkpoint *ckpt, size_t index,
                                   const char **text) {
  return warningAt("cq_checkpoint_warning_at", ckpt, "checkpoint", index, text,
                   checkpointWarnings);
}

cq_status cq_module_count(const cq_checkpoint *ckpt, size_t *count) {
  return guarded("cq_module_count", [&] {
    require(ckpt, "checkpoint");
    require(count, "count");
    *count = ckpt->resolved.modules.size();
  });
}

cq_status cq_module_info_at(const cq_checkpoint *ckpt, size_t index,
                            cq_module_info *info) {
  return guarded("cq_module_info_at", [&] {
    require(ckpt, "checkpoint");
    requireStruct(info, "info");
    requireIndex(index, ckpt->resolved.modules.size(), "module index");
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
  });
}

cq_status cq_module_find(const cq_checkpoint *ckpt, const char *name,
                         size_t *index) {
  return guarded("cq_module_find", [&] {
    require(ckpt, "checkpoint");
    require(name, "name");
    require(index, "index");
    const auto &mods = ckpt->resolved.modules;
    for (size_t i = 0; i < mods.size(); ++i)
      if (mods[i].desc.name == name) {
        *index = i;
        return;
      }
    fail(CQ_ERROR_NOT_FOUND,
         "no quantized module '" + std::string(name) + "' in " +
             ckpt->checkpoint->path());
  });
}

} // extern "C"

namespace {
/// `expert` must select a bank slice of a MoE module and be 0 otherwise.
void requireExpert(const ModuleDesc &d, int64_t expert) {
  const int64_t experts = d.kind == ModuleKind::MoE ? d.experts : 1;
  if (expert < 0 || expert >= experts)
    fail(CQ_ERROR_INVALID_ARGUMENT,
         moduleSubject(d.name) + ": expert " + std::to_string(expert) +
             " is out of range [0, " + std::to_string(experts) + ")");
}
} // namespace

extern "C" {

cq_status cq_dequantize_rows(const cq_checkpoint *ckpt, size_t index,
                             int64_t expert, int64_t row_begin,
                             int64_t row_end, float *out, size_t out_count) {
  return guarded("cq_dequantize_rows", [&] {
    require(ckpt, "checkpoint");
    require(out, "out");
    requireIndex(index, ckpt->resolved.modules.size(), "module index");
    const ResolvedModule &m = ckpt->resolved.modules[index];
    requireExpert(m.desc, expert);
    if (row_begin < 0 || row_end < row_begin || row_end > m.desc.outFeatures)
      fail(CQ_ERROR_INVALID_ARGUMENT,
           moduleSubject(m.desc.name) + ": rows [" +
               std::to_string(row_begin) + ", " + std::to_string(row_end) +
               ") are not within [0, " + std::to_string(m.desc.outFeatures) +
               ")");
    if (static_cast<uint64_t>(row_end - row_begin) *
            static_cast<uint64_t>(m.desc.inFeatures) >
        out_count)
      fail(CQ_ERROR_BUFFER_TOO_SMALL,
           moduleSubject(m.desc.name) +
               ": output buffer too small for the requested rows");
    dequantizeRows(m, expert, row_begin, row_end, out);
  });
}

cq_status cq_reference_linear(const cq_checkpoint *ckpt, size_t index,
                              int64_t expert, int dtype, const void *x,
                              int64_t m, void *y, size_t y_bytes) {
  return guarded("cq_reference_linear", [&] {
    require(ckpt, "checkpoint");
    requireIndex(index, ckpt->resolved.modules.size(), "module index");
    const ResolvedModule &mod = ckpt->resolved.modules[index];
    if (mod.desc.kind == ModuleKind::Embedding)
      fail(CQ_ERROR_INVALID_ARGUMENT,
           moduleSubject(mod.desc.name) +
               ": an embedding has no linear forward (cq_dequantize_rows)");
    requireExpert(mod.desc, expert);
    const DType dt = dtypeOf(dtype);
    if (m < 0 || (m > 0 && (!x || !y)))
      fail(CQ_ERROR_INVALID_ARGUMENT, "m < 0 or x / y is NULL");
    requireCapacity(m, mod.desc.outFeatures, dt, y_bytes, "y");
    ActivationView view;
    view.dtype = dt;
    view.rows = m;
    view.cols = mod.desc.inFeatures;
    view.data = x;
    std::vector<uint8_t> result = referenceLinear(mod, view, expert);
    if (!result.empty())
      std::memcpy(y, result.data(), result.size());
  });
}

//===----------------------------------------------------------------------===//
// Sessions
//===----------------------------------------------------------------------===//

cq_status cq_session_open_checked(int header_version, const char *artifact_dir,
                                  const cq_session_options *options,
                                  cq_session **out) {
  return cq_session_open_backend_checked(header_version, artifact_dir, options,
                                         nullptr, out);
}

cq_status cq_session_open_backend_checked(int header_version,
                                          const char *artifact_dir,
                                          const cq_session_options *options,
                                          const cq_device_options *device,
                                          cq_session **out) {
  if (out)
    *out = nullptr;
  return guarded("cq_session_open", [&] {
    if (!compatible(header_version))
      fail(CQ_ERROR_VERSION,
           "the program was built with comfyquant.h " +
               versionText(header_version) + " but libcomfyquant is " +
               CQ_VERSION_STRING +
               " (rebuild the program against this library's headers)");
    require(out, "out");
    require(artifact_dir, "artifact_dir");
    SessionOptions o;
    if (options) {
      requireStruct(options, "options");
      if (options->checkpoint)
        o.checkpoint = options->checkpoint;
      if (options->variant)
        o.variant = options->variant;
      if (options->threads < 0)
        fail(CQ_ERROR_INVALID_ARGUMENT,
             "options->threads is " + std::to_string(options->threads) +
                 " (0: default, else a thread count)");
      o.threads = options->threads;
      if (cq_parallel_for_fn pf = options->parallel_for) {
        void *user = options->parallel_for_data;
        o.parallelFor = [pf, user](int count,
                                   const std::function<void(int)> &task) {
          auto trampoline = [](void *data, int i) {
            (*static_cast<const std::function<void(int)> *>(data))(i);
          };
          pf(user, count, trampoline,
             const_cast<std::function<void(int)> *>(&task));
        };
      }
    }
    if (device) {
      requireStruct(device, "device");
      if (device->backend)
        o.backend = device->backend;
      SessionBackend parsed;
      if (!parseSessionBackend(o.backend, parsed))
        fail(CQ_ERROR_INVALID_ARGUMENT, "device->backend is '" + o.backend +
                                            "' (\"cpu\" or \"cuda\")");
      if (device->device < 0)
        fail(CQ_ERROR_INVALID_ARGUMENT,
             "device->device is " + std::to_string(device->device));
      o.device = device->device;
      o.cudaStream = device->cuda_stream;
    }
    auto s = std::make_unique<cq_session>();
    s->session = Session::open(artifact_dir, o);
    s->device = s->session->deviceDescription();
    *out = s.release();
  });
}

void cq_session_close(cq_session *session) { delete session; }

cq_status cq_session_variant(const cq_session *session, const char **variant) {
  return guarded("cq_session_variant", [&] {
    require(session, "session");
    require(variant, "variant");
    *variant = session->session->variant().c_str();
  });
}

cq_status cq_session_variant_for(const cq_session *session, size_t index,
                                 int dtype, int64_t m, const char **variant) {
  return guarded("cq_session_variant_for", [&] {
    require(session, "session");
    require(variant, "variant");
    const Session &s = *session->session;
    requireIndex(index, s.moduleCount(), "module index");
    if (m < 0)
      fail(CQ_ERROR_INVALID_ARGUMENT, "m must not be negative");
    *variant = s.variantFor(index, dtypeOf(dtype), m).c_str();
  });
}

cq_status cq_session_backend(const cq_session *session, const char **backend) {
  return guarded("cq_session_backend", [&] {
    require(session, "session");
    require(backend, "backend");
    *backend = session->session->backendName();
  });
}

cq_status cq_session_device(const cq_session *session,
                            const char **description) {
  return guarded("cq_session_device", [&] {
    require(session, "session");
    require(description, "description");
    *description = session->device.c_str();
  });
}

cq_status cq_session_checkpoint_path(const cq_session *session,
                                     const char **path) {
  return guarded("cq_session_checkpoint_path", [&] {
    require(session, "session");
    require(path, "path");
    *path = session->session->checkpointPath().c_str();
  });
}

cq_status cq_session_set_threads(cq_session *session, int threads) {
  return guarded("cq_session_set_threads", [&] {
    require(session, "session");
    if (threads < 1)
      fail(CQ_ERROR_INVALID_ARGUMENT,
           "thread count " + std::to_string(threads) + " is not >= 1");
    session->session->setThreads(threads);
  });
}

cq_status cq_session_threads(const cq_session *session, int *threads) {
  return guarded("cq_session_threads", [&] {
    require(session, "session");
    require(threads, "threads");
    *threads = session->session->threads();
  });
}

/// A session's set-up warnings.
static const std::vector<std::string> &sessionWarnings(const cq_session &s) {
  return s.session->warnings();
}

cq_status cq_session_warning_count(const cq_session *session, size_t *count) {
  return warningCount("cq_session_warning_count", session, "session", count,
                      sessionWarnings);
}

cq_status cq_session_warning_at(const cq_session *session, size_t index,
                                const char **text) {
  return warningAt("cq_session_warning_at", session, "session", index, text,
                   sessionWarnings);
}

cq_status cq_session_module_count(const cq_session *session, size_t *count) {
  return guarded("cq_session_module_count", [&] {
    require(session, "session");
    require(count, "count");
    *count = session->session->moduleCount();
  });
}

cq_status cq_session_module_info_at(const cq_session *session, size_t index,
                                    cq_session_module_info *info) {
  return guarded("cq_session_module_info_at", [&] {
    require(session, "session");
    requireStruct(info, "info");
    requireIndex(index, session->session->moduleCount(), "module index");
    const ManifestModule &m = session->session->module(index);
    info->name = m.name.c_str();
    info->format = m.format.c_str();
    info->kind = kindOf(m.kind);
    info->out_features = m.outFeatures;
    info->in_features = m.inFeatures;
    info->experts = m.experts;
  });
}

cq_status cq_session_module_find(const cq_session *session, const char *name,
                                 size_t *index) {
  return guarded("cq_session_module_find", [&] {
    require(session, "session");
    require(name, "name");
    require(index, "index");
    int64_t i = session->session->findModule(name);
    if (i < 0)
      fail(CQ_ERROR_NOT_FOUND, "no module '" + std::string(name) +
                                   "' in the artifact " +
                                   session->session->artifactDir());
    *index = static_cast<size_t>(i);
  });
}

cq_status cq_session_run(const cq_session *session, size_t index, int dtype,
                         const void *x, int64_t m, void *y, size_t y_bytes) {
  return cq_session_run_expert(session, index, 0, dtype, x, m, y, y_bytes);
}

cq_status cq_session_run_expert(const cq_session *session, size_t index,
                                int64_t expert, int dtype, const void *x,
                                int64_t m, void *y, size_t y_bytes) {
  return guarded("cq_session_run", [&] {
    require(session, "session");
    const Session &s = *session->session;
    requireIndex(index, s.moduleCount(), "module index");
    const DType dt = dtypeOf(dtype);
    if (m > 0)
      requireCapacity(m, s.module(index).outFeatures, dt, y_bytes, "y");
    s.run(index, dt, x, m, y, expert);
  });
}

cq_status cq_session_lookup(const cq_session *session, size_t index, int dtype,
                            const int64_t *indices, int64_t m, void *y,
                            size_t y_bytes) {
  return guarded("cq_session_lookup", [&] {
    require(session, "session");
    const Session &s = *session->session;
    requireIndex(index, s.moduleCount(), "module index");
    const DType dt = dtypeOf(dtype);
    if (m > 0)
      requireCapacity(m, s.module(index).inFeatures, dt, y_bytes, "y");
    s.lookup(index, dt, indices, m, y);
  });
}

cq_status cq_session_run_device(const cq_session *session, size_t index,
                                int64_t expert, int dtype, uint64_t x,
                                int64_t m, uint64_t y, size_t y_bytes) {
  return guarded("cq_session_run_device", [&] {
    require(session, "session");
    const Session &s = *session->session;
    requireIndex(index, s.moduleCount(), "module index");
    const DType dt = dtypeOf(dtype);
    if (m > 0)
      requireCapacity(m, s.module(index).outFeatures, dt, y_bytes, "y");
    s.runDevice(index, dt, x, m, y, expert);
  });
}

cq_status cq_session_lookup_device(const cq_session *session, size_t index,
                                   int dtype, uint64_t indices, int64_t m,
                                   uint64_t y, size_t y_bytes) {
  return guarded("cq_session_lookup_device", [&] {
    require(session, "session");
    const Session &s = *session->session;
    requireIndex(index, s.moduleCount(), "module index");
    const DType dt = dtypeOf(dtype);
    if (m > 0)
      requireCapacity(m, s.module(index).inFeatures, dt, y_bytes, "y");
    s.lookupDevice(index, dt, indices, m, y);
  });
}

cq_status cq_session_synchronize(const cq_session *session) {
  return guarded("cq_session_synchronize", [&] {
    require(session, "session");
    session->session->synchronize();
  });
}

//===----------------------------------------------------------------------===//
// This machine
//===----------------------------------------------------------------------===//

const char *cq_cpu_features(void) {
  static const std::string s = cpuFeatures().describe();
  return s.c_str();
}

cq_status cq_cpu_supports(const char *variant, int *supported) {
  return guarded("cq_cpu_supports", [&] {
    require(variant, "variant");
    require(supported, "supported");
    *supported = cpuSupportsVariant(variant) ? 1 : 0;
  });
}

int cq_available_cores(void) { return availableCores(); }

cq_status cq_cuda_device_count(int *count) {
  if (count)
    *count = 0;
  return guarded("cq_cuda_device_count", [&] {
    require(count, "count");
    std::shared_ptr<const CudaDriver> driver = CudaDriver::load();
    *count = static_cast<int>(driver->devices().size());
  });
}

cq_status cq_quantize(const char *input, const char *output,
                      const cq_quantize_options *options, int *quantized) {
  if (quantized)
    *quantized = 0;
  return guarded("cq_quantize", [&] {
    require(input, "input");
    require(output, "output");
    require(options, "options");
    requireStruct(options, "options");
    require(options->format, "options->format");
    if (options->threads < 0 || options->threads > 1024)
      fail(CQ_ERROR_INVALID_ARGUMENT,
           "options->threads is " + std::to_string(options->threads) +
               " (0: default, else a thread count up to 1024)");
    QuantizeOptions o;
    o.input = input;
    o.output = output;
    o.format = options->format;
    if (options->architecture)
      o.architecture = options->architecture;
    if (options->policy_file)
      o.policyFiles.push_back(options->policy_file);
    o.maxMemory = options->max_memory;
    o.validate = options->validate != 0;
    o.strict = options->strict != 0;
    o.overwrite = options->overwrite != 0;
    o.threads = options->threads;
    if (options->optimizer)
      o.optimizer = options->optimizer;
    if (options->report_json)
      o.report = options->report_json;
    QuantizeReport rep = quantizeCheckpoint(o);
    if (quantized)
      *quantized = rep.quantized;
  });
}

} // extern "C"
