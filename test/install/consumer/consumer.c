/*===- consumer.c - a C program that embeds an installed comfyquant ------===*
 *
 *   consumer --version-only
 *   consumer CHECKPOINT [ARTIFACT_DIR]
 *
 * Built against an installed prefix (CMake package or pkg-config) or a
 * parent project. Checks the version, lists the checkpoint's modules, runs
 * the reference forward of every Linear module, checks error statuses, and
 * with an artifact runs every Linear module with the compiled kernels on the
 * session's worker pool and on a host scheduler callback: both must equal
 * each other bit for bit and the reference within 1e-3 relative, and stay
 * so while two threads run the modules on one session and a third changes
 * its thread count (cq_session_set_threads during runs). Prints
 * "consumer: OK" and exits 0, else names the failed step and exits 1.
 *===----------------------------------------------------------------------===*/
#include <comfyquant/comfyquant.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "consumer: FAILED %s:%d: ", __FILE__, __LINE__);         \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, " (last error: %s)\n", cq_last_error());                 \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* A host scheduler: runs the parts in reverse order on this thread. */
static int host_calls = 0;
static void serial_parallel_for(void *user, int count, cq_task_fn task,
                                void *task_data) {
  int *calls = (int *)user;
  ++*calls;
  for (int i = count - 1; i >= 0; --i)
    task(task_data, i);
}

/* Runs module `index` `reps` times on a shared session and compares every
 * result with `expected`. */
typedef struct {
  cq_session *session;
  size_t index;
  const float *x, *expected;
  int64_t m, n;
  int reps, mismatches, errors;
} runner;

static void *run_repeatedly(void *arg) {
  runner *r = arg;
  size_t bytes = sizeof(float) * (size_t)(r->m * r->n);
  float *y = malloc(bytes);
  for (int i = 0; i < r->reps; ++i) {
    if (cq_session_run(r->session, r->index, CQ_DTYPE_F32, r->x, r->m, y,
                       bytes) != CQ_OK)
      ++r->errors;
    else if (memcmp(y, r->expected, bytes) != 0)
      ++r->mismatches;
  }
  free(y);
  return NULL;
}

static void run_artifact(const char *artifact, cq_checkpoint *ck) {
  cq_session *pool = NULL, *host = NULL;
  cq_session_options o = CQ_SESSION_OPTIONS_INIT;
  o.threads = 2;
  cq_status st = cq_session_open(artifact, &o, &pool);
  CHECK(st == CQ_OK, "cq_session_open: %s", cq_status_string(st));
  o.parallel_for = serial_parallel_for;
  o.parallel_for_data = &host_calls;
  st = cq_session_open(artifact, &o, &host);
  CHECK(st == CQ_OK, "cq_session_open (host scheduler): %s",
        cq_status_string(st));
  if (!pool || !host) {
    cq_session_close(pool);
    cq_session_close(host);
    return;
  }
  size_t count = 0;
  CHECK(cq_session_module_count(pool, &count) == CQ_OK && count > 0,
        "no modules in the artifact");
  int ran = 0;
  for (size_t i = 0; i < count; ++i) {
    cq_session_module_info info = CQ_SESSION_MODULE_INFO_INIT;
    CHECK(cq_session_module_info_at(pool, i, &info) == CQ_OK, "module info");
    if (info.kind != CQ_KIND_LINEAR)
      continue;
    size_t ref;
    CHECK(cq_module_find(ck, info.name, &ref) == CQ_OK, "find %s", info.name);
    const int64_t m = 3, K = info.in_features, N = info.out_features;
    float *x = malloc(sizeof(float) * (size_t)(m * K));
    float *y1 = malloc(sizeof(float) * (size_t)(m * N));
    float *y2 = malloc(sizeof(float) * (size_t)(m * N));
    float *yr = malloc(sizeof(float) * (size_t)(m * N));
    const size_t y_bytes = sizeof(float) * (size_t)(m * N);
    for (int64_t j = 0; j < m * K; ++j)
      x[j] = (float)((j * 37) % 19 - 9) / 8.0f;
    CHECK(cq_session_run(pool, i, CQ_DTYPE_F32, x, m, y1, y_bytes) == CQ_OK,
          "run %s", info.name);
    CHECK(cq_session_run(host, i, CQ_DTYPE_F32, x, m, y2, y_bytes) == CQ_OK,
          "run %s (host scheduler)", info.name);
    CHECK(cq_reference_linear(ck, ref, 0, CQ_DTYPE_F32, x, m, yr, y_bytes) ==
              CQ_OK,
          "reference %s", info.name);
    CHECK(memcmp(y1, y2, y_bytes) == 0,
          "%s: pool and host scheduler results differ", info.name);
    double max_ref = 0, max_err = 0;
    for (int64_t j = 0; j < m * N; ++j) {
      double e = fabs((double)y1[j] - yr[j]);
      if (isnan(e))
        e = INFINITY;
      max_err = fmax(max_err, e);
      max_ref = fmax(max_ref, fabs(yr[j]));
    }
    CHECK(max_err <= 1e-3 * fmax(1.0, max_ref), "%s: max error %g (max|y| %g)",
          info.name, max_err, max_ref);
    /* A y buffer one byte short is refused before anything is written. */
    CHECK(cq_session_run(pool, i, CQ_DTYPE_F32, x, m, y1, y_bytes - 1) ==
              CQ_ERROR_BUFFER_TOO_SMALL,
          "short y accepted");
    /* Concurrent runs on one session while its thread count changes. */
    runner r[2];
    pthread_t t[2];
    for (int k = 0; k < 2; ++k) {
      runner init = {pool, i, x, y2, m, N, 200, 0, 0};
      r[k] = init;
      CHECK(pthread_create(&t[k], NULL, run_repeatedly, &r[k]) == 0,
            "pthread_create");
    }
    for (int k = 0; k < 300; ++k)
      CHECK(cq_session_set_threads(pool, 1 + k % 3) == CQ_OK, "set_threads");
    for (int k = 0; k < 2; ++k) {
      pthread_join(t[k], NULL);
      CHECK(r[k].errors == 0 && r[k].mismatches == 0,
            "%s: concurrent runs: %d errors, %d differing results", info.name,
            r[k].errors, r[k].mismatches);
    }
    CHECK(cq_session_set_threads(pool, 2) == CQ_OK, "set_threads");
    ++ran;
    free(x);
    free(y1);
    free(y2);
    free(yr);
  }
  CHECK(ran > 0, "no Linear module ran");
  CHECK(host_calls > 0, "the host scheduler was never called");
  printf("consumer: %d modules run with the compiled kernels\n", ran);
  cq_session_close(pool);
  cq_session_close(host);
}

