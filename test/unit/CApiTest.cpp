//===- CApiTest.cpp - the C API of the runtime ----------------------------===//
//
// Every status the C API returns, the version check, struct_size, warnings,
// the thread-local error text and the artifact session's checkpoint lookup.
// Sessions here open a manifest without modules whose kernels.so is any
// loadable shared library (libcomfyquant itself), so they need no compiler;
// running compiled kernels is covered by test/Artifact and test/install.
//===----------------------------------------------------------------------===//
#include "comfyquant/comfyquant.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/Reference.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::string kCkpt = std::string(COMFYQUANT_FIXTURES_DIR) + "/ckpt/";
const std::string kSample = kCkpt + "sample_mixed.safetensors";

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

std::string lastError() { return cq_last_error(); }

TEST(CApi, Versions) {
  EXPECT_EQ(cq_version(), CQ_VERSION);
  EXPECT_STREQ(cq_version_string(), CQ_VERSION_STRING);
  EXPECT_EQ(CQ_VERSION, CQ_VERSION_MAJOR * 10000 + CQ_VERSION_MINOR * 100 +
                            CQ_VERSION_PATCH);
  EXPECT_STREQ(cq_status_string(CQ_OK), "CQ_OK");
  EXPECT_STREQ(cq_status_string(CQ_ERROR_BUFFER_TOO_SMALL),
               "CQ_ERROR_BUFFER_TOO_SMALL");
  EXPECT_STREQ(cq_status_string(77),
               "CQ_UNKNOWN_STATUS");
}

TEST(CApi, SessionOpenChecksTheHeaderVersion) {
  cq_session *s = reinterpret_cast<cq_session *>(1);
  // Another major version, a header newer than the library, and (before
  // 1.0) another minor version are refused before anything is opened.
  for (int header : {CQ_VERSION + 10000, CQ_VERSION + 1, CQ_VERSION + 100}) {
    EXPECT_EQ(cq_session_open_checked(header, "/nonexistent", nullptr, &s),
              CQ_ERROR_VERSION)
        << header;
    EXPECT_EQ(s, nullptr);
    EXPECT_TRUE(contains(lastError(), CQ_VERSION_STRING)) << lastError();
  }
  // The header's own version passes the check (and fails on the directory).
  EXPECT_EQ(cq_session_open("/nonexistent", nullptr, &s), CQ_ERROR_IO);
  EXPECT_TRUE(contains(lastError(), "/nonexistent/manifest.json"))
      << lastError();
}

TEST(CApi, ListsAndDequantizesModules) {
  cq_checkpoint *c = nullptr;
  ASSERT_EQ(cq_checkpoint_open(kSample.c_str(), &c), CQ_OK) << lastError();
  EXPECT_EQ(lastError(), "");
  size_t count = 0;
  ASSERT_EQ(cq_module_count(c, &count), CQ_OK);
  ASSERT_EQ(count, 6u);
  size_t idx = 99;
  ASSERT_EQ(cq_module_find(c, "double_blocks.0.img_mlp.2", &idx), CQ_OK);
  cq_module_info info = CQ_MODULE_INFO_INIT;
  ASSERT_EQ(cq_module_info_at(c, idx, &info), CQ_OK);
  EXPECT_STREQ(info.name, "double_blocks.0.img_mlp.2");
  EXPECT_STREQ(info.format, "asym_w4a8_int8");
  EXPECT_EQ(info.kind, CQ_KIND_LINEAR);
  EXPECT_EQ(info.out_features, 64);
  EXPECT_EQ(info.in_features, 256);
  EXPECT_EQ(info.rotation_group, 256);
  EXPECT_EQ(info.group_size, 16);

  // Rows 3..5 equal the same rows of the whole reference weight.
  std::vector<float> rows(3 * 256);
  ASSERT_EQ(cq_dequantize_rows(c, idx, 0, 3, 6, rows.data(), rows.size()),
            CQ_OK)
      << lastError();
  auto ckpt = comfyquant::rt::Checkpoint::open(kSample);
  auto resolved = comfyquant::rt::resolveCheckpoint(*ckpt);
  std::vector<float> all = comfyquant::rt::dequantizeModule(
      *resolved.find("double_blocks.0.img_mlp.2"));
  EXPECT_EQ(std::memcmp(rows.data(), all.data() + 3 * 256, rows.size() * 4),
            0);
  size_t warnings = 99;
  ASSERT_EQ(cq_checkpoint_warning_count(c, &warnings), CQ_OK);
  EXPECT_EQ(warnings, 0u);
  cq_checkpoint_close(c);
}

