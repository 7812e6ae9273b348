//===- CudaExecutorTest.cpp - the CUDA backend on a fake driver -----------===//
//
// The fake libcuda (fake_cuda/FakeCuda.cpp, loaded through
// $COMFYQUANT_LIBCUDA) keeps device memory in host memory and logs every
// launch with its parameter values, so the executor's whole path runs here:
// image choice, kernel lookup, weight upload, workspace, the launcher and
// the host entry's arguments.
//===----------------------------------------------------------------------===//
#include "cuda/CudaExecutor.h"
#include "cuda/CudaDriver.h"
#include "fake_cuda/FakeControl.h"

#include "comfyquant/runtime/Error.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <dlfcn.h>

using namespace comfyquant::rt;
namespace fs = std::filesystem;

namespace {

using comfyquant::test::FakeCuda;
FakeCuda &fake() { return comfyquant::test::fakeCuda(); }

struct Memref1 {
  int64_t allocated, aligned, offset, size, stride;
};
struct Memref2 {
  int64_t allocated, aligned, offset, sizes[2], strides[2];
};

/// What the fake host entries saw in their last call.
struct Seen {
  Memref2 x{}, y{}, w{};
  Memref1 indices{}, ws{};
  int64_t bank[9] = {};
  int64_t expert = -1;
  int calls = 0;
};
Seen seen;

const cq_gpu_launcher *launcherOf(void **args) {
  return *static_cast<const cq_gpu_launcher *const *>(args[0]);
}

/// A linear entry: two kernels, the second with 64 KiB of dynamic shared
/// memory and a 16-byte by-value parameter; writes y = x[:, 0] + column on
/// the "device" (host memory in the fake).
void linearEntry(void **args) {
  const cq_gpu_launcher *l = launcherOf(args);
  seen.x = *static_cast<Memref2 *>(args[1]);
  seen.y = *static_cast<Memref2 *>(args[2]);
  seen.w = *static_cast<Memref2 *>(args[3]);
  seen.ws = *static_cast<Memref1 *>(args[4]);
  ++seen.calls;
  int64_t x = seen.x.aligned, y = seen.y.aligned, w = seen.w.aligned,
          ws = seen.ws.aligned, m = seen.x.sizes[0];
  void *p0[] = {&x, &y, &w, &ws, &m};
  l->launch(l->self, 0, m, 1, 1, 128, 1, 1, 0, p0, 5);
  uint32_t n = static_cast<uint32_t>(seen.y.sizes[1]);
  uint8_t map[16];
  std::iota(map, map + 16, uint8_t(1));
  void *p1[] = {&y, &n, map};
  l->launch(l->self, 1, (n + 63) / 64, m, 1, 256, 1, 1, 64 * 1024, p1, 3);
  const auto *xf = reinterpret_cast<const float *>(x);
  auto *yf = reinterpret_cast<float *>(y);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      yf[i * n + j] = xf[i * seen.x.sizes[1]] + static_cast<float>(j);
}

/// linearEntry's second kernel with 52 KiB of dynamic shared memory (a
/// second entry that shares that kernel function).
void smallerSmemEntry(void **args) {
  const cq_gpu_launcher *l = launcherOf(args);
  int64_t y = static_cast<Memref2 *>(args[2])->aligned;
  uint32_t n = 1;
  uint8_t map[16] = {};
  void *p1[] = {&y, &n, map};
  l->launch(l->self, 1, 1, 1, 1, 256, 1, 1, 52 * 1024, p1, 3);
}

/// A MoE entry: reads the expert argument, launches one kernel.
void moeEntry(void **args) {
  const cq_gpu_launcher *l = launcherOf(args);
  seen.x = *static_cast<Memref2 *>(args[1]);
  seen.expert = *static_cast<int64_t *>(args[3]);
  std::memcpy(seen.bank, args[4], sizeof seen.bank);
  seen.ws = *static_cast<Memref1 *>(args[5]);
  ++seen.calls;
  int64_t x = seen.x.aligned, y = static_cast<Memref2 *>(args[2])->aligned,
          w = seen.bank[1], ws = seen.ws.aligned, e = seen.expert;
  void *p[] = {&x, &y, &w, &ws, &e};
  l->launch(l->self, 0, 1, 1, 1, 32, 1, 1, 0, p, 5);
}

/// An embedding entry: x is int64 indices [M].
void embeddingEntry(void **args) {
  seen.indices = *static_cast<Memref1 *>(args[1]);
  seen.y = *static_cast<Memref2 *>(args[2]);
  ++seen.calls;
}

/// Launches kernel 0 three times: an empty grid (skipped), then two more.
void threeLaunchEntry(void **args) {
  const cq_gpu_launcher *l = launcherOf(args);
  int64_t a = 1, b = 2, c = 3, d = 4, e = 5;
  void *p[] = {&a, &b, &c, &d, &e};
  l->launch(l->self, 0, 4, 0, 1, 32, 1, 1, 0, p, 5);
  l->launch(l->self, 0, 1, 1, 1, 32, 1, 1, 0, p, 5);
  l->launch(l->self, 0, 2, 1, 1, 32, 1, 1, 0, p, 5);
}

/// Launches gemm_main (5 parameters) with 4.
void shortParamsEntry(void **args) {
  const cq_gpu_launcher *l = launcherOf(args);
  int64_t a = 1, b = 2, c = 3, d = 4;
  void *p[] = {&a, &b, &c, &d};
  l->launch(l->self, 0, 1, 1, 1, 32, 1, 1, 0, p, 4);
}

/// Launches a kernel index its entry does not have.
void badIndexEntry(void **args) {
  const cq_gpu_launcher *l = launcherOf(args);
  l->launch(l->self, 7, 1, 1, 1, 32, 1, 1, 0, nullptr, 0);
}

const char *kKernels =
    ".visible .entry gemm_main(.param .u64 x, .param .u64 y, .param .u64 w,\n"
    "    .param .u64 ws, .param .u64 m)\n"
    ".visible .entry gemm_epilogue(.param .u64 y, .param .u32 n,\n"
    "    .param .align 8 .b8 map[16])\n";

class CudaExecutorTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_NE(fake().handle, nullptr) << ::dlerror();
    ::setenv("COMFYQUANT_LIBCUDA", COMFYQUANT_FAKE_LIBCUDA, 1);
    fake().setDevice(1, 9, 0);
    fake().failLaunch(-1);
    fake().takeLog();
    seen = Seen();
    char tmpl[] = "/tmp/cq-cuda-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    baseline = fake().counter("allocations");
  }
  void TearDown() override {
    ::unsetenv("COMFYQUANT_LIBCUDA");
    fs::remove_all(dir);
  }

  /// Writes a fake image (first line names it) and returns its path.
  std::string image(const std::string &file, const std::string &extra = "") {
    const std::string path = dir + "/" + file;
    std::ofstream(path) << "// " << file << "\n" << kKernels << extra;
    return path;
  }

  std::unique_ptr<CudaExecutor>
  open(const std::vector<CudaExecutor::Image> &images,
       CudaExecutorOptions options = {}) {
    return CudaExecutor::open(CudaDriver::load(), dir, images, "", options);
  }

  /// The message of the Error `fn` throws ("" and a failure if none).
  template <typename Fn> std::string errorOf(Fn &&fn) {
    try {
      fn();
    } catch (const Error &e) {
      return e.what();
    }
    ADD_FAILURE() << "no Error thrown";
    return "";
  }

  std::string dir;
  uint64_t baseline = 0;
};

