//===- ThreadPool.h - persistent workers and usable core count --*- C++ -*-===//
//
// A Session splits a call into parts (column or row ranges). WorkerPool runs
// them on threads it starts once and keeps, instead of starting threads on
// every call: a small call then costs a wake-up, not a thread creation.
// availableCores() is the default thread count: the CPUs this process may
// run on, not the machine's.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_THREADPOOL_H
#define COMFYQUANT_RUNTIME_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace comfyquant::rt {

/// CPUs in this process's affinity mask, capped by its cgroup CPU quota
/// (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us); at least 1.
int availableCores();

/// CPUs granted by a cgroup v2 cpu.max text ("max 100000", "150000 100000"),
/// rounded up; 0 when unlimited or unreadable.
int cpuQuotaFromCpuMax(const std::string &text);
/// The same from cgroup v1 cfs_quota_us / cfs_period_us (quota -1:
/// unlimited).
int cpuQuotaFromCfs(long long quotaUs, long long periodUs);

/// Runs the parts of a call on the calling thread plus workers that are
/// started on first use and kept until the pool is destroyed. Several threads
/// may call parallelFor at once; each call waits only for its own parts.
class WorkerPool {
public:
  WorkerPool() = default;
  ~WorkerPool();
  WorkerPool(const WorkerPool &) = delete;
  WorkerPool &operator=(const WorkerPool &) = delete;

  /// Runs task(i) for every i in [0, count), returns when all have returned;
  /// rethrows the first exception a part threw.
  void parallelFor(int count, const std::function<void(int)> &task);
  /// Workers started so far.
  size_t workers() const;

private:
  struct Job;
  void workerLoop();
  static void runParts(Job &job);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_; ///< one entry per helper wanted
  std::atomic<size_t> queued_{0}; ///< queue_.size(), read without the lock
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_THREADPOOL_H
