//===- ThreadPoolTest.cpp - worker pool and usable core count -------------===//
#include "comfyquant/runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sched.h>

using namespace comfyquant::rt;

namespace {

TEST(ThreadPool, CgroupQuotas) {
  EXPECT_EQ(cpuQuotaFromCpuMax("max 100000\n"), 0);
  EXPECT_EQ(cpuQuotaFromCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(cpuQuotaFromCpuMax("150000 100000"), 2); // rounded up
  EXPECT_EQ(cpuQuotaFromCpuMax("50000 100000"), 1);
  EXPECT_EQ(cpuQuotaFromCpuMax(""), 0);
  EXPECT_EQ(cpuQuotaFromCpuMax("12x 100000"), 0);
  EXPECT_EQ(cpuQuotaFromCfs(-1, 100000), 0);
  EXPECT_EQ(cpuQuotaFromCfs(400000, 100000), 4);
  EXPECT_EQ(cpuQuotaFromCfs(1000, 100000), 1);
}

TEST(ThreadPool, CoresFollowTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_GE(availableCores(), 1);
  EXPECT_LE(availableCores(), CPU_COUNT(&all));
  // Affinity is per thread: restrict a fresh thread to its first CPU.
  int seen = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &all)) {
        CPU_SET(c, &one);
        break;
      }
    if (sched_setaffinity(0, sizeof one, &one) == 0)
      seen = availableCores();
  }).join();
  EXPECT_EQ(seen, 1);
}

TEST(ThreadPool, RunsEveryPartOnceAndKeepsItsWorkers) {
  WorkerPool pool;
  EXPECT_EQ(pool.workers(), 0u);
  std::vector<std::atomic<int>> hits(64);
  pool.parallelFor(64, [&](int i) { hits[i].fetch_add(1); });
  for (auto &h : hits)
    EXPECT_EQ(h.load(), 1);
  // Started once: later calls reuse the workers.
  const size_t workers = pool.workers();
  EXPECT_EQ(workers, 63u);
  for (int r = 0; r < 500; ++r)
    pool.parallelFor(4, [&](int i) { hits[i].fetch_add(1); });
  EXPECT_EQ(pool.workers(), workers);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(hits[i].load(), 501);
  // One part runs on the caller, no worker involved.
  std::thread::id ran;
  pool.parallelFor(1, [&](int) { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, std::this_thread::get_id());
}

TEST(ThreadPool, ConcurrentCallers) {
  WorkerPool pool;
  std::atomic<long> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 200; ++r) {
        std::atomic<int> mine{0};
        pool.parallelFor(3, [&](int i) {
          mine.fetch_add(i + 1);
          sum.fetch_add(1);
        });
        // Each call returns only after its own parts are done.
        EXPECT_EQ(mine.load(), 6);
      }
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(sum.load(), 4 * 200 * 3);
}

TEST(ThreadPool, RethrowsAPartsException) {
  WorkerPool pool;
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallelFor(8,
                                [&](int i) {
                                  ran.fetch_add(1);
                                  if (i == 5)
                                    throw std::runtime_error("part 5");
                                }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 8);
  // The pool still works afterwards.
  std::atomic<int> again{0};
  pool.parallelFor(8, [&](int) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 8);
}

} // namespace