TEST(CApi, ErrorCodesOfCheckpointCalls) {
  cq_checkpoint *c = nullptr;
  ASSERT_EQ(cq_checkpoint_open(kSample.c_str(), &c), CQ_OK) << lastError();
  size_t idx = 0;
  ASSERT_EQ(cq_module_find(c, "double_blocks.0.img_mlp.2", &idx), CQ_OK);
  std::vector<float> rows(3 * 256);

  EXPECT_EQ(cq_dequantize_rows(c, idx, 0, 3, 6, rows.data(), 10),
            CQ_ERROR_BUFFER_TOO_SMALL);
  EXPECT_TRUE(contains(lastError(), "output buffer too small")) << lastError();
  EXPECT_EQ(cq_dequantize_rows(c, idx, 1, 0, 1, rows.data(), rows.size()),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(lastError(), "expert 1 is out of range [0, 1)"))
      << lastError();
  EXPECT_EQ(cq_dequantize_rows(c, idx, 0, 60, 65, rows.data(), rows.size()),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cq_dequantize_rows(c, 99, 0, 0, 1, rows.data(), rows.size()),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cq_dequantize_rows(nullptr, 0, 0, 0, 1, rows.data(), rows.size()),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "cq_dequantize_rows: checkpoint is NULL");

  cq_module_info info = CQ_MODULE_INFO_INIT;
  EXPECT_EQ(cq_module_info_at(c, 99, &info), CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(lastError(), "module index 99 is out of range [0, 6)"))
      << lastError();
  cq_module_info small = CQ_MODULE_INFO_INIT;
  small.struct_size = sizeof(size_t);
  EXPECT_EQ(cq_module_info_at(c, 0, &small), CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(lastError(), "struct_size")) << lastError();
  EXPECT_EQ(small.name, nullptr); // nothing written past struct_size

  // Not found is an error with a message, not a silent -1.
  size_t missing = 7;
  EXPECT_EQ(cq_module_find(c, "nope", &missing), CQ_ERROR_NOT_FOUND);
  EXPECT_EQ(missing, 7u);
  EXPECT_TRUE(contains(lastError(), "no quantized module 'nope' in " + kSample))
      << lastError();
  EXPECT_EQ(cq_module_find(c, nullptr, &missing), CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cq_module_count(c, nullptr), CQ_ERROR_INVALID_ARGUMENT);

  // A successful call clears the previous message.
  size_t count = 0;
  EXPECT_EQ(cq_module_count(c, &count), CQ_OK);
  EXPECT_EQ(lastError(), "");
  cq_checkpoint_close(c);
  cq_checkpoint_close(nullptr);
}

TEST(CApi, OpenFailures) {
  cq_checkpoint *c = reinterpret_cast<cq_checkpoint *>(1);
  EXPECT_EQ(cq_checkpoint_open("/nonexistent/x.safetensors", &c), CQ_ERROR_IO);
  EXPECT_EQ(c, nullptr);
  EXPECT_TRUE(contains(lastError(), "/nonexistent/x.safetensors"))
      << lastError();
  EXPECT_EQ(cq_checkpoint_open(nullptr, &c), CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "cq_checkpoint_open: path is NULL");
  EXPECT_FALSE(contains(lastError(), "<memory>"));
  EXPECT_EQ(cq_checkpoint_open(kSample.c_str(), nullptr),
            CQ_ERROR_INVALID_ARGUMENT);

  // A file that exists but is not a checkpoint breaks a format rule.
  fs::path bad = fs::temp_directory_path() /
                 ("cq-capi-bad-" + std::to_string(::getpid()) + ".safetensors");
  std::ofstream(bad) << "not a safetensors file";
  EXPECT_EQ(cq_checkpoint_open(bad.c_str(), &c), CQ_ERROR_INVALID_INPUT);
  EXPECT_TRUE(contains(lastError(), bad.string())) << lastError();
  fs::remove(bad);
}

