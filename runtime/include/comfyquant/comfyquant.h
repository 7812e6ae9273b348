/*===- comfyquant.h - C API of the comfyquant runtime -------------*- C -*-===*
 *
 * The C ABI of libcomfyquant: open a Comfy quant checkpoint (mmap, zero
 * copy), list its validated quantized modules, dequantize them and run the
 * reference forward; open an artifact compiled by comfyquant-compile
 * (kernels.so + manifest.json) and run modules with its CPU kernels on the
 * mapped checkpoint. docs/Runtime.md has examples and the full rules.
 *
 * Versions. CQ_VERSION_* (comfyquant/version.h) are the header's version,
 * cq_version() the library's. cq_session_open() passes the header's version
 * and fails with CQ_ERROR_VERSION when the library cannot serve it: a
 * different major version, before 1.0 a different minor version, or a
 * library older than the header. Every struct the caller allocates starts
 * with `struct_size`, which the caller sets to sizeof(the struct) (the
 * CQ_*_INIT macros do); the library fills or reads only that many bytes.
 *
 * Errors. Every call that can fail returns a cq_status; CQ_OK is 0. On
 * failure, cq_last_error() describes it: the message names the file, the
 * module or tensor, and the broken rule. That text is thread-local and stays
 * valid until the next cq_* call on the same thread. Calls that cannot fail
 * (cq_version, cq_*_close, cq_cpu_features, ...) leave it alone.
 *
 * Threads. A checkpoint or session may be used from several threads at once
 * for every call except its close, which must not race with any other call
 * on the same handle. cq_session_run*, cq_session_lookup and
 * cq_session_set_threads may run concurrently on one session: a run uses
 * the thread count in effect when it starts. A session splits large calls
 * across a worker pool it owns (started on first use, stopped by close), or
 * across the host's scheduler when cq_session_options.parallel_for is set.
 *
 * Backends. A session runs the artifact's CPU kernels (cq_session_open) or
 * its CUDA kernels on one device (cq_session_open_backend with backend
 * "cuda"). No CUDA library is linked: libcuda.so.1 is loaded when a cuda
 * session opens, and without it the open fails with CQ_ERROR_UNSUPPORTED
 * and a one-line reason.
 *
 * Host and device pointers. cq_session_run, cq_session_run_expert and
 * cq_session_lookup always take HOST pointers: on a cuda session they copy
 * x (or the indices) to the device, run, copy y back and wait, so they
 * return with y complete. cq_session_run_device and
 * cq_session_lookup_device take DEVICE addresses (CUdeviceptr values, e.g.
 * a torch CUDA tensor's data_ptr()) of memory in the device's primary
 * context (the one the CUDA runtime uses); they enqueue the kernels on the
 * session's stream and return before they finish: keep x and y alive and
 * read y only after cq_session_synchronize() or, when the session runs on
 * the host's stream (cq_device_options.cuda_stream), after that stream has
 * passed the call. Embedding indices given on the device are not range
 * checked. On a CPU session the device calls fail with
 * CQ_ERROR_INVALID_ARGUMENT. The weights are copied to the device once, when the session
 * opens. Calls on one cuda session are serialized.
 *
 * Lifetimes. Strings returned by the library (names, formats, warnings,
 * variants) stay valid until the checkpoint or session they came from is
 * closed; cq_version_string(), cq_status_string() and cq_cpu_features() are
 * static.
 *===----------------------------------------------------------------------===*/
#ifndef COMFYQUANT_C_API_H
#define COMFYQUANT_C_API_H

#include <stddef.h>
#include <stdint.h>

#include "comfyquant/version.h"

/* CQ_API marks the exported functions: libcomfyquant.so is built with hidden
 * visibility, so nothing else leaves it. Define CQ_STATIC when linking the
 * static libcomfyquant.a on a platform that needs import declarations. */
#ifndef CQ_API
#if defined(_WIN32) && !defined(CQ_STATIC)
#ifdef CQ_BUILDING_LIBRARY
#define CQ_API __declspec(dllexport)
#else
#define CQ_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define CQ_API __attribute__((visibility("default")))
#else
#define CQ_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions and errors ---------------------------------------------- */