TEST_F(CudaExecutorTest, DriverIsResolvedThroughProcAddressAndQueried) {
  auto driver = CudaDriver::load();
  EXPECT_EQ(driver->library(), COMFYQUANT_FAKE_LIBCUDA);
  EXPECT_EQ(driver->version(), 13000);
  // Every function (and the optional cuFuncGetParamInfo) came through
  // cuGetProcAddress, once per process: a second load() resolves nothing.
#define COMFYQUANT_COUNT(...) +1
  constexpr uint64_t functions = 1 COMFYQUANT_CUDA_FUNCTIONS(COMFYQUANT_COUNT);
#undef COMFYQUANT_COUNT
  EXPECT_NE(driver->cuFuncGetParamInfo, nullptr);
  EXPECT_EQ(fake().counter("proc_lookups"), functions);
  EXPECT_EQ(CudaDriver::load(), driver);
  EXPECT_EQ(fake().counter("proc_lookups"), functions);
  std::vector<CudaDeviceInfo> devices = driver->devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].name, "Fake CUDA Device 0");
  EXPECT_EQ(devices[0].arch(), "sm_90");
  EXPECT_EQ(devices[0].smCount, 132);
  EXPECT_EQ(devices[0].totalMemory, uint64_t(80) << 30);
  EXPECT_EQ(devices[0].maxDynamicSmem, 232448);
  EXPECT_EQ(devices[0].describe(),
            "0: Fake CUDA Device 0 (sm_90, 132 SMs, 80.0 GiB)");
}

