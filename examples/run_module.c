/*===- run_module.c - run a compiled module through the C API --------------===*
 *
 *   run_module ARTIFACT_DIR CHECKPOINT|- [MODULE|-] [M] [f32|bf16|f16] [THREADS]
 *
 * Opens the artifact written by comfyquant-compile together with its
 * checkpoint (the runtime refuses a different file; "-": the one the
 * manifest names, found next to the artifact or at its absolute path), runs
 * MODULE (default:
 * every module) on a deterministic activation x [M, K] (default M = 7) with
 * the compiled kernels of the best CPU variant ($COMFYQUANT_CPU_VARIANT
 * overrides), and compares y with the reference forward of the same C API.
 * Prints one line per module; exit code 0 when every module agrees within
 * the tolerance (f32: 1e-4, bf16/f16: 1e-2 of max|y_ref|; integer formats
 * are expected to agree exactly), 1 otherwise. Every MoE expert is run.
 * Every C API call is checked: a failure prints its status name and
 * cq_last_error().
 *===----------------------------------------------------------------------===*/
/* clock_gettime under -std=c99. */
#define _POSIX_C_SOURCE 199309L

#include "comfyquant/comfyquant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static float bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static float half_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F,
           man = h & 0x3FF;
  if (exp == 0x1F)
    return bits_to_f32(sign | 0x7F800000u | (man << 13));
  if (exp == 0) /* zero or subnormal: man * 2^-24 */
    return (sign ? -1.0f : 1.0f) * (float)man * 5.9604644775390625e-8f;
  return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* Element i of a row-major buffer of `dtype` as f32. */
static float load(const void *p, int dtype, size_t i) {
  if (dtype == CQ_DTYPE_F32)
    return ((const float *)p)[i];
  uint16_t b = ((const uint16_t *)p)[i];
  return dtype == CQ_DTYPE_BF16 ? bits_to_f32((uint32_t)b << 16)
                                : half_to_f32(b);
}

/* Element i := v (truncated to bf16 / f16; only the check's self-test
 * writes outputs). */
static void store(void *p, int dtype, size_t i, double value) {
  float v = (float)value;
  uint32_t u;
  memcpy(&u, &v, 4);
  if (dtype == CQ_DTYPE_F32) {
    ((float *)p)[i] = v;
  } else if (dtype == CQ_DTYPE_BF16) {
    ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
  } else {
    uint16_t h = (uint16_t)((u >> 16) & 0x8000);
    int e = (int)((u >> 23) & 0xFF) - 127;
    if (isnan(v))
      h = 0x7E00;
    else if (e > 15)
      h |= 0x7C00; /* inf */
    else if (e >= -14)
      h |= (uint16_t)(((e + 15) << 10) | ((u >> 13) & 0x3FF));
    ((uint16_t *)p)[i] = h; /* smaller magnitudes: signed zero */
  }
}

/* A deterministic activation: a small LCG in [-2, 2), stored as `dtype`
 * (bf16/f16 by truncating an f32 that is exact in both). */
static void fill(void *p, int dtype, size_t n) {
  uint32_t s = 12345u;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    /* 8 fraction bits: exact in bf16 and f16. */
    float v = (float)((int)(s >> 23) - 256) / 128.0f;
    if (dtype == CQ_DTYPE_F32) {
      ((float *)p)[i] = v;
    } else if (dtype == CQ_DTYPE_BF16) {
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    } else { /* f16 of a value with |v| <= 2 and 8 fraction bits */
      uint32_t u;
      memcpy(&u, &v, 4);
      uint16_t h = (uint16_t)((u >> 16) & 0x8000);
      if (v != 0.0f) {
        int e = (int)((u >> 23) & 0xFF) - 127;
        h |= (uint16_t)(((e + 15) << 10) | ((u >> 13) & 0x3FF));
      }
      ((uint16_t *)p)[i] = h;
    }
  }
}

/* Prints a failed call's status and message; returns 1. */
static int report(const char *what, cq_status st) {
  fprintf(stderr, "run_module: %s%s%s (%s)\n", what ? what : "",
          what ? ": " : "", cq_last_error(), cq_status_string(st));
  return 1;
}

/* Runs expert `expert` (0 unless MoE) of module `index` and compares it with
 * the reference path. */
