/*===- comfyquant.h - C API of the comfyquant runtime -------------*- C -*-===*
 *
 * A stable C ABI for embedding: open a Comfy quant checkpoint (mmap, zero
 * copy), list its validated quantized modules and dequantize them with the
 * reference path. Every function returns 0 / a valid handle on success; on
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

#ifdef __cplusplus
}
#endif

#endif /* COMFYQUANT_C_API_H */
