//===- CudaSessionTest.cpp - a cuda session through the C API -------------===//
//
// An artifact with a cuda backend (manifest version 3, a PTX image, a host
// library: fake_cuda/FakeHost.c) bound to a fixture checkpoint, opened with
// cq_session_open_backend on the fake driver: the manifest's paths, the
// host entry's dlsym, the checkpoint's bytes uploaded once at open, host and
// device pointer runs, and the C API's statuses.
//===----------------------------------------------------------------------===//
#include "comfyquant/comfyquant.h"
#include "comfyquant/runtime/Manifest.h"
#include "comfyquant/runtime/Safetensors.h"
#include "fake_cuda/FakeControl.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace comfyquant::rt;
namespace fs = std::filesystem;

namespace {

using comfyquant::test::fakeCuda;

const std::string kCheckpoint =
    COMFYQUANT_FIXTURES_DIR "/ckpt/sample_mixed.safetensors";
const std::string kModule = "double_blocks.0.img_attn.proj";

class CudaSessionTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_NE(fakeCuda().handle, nullptr) << ::dlerror();
    ::setenv("COMFYQUANT_LIBCUDA", COMFYQUANT_FAKE_LIBCUDA, 1);
    fakeCuda().setDevice(1, 9, 0);
    fakeCuda().failLaunch(-1);
    char tmpl[] = "/tmp/cq-cuda-session-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    checkpoint = Checkpoint::open(kCheckpoint);
    weight = checkpoint->find(kModule + ".weight");
    scale = checkpoint->find(kModule + ".weight_scale");
    ASSERT_TRUE(weight && scale);
    writeArtifact();
    fakeCuda().takeLog();
  }
  void TearDown() override {
    ::unsetenv("COMFYQUANT_LIBCUDA");
    fs::remove_all(dir);
  }

  void writeArtifact() {
    Manifest m;
    m.producer = "test";
    m.checkpointPath = kCheckpoint;
    m.checkpointSize = checkpoint->totalSize();
    char hash[32];
    std::snprintf(hash, sizeof hash, "fnv1a64:%016" PRIx64,
                  checkpoint->headerHash());
    m.checkpointHash = hash;
    m.dtypes = {"f32"};
    CudaBackend cuda;
    cuda.images.push_back({"sm_90a", "", "cuda/sm_90a.ptx", "8.7"});
    m.cuda = cuda;
    ManifestModule mod;
    mod.name = kModule;
    mod.kind = ModuleKind::Linear;
    mod.format = "int8_tensorwise";
    mod.outFeatures = weight->shape[0];
    mod.inFeatures = weight->shape[1];
    for (const TensorInfo *t : {weight, scale})
      mod.weights.push_back(
          {t->name, dtypeName(t->dtype), "", t->fileOffset, t->shape});
    CudaEntry e;
    e.dtype = "f32";
    e.arch = "sm_90a";
    e.host = "fake_linear_f32";
    e.kernels = {"fake_gemm"};
    e.workspacePerRow = 64;
    e.workspaceFixed = 512;
    mod.cudaEntries.push_back(e);
    m.modules.push_back(mod);
    fs::create_directories(dir + "/cuda");
    std::ofstream(dir + "/manifest.json") << writeManifest(m);
    std::ofstream(dir + "/cuda/sm_90a.ptx")
        << "// fake sm_90a.ptx\n.version 8.7\n.target sm_90a\n"
           ".visible .entry fake_gemm(.param .u64 x, .param .u64 y, "
           ".param .u64 w, .param .u64 ws, .param .u64 m)\n";
    fs::copy_file(COMFYQUANT_FAKE_CUDA_HOST, dir + "/cuda/host.so");
  }

  cq_session *open(const char *backend = "cuda", int device = 0) {
    cq_session_options options = CQ_SESSION_OPTIONS_INIT;
    options.checkpoint = kCheckpoint.c_str();
    cq_device_options where = CQ_DEVICE_OPTIONS_INIT;
    where.backend = backend;
    where.device = device;
    cq_session *s = nullptr;
    status = cq_session_open_backend(dir.c_str(), &options, &where, &s);
    return s;
  }

  /// y[i][j] = x[i][0] + w[j][0], as the fake host entry computes it.
  std::vector<float> expected(const std::vector<float> &x, int64_t m) {
    const int64_t n = weight->shape[0], k = weight->shape[1];
    std::vector<float> y(m * n);
    const auto *w = reinterpret_cast<const int8_t *>(weight->data);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        y[i * n + j] = x[i * k] + static_cast<float>(w[j * k]);
    return y;
  }

  std::string dir;
  std::unique_ptr<Checkpoint> checkpoint;
  const TensorInfo *weight = nullptr, *scale = nullptr;
  cq_status status = CQ_OK;
};