static int run_one(cq_session *s, cq_checkpoint *ck, size_t index,
                   int64_t expert, int64_t m, int dtype) {
  cq_session_module_info info = CQ_SESSION_MODULE_INFO_INIT;
  cq_status st = cq_session_module_info_at(s, index, &info);
  if (st)
    return report(NULL, st);
  size_t ref_index;
  st = cq_module_find(ck, info.name, &ref_index);
  if (st)
    return report(info.name, st);
  size_t esize = dtype == CQ_DTYPE_F32 ? 4 : 2;
  int embedding = info.kind == CQ_KIND_EMBEDDING;
  int64_t in_cols = embedding ? 0 : info.in_features;
  int64_t out_cols = embedding ? info.in_features : info.out_features;
  size_t y_bytes = (size_t)(m * out_cols) * esize;
  void *x = malloc((size_t)(m * (in_cols ? in_cols : 1)) * esize);
  void *y = malloc(y_bytes);
  float *ref = malloc((size_t)(m * out_cols) * sizeof(float));
  void *yref = malloc(y_bytes);
  int64_t *idx = malloc((size_t)m * sizeof(int64_t));
  int rc = 0;
  if (embedding) {
    for (int64_t i = 0; i < m; ++i)
      idx[i] = (i * 7 + 3) % info.out_features;
    st = cq_session_lookup(s, index, dtype, idx, m, y, y_bytes);
    for (int64_t i = 0; !st && i < m; ++i)
      st = cq_dequantize_rows(ck, ref_index, 0, idx[i], idx[i] + 1,
                              ref + i * out_cols, (size_t)out_cols);
  } else {
    fill(x, dtype, (size_t)(m * in_cols));
    st = cq_session_run_expert(s, index, expert, dtype, x, m, y, y_bytes);
    if (!st)
      st = cq_reference_linear(ck, ref_index, expert, dtype, x, m, yref,
                               y_bytes);
    for (int64_t i = 0; !st && i < m * out_cols; ++i)
      ref[i] = load(yref, dtype, (size_t)i);
  }
  if (st) {
    rc = report(info.name, st);
    goto done;
  }
  {
    /* Run time of the compiled module: mean of a few warm calls. */
    struct timespec t0, t1;
    const int reps = 10;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps && !st; ++r)
      st = embedding ? cq_session_lookup(s, index, dtype, idx, m, y, y_bytes)
                     : cq_session_run_expert(s, index, expert, dtype, x, m, y,
                                             y_bytes);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st) {
      rc = report(info.name, st);
      goto done;
    }
    double run_us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
                    1e3 / reps;
    /* The check's own test (test/Artifact/run-module-mutations.test):
       $RUN_MODULE_MUTATE doctors the compiled output before it is compared:
       "zero-channel" zeroes the last channel, "scale-channel" multiplies it
       by 1.1, "nan" puts a NaN in its first row. Each must be caught. */
    const char *mutate = getenv("RUN_MODULE_MUTATE");
    if (mutate && out_cols > 0 && m > 0) {
      for (int64_t i = out_cols - 1; i < m * out_cols; i += out_cols) {
        double v = load(y, dtype, (size_t)i);
        if (!strcmp(mutate, "zero-channel"))
          store(y, dtype, (size_t)i, 0.0);
        else if (!strcmp(mutate, "scale-channel"))
          store(y, dtype, (size_t)i, v * 1.1);
        else if (!strcmp(mutate, "nan") && i == out_cols - 1)
          store(y, dtype, (size_t)i, NAN);
      }
    }
    /* Each output channel (column of y) is held to its own scale: the
       relative bound times the channel's largest |y_ref|, not less than
       2^-10 of the module's (so a channel of zeros is not divided by zero).
       A channel that is all zero, or 10 % off, fails even where another
       channel dominates |y|. NaN must meet NaN; +-inf must meet itself. */
    double max_ref = 0, max_err = 0;
    int64_t exact = 0, n = m * out_cols, bad = 0, worst_col = -1;
    double worst_ratio = 0;
    double *col_ref = calloc((size_t)(out_cols > 0 ? out_cols : 1), sizeof *col_ref);
    if (!col_ref) {
      fprintf(stderr, "run_module: out of memory\n");
      rc = 1;
      goto done;
    }
    for (int64_t i = 0; i < n; ++i) {
      double r = ref[i];
      if (isfinite(r)) {
        col_ref[i % out_cols] = fmax(col_ref[i % out_cols], fabs(r));
        max_ref = fmax(max_ref, fabs(r));
      }
    }
    const double rel = dtype == CQ_DTYPE_F32 ? 1e-4 : 1e-2;
    const double floor_ref = ldexp(fmax(1.0, max_ref), -10);
    for (int64_t i = 0; i < n; ++i) {
      double r = ref[i], v = load(y, dtype, (size_t)i);
      double err = fabs(v - r);
      if (isnan(r) || isnan(v))
        err = isnan(r) && isnan(v) ? 0 : INFINITY;
      else if (isinf(r) || isinf(v))
        err = r == v ? 0 : INFINITY;
      double tol = rel * fmax(col_ref[i % out_cols], floor_ref);
      if (err > tol) {
        ++bad;
        if (err / tol > worst_ratio) {
          worst_ratio = err / tol;
          worst_col = i % out_cols;
        }
      }
      max_err = fmax(max_err, err);
      exact += v == r || (isnan(r) && isnan(v));
    }
    free(col_ref);
    int ok = bad == 0;
    if (!ok)
      fprintf(stderr,
              "run_module: %s: %lld elements out of bound; worst: channel "
              "%lld at %.3g x its bound\n",
              info.name, (long long)bad, (long long)worst_col, worst_ratio);
    char expert_text[32] = "";
    if (info.kind == CQ_KIND_MOE)
      snprintf(expert_text, sizeof expert_text, " expert=%lld",
               (long long)expert);
    printf("%s%s %s %s %lldx%lld M=%lld: max_abs_err=%.3g (max|y|=%.3g) "
           "exact=%lld/%lld %s run_us=%.1f\n",
           info.name, expert_text, info.format,
           dtype == CQ_DTYPE_F32 ? "f32" : dtype == CQ_DTYPE_BF16 ? "bf16" : "f16",
           (long long)info.out_features, (long long)info.in_features,
           (long long)m, max_err, max_ref, (long long)exact, (long long)n,
           ok ? "OK" : "MISMATCH", run_us);
    rc = ok ? 0 : 1;
  }
