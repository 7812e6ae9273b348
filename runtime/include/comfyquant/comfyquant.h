/*===- comfyquant.h - C API of the comfyquant runtime -------------*- C -*-===*
 *
 * A stable C ABI for embedding: open a Comfy quant checkpoint (mmap, zero
 * copy), list its validated quantized modules and dequantize them with the
 * reference path; run the reference forward; and load an artifact compiled
 * by comfyquant-compile (kernels.so + manifest.json) to run modules with the
 * compiled CPU kernels on the mapped checkpoint. Every function returns 0 / a valid handle on success; on
 * failure it returns non-zero / NULL and cq_last_error() describes it (the
 * message names the file, the module or tensor, and the broken rule).
 *===----------------------------------------------------------------------===*/
#ifndef COMFYQUANT_C_API_H
#define COMFYQUANT_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cq_checkpoint cq_checkpoint;

/* Module kinds. */
enum { CQ_KIND_LINEAR = 0, CQ_KIND_EMBEDDING = 1, CQ_KIND_MOE = 2 };

typedef struct cq_module_info {
  const char *name;   /* valid while the checkpoint is open */
  const char *format; /* comfy_quant format string */
  int kind;           /* CQ_KIND_* */
  int64_t out_features, in_features, experts; /* experts = 0 unless MoE */
  int64_t rotation_group; /* ConvRot Gr, 0 when none */
  int64_t group_size;     /* G of grouped formats, 0 otherwise */
  int full_precision_matrix_mult;
} cq_module_info;

/* Thread-local description of the last failure ("" if none). */
const char *cq_last_error(void);

/* Opens a .safetensors file or a *.safetensors.index.json. */
cq_checkpoint *cq_checkpoint_open(const char *path);
void cq_checkpoint_close(cq_checkpoint *ckpt);

size_t cq_module_count(const cq_checkpoint *ckpt);
/* index < cq_module_count(); modules are sorted by name. */
int cq_module_info_at(const cq_checkpoint *ckpt, size_t index,
                      cq_module_info *info);
/* Index of a module by name, or -1. */
int64_t cq_module_find(const cq_checkpoint *ckpt, const char *name);

/* Reference dequantization of rows [row_begin, row_end) of `expert` into
 * `out` (f32, row-major, in_features columns). `out_count` is the capacity in
 * floats. */
int cq_dequantize_rows(const cq_checkpoint *ckpt, size_t index, int64_t expert,
                       int64_t row_begin, int64_t row_end, float *out,
                       size_t out_count);

/* Activation / output element types. */
enum { CQ_DTYPE_F32 = 0, CQ_DTYPE_BF16 = 1, CQ_DTYPE_F16 = 2 };

/* Reference forward (docs/CpuCodegen.md §1) of a Linear module, or of expert
 * `expert` of a MoE bank: y [m, out_features] = module(x [m, in_features]),
 * x and y row-major in `dtype`. */
int cq_reference_linear(const cq_checkpoint *ckpt, size_t index,
                        int64_t expert, int dtype, const void *x, int64_t m,
                        void *y);

/* ---- Compiled kernels -------------------------------------------------- */

typedef struct cq_session cq_session;

typedef struct cq_session_module_info {
  const char *name;   /* valid while the session is open */
  const char *format; /* comfy_quant format string */
  int kind;           /* CQ_KIND_* */
  int64_t out_features, in_features, experts; /* experts = 0 unless MoE */
} cq_session_module_info;

/* Opens an artifact directory and the checkpoint it was compiled for
 * (`checkpoint` NULL: the path in the manifest). A checkpoint whose size or
 * header hash differs from the manifest's is refused. `variant` NULL picks
 * the best CPU variant this machine supports ("x86-64-v3", "avx512-vnni",
 * "amx"; $COMFYQUANT_CPU_VARIANT overrides); `threads` 0 uses
 * $COMFYQUANT_THREADS or all hardware threads. */
cq_session *cq_session_open(const char *artifact_dir, const char *checkpoint,
                            const char *variant, int threads);
void cq_session_close(cq_session *session);

/* The CPU variant the session runs. */
const char *cq_session_variant(const cq_session *session);
int cq_session_set_threads(cq_session *session, int threads);

size_t cq_session_module_count(const cq_session *session);
int cq_session_module_info_at(const cq_session *session, size_t index,
                              cq_session_module_info *info);
/* Index of a module by name, or -1. */
int64_t cq_session_module_find(const cq_session *session, const char *name);

/* y [m, out_features] = module(x [m, in_features]) with the compiled
 * kernels, x and y row-major in `dtype`. */
int cq_session_run(const cq_session *session, size_t index, int dtype,
                   const void *x, int64_t m, void *y);
/* The same for expert `expert` of a MoE bank. */
int cq_session_run_expert(const cq_session *session, size_t index,
                          int64_t expert, int dtype, const void *x, int64_t m,
                          void *y);
/* Embedding rows: y [m, in_features] = dequantized rows indices[0..m). */
int cq_session_lookup(const cq_session *session, size_t index, int dtype,
                      const int64_t *indices, int64_t m, void *y);

/* This CPU's features (space-separated) and whether it can run `variant`. */
const char *cq_cpu_features(void);
int cq_cpu_supports(const char *variant);

#ifdef __cplusplus
}
#endif

#endif /* COMFYQUANT_C_API_H */