TEST_F(CudaSessionTest, RunsWithHostAndDevicePointers) {
  const uint64_t htod0 = fakeCuda().counter("htod_bytes");
  cq_session *s = open();
  ASSERT_EQ(status, CQ_OK) << cq_last_error();
  // The bound tensors went to the device once, at open.
  EXPECT_EQ(fakeCuda().counter("htod_bytes") - htod0,
            weight->nbytes() + scale->nbytes());
  EXPECT_EQ(fakeCuda().takeLog(), "load // fake sm_90a.ptx\n");

  const char *text = nullptr;
  ASSERT_EQ(cq_session_backend(s, &text), CQ_OK);
  EXPECT_STREQ(text, "cuda");
  ASSERT_EQ(cq_session_variant(s, &text), CQ_OK);
  EXPECT_STREQ(text, "sm_90a");
  ASSERT_EQ(cq_session_device(s, &text), CQ_OK);
  EXPECT_STREQ(text, "0: Fake CUDA Device 0 (sm_90, 132 SMs, 80.0 GiB), "
                     "sm_90a PTX (JIT)");
  size_t index = 0;
  ASSERT_EQ(cq_session_module_find(s, kModule.c_str(), &index), CQ_OK);

  const int64_t k = weight->shape[1], n = weight->shape[0];
  for (int64_t m : {4, 1, 17}) {
    SCOPED_TRACE(m);
    std::vector<float> x(m * k), y(m * n, -1.0f);
    for (int64_t i = 0; i < m; ++i)
      x[i * k] = 0.5f * static_cast<float>(i);
    const uint64_t htod = fakeCuda().counter("htod_bytes");
    ASSERT_EQ(cq_session_run(s, index, CQ_DTYPE_F32, x.data(), m, y.data(),
                             y.size() * 4),
              CQ_OK)
        << cq_last_error();
    EXPECT_EQ(fakeCuda().counter("htod_bytes") - htod, x.size() * 4);
    EXPECT_EQ(y, expected(x, m));
    const std::string log = fakeCuda().takeLog();
    EXPECT_EQ(
        log.rfind("launch fake_gemm grid=" + std::to_string((m + 15) / 16) +
                      ",1,1 block=128,1,1 smem=0 params=",
                  0),
        0u)
        << log;
    EXPECT_EQ(log.substr(log.rfind(',') + 1), std::to_string(m) + "\n");
  }

  // Device pointers (host memory in the fake): no copies, and the caller
  // waits with cq_session_synchronize.
  std::vector<float> x(2 * k, 3.0f), y(2 * n);
  const uint64_t htod = fakeCuda().counter("htod_bytes"),
                 dtoh = fakeCuda().counter("dtoh_bytes");
  ASSERT_EQ(cq_session_run_device(
                s, index, 0, CQ_DTYPE_F32, reinterpret_cast<uint64_t>(x.data()),
                2, reinterpret_cast<uint64_t>(y.data()), y.size() * 4),
            CQ_OK)
      << cq_last_error();
  ASSERT_EQ(cq_session_synchronize(s), CQ_OK);
  EXPECT_EQ(fakeCuda().counter("htod_bytes"), htod);
  EXPECT_EQ(fakeCuda().counter("dtoh_bytes"), dtoh);
  EXPECT_EQ(y, expected(x, 2));

  // Statuses: a dtype the artifact lacks, a y too small, an embedding call.
  EXPECT_EQ(cq_session_run(s, index, CQ_DTYPE_BF16, x.data(), 2, y.data(),
                           y.size() * 4),
            CQ_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(cq_last_error()).find("no bf16 CUDA kernels"),
            std::string::npos)
      << cq_last_error();
  EXPECT_EQ(cq_session_run_device(s, index, 0, CQ_DTYPE_F32,
                                  reinterpret_cast<uint64_t>(x.data()), 2,
                                  reinterpret_cast<uint64_t>(y.data()), 4),
            CQ_ERROR_BUFFER_TOO_SMALL);
  int64_t indices[1] = {0};
  EXPECT_EQ(cq_session_lookup_device(
                s, index, CQ_DTYPE_F32, reinterpret_cast<uint64_t>(indices), 1,
                reinterpret_cast<uint64_t>(y.data()), y.size() * 4),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cq_last_error()).find("is not an embedding"),
            std::string::npos);

  cq_session_close(s);
  EXPECT_EQ(fakeCuda().counter("context_refs"), 0u);
  EXPECT_EQ(fakeCuda().counter("streams"), 0u);
}

TEST_F(CudaSessionTest, ConcurrentCallsAreSerialized) {
  cq_session *s = open();
  ASSERT_EQ(status, CQ_OK) << cq_last_error();
  size_t index = 0;
  ASSERT_EQ(cq_session_module_find(s, kModule.c_str(), &index), CQ_OK);
  const int64_t k = weight->shape[1], n = weight->shape[0];
  // Each thread its own M: the shared workspace and copy buffers grow
  // while other calls run.
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 10; ++r) {
        const int64_t m = 1 + t * 7 + r;
        std::vector<float> x(m * k), y(m * n);
        for (int64_t i = 0; i < m; ++i)
          x[i * k] = static_cast<float>(t * 100 + i);
        if (cq_session_run(s, index, CQ_DTYPE_F32, x.data(), m, y.data(),
                           y.size() * 4) != CQ_OK ||
            y != expected(x, m))
          ++bad[t];
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
  cq_session_close(s);
}