done:
  free(x);
  free(y);
  free(ref);
  free(yref);
  free(idx);
  return rc;
}

/* Every expert of a MoE bank, else the module once. */
static int run_module(cq_session *s, cq_checkpoint *ck, size_t index,
                      int64_t m, int dtype) {
  cq_session_module_info info = CQ_SESSION_MODULE_INFO_INIT;
  cq_status st = cq_session_module_info_at(s, index, &info);
  if (st)
    return report(NULL, st);
  int64_t experts = info.kind == CQ_KIND_MOE ? info.experts : 1;
  int rc = 0;
  for (int64_t e = 0; e < experts; ++e)
    rc |= run_one(s, ck, index, e, m, dtype);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: run_module ARTIFACT_DIR CHECKPOINT|- [MODULE|-] [M] "
                    "[f32|bf16|f16] [THREADS]\n");
    return 2;
  }
  const char *module = argc > 3 ? argv[3] : "-";
  int64_t m = argc > 4 ? atoll(argv[4]) : 7;
  int dtype = CQ_DTYPE_F32;
  if (argc > 5)
    dtype = !strcmp(argv[5], "bf16") ? CQ_DTYPE_BF16
            : !strcmp(argv[5], "f16") ? CQ_DTYPE_F16 : CQ_DTYPE_F32;
  int threads = argc > 6 ? atoi(argv[6]) : 0;

  cq_session_options options = CQ_SESSION_OPTIONS_INIT;
  options.checkpoint = strcmp(argv[2], "-") ? argv[2] : NULL;
  options.threads = threads;
  cq_session *s;
  cq_status st = cq_session_open(argv[1], &options, &s);
  if (st)
    return report(NULL, st);
  size_t nwarn = 0;
  cq_session_warning_count(s, &nwarn);
  for (size_t i = 0; i < nwarn; ++i) {
    const char *w;
    if (!cq_session_warning_at(s, i, &w))
      fprintf(stderr, "run_module: warning: %s\n", w);
  }
  const char *ckpt_path;
  st = cq_session_checkpoint_path(s, &ckpt_path);
  if (st) {
    cq_session_close(s);
    return report(NULL, st);
  }
  cq_checkpoint *ck;
  st = cq_checkpoint_open(ckpt_path, &ck);
  if (st) {
    cq_session_close(s);
    return report(NULL, st);
  }
  const char *variant;
  st = cq_session_variant(s, &variant);
  if (st) {
    cq_checkpoint_close(ck);
    cq_session_close(s);
    return report(NULL, st);
  }
  printf("variant %s\n", variant);
  size_t count = 0;
  int rc = 0;
  if (strcmp(module, "-") != 0) {
    size_t i;
    st = cq_session_module_find(s, module, &i);
    if (st)
      rc = report(NULL, st);
    else
      rc = run_module(s, ck, i, m, dtype);
  } else if ((st = cq_session_module_count(s, &count))) {
    rc = report(NULL, st);
  } else {
    for (size_t i = 0; i < count; ++i)
      rc |= run_module(s, ck, i, m, dtype);
  }
  cq_checkpoint_close(ck);
  cq_session_close(s);
  return rc;
}