typedef enum cq_status {
  CQ_OK = 0,
  /* A NULL handle or pointer, an index or expert out of range, an unknown
   * dtype, negative rows, a struct_size too small, a module of the wrong
   * kind for the call. */
  CQ_ERROR_INVALID_ARGUMENT = 1,
  /* cq_module_find / cq_session_module_find: no module of that name. */
  CQ_ERROR_NOT_FOUND = 2,
  /* A file cannot be opened, read or mapped; kernels.so cannot be loaded. */
  CQ_ERROR_IO = 3,
  /* A checkpoint, index or manifest breaks a format rule. */
  CQ_ERROR_INVALID_INPUT = 4,
  /* The checkpoint is not the one the artifact was compiled for. */
  CQ_ERROR_MISMATCH = 5,
  /* The CPU cannot run the variant, or the artifact lacks the dtype's or
   * the variant's kernels. */
  CQ_ERROR_UNSUPPORTED = 6,
  /* An output buffer is smaller than the result. */
  CQ_ERROR_BUFFER_TOO_SMALL = 7,
  /* The header's version is one the library cannot serve. */
  CQ_ERROR_VERSION = 8,
  CQ_ERROR_OUT_OF_MEMORY = 9,
  CQ_ERROR_INTERNAL = 10
} cq_status;

/* The library's version: CQ_VERSION as the library was built. */
CQ_API int cq_version(void);
/* "MAJOR.MINOR.PATCH" of the library. */
CQ_API const char *cq_version_string(void);
/* The name of a status ("CQ_ERROR_IO"), "CQ_UNKNOWN_STATUS" for any other
   value. Takes an int: a code from a newer library is not a valid cq_status
   value for this header. */
CQ_API const char *cq_status_string(int status);
/* The message of the last failed call on this thread ("" if none). */
CQ_API const char *cq_last_error(void);

/* ---- Checkpoints: modules, dequantization, reference forward ---------- */

typedef struct cq_checkpoint cq_checkpoint;

/* Module kinds. */
enum { CQ_KIND_LINEAR = 0, CQ_KIND_EMBEDDING = 1, CQ_KIND_MOE = 2 };

/* Activation / output element types. */
enum { CQ_DTYPE_F32 = 0, CQ_DTYPE_BF16 = 1, CQ_DTYPE_F16 = 2 };

typedef struct cq_module_info {
  size_t struct_size; /* set by the caller: sizeof(cq_module_info) */
  const char *name;   /* valid while the checkpoint is open */
  const char *format; /* comfy_quant format string */
  int kind;           /* CQ_KIND_* */
  int64_t out_features, in_features, experts; /* experts = 0 unless MoE */
  int64_t rotation_group; /* ConvRot Gr, 0 when none */
  int64_t group_size;     /* G of grouped formats, 0 otherwise */
  int full_precision_matrix_mult;
} cq_module_info;
#define CQ_MODULE_INFO_INIT {sizeof(cq_module_info), 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* Opens a .safetensors file or a *.safetensors.index.json and validates
 * every quantized module. *out is NULL on failure. */
CQ_API cq_status cq_checkpoint_open(const char *path, cq_checkpoint **out);
/* Closes a checkpoint (NULL is ignored). */
CQ_API void cq_checkpoint_close(cq_checkpoint *ckpt);

/* Warnings found while resolving the checkpoint (those comfyquant-translate
 * --inspect prints), e.g. a legacy layout accepted with a default. */
CQ_API cq_status cq_checkpoint_warning_count(const cq_checkpoint *ckpt,
                                             size_t *count);
CQ_API cq_status cq_checkpoint_warning_at(const cq_checkpoint *ckpt,
                                          size_t index, const char **text);

CQ_API cq_status cq_module_count(const cq_checkpoint *ckpt, size_t *count);
/* index < cq_module_count(); modules are sorted by name. */
CQ_API cq_status cq_module_info_at(const cq_checkpoint *ckpt, size_t index,
                                   cq_module_info *info);
/* The index of a module by name; CQ_ERROR_NOT_FOUND when there is none. */
CQ_API cq_status cq_module_find(const cq_checkpoint *ckpt, const char *name,
                                size_t *index);

/* Reference dequantization of rows [row_begin, row_end) of `expert` (0
 * unless MoE) into `out` (f32, row-major, in_features columns); `out_count`
 * is its capacity in floats. */
CQ_API cq_status cq_dequantize_rows(const cq_checkpoint *ckpt, size_t index,
                                    int64_t expert, int64_t row_begin,
                                    int64_t row_end, float *out,
                                    size_t out_count);

/* Reference forward (docs/CpuCodegen.md §1) of a Linear module, or of expert
 * `expert` of a MoE bank: y [m, out_features] = module(x [m, in_features]),
 * x and y row-major in `dtype`; `y_bytes` is y's capacity in bytes. */
CQ_API cq_status cq_reference_linear(const cq_checkpoint *ckpt, size_t index,
                                     int64_t expert, int dtype, const void *x,
                                     int64_t m, void *y, size_t y_bytes);

/* ---- Compiled kernels: sessions -------------------------------------- */

typedef struct cq_session cq_session;

/* A host scheduler: runs task(task_data, i) for every i in [0, count), on
 * any threads and in any order, and returns when all have returned. */
typedef void (*cq_task_fn)(void *task_data, int index);
typedef void (*cq_parallel_for_fn)(void *user_data, int count, cq_task_fn task,
                                   void *task_data);

