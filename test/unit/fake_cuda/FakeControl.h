//===- FakeControl.h - the fake libcuda's test controls ---------*- C++ -*-===//
//
// The fakecuda_* functions of fake_cuda/FakeCuda.cpp, reached through the
// same library instance the runtime loads (dlopen of one path returns one
// handle).
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_TEST_FAKE_CUDA_FAKECONTROL_H
#define COMFYQUANT_TEST_FAKE_CUDA_FAKECONTROL_H

#include <cstdint>
#include <string>

#include <dlfcn.h>

namespace comfyquant::test {

struct FakeCuda {
  void *handle = ::dlopen(COMFYQUANT_FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
  template <typename F> F get(const char *name) {
    return reinterpret_cast<F>(::dlsym(handle, name));
  }
  void setDevice(int count, int major, int minor) {
    get<void (*)(int, int, int)>("fakecuda_set_device")(count, major, minor);
  }
  /// The `after`-th launch from now (0: the next) fails; -1: none.
  void failLaunch(int after) {
    get<void (*)(int)>("fakecuda_fail_launch")(after);
  }
  /// The log since the last call ("load ...", "attribute ...", "launch ...").
  std::string takeLog() {
    return get<const char *(*)()>("fakecuda_take_log")();
  }
  uint64_t counter(const char *name) {
    return get<uint64_t (*)(const char *)>("fakecuda_counter")(name);
  }
  uint64_t allocationBytes(uint64_t p) {
    return get<uint64_t (*)(uint64_t)>("fakecuda_allocation_bytes")(p);
  }
};

inline FakeCuda &fakeCuda() {
  static FakeCuda f;
  return f;
}

} // namespace comfyquant::test

#endif // COMFYQUANT_TEST_FAKE_CUDA_FAKECONTROL_H