TEST_F(CudaSessionTest, OpenFailuresAreStatuses) {
  EXPECT_EQ(open("cuda", 2), nullptr);
  EXPECT_EQ(status, CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(cq_last_error(),
               "CUDA device 2 does not exist: this machine has 1 (0..0)");

  EXPECT_EQ(open("gpu"), nullptr);
  EXPECT_EQ(status, CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(cq_last_error(),
               "cq_session_open: device->backend is 'gpu' (\"cpu\" or "
               "\"cuda\")");

  // The artifact has no CPU kernels.
  EXPECT_EQ(open("cpu"), nullptr);
  EXPECT_EQ(status, CQ_ERROR_UNSUPPORTED);

  // No image for an sm_80 device ("a" PTX runs only on 9.0).
  fakeCuda().setDevice(1, 8, 0);
  EXPECT_EQ(open(), nullptr);
  EXPECT_EQ(status, CQ_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(cq_last_error()).find("the artifact has sm_90a (ptx)"),
            std::string::npos)
      << cq_last_error();

  // No driver at all.
  fakeCuda().setDevice(1, 9, 0);
  ::setenv("COMFYQUANT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  EXPECT_EQ(open(), nullptr);
  EXPECT_EQ(status, CQ_ERROR_UNSUPPORTED);
  int count = -1;
  EXPECT_EQ(cq_cuda_device_count(&count), CQ_ERROR_UNSUPPORTED);
  EXPECT_EQ(count, 0);
  EXPECT_NE(std::string(cq_last_error()).find("cannot be loaded"),
            std::string::npos);
  ::setenv("COMFYQUANT_LIBCUDA", COMFYQUANT_FAKE_LIBCUDA, 1);
  EXPECT_EQ(cq_cuda_device_count(&count), CQ_OK);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(fakeCuda().counter("context_refs"), 0u);
}

TEST_F(CudaSessionTest, DeviceCallsNeedTheCudaBackend) {
  int supported = 0;
  ASSERT_EQ(cq_cpu_supports("x86-64-v3", &supported), CQ_OK);
  if (!supported)
    GTEST_SKIP() << "this CPU cannot open an x86-64-v3 artifact";
  // The same artifact with a cpu backend too; the fake host library stands
  // in for kernels.so (its symbol is bound, never called).
  Manifest m = parseManifest(
      [&] {
        std::ifstream in(dir + "/manifest.json");
        return std::string((std::istreambuf_iterator<char>(in)), {});
      }(),
      dir + "/manifest.json");
  m.cpu = CpuBackend{"kernels.so", {"x86-64-v3"}};
  m.modules[0].cpuEntries.push_back(
      {"f32", "x86-64-v3", "fake_linear_f32", false, {}});
  std::ofstream(dir + "/manifest.json") << writeManifest(m);
  fs::copy_file(COMFYQUANT_FAKE_CUDA_HOST, dir + "/kernels.so");

  cq_session *s = open("cpu");
  ASSERT_EQ(status, CQ_OK) << cq_last_error();
  const char *text = nullptr;
  ASSERT_EQ(cq_session_backend(s, &text), CQ_OK);
  EXPECT_STREQ(text, "cpu");
  ASSERT_EQ(cq_session_device(s, &text), CQ_OK);
  EXPECT_STREQ(text, "");
  std::vector<float> x(64), y(64);
  EXPECT_EQ(cq_session_run_device(s, 0, 0, CQ_DTYPE_F32,
                                  reinterpret_cast<uint64_t>(x.data()), 1,
                                  reinterpret_cast<uint64_t>(y.data()),
                                  y.size() * 4),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(cq_last_error()),
            dir + ": device pointers need a session on the cuda backend");
  EXPECT_EQ(cq_session_synchronize(s), CQ_OK);
  cq_session_close(s);

  // The same directory opens on cuda.
  s = open("cuda");
  ASSERT_EQ(status, CQ_OK) << cq_last_error();
  ASSERT_EQ(cq_session_backend(s, &text), CQ_OK);
  EXPECT_STREQ(text, "cuda");
  cq_session_close(s);
}

TEST_F(CudaSessionTest, MissingHostEntryNamesIt) {
  // A manifest naming a host symbol the library lacks.
  std::ifstream in(dir + "/manifest.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t at = text.find("fake_linear_f32");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 15, "fake_linear_f64");
  std::ofstream(dir + "/manifest.json") << text;
  EXPECT_EQ(open(), nullptr);
  EXPECT_EQ(status, CQ_ERROR_INVALID_INPUT);
  EXPECT_EQ(std::string(cq_last_error()),
            dir + "/cuda/host.so: module '" + kModule +
                "': entry 'fake_linear_f64' is not defined in the CUDA host "
                "library");
}

} // namespace