typedef struct cq_session_options {
  size_t struct_size; /* set by the caller: sizeof(cq_session_options) */
  /* The checkpoint; NULL: the one the manifest names (next to the artifact
   * as it was when compiled, else its absolute path). */
  const char *checkpoint;
  /* "x86-64-v3", "avx512-vnni", "avx512-bf16" or "amx"; NULL:
   * $COMFYQUANT_CPU_VARIANT, else the best one this CPU supports. */
  const char *variant;
  /* Threads per call; 0: $COMFYQUANT_THREADS, else cq_available_cores(). */
  int threads;
  /* Optional: split calls with the host's scheduler instead of the
   * session's own worker pool. */
  cq_parallel_for_fn parallel_for;
  void *parallel_for_data;
} cq_session_options;
#define CQ_SESSION_OPTIONS_INIT {sizeof(cq_session_options), 0, 0, 0, 0, 0}

/* Opens an artifact directory and the checkpoint it was compiled for; a
 * checkpoint whose size or header hash differs from the manifest's is
 * refused (CQ_ERROR_MISMATCH). `options` may be NULL. Call it through the
 * cq_session_open macro, which passes this header's version. */
CQ_API cq_status cq_session_open_checked(int header_version,
                                         const char *artifact_dir,
                                         const cq_session_options *options,
                                         cq_session **out);
#define cq_session_open(artifact_dir, options, out)                            \
  cq_session_open_checked(CQ_VERSION, (artifact_dir), (options), (out))
/* Where a session runs (cq_session_open_backend). */
typedef struct cq_device_options {
  size_t struct_size; /* set by the caller: sizeof(cq_device_options) */
  /* "cpu" (also NULL) or "cuda". */
  const char *backend;
  /* cuda: the device ordinal (0: the first GPU). */
  int device;
  /* cuda: a CUstream to enqueue on; NULL: a stream the session owns. */
  void *cuda_stream;
} cq_device_options;
#define CQ_DEVICE_OPTIONS_INIT {sizeof(cq_device_options), 0, 0, 0}

/* cq_session_open on a backend and device; `device` NULL: the CPU. On
 * cuda, `options` keeps only its checkpoint; the kernel image is the
 * device's (a cubin of its exact architecture, else PTX the driver
 * compiles). Call it through the cq_session_open_backend macro. */
CQ_API cq_status cq_session_open_backend_checked(
    int header_version, const char *artifact_dir,
    const cq_session_options *options, const cq_device_options *device,
    cq_session **out);
#define cq_session_open_backend(artifact_dir, options, device, out)           \
  cq_session_open_backend_checked(CQ_VERSION, (artifact_dir), (options),      \
                                  (device), (out))
/* Closes a session and stops its workers (NULL is ignored). */
CQ_API void cq_session_close(cq_session *session);

/* The CPU variant the session runs; on cuda, the arch of the kernel image
 * it loaded ("sm_90a"). */
CQ_API cq_status cq_session_variant(const cq_session *session,
                                    const char **variant);
/* The variant whose kernel a call of `m` rows of module `index` in
 * `dtype` runs: cq_session_variant's, except on a CPU whose best variant's
 * entry is meant for more rows (the manifest's min_rows: 16 for AMX tiles),
 * where the variant below that runs such calls is named. The string lives
 * as long as the session. */
CQ_API cq_status cq_session_variant_for(const cq_session *session,
                                        size_t index, int dtype, int64_t m,
                                        const char **variant);
/* "cpu" or "cuda". */
CQ_API cq_status cq_session_backend(const cq_session *session,
                                    const char **backend);
/* cuda: the device and image ("0: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB),
 * sm_90a cubin"); "" on the CPU. */
CQ_API cq_status cq_session_device(const cq_session *session,
                                   const char **description);
/* The checkpoint file the session opened. */
CQ_API cq_status cq_session_checkpoint_path(const cq_session *session,
                                            const char **path);
/* Threads per call (>= 1); calls already running keep their count. */
CQ_API cq_status cq_session_set_threads(cq_session *session, int threads);
CQ_API cq_status cq_session_threads(const cq_session *session, int *threads);
/* Warnings of the session's set-up (e.g. an ignored $COMFYQUANT_THREADS). */
CQ_API cq_status cq_session_warning_count(const cq_session *session,
                                          size_t *count);
CQ_API cq_status cq_session_warning_at(const cq_session *session, size_t index,
                                       const char **text);

typedef struct cq_session_module_info {
  size_t struct_size; /* set by the caller: sizeof(cq_session_module_info) */
  const char *name;   /* valid while the session is open */
  const char *format; /* comfy_quant format string */
  int kind;           /* CQ_KIND_* */
  int64_t out_features, in_features, experts; /* experts = 0 unless MoE */
} cq_session_module_info;
#define CQ_SESSION_MODULE_INFO_INIT                                            \
  {sizeof(cq_session_module_info), 0, 0, 0, 0, 0, 0}