TEST_F(CudaExecutorTest, DeviceErrorsAreOneLine) {
  auto driver = CudaDriver::load();
  EXPECT_EQ(errorOf([&] { driver->device(3); }),
            "CUDA device 3 does not exist: this machine has 1 (0..0)");
  EXPECT_EQ(errorOf([&] { open({}, {3}); }),
            "CUDA device 3 does not exist: this machine has 1 (0..0)");
  fake().setDevice(0, 9, 0);
  EXPECT_EQ(errorOf([&] { driver->devices(); }),
            std::string("no CUDA device on this machine (") +
                COMFYQUANT_FAKE_LIBCUDA + " is loaded but reports none)");
}

TEST_F(CudaExecutorTest, MissingDriverIsOneLine) {
  ::setenv("COMFYQUANT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  std::string message = errorOf([] { CudaDriver::load(); });
  EXPECT_EQ(message.rfind("/nonexistent/libcuda.so.1 ($COMFYQUANT_LIBCUDA) "
                          "cannot be loaded: ",
                          0),
            0u)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  ::unsetenv("COMFYQUANT_LIBCUDA");
  if (void *real = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(real);
    GTEST_SKIP() << "this machine has a CUDA driver";
  }
  EXPECT_EQ(errorOf([] { CudaDriver::load(); }),
            "libcuda.so.1 not found: no NVIDIA driver on this machine; "
            "--backend cuda needs one");
}

TEST_F(CudaExecutorTest, ImageChoice) {
  struct Case {
    int major, minor;
    std::vector<CudaExecutor::Image> images;
    std::string arch; // expected
    bool jit;
  };
  const std::string c90a = image("sm_90a.cubin"), p90a = image("sm_90a.ptx"),
                    p80 = image("sm_80.ptx"), p86 = image("sm_86.ptx"),
                    c80 = image("sm_80.cubin"), c90 = image("sm_90.cubin"),
                    p120a = image("sm_120a.ptx");
  const std::vector<Case> cases = {
      // The exact cubin wins over any PTX; "a" over the portable one.
      {9, 0, {{"sm_80", c80, p80}, {"sm_90a", c90a, p90a}}, "sm_90a", false},
      {9, 0, {{"sm_90", c90, ""}, {"sm_90a", c90a, ""}}, "sm_90a", false},
      // No cubin for 9.0: the newest compatible PTX; "a" PTX only on its own
      // capability.
      {9, 0, {{"sm_80", c80, p80}, {"sm_86", "", p86}}, "sm_86", true},
      {9, 0, {{"sm_80", "", p80}, {"sm_90a", "", p90a}}, "sm_90a", true},
      {12, 0, {{"sm_80", "", p80}, {"sm_90a", c90a, p90a}}, "sm_80", true},
      {8, 6, {{"sm_80", c80, p80}, {"sm_86", "", p86}}, "sm_86", true},
      {12,
       0,
       {{"sm_90a", c90a, p90a}, {"sm_120a", "", p120a}},
       "sm_120a",
       true},
  };
  for (const Case &c : cases) {
    fake().setDevice(1, c.major, c.minor);
    auto e = open(c.images);
    EXPECT_EQ(e->imageArch(), c.arch) << c.major << "." << c.minor;
    EXPECT_EQ(e->jitCompiled(), c.jit) << c.major << "." << c.minor;
    const std::string loaded = fake().takeLog();
    EXPECT_EQ(loaded, "load // " + c.arch + (c.jit ? ".ptx" : ".cubin") + "\n");
  }
}

TEST_F(CudaExecutorTest, NoImageForTheDeviceListsBothSides) {
  fake().setDevice(1, 8, 9);
  const std::string p90a = image("sm_90a.ptx"), c90a = image("sm_90a.cubin");
  EXPECT_EQ(errorOf([&] {
              open({{"sm_90a", c90a, p90a}, {"sm_100a", "", p90a}});
            }),
            dir + ": no kernel image runs on CUDA device 0 'Fake CUDA Device "
                  "0' (sm_89, compute capability 8.9): the artifact has "
                  "sm_90a (cubin+ptx), sm_100a (ptx); compile it with "
                  "--target cuda:sm_89");
  EXPECT_EQ(fake().counter("context_refs"), 0u);
}

TEST_F(CudaExecutorTest, JitFailureCarriesTheLog) {
  const std::string bad = image("sm_80.ptx", "FAKE_JIT_ERROR\n");
  std::string message = errorOf([&] { open({{"sm_80", "", bad}}); });
  EXPECT_NE(message.find("the driver cannot JIT-compile " + bad +
                         " (sm_80) for CUDA device 0"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("CUDA_ERROR_INVALID_PTX: fake driver error; JIT log: "
                         "ptxas fatal   : fake JIT failure"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(CudaExecutorTest, LinearRunsWithUploadedWeightsAndWorkspace) {
  const int64_t K = 8, N = 100;
  std::vector<uint8_t> weight(10000);
  for (size_t i = 0; i < weight.size(); ++i)
    weight[i] = static_cast<uint8_t>(i * 7 + 3);
  CudaExecutorOptions options;
  options.stagingBytes = 4096; // three chunks
  auto e = open({{"sm_90a", image("sm_90a.cubin"), ""}}, options);
  fake().takeLog();
  const uint64_t htod0 = fake().counter("htod_bytes"),
                 calls0 = fake().counter("htod_calls");
  size_t w =
      e->addWeight({"layer.weight", weight.data(), weight.size(), {100, 100}});
  // The same bytes bound twice are one weight.
  EXPECT_EQ(
      e->addWeight({"layer.weight", weight.data(), weight.size(), {100, 100}}),
      w);
  e->upload();
  EXPECT_EQ(fake().counter("htod_bytes") - htod0, weight.size());
  EXPECT_EQ(fake().counter("htod_calls") - calls0, 3u);
  EXPECT_EQ(fake().counter("pinned"), 0u); // staging released
  e->upload();                             // nothing new
  EXPECT_EQ(fake().counter("htod_bytes") - htod0, weight.size());

  CudaExecutor::Entry spec;
  spec.module = "layer";
  spec.kind = CudaExecutor::Kind::Linear;
  spec.inFeatures = K;
  spec.outFeatures = N;
  spec.elementSize = 4;
  spec.symbol = "layer_f32_sm_90a";
  spec.fn = linearEntry;
  spec.kernels = {"gemm_main", "gemm_epilogue"};
  spec.workspacePerRow = 1000;
  spec.workspaceFixed = 24;
  spec.weights = {w};
  size_t entry = e->addEntry(spec);

  for (int64_t m : {3, 2, 5}) {
    SCOPED_TRACE(m);
    std::vector<float> x(m * K), y(m * N, -1.0f);
    for (int64_t i = 0; i < m; ++i)
      x[i * K] = static_cast<float>(10 * i);
    const uint64_t htodBefore = fake().counter("htod_bytes");
    e->runHost(entry, x.data(), y.data(), m);
    // Only x went up: the weights stay on the device.
    EXPECT_EQ(fake().counter("htod_bytes") - htodBefore, x.size() * 4);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < N; ++j)
        ASSERT_EQ(y[i * N + j], 10.0f * i + j) << i << "," << j;

    // The descriptors the entry got: device pointers, shapes, strides.
    EXPECT_EQ(seen.x.sizes[0], m);
    EXPECT_EQ(seen.x.sizes[1], K);
    EXPECT_EQ(seen.x.strides[0], K);
    EXPECT_EQ(seen.x.strides[1], 1);
    EXPECT_EQ(seen.y.sizes[1], N);
    EXPECT_EQ(seen.w.sizes[0], 100);
    EXPECT_EQ(seen.w.strides[0], 100);
    EXPECT_EQ(std::memcmp(reinterpret_cast<const void *>(seen.w.aligned),
                          weight.data(), weight.size()),
              0);
    // The workspace: exactly the rule's bytes, in a grow-only buffer.
    EXPECT_EQ(seen.ws.size, 1000 * m + 24);
    EXPECT_EQ(seen.ws.aligned % 256, 0);
    EXPECT_GE(fake().allocationBytes(seen.ws.aligned), uint64_t(1000 * m + 24));
    EXPECT_EQ(e->workspaceBytes(),
              uint64_t(1000 * std::max<int64_t>(m, 3) + 24 + 255) / 256 * 256);

    // The first call opts the epilogue in to 64 KiB of dynamic shared
    // memory before launching it; later calls need not.
    const std::string y0 = std::to_string(seen.y.aligned);
    const std::string expected =
        "launch gemm_main grid=" + std::to_string(m) +
        ",1,1 block=128,1,1 smem=0 params=" + std::to_string(seen.x.aligned) +
        "," + y0 + "," + std::to_string(seen.w.aligned) + "," +
        std::to_string(seen.ws.aligned) + "," + std::to_string(m) + "\n" +
        (m == 3 ? "attribute gemm_epilogue max_dynamic_smem=65536\n" : "") +
        "launch gemm_epilogue grid=2," + std::to_string(m) +
        ",1 block=256,1,1 smem=65536 params=" + y0 +
        ",100,0x0102030405060708090a0b0c0d0e0f10\n";
    const std::string log = fake().takeLog();
    EXPECT_EQ(log, expected);
  }
  EXPECT_EQ(seen.calls, 3);
  e.reset();
  // Everything the executor allocated is released.
  EXPECT_EQ(fake().counter("allocations"), baseline);
  EXPECT_EQ(fake().counter("streams"), 0u);
  EXPECT_EQ(fake().counter("modules"), 0u);
  EXPECT_EQ(fake().counter("context_refs"), 0u);
  EXPECT_EQ(fake().counter("context_depth"), 0u);
}

/// linearEntry as an 8 -> 64 f32 linear over weight `w`.
CudaExecutor::Entry smallLinearSpec(size_t w) {
  CudaExecutor::Entry spec;
  spec.module = "layer";
  spec.inFeatures = 8;
  spec.outFeatures = 64;
  spec.symbol = "layer_f32";
  spec.fn = linearEntry;
  spec.kernels = {"gemm_main", "gemm_epilogue"};
  spec.weights = {w};
  return spec;
}

TEST_F(CudaExecutorTest, DeviceRunUsesTheCallersPointersAsync) {
  auto e = open({{"sm_90a", image("sm_90a.cubin"), ""}});
  std::vector<uint8_t> weight(64, 1);
  size_t w = e->addWeight({"w", weight.data(), weight.size(), {8, 8}});
  e->upload();
  size_t entry = e->addEntry(smallLinearSpec(w));
  std::vector<float> x(2 * 8, 1.0f), y(2 * 64);
  const uint64_t htod = fake().counter("htod_bytes");
  // In the fake, host memory is device memory.
  e->run(entry, reinterpret_cast<uint64_t>(x.data()),
         reinterpret_cast<uint64_t>(y.data()), 2);
  e->synchronize();
  EXPECT_EQ(fake().counter("htod_bytes"), htod); // no copies at all
  EXPECT_EQ(seen.x.aligned, reinterpret_cast<int64_t>(x.data()));
  EXPECT_EQ(seen.y.aligned, reinterpret_cast<int64_t>(y.data()));
  EXPECT_EQ(seen.ws.size, 0);
  EXPECT_EQ(y[64 + 5], 6.0f);
  EXPECT_EQ(errorOf([&] { e->run(entry, 0, 0, 2); }),
            dir + ": module 'layer': bad activation rows or device pointers");
}

TEST_F(CudaExecutorTest, SharedKernelKeepsItsLargestSharedMemoryOptIn) {
  // Two entries name the same kernel (the compiler shares kernels formed
  // identically). After one opts it in to 64 KiB, the other's 52 KiB
  // launch must not lower the function's limit again.
  auto e = open({{"sm_90a", image("sm_90a.cubin"), ""}});
  std::vector<uint8_t> weight(8 * 64, 1);
  size_t w = e->addWeight({"w", weight.data(), weight.size(), {64, 8}});
  e->upload();
  CudaExecutor::Entry big = smallLinearSpec(w);
  CudaExecutor::Entry small = big;
  small.symbol = "layer_bf16";
  small.fn = smallerSmemEntry;
  size_t a = e->addEntry(big), b = e->addEntry(small);
  std::vector<float> x(8, 1.0f), y(64);
  auto run = [&](size_t entry) {
    e->run(entry, reinterpret_cast<uint64_t>(x.data()),
           reinterpret_cast<uint64_t>(y.data()), 1);
    e->synchronize();
  };
  fake().takeLog();
  run(a);
  run(b);
  run(a);
  const std::string log = fake().takeLog();
  EXPECT_NE(log.find("attribute gemm_epilogue max_dynamic_smem=65536\n"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("max_dynamic_smem=53248"), std::string::npos) << log;
  EXPECT_EQ(log.find("attribute"), log.rfind("attribute")) << log;
}

TEST_F(CudaExecutorTest, MissingKernelNamesEntryAndKernel) {
  const std::string cubin = image("sm_90a.cubin");
  auto e = open({{"sm_90a", cubin, ""}});
  CudaExecutor::Entry spec;
  spec.module = "blocks.0.attn";
  spec.symbol = "attn_bf16_sm_90a";
  spec.fn = linearEntry;
  spec.kernels = {"gemm_main", "gemm"}; // a prefix of a real name is not it
  EXPECT_EQ(errorOf([&] { e->addEntry(spec); }),
            dir +
                ": module 'blocks.0.attn': entry 'attn_bf16_sm_90a': kernel "
                "'gemm' is not in the sm_90a image (" +
                cubin + ")");
  spec.fn = nullptr; // and no host library
  EXPECT_EQ(errorOf([&] { e->addEntry(spec); }),
            dir + ": module 'blocks.0.attn': entry 'attn_bf16_sm_90a': no CUDA "
                  "host library is loaded");
}

TEST_F(CudaExecutorTest, LaunchFailureIsKeptAndLaterLaunchesSkipped) {
  auto e = open({{"sm_90a", image("sm_90a.cubin"), ""}});
  CudaExecutor::Entry spec;
  spec.module = "m";
  spec.symbol = "three";
  spec.fn = threeLaunchEntry;
  spec.kernels = {"gemm_main"};
  size_t entry = e->addEntry(spec);
  std::vector<float> x(4), y(4);
  spec.inFeatures = spec.outFeatures = 1;
  fake().takeLog();
  fake().failLaunch(0); // the first real launch fails
  std::string message = errorOf([&] {
    e->run(entry, reinterpret_cast<uint64_t>(x.data()),
           reinterpret_cast<uint64_t>(y.data()), 1);
  });
  EXPECT_EQ(message,
            dir + ": module 'm': entry 'three': launch 1: kernel 'gemm_main' "
                  "(grid [1, 1, 1], block [32, 1, 1], 0 bytes dynamic shared "
                  "memory): cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED: "
                  "unspecified launch failure");
  // The empty grid was skipped, the failed launch tried, the third skipped.
  EXPECT_EQ(fake().takeLog(), "launch gemm_main FAILED\n");
  // The next call starts clean.
  e->run(entry, reinterpret_cast<uint64_t>(x.data()),
         reinterpret_cast<uint64_t>(y.data()), 1);
  EXPECT_EQ(
      fake().takeLog(),
      "launch gemm_main grid=1,1,1 block=32,1,1 smem=0 params=1,2,3,4,5\n"
      "launch gemm_main grid=2,1,1 block=32,1,1 smem=0 params=1,2,3,4,5\n");

  spec.symbol = "bad_index";
  spec.fn = badIndexEntry;
  size_t bad = e->addEntry(spec);
  EXPECT_EQ(errorOf([&] {
              e->run(bad, reinterpret_cast<uint64_t>(x.data()),
                     reinterpret_cast<uint64_t>(y.data()), 1);
            }),
            dir + ": module 'm': entry 'bad_index': launch 0: kernel index 7 "
                  "is out of range [0, 1)");

  // The parameter count the kernel takes (cuFuncGetParamInfo) is checked
  // before the launch.
  spec.symbol = "short_params";
  spec.fn = shortParamsEntry;
  size_t shortParams = e->addEntry(spec);
  fake().takeLog();
  EXPECT_EQ(errorOf([&] {
              e->run(shortParams, reinterpret_cast<uint64_t>(x.data()),
                     reinterpret_cast<uint64_t>(y.data()), 1);
            }),
            dir + ": module 'm': entry 'short_params': launch 0: kernel "
                  "'gemm_main' takes 5 parameters; the host entry passes 4");
  EXPECT_EQ(fake().takeLog(), "");
}

TEST_F(CudaExecutorTest, MoeGetsTheExpertAndEmbeddingsTheIndices) {
  auto e = open({{"sm_90a", image("sm_90a.cubin"), ""}});
  std::vector<uint8_t> bank(4 * 16 * 8);
  size_t w = e->addWeight({"bank", bank.data(), bank.size(), {4, 16, 8}});
  e->upload();
  CudaExecutor::Entry moe;
  moe.module = "experts";
  moe.kind = CudaExecutor::Kind::MoE;
  moe.inFeatures = 8;
  moe.outFeatures = 16;
  moe.experts = 4;
  moe.symbol = "experts_f32";
  moe.fn = moeEntry;
  moe.kernels = {"gemm_main"};
  moe.workspaceFixed = 100;
  moe.weights = {w};
  size_t entry = e->addEntry(moe);
  std::vector<float> x(8), y(16);
  e->runHost(entry, x.data(), y.data(), 1, 3);
  EXPECT_EQ(seen.expert, 3);
  // A rank-3 descriptor: {allocated, aligned, offset, sizes[3], strides[3]}.
  const int64_t *bankDesc = seen.bank;
  EXPECT_EQ(std::vector<int64_t>(bankDesc + 3, bankDesc + 9),
            (std::vector<int64_t>{4, 16, 8, 128, 8, 1}));
  EXPECT_EQ(seen.ws.size, 100);
  EXPECT_NE(fake().takeLog().find(",3\n"), std::string::npos);
  EXPECT_EQ(errorOf([&] { e->runHost(entry, x.data(), y.data(), 1, 4); }),
            dir + ": module 'experts': expert 4 is out of range [0, 4)");

  CudaExecutor::Entry emb;
  emb.module = "embed";
  emb.kind = CudaExecutor::Kind::Embedding;
  emb.inFeatures = 6;   // row width
  emb.outFeatures = 10; // rows
  emb.elementSize = 2;
  emb.symbol = "embed_bf16";
  emb.fn = embeddingEntry;
  size_t embEntry = e->addEntry(emb);
  std::vector<int64_t> indices = {9, 0, 4};
  std::vector<uint16_t> rows(3 * 6);
  e->runHost(embEntry, indices.data(), rows.data(), 3);
  EXPECT_EQ(seen.indices.size, 3);
  EXPECT_EQ(seen.indices.stride, 1);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void *>(seen.indices.aligned),
                        indices.data(), 24),
            0);
  EXPECT_EQ(seen.y.sizes[0], 3);
  EXPECT_EQ(seen.y.sizes[1], 6);
  indices[1] = 10;
  EXPECT_EQ(
      errorOf([&] { e->runHost(embEntry, indices.data(), rows.data(), 3); }),
      dir + ": module 'embed': index 10 is out of range [0, 10)");
  // M = 0 calls nothing.
  const int calls = seen.calls;
  e->runHost(embEntry, indices.data(), rows.data(), 0);
  EXPECT_EQ(seen.calls, calls);
}

TEST_F(CudaExecutorTest, HostStreamIsUsedAndNotDestroyed) {
  CudaExecutorOptions options;
  int token = 0;
  options.stream = &token; // the fake never dereferences a stream
  auto e = open({{"sm_90a", image("sm_90a.cubin"), ""}}, options);
  EXPECT_EQ(e->stream(), &token);
  EXPECT_EQ(fake().counter("streams"), 0u);
  e.reset();
  EXPECT_EQ(fake().counter("streams"), 0u);
  EXPECT_EQ(fake().counter("context_refs"), 0u);
}

TEST(CudaArch, Names) {
  int major = 0, minor = 0;
  bool specific = false, family = false;
  ASSERT_TRUE(parseCudaArch("sm_90a", major, minor, specific, family));
  EXPECT_EQ(major, 9);
  EXPECT_EQ(minor, 0);
  EXPECT_TRUE(specific);
  EXPECT_FALSE(family);
  ASSERT_TRUE(parseCudaArch("sm_86", major, minor, specific, family));
  EXPECT_EQ(major, 8);
  EXPECT_EQ(minor, 6);
  EXPECT_FALSE(specific);
  EXPECT_FALSE(family);
  ASSERT_TRUE(parseCudaArch("sm_120a", major, minor, specific, family));
  EXPECT_EQ(major, 12);
  EXPECT_EQ(minor, 0);
  ASSERT_TRUE(parseCudaArch("sm_100a", major, minor, specific, family));
  EXPECT_EQ(major, 10);
  ASSERT_TRUE(parseCudaArch("sm_100f", major, minor, specific, family));
  EXPECT_EQ(major, 10);
  EXPECT_EQ(minor, 0);
  EXPECT_FALSE(specific);
  EXPECT_TRUE(family);
  for (const char *bad : {"", "sm_", "sm_9", "compute_90", "sm_90b", "sm_1000"})
    EXPECT_FALSE(parseCudaArch(bad, major, minor, specific, family)) << bad;
}

} // namespace
