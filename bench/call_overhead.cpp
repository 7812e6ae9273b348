//===- call_overhead.cpp - per-call cost of Session::run at M = 1 ---------===//
//
//   call_overhead ARTIFACT_DIR CHECKPOINT MODULE [ITERATIONS]
//
// Runs MODULE of a compiled artifact on one f32 activation row, ITERATIONS
// times (default 20000) after a warm-up, on 1 and on 2 threads, and prints
// the mean and the median of 20 batches in microseconds per call. For a small
// module the kernel itself takes a few microseconds, so the numbers are the
// runtime's per-call overhead (argument set-up, thread hand-off). A benchmark,
// not a test: built with the runtime, run by hand (bench/results.md).
// Uses only the C++ Session API, so the same file builds against older
// versions of the runtime for before/after comparisons.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

namespace rt = comfyquant::rt;

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: call_overhead ARTIFACT_DIR CHECKPOINT MODULE "
                 "[ITERATIONS]\n");
    return 2;
  }
  const long iterations = argc > 4 ? std::atol(argv[4]) : 20000;
  if (iterations < 20) {
    std::fprintf(stderr, "call_overhead: ITERATIONS must be >= 20\n");
    return 2;
  }
  try {
    rt::SessionOptions options;
    options.checkpoint = argv[2];
    auto session = rt::Session::open(argv[1], options);
    int64_t index = session->findModule(argv[3]);
    if (index < 0) {
      std::fprintf(stderr, "call_overhead: no module '%s'\n", argv[3]);
      return 1;
    }
    const rt::ManifestModule &m = session->module(static_cast<size_t>(index));
    std::vector<float> x(static_cast<size_t>(m.inFeatures), 0.5f);
    std::vector<float> y(static_cast<size_t>(m.outFeatures));
    std::printf("module %s %s %lldx%lld M=1 f32 variant %s\n", m.name.c_str(),
                m.format.c_str(), static_cast<long long>(m.outFeatures),
                static_cast<long long>(m.inFeatures),
                session->variant().c_str());
    for (int threads : {1, 2}) {
      session->setThreads(threads);
      for (long i = 0; i < iterations / 10; ++i) // warm-up
        session->run(static_cast<size_t>(index), rt::DType::F32, x.data(), 1,
                     y.data());
      const long batch = iterations / 20;
      std::vector<double> perCall;
      double total = 0;
      for (int b = 0; b < 20; ++b) {
        auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < batch; ++i)
          session->run(static_cast<size_t>(index), rt::DType::F32, x.data(),
                       1, y.data());
        std::chrono::duration<double, std::micro> dt =
            std::chrono::steady_clock::now() - t0;
        perCall.push_back(dt.count() / batch);
        total += dt.count();
      }
      std::sort(perCall.begin(), perCall.end());
      std::printf("threads %d: mean %.2f us/call, median %.2f us/call "
                  "(%ld calls)\n",
                  threads, total / (batch * 20), perCall[10], batch * 20);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "call_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