TEST(CApi, WarningsAreReachable) {
  cq_checkpoint *c = nullptr;
  std::string path = kCkpt + "exporter_int8_noformat.safetensors";
  ASSERT_EQ(cq_checkpoint_open(path.c_str(), &c), CQ_OK) << lastError();
  size_t n = 0;
  ASSERT_EQ(cq_checkpoint_warning_count(c, &n), CQ_OK);
  ASSERT_EQ(n, 1u);
  const char *text = nullptr;
  ASSERT_EQ(cq_checkpoint_warning_at(c, 0, &text), CQ_OK);
  EXPECT_TRUE(contains(text, "has no \"format\"; treated as int8_tensorwise"))
      << text;
  EXPECT_EQ(cq_checkpoint_warning_at(c, 1, &text), CQ_ERROR_INVALID_ARGUMENT);
  cq_checkpoint_close(c);
}

TEST(CApi, ReferenceLinearChecksItsArguments) {
  cq_checkpoint *c = nullptr;
  ASSERT_EQ(cq_checkpoint_open(kSample.c_str(), &c), CQ_OK) << lastError();
  size_t idx = 0;
  ASSERT_EQ(cq_module_find(c, "double_blocks.0.img_mlp.0", &idx), CQ_OK);
  cq_module_info info = CQ_MODULE_INFO_INIT;
  ASSERT_EQ(cq_module_info_at(c, idx, &info), CQ_OK);
  const int64_t m = 3, K = info.in_features, N = info.out_features;
  std::vector<float> x(m * K), y(m * N, -1.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  const size_t yBytes = y.size() * sizeof(float);

  EXPECT_EQ(cq_reference_linear(c, idx, 0, CQ_DTYPE_F32, x.data(), m,
                                y.data(), yBytes - 1),
            CQ_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(y[0], -1.0f); // nothing written
  EXPECT_EQ(cq_reference_linear(c, idx, 0, 9, x.data(), m, y.data(), yBytes),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(lastError(), "unknown dtype 9")) << lastError();
  EXPECT_EQ(cq_reference_linear(c, idx, 0, CQ_DTYPE_F32, nullptr, m, y.data(),
                                yBytes),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cq_reference_linear(c, idx, 2, CQ_DTYPE_F32, x.data(), m,
                                y.data(), yBytes),
            CQ_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(cq_reference_linear(c, idx, 0, CQ_DTYPE_F32, x.data(), m,
                                y.data(), yBytes),
            CQ_OK)
      << lastError();
  auto ckpt = comfyquant::rt::Checkpoint::open(kSample);
  auto resolved = comfyquant::rt::resolveCheckpoint(*ckpt);
  comfyquant::rt::ActivationView view;
  view.dtype = comfyquant::rt::DType::F32;
  view.rows = m;
  view.cols = K;
  view.data = x.data();
  std::vector<uint8_t> expected = comfyquant::rt::referenceLinear(
      *resolved.find("double_blocks.0.img_mlp.0"), view, 0);
  ASSERT_EQ(expected.size(), yBytes);
  EXPECT_EQ(std::memcmp(expected.data(), y.data(), yBytes), 0);
  cq_checkpoint_close(c);

  // An embedding has no linear forward.
  std::string emb = kCkpt + "emb_fp8.safetensors";
  ASSERT_EQ(cq_checkpoint_open(emb.c_str(), &c), CQ_OK) << lastError();
  EXPECT_EQ(cq_reference_linear(c, 0, 0, CQ_DTYPE_F32, x.data(), 1, y.data(),
                                yBytes),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(lastError(), "embedding")) << lastError();
  cq_checkpoint_close(c);
}

TEST(CApi, LastErrorIsPerThread) {
  cq_checkpoint *c = nullptr;
  EXPECT_EQ(cq_checkpoint_open(nullptr, &c), CQ_ERROR_INVALID_ARGUMENT);
  std::string other = "unset";
  std::thread([&] { other = cq_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(lastError(), "cq_checkpoint_open: path is NULL");
}

TEST(CApi, MachineQueries) {
  int supported = -1;
  EXPECT_EQ(cq_cpu_supports("x86-64-v3", &supported), CQ_OK);
  EXPECT_TRUE(supported == 0 || supported == 1);
  EXPECT_EQ(cq_cpu_supports("bogus", &supported), CQ_OK);
  EXPECT_EQ(supported, 0);
  EXPECT_EQ(cq_cpu_supports(nullptr, &supported), CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_GE(cq_available_cores(), 1);
  EXPECT_NE(std::string(cq_cpu_features()), "");
}

//===----------------------------------------------------------------------===//
// Sessions on a manifest without modules
//===----------------------------------------------------------------------===//

/// A scratch directory removed at the end of the test.
class SessionTest : public ::testing::Test {
protected:
  void SetUp() override {
#ifndef COMFYQUANT_TEST_LOADABLE_SO
    GTEST_SKIP() << "needs a shared libcomfyquant to stand in for kernels.so";
#else
    int supported = 0;
    cq_cpu_supports("x86-64-v3", &supported);
    if (!supported)
      GTEST_SKIP() << "this CPU cannot run the x86-64-v3 variant";
    char tmpl[] = "/tmp/cq-capi-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
#endif
  }
  void TearDown() override {
    if (!dir_.empty())
      fs::remove_all(dir_);
  }

  /// DIR/NAME: manifest.json for `checkpoint` (absolute path + the path
  /// relative to the artifact) and a loadable kernels.so.
  std::string makeArtifact(const std::string &name,
                           const std::string &checkpoint) {
#ifdef COMFYQUANT_TEST_LOADABLE_SO
    auto ck = comfyquant::rt::Checkpoint::open(checkpoint);
    char hash[40];
    std::snprintf(hash, sizeof hash, "fnv1a64:%016" PRIx64, ck->headerHash());
    fs::path art = fs::path(dir_) / name;
    fs::create_directories(art);
    fs::path abs = fs::absolute(checkpoint).lexically_normal();
    nlohmann::ordered_json j;
    j["version"] = 2;
    j["target"] = "cpu";
    j["checkpoint"] = {{"path", abs.string()},
                       {"size", ck->totalSize()},
                       {"hash", hash},
                       {"relative_path", abs.lexically_relative(art).string()}};
    j["variants"] = {"x86-64-v3"};
    j["dtypes"] = {"f32"};
    j["modules"] = nlohmann::ordered_json::array();
    std::ofstream(art / "manifest.json") << j.dump(2);
    fs::copy_file(COMFYQUANT_TEST_LOADABLE_SO, art / "kernels.so");
    return art.string();
#else
    (void)name;
    (void)checkpoint;
    return "";
#endif
  }

  std::string dir_;
};

TEST_F(SessionTest, StatusOfEveryCall) {
  fs::copy_file(kSample, fs::path(dir_) / "model.safetensors");
  std::string art = makeArtifact("art", dir_ + "/model.safetensors");
  cq_session_options o = CQ_SESSION_OPTIONS_INIT;
  o.threads = 3;
  cq_session *s = nullptr;
  ASSERT_EQ(cq_session_open(art.c_str(), &o, &s), CQ_OK) << lastError();
  int threads = 0;
  ASSERT_EQ(cq_session_threads(s, &threads), CQ_OK);
  EXPECT_EQ(threads, 3);
  EXPECT_EQ(cq_session_set_threads(s, 0), CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cq_session_set_threads(s, 2), CQ_OK);
  ASSERT_EQ(cq_session_threads(s, &threads), CQ_OK);
  EXPECT_EQ(threads, 2);
  const char *variant = nullptr;
  ASSERT_EQ(cq_session_variant(s, &variant), CQ_OK);
  EXPECT_STREQ(variant, "x86-64-v3");
  // No module: the per-call variant has none to name.
  EXPECT_EQ(cq_session_variant_for(s, 0, CQ_DTYPE_F32, 1, &variant),
            CQ_ERROR_INVALID_ARGUMENT);
  size_t count = 9;
  ASSERT_EQ(cq_session_module_count(s, &count), CQ_OK);
  EXPECT_EQ(count, 0u);
  size_t idx = 0;
  EXPECT_EQ(cq_session_module_find(s, "nope", &idx), CQ_ERROR_NOT_FOUND);
  EXPECT_TRUE(contains(lastError(), "no module 'nope' in the artifact " + art))
      << lastError();
  cq_session_module_info info = CQ_SESSION_MODULE_INFO_INIT;
  EXPECT_EQ(cq_session_module_info_at(s, 0, &info), CQ_ERROR_INVALID_ARGUMENT);
  float x[4] = {}, y[4] = {};
  EXPECT_EQ(cq_session_run(s, 0, CQ_DTYPE_F32, x, 1, y, sizeof y),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(lastError(), "module index 0 is out of range [0, 0)"))
      << lastError();
  int64_t indices[1] = {0};
  EXPECT_EQ(cq_session_lookup(s, 0, CQ_DTYPE_F32, indices, 1, y, sizeof y),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cq_session_run(nullptr, 0, CQ_DTYPE_F32, x, 1, y, sizeof y),
            CQ_ERROR_INVALID_ARGUMENT);
  size_t warnings = 9;
  ASSERT_EQ(cq_session_warning_count(s, &warnings), CQ_OK);
  EXPECT_EQ(warnings, 0u);
  cq_session_close(s);
  cq_session_close(nullptr);

  // Options: struct_size, negative threads, a variant the artifact lacks.
  cq_session_options bad = CQ_SESSION_OPTIONS_INIT;
  bad.struct_size = 8;
  EXPECT_EQ(cq_session_open(art.c_str(), &bad, &s), CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(lastError(), "struct_size")) << lastError();
  bad = CQ_SESSION_OPTIONS_INIT;
  bad.threads = -1;
  EXPECT_EQ(cq_session_open(art.c_str(), &bad, &s), CQ_ERROR_INVALID_ARGUMENT);
  bad = CQ_SESSION_OPTIONS_INIT;
  bad.variant = "amx";
  EXPECT_EQ(cq_session_open(art.c_str(), &bad, &s), CQ_ERROR_UNSUPPORTED);
  EXPECT_TRUE(contains(lastError(), "no kernels for CPU variant 'amx'"))
      << lastError();
  EXPECT_EQ(cq_session_open(art.c_str(), nullptr, nullptr),
            CQ_ERROR_INVALID_ARGUMENT);

  // Another checkpoint than the artifact's.
  bad = CQ_SESSION_OPTIONS_INIT;
  std::string other = kCkpt + "int8_scalar.safetensors";
  bad.checkpoint = other.c_str();
  EXPECT_EQ(cq_session_open(art.c_str(), &bad, &s), CQ_ERROR_MISMATCH);
  EXPECT_TRUE(contains(lastError(), "checkpoint does not match the artifact"))
      << lastError();

  // A manifest that breaks its rules; kernels.so that cannot be loaded.
  std::ofstream(fs::path(art) / "manifest.json") << "{\"version\": 2}";
  EXPECT_EQ(cq_session_open(art.c_str(), nullptr, &s), CQ_ERROR_INVALID_INPUT);
  EXPECT_TRUE(contains(lastError(), "manifest.json")) << lastError();
  std::string art2 = makeArtifact("art2", dir_ + "/model.safetensors");
  std::ofstream(fs::path(art2) / "kernels.so", std::ios::trunc) << "garbage";
  EXPECT_EQ(cq_session_open(art2.c_str(), nullptr, &s), CQ_ERROR_IO);
  EXPECT_TRUE(contains(lastError(), "cannot load the kernels")) << lastError();
}

TEST_F(SessionTest, MovedTogetherWithItsCheckpoint) {
  fs::create_directories(fs::path(dir_) / "a");
  fs::copy_file(kSample, fs::path(dir_) / "a/model.safetensors");
  std::string art = makeArtifact("a/art", dir_ + "/a/model.safetensors");
  // Move the pair: the manifest's absolute path no longer exists.
  fs::rename(fs::path(dir_) / "a", fs::path(dir_) / "b");
  std::string moved = dir_ + "/b/art";
  cq_session *s = nullptr;
  ASSERT_EQ(cq_session_open(moved.c_str(), nullptr, &s), CQ_OK) << lastError();
  const char *path = nullptr;
  ASSERT_EQ(cq_session_checkpoint_path(s, &path), CQ_OK);
  EXPECT_EQ(fs::canonical(path), fs::canonical(dir_ + "/b/model.safetensors"));
  size_t warnings = 9;
  ASSERT_EQ(cq_session_warning_count(s, &warnings), CQ_OK);
  EXPECT_EQ(warnings, 0u);
  cq_session_close(s);

  // The artifact alone, moved elsewhere: found through the absolute path
  // (recorded as a warning) once the checkpoint is back there.
  fs::create_directories(fs::path(dir_) / "a");
  fs::rename(fs::path(dir_) / "b/model.safetensors",
             fs::path(dir_) / "a/model.safetensors");
  ASSERT_EQ(cq_session_open(moved.c_str(), nullptr, &s), CQ_OK) << lastError();
  ASSERT_EQ(cq_session_checkpoint_path(s, &path), CQ_OK);
  EXPECT_EQ(fs::canonical(path), fs::canonical(dir_ + "/a/model.safetensors"));
  ASSERT_EQ(cq_session_warning_count(s, &warnings), CQ_OK);
  ASSERT_EQ(warnings, 1u);
  const char *text = nullptr;
  ASSERT_EQ(cq_session_warning_at(s, 0, &text), CQ_OK);
  EXPECT_TRUE(contains(text, "checkpoint not found next to the artifact"))
      << text;
  cq_session_close(s);

  // Nowhere: an I/O error naming both places.
  fs::remove(fs::path(dir_) / "a/model.safetensors");
  EXPECT_EQ(cq_session_open(moved.c_str(), nullptr, &s), CQ_ERROR_IO);
  EXPECT_TRUE(contains(lastError(), "is not at")) << lastError();
  EXPECT_TRUE(contains(lastError(), dir_ + "/a/model.safetensors"))
      << lastError();

  // A different file next to the artifact is refused even when found by the
  // relative path.
  fs::copy_file(kCkpt + "int8_scalar.safetensors",
                fs::path(dir_) / "b/model.safetensors");
  EXPECT_EQ(cq_session_open(moved.c_str(), nullptr, &s), CQ_ERROR_MISMATCH);
}

TEST_F(SessionTest, ThreadsFromTheEnvironment) {
  fs::copy_file(kSample, fs::path(dir_) / "model.safetensors");
  std::string art = makeArtifact("art", dir_ + "/model.safetensors");
  cq_session *s = nullptr;
  ::setenv("COMFYQUANT_THREADS", "5", 1);
  ASSERT_EQ(cq_session_open(art.c_str(), nullptr, &s), CQ_OK) << lastError();
  int threads = 0;
  ASSERT_EQ(cq_session_threads(s, &threads), CQ_OK);
  EXPECT_EQ(threads, 5);
  cq_session_close(s);

  // Not a number: ignored with a warning; the usable cores instead.
  ::setenv("COMFYQUANT_THREADS", "abc", 1);
  ASSERT_EQ(cq_session_open(art.c_str(), nullptr, &s), CQ_OK) << lastError();
  ::unsetenv("COMFYQUANT_THREADS");
  ASSERT_EQ(cq_session_threads(s, &threads), CQ_OK);
  EXPECT_EQ(threads, cq_available_cores());
  size_t warnings = 0;
  ASSERT_EQ(cq_session_warning_count(s, &warnings), CQ_OK);
  ASSERT_EQ(warnings, 1u);
  const char *text = nullptr;
  ASSERT_EQ(cq_session_warning_at(s, 0, &text), CQ_OK);
  EXPECT_TRUE(contains(text, "$COMFYQUANT_THREADS='abc'")) << text;
  cq_session_close(s);
}

} // namespace

// cq_quantize: the tool's job as one call; the result opens as a Comfy quant
// checkpoint, and bad arguments get a status and a message.
TEST(CApi, QuantizeWritesACheckpointTheRuntimeOpens) {
  const std::string src =
      std::string(COMFYQUANT_FIXTURES_DIR) + "/architectures/wan.safetensors";
  char dir[] = "/tmp/cq-capi-quantize-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string(dir) + "/wan-int8.safetensors";
  cq_quantize_options o = CQ_QUANTIZE_OPTIONS_INIT;
  o.format = "int8-convrot";
  o.validate = 1;
  int quantized = -1;
  ASSERT_EQ(cq_quantize(src.c_str(), out.c_str(), &o, &quantized), CQ_OK)
      << cq_last_error();
  EXPECT_GT(quantized, 0);
  cq_checkpoint *ck = nullptr;
  ASSERT_EQ(cq_checkpoint_open(out.c_str(), &ck), CQ_OK) << cq_last_error();
  size_t count = 0;
  EXPECT_EQ(cq_module_count(ck, &count), CQ_OK);
  EXPECT_EQ(count, size_t(quantized));
  cq_checkpoint_close(ck);

  // The output exists: refused without overwrite, and nothing changes.
  EXPECT_NE(cq_quantize(src.c_str(), out.c_str(), &o, nullptr), CQ_OK);
  EXPECT_NE(std::string(cq_last_error()).find("overwrite"), std::string::npos);
  o.format = "int3";
  EXPECT_EQ(cq_quantize(src.c_str(), (out + "2").c_str(), &o, nullptr),
            CQ_ERROR_INVALID_INPUT);
  EXPECT_NE(std::string(cq_last_error()).find("unknown format"),
            std::string::npos);
  o.format = nullptr;
  EXPECT_EQ(cq_quantize(src.c_str(), (out + "2").c_str(), &o, nullptr),
            CQ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cq_quantize(src.c_str(), (out + "2").c_str(), nullptr, nullptr),
            CQ_ERROR_INVALID_ARGUMENT);
  std::remove(out.c_str());
  rmdir(dir);
}