int main(int argc, char **argv) {
  CHECK(cq_version() == CQ_VERSION, "library %d, header %d", cq_version(),
        CQ_VERSION);
  CHECK(strcmp(cq_version_string(), CQ_VERSION_STRING) == 0, "version string");
  if (argc == 2 && strcmp(argv[1], "--version-only") == 0) {
    printf("consumer: comfyquant %s\n", cq_version_string());
    return failures ? 1 : 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: consumer CHECKPOINT [ARTIFACT_DIR]\n");
    return 2;
  }
  cq_checkpoint *ck = NULL;
  cq_status st = cq_checkpoint_open(argv[1], &ck);
  CHECK(st == CQ_OK, "cq_checkpoint_open(%s): %s", argv[1],
        cq_status_string(st));
  if (!ck)
    return 1;
  size_t count = 0, linear = 0;
  CHECK(cq_module_count(ck, &count) == CQ_OK && count > 0, "no modules");
  for (size_t i = 0; i < count; ++i) {
    cq_module_info info = CQ_MODULE_INFO_INIT;
    CHECK(cq_module_info_at(ck, i, &info) == CQ_OK, "module %zu", i);
    if (info.kind != CQ_KIND_LINEAR)
      continue;
    const int64_t m = 2;
    size_t n = (size_t)(m * info.in_features), out = (size_t)(m * info.out_features);
    float *x = calloc(n, sizeof(float)), *y = malloc(out * sizeof(float));
    for (size_t j = 0; j < n; ++j)
      x[j] = (float)(j % 7) * 0.25f;
    st = cq_reference_linear(ck, i, 0, CQ_DTYPE_F32, x, m, y, out * sizeof(float));
    CHECK(st == CQ_OK, "reference %s: %s", info.name, cq_status_string(st));
    int finite = 1;
    for (size_t j = 0; j < out; ++j)
      finite &= isfinite(y[j]) != 0;
    CHECK(finite, "%s: non-finite reference output", info.name);
    printf("consumer: %s %s %lldx%lld\n", info.name, info.format,
           (long long)info.out_features, (long long)info.in_features);
    ++linear;
    free(x);
    free(y);
  }
  CHECK(linear > 0, "no Linear module");
  size_t index = 0;
  st = cq_module_find(ck, "no.such.module", &index);
  CHECK(st == CQ_ERROR_NOT_FOUND, "find of a missing module: %s",
        cq_status_string(st));
  CHECK(strstr(cq_last_error(), "no.such.module") != NULL,
        "error text names the module");
  cq_checkpoint *missing = NULL;
  st = cq_checkpoint_open("/nonexistent/model.safetensors", &missing);
  CHECK(st == CQ_ERROR_IO && missing == NULL, "open of a missing file: %s",
        cq_status_string(st));
  if (argc > 2)
    run_artifact(argv[2], ck);
  cq_checkpoint_close(ck);
  if (failures)
    return 1;
  printf("consumer: OK\n");
  return 0;
}