CQ_API cq_status cq_session_module_count(const cq_session *session,
                                         size_t *count);
CQ_API cq_status cq_session_module_info_at(const cq_session *session,
                                           size_t index,
                                           cq_session_module_info *info);
/* The index of a module by name; CQ_ERROR_NOT_FOUND when there is none. */
CQ_API cq_status cq_session_module_find(const cq_session *session,
                                        const char *name, size_t *index);

/* y [m, out_features] = module(x [m, in_features]) with the compiled
 * kernels, x and y contiguous row-major in `dtype`; `y_bytes` is y's
 * capacity in bytes. */
CQ_API cq_status cq_session_run(const cq_session *session, size_t index,
                                int dtype, const void *x, int64_t m, void *y,
                                size_t y_bytes);
/* The same for expert `expert` of a MoE bank. */
CQ_API cq_status cq_session_run_expert(const cq_session *session, size_t index,
                                       int64_t expert, int dtype,
                                       const void *x, int64_t m, void *y,
                                       size_t y_bytes);
/* Embedding rows: y [m, in_features] = dequantized rows indices[0..m). */
CQ_API cq_status cq_session_lookup(const cq_session *session, size_t index,
                                   int dtype, const int64_t *indices,
                                   int64_t m, void *y, size_t y_bytes);

/* cuda sessions: y [m, out_features] = module(x [m, in_features]) with x
 * and y DEVICE addresses (see "Host and device pointers" above), enqueued
 * on the session's stream; `expert` selects a MoE bank's slice (else 0). */
CQ_API cq_status cq_session_run_device(const cq_session *session,
                                       size_t index, int64_t expert,
                                       int dtype, uint64_t x, int64_t m,
                                       uint64_t y, size_t y_bytes);
/* Embedding rows with DEVICE int64 indices and y. */
CQ_API cq_status cq_session_lookup_device(const cq_session *session,
                                          size_t index, int dtype,
                                          uint64_t indices, int64_t m,
                                          uint64_t y, size_t y_bytes);
/* Waits for every call enqueued on a cuda session; CQ_OK at once on the
 * CPU. A kernel's failure on the device is reported here. */
CQ_API cq_status cq_session_synchronize(const cq_session *session);

/* ---- Quantizer: make a Comfy quant checkpoint --------------------------- */

/* What cq_quantize does (docs/Quantize.md): `format` is a comfyquant-quantize
 * --format name ("int8", "int8-convrot", "w4a4", "w4a8", "fp8-e4m3",
 * "nvfp4", "mixed", ...). NULL strings and 0 numbers take the tool's
 * defaults. The input is never modified; the output is written atomically
 * and an existing one is replaced only with `overwrite`. */
typedef struct cq_quantize_options {
  size_t struct_size;        /* set by the caller: sizeof(cq_quantize_options) */
  const char *format;        /* required */
  const char *architecture;  /* NULL: detected from tensor names */
  const char *policy_file;   /* NULL, or an extra policy JSON file */
  uint64_t max_memory;       /* bytes of working memory; 0: unbounded */
  int validate;              /* measure each layer; over its bound: kept */
  int strict;                /* over bound / non-finite: an error */
  int overwrite;
  int threads;               /* 0: every available core */
  const char *optimizer;     /* NULL or "none" | "mse" */
  const char *report_json;   /* NULL, or a file for the JSON report */
} cq_quantize_options;
#define CQ_QUANTIZE_OPTIONS_INIT \
  {sizeof(cq_quantize_options), NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL}

/* Quantizes `input` (.safetensors, *.index.json or a directory) to
 * `output`; *quantized (if not NULL) = the number of layers quantized. */
CQ_API cq_status cq_quantize(const char *input, const char *output,
                             const cq_quantize_options *options,
                             int *quantized);

/* ---- This machine ----------------------------------------------------- */

/* This CPU's features (space-separated). */
CQ_API const char *cq_cpu_features(void);
/* *supported = whether this CPU can run `variant`. */
CQ_API cq_status cq_cpu_supports(const char *variant, int *supported);
/* CPUs this process may use: its affinity mask, capped by a cgroup CPU
 * quota (v2 cpu.max, v1 cpu.cfs_quota_us); at least 1. */
CQ_API int cq_available_cores(void);
/* CUDA devices of this machine: *count >= 1, or CQ_ERROR_UNSUPPORTED with
 * the reason in cq_last_error() (no driver, no device). */
CQ_API cq_status cq_cuda_device_count(int *count);

#ifdef __cplusplus
}
#endif

#endif /* COMFYQUANT_C_API_H */
