/*===- FakeHost.c - a CUDA host library for tests -------------------------===*
 *
 * Stands in for an artifact's cuda/host.so (plain C, only libc): a linear
 * entry with the host-entry convention, args = {&launcher, &x, &y, &w0,
 * &w1, &workspace}, that launches kernel 0 with (x, y, w0, workspace, M)
 * and, since the fake driver's device memory is host memory, computes
 * y[i][j] = x[i][0] + w0[j][0] (w0 int8 [N, K], x and y f32) itself.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>

typedef struct cq_gpu_launcher {
  void *self;
  void (*launch)(void *self, int32_t kernel, int64_t grid_x, int64_t grid_y,
                 int64_t grid_z, int64_t block_x, int64_t block_y,
                 int64_t block_z, int64_t dynamic_smem_bytes, void **params,
                 int32_t num_params);
} cq_gpu_launcher;

typedef struct memref2 {
  int64_t allocated, aligned, offset, sizes[2], strides[2];
} memref2;
typedef struct memref1 {
  int64_t allocated, aligned, offset, size, stride;
} memref1;

__attribute__((visibility("default"))) void fake_linear_f32(void **args) {
  const cq_gpu_launcher *launcher = *(const cq_gpu_launcher *const *)args[0];
  const memref2 *x = (const memref2 *)args[1];
  const memref2 *y = (const memref2 *)args[2];
  const memref2 *w = (const memref2 *)args[3];
  const memref1 *ws = (const memref1 *)args[5];
  int64_t xp = x->aligned, yp = y->aligned, wp = w->aligned, wsp = ws->aligned,
          m = x->sizes[0];
  void *params[] = {&xp, &yp, &wp, &wsp, &m};
  launcher->launch(launcher->self, 0, (m + 15) / 16, 1, 1, 128, 1, 1, 0, params,
                   5);
  const float *xf = (const float *)(intptr_t)xp;
  float *yf = (float *)(intptr_t)yp;
  const int8_t *wi = (const int8_t *)(intptr_t)wp;
  const int64_t n = y->sizes[1], k = x->sizes[1];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      yf[i * n + j] = xf[i * k] + (float)wi[j * w->strides[0]];
}
