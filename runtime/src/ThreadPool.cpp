//===- ThreadPool.cpp - persistent workers and usable core count ----------===//
#include "comfyquant/runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <fstream>
#include <sstream>

#include <sched.h>

namespace comfyquant::rt {

//===----------------------------------------------------------------------===//
// Core count
//===----------------------------------------------------------------------===//

int cpuQuotaFromCpuMax(const std::string &text) {
  std::istringstream in(text);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0)
    return 0;
  char *end = nullptr;
  long long q = std::strtoll(quota.c_str(), &end, 10);
  if (!end || *end != '\0')
    return 0;
  return cpuQuotaFromCfs(q, period);
}

int cpuQuotaFromCfs(long long quotaUs, long long periodUs) {
  if (quotaUs <= 0 || periodUs <= 0)
    return 0;
  return static_cast<int>(
      std::max<long long>(1, (quotaUs + periodUs - 1) / periodUs));
}

namespace {

std::string readSmallFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The process's cgroup paths: {v2 path, v1 "cpu" controller path}.
std::pair<std::string, std::string> ownCgroups() {
  std::istringstream in(readSmallFile("/proc/self/cgroup"));
  std::string line, v2, v1;
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty())
      v2 = path;
    std::istringstream cs(controllers);
    std::string c;
    while (std::getline(cs, c, ','))
      if (c == "cpu")
        v1 = path;
  }
  return {v2, v1};
}

/// The smallest quota on the way from `dir` up to `root` (a cgroup's
/// effective limit is its ancestors' too); 0 when none.
template <typename ReadQuota>
int smallestQuotaUpTo(const std::string &root, std::string rel,
                      ReadQuota readQuota) {
  int best = 0;
  for (;;) {
    int q = readQuota(root + rel);
    if (q > 0 && (best == 0 || q < best))
      best = q;
    if (rel.empty() || rel == "/")
      break;
    size_t slash = rel.find_last_of('/');
    rel = slash == std::string::npos || slash == 0 ? "" : rel.substr(0, slash);
  }
  return best;
}

int cgroupQuota() {
  auto [v2, v1] = ownCgroups();
  int quota = 0;
  if (!v2.empty())
    quota = smallestQuotaUpTo("/sys/fs/cgroup", v2, [](const std::string &d) {
      return cpuQuotaFromCpuMax(readSmallFile(d + "/cpu.max"));
    });
  if (quota == 0 && !v1.empty())
    for (const char *root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"})
      if (int q = smallestQuotaUpTo(root, v1, [](const std::string &d) {
            long long quotaUs = 0, periodUs = 0;
            std::istringstream(readSmallFile(d + "/cpu.cfs_quota_us")) >>
                quotaUs;
            std::istringstream(readSmallFile(d + "/cpu.cfs_period_us")) >>
                periodUs;
            return cpuQuotaFromCfs(quotaUs, periodUs);
          }))
        return q;
  return quota;
}

} // namespace

int availableCores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    cores = CPU_COUNT(&set);
  if (cores <= 0)
    cores = static_cast<int>(std::thread::hardware_concurrency());
  int quota = cgroupQuota();
  if (quota > 0)
    cores = std::min(cores, quota);
  return std::max(1, cores);
}

//===----------------------------------------------------------------------===//
// WorkerPool
//===----------------------------------------------------------------------===//

struct WorkerPool::Job {
  const std::function<void(int)> *task = nullptr;
  int count = 0;
  std::atomic<int> next{0}, done{0};
  std::mutex mutex; ///< guards error and the completion wait
  std::condition_variable finished;
  std::exception_ptr error;
};

void WorkerPool::runParts(Job &job) {
  for (int i; (i = job.next.fetch_add(1)) < job.count;) {
    try {
      (*job.task)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.mutex);
      if (!job.error)
        job.error = std::current_exception();
    }
    if (job.done.fetch_add(1) + 1 == job.count) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.finished.notify_all();
    }
  }
}

void WorkerPool::workerLoop() {
  for (;;) {
    // Back-to-back calls are common (one per layer): look for the next job
    // for up to a millisecond before sleeping, so it does not wait for a
    // wake-up (tens of µs on a VM, against ~50–200 µs for a one-row call of
    // a 3072² layer; 200 yields, ~0.1 ms, lost a fifth of the W4A4 one-row
    // rate on two threads). Yielding leaves the core to any other runnable
    // thread.
    const auto spinEnd =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    while (queued_.load() == 0 && std::chrono::steady_clock::now() < spinEnd)
      std::this_thread::yield();
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_)
        return;
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size());
    }
    runParts(*job);
  }
}

void WorkerPool::parallelFor(int count, const std::function<void(int)> &task) {
  if (count <= 0)
    return;
  if (count == 1) {
    task(0);
    return;
  }
  auto job = std::make_shared<Job>();
  job->task = &task;
  job->count = count;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Enough workers that every helper part can start at once, counting
    // the ones other callers may be using.
    size_t wanted = queue_.size() + static_cast<size_t>(count - 1);
    while (threads_.size() < wanted)
      threads_.emplace_back([this] { workerLoop(); });
    for (int i = 1; i < count; ++i)
      queue_.push_back(job);
    queued_.store(queue_.size());
  }
  if (count == 2)
    wake_.notify_one();
  else
    wake_.notify_all();
  runParts(*job);
  // Parts taken by workers may still run: wait for them, spinning briefly
  // first (a small part finishes sooner than a sleep/wake-up round trip).
  for (int spin = 0; spin < 1000 && job->done.load() < count; ++spin)
    std::this_thread::yield();
  {
    std::unique_lock<std::mutex> lock(job->mutex);
    job->finished.wait(lock, [&] { return job->done.load() == count; });
  }
  // Tickets of this job still queued would find no part left; drop them.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
    queued_.store(queue_.size());
  }
  if (job->error)
    std::rethrow_exception(job->error);
}

size_t WorkerPool::workers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : threads_)
    t.join();
}

} // namespace comfyquant::rt
