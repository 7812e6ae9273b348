//===- ManifestTest.cpp - manifest.json reader and writer -----------------===//
//
// writeManifest and parseManifest agree (round trip, byte-identical text),
// version-2 manifests read into the same structs, and every broken field is
// an error naming the file, the module and the field.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Manifest.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

using namespace comfyquant::rt;
using json = nlohmann::json;

namespace {

const char *kFile = "/art/manifest.json";

/// Both backends, a module per kind, a shard, a block entry.
Manifest sampleManifest() {
  Manifest m;
  m.producer = "comfyquant 9.8.7";
  m.llvmVersion = "22.1.0";
  m.checkpointPath = "/models/m.safetensors";
  m.checkpointRelativePath = "../m.safetensors";
  m.checkpointSize = 66316;
  m.checkpointHash = "fnv1a64:a3955fdcaac61613";
  m.dtypes = {"f32", "bf16"};
  m.cpu = CpuBackend{"kernels.so", {"x86-64-v3", "avx512-vnni"}};
  CudaBackend cuda;
  cuda.hostLibrary = "cuda/host.so";
  cuda.images = {{"sm_80", "cuda/sm_80.cubin", "cuda/sm_80.ptx", "8.7"},
                 {"sm_90a", "", "cuda/sm_90a.ptx", "8.7"}};
  m.cuda = cuda;

  ManifestModule lin;
  lin.name = "blocks.0.attn.to_k";
  lin.kind = ModuleKind::Linear;
  lin.format = "int8_tensorwise";
  lin.outFeatures = 48;
  lin.inFeatures = 128;
  lin.rotationGroup = 64;
  lin.weights = {{"blocks.0.attn.to_k.weight", "I8", "", 18427, {48, 128}},
                 {"blocks.0.attn.to_k.weight_scale", "F32",
                  "model-00002-of-00002.safetensors", 24571, {}}};
  lin.cpuEntries = {{"f32", "x86-64-v3", "cq_0_f32_v3", true, {}},
                    {"f32", "avx512-vnni", "cq_0_f32_vnni", false, {}, 16},
                    {"bf16", "x86-64-v3", "cq_0_bf16_v3", true, {}}};
  lin.cudaEntries = {{"bf16", "sm_80", "cq_0_bf16_sm_80",
                      {"cq_0_bf16_sm_80_quant", "cq_0_bf16_sm_80_gemm"},
                      160, 256, {}},
                     {"bf16", "sm_90a", "cq_0_bf16_sm_90a",
                      {"cq_0_bf16_sm_90a_gemm"}, 0, 0, {}}};
  ManifestModule moe;
  moe.name = "blocks.0.moe";
  moe.kind = ModuleKind::MoE;
  moe.format = "nvfp4";
  moe.outFeatures = 64;
  moe.inFeatures = 32;
  moe.experts = 3;
  moe.rowIndependent = false;
  moe.cpuEntries = {{"f32", "x86-64-v3", "cq_1_f32_v3", false, {}},
                    // One call computes both modules (a later step).
                    {"f32", "x86-64-v3", "cq_block_f32_v3", false,
                     {"blocks.0.moe", "blocks.0.attn.to_k"}}};
  ManifestModule emb;
  emb.name = "embed";
  emb.kind = ModuleKind::Embedding;
  emb.format = "float8_e4m3fn";
  emb.outFeatures = 100;
  emb.inFeatures = 16;
  m.modules = {lin, moe, emb};
  return m;
}

json sampleJson() { return json::parse(writeManifest(sampleManifest())); }

/// The message parseManifest throws for `j`, or "" when it parses.
std::string errorOf(const json &j) {
  try {
    parseManifest(j.dump(), kFile);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(Manifest, RoundTripIsByteIdentical) {
  const Manifest m = sampleManifest();
  const std::string text = writeManifest(m);
  EXPECT_EQ(text, writeManifest(m)); // deterministic
  Manifest back = parseManifest(text, kFile);
  EXPECT_EQ(writeManifest(back), text);

  EXPECT_EQ(back.version, 4);
  EXPECT_EQ(back.producer, "comfyquant 9.8.7");
  EXPECT_EQ(back.modules[0].findCpuEntry("f32", "avx512-vnni")->minRows, 16);
  EXPECT_EQ(back.modules[0].findCpuEntry("f32", "x86-64-v3")->minRows, 1);
  EXPECT_EQ(back.llvmVersion, "22.1.0");
  EXPECT_EQ(back.checkpointPath, m.checkpointPath);
  EXPECT_EQ(back.checkpointRelativePath, m.checkpointRelativePath);
  EXPECT_EQ(back.checkpointSize, 66316u);
  EXPECT_EQ(back.checkpointHash, m.checkpointHash);
  EXPECT_EQ(back.dtypes, m.dtypes);
  ASSERT_TRUE(back.cpu && back.cuda);
  EXPECT_EQ(back.cpu->library, "kernels.so");
  EXPECT_EQ(back.cpu->variants, m.cpu->variants);
  ASSERT_EQ(back.cuda->images.size(), 2u);
  EXPECT_EQ(back.cuda->hostLibrary, "cuda/host.so");
  const CudaImage *img = back.cuda->findImage("sm_90a");
  ASSERT_TRUE(img);
  EXPECT_EQ(img->cubin, "");
  EXPECT_EQ(img->ptx, "cuda/sm_90a.ptx");
  EXPECT_EQ(img->ptxVersion, "8.7");

  ASSERT_EQ(back.modules.size(), 3u);
  const ManifestModule *lin = back.find("blocks.0.attn.to_k");
  ASSERT_TRUE(lin);
  EXPECT_EQ(lin->weights, m.modules[0].weights);
  EXPECT_EQ(lin->rotationGroup, 64);
  EXPECT_EQ(lin->experts, 0);
  const CpuEntry *e = lin->findCpuEntry("f32", "avx512-vnni");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->symbol, "cq_0_f32_vnni");
  EXPECT_FALSE(e->columnSplit);
  EXPECT_TRUE(lin->findCpuEntry("bf16", "x86-64-v3")->columnSplit);
  EXPECT_FALSE(lin->findCpuEntry("bf16", "avx512-vnni"));
  const CudaEntry *c = lin->findCudaEntry("bf16", "sm_80");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "cq_0_bf16_sm_80");
  EXPECT_EQ(c->kernels, m.modules[0].cudaEntries[0].kernels);
  EXPECT_EQ(c->workspacePerRow, 160);
  EXPECT_EQ(c->workspaceFixed, 256);
  EXPECT_FALSE(lin->findCudaEntry("f32", "sm_80"));

  const ManifestModule *moe = back.find("blocks.0.moe");
  ASSERT_TRUE(moe);
  EXPECT_EQ(moe->experts, 3);
  EXPECT_FALSE(moe->rowIndependent);
  ASSERT_EQ(moe->cpuEntries.size(), 2u);
  EXPECT_EQ(moe->cpuEntries[1].modules,
            (std::vector<std::string>{"blocks.0.moe", "blocks.0.attn.to_k"}));
  // The block entry is not the module's own entry.
  EXPECT_EQ(moe->findCpuEntry("f32", "x86-64-v3")->symbol, "cq_1_f32_v3");
  EXPECT_EQ(moe->cpuDTypes(), (std::vector<std::string>{"f32"}));
  EXPECT_TRUE(moe->cudaDTypes().empty());
  EXPECT_EQ(lin->cpuDTypes(), (std::vector<std::string>{"f32", "bf16"}));
  EXPECT_EQ(lin->cudaDTypes(), (std::vector<std::string>{"bf16"}));
}

TEST(Manifest, TextLayout) {
  const std::string text = writeManifest(sampleManifest());
  EXPECT_EQ(text.rfind("{\n  \"schema\": \"comfyquant-manifest\",\n"
                       "  \"version\": 4,\n"
                       "  \"producer\": \"comfyquant 9.8.7\",\n"
                       "  \"llvm_version\": \"22.1.0\",\n",
                       0),
            0u)
      << text;
  EXPECT_EQ(text.back(), '\n');
  json j = json::parse(text);
  // Only the block entry spells out its modules; the default is implied.
  EXPECT_FALSE(j["modules"][0]["entries"][0].contains("modules"));
  EXPECT_TRUE(j["modules"][1]["entries"][1].contains("modules"));
  EXPECT_TRUE(j["modules"][2]["experts"].is_null());
  EXPECT_EQ(j["modules"][0]["entries"][3]["backend"], "cuda");
}

TEST(Manifest, CudaOnlyAndCpuOnly) {
  Manifest m = sampleManifest();
  m.cpu.reset();
  for (ManifestModule &a : m.modules)
    a.cpuEntries.clear();
  Manifest back = parseManifest(writeManifest(m), kFile);
  EXPECT_FALSE(back.cpu);
  EXPECT_TRUE(back.cuda);
  m = sampleManifest();
  m.cuda.reset();
  for (ManifestModule &a : m.modules)
    a.cudaEntries.clear();
  back = parseManifest(writeManifest(m), kFile);
  EXPECT_TRUE(back.cpu);
  EXPECT_FALSE(back.cuda);
}

// What comfyquant-compile wrote before version 3.
const char *kVersion2 = R"({
  "schema": "comfyquant-manifest",
  "version": 2,
  "target": "cpu",
  "checkpoint": {"path": "/models/m.safetensors", "size": 1000,
                 "hash": "fnv1a64:0011223344556677",
                 "relative_path": "../m.safetensors"},
  "variants": ["x86-64-v3", "avx512-vnni"],
  "dtypes": ["bf16", "f32"],
  "modules": [{
    "name": "blocks.0.attn.to_k", "kind": "linear",
    "format": "int8_tensorwise", "out_features": 48, "in_features": 128,
    "experts": null, "rotation_group": 0, "row_independent": true,
    "entry": {"bf16": {"x86-64-v3": "cq_0_bf16_v3", "avx512-vnni": "cq_0_bf16_vnni"},
              "f32": {"x86-64-v3": "cq_1_f32_v3", "avx512-vnni": "cq_1_f32_vnni"}},
    "column_split": ["cq_0_bf16_v3", "cq_1_f32_vnni"],
    "weights": [{"tensor": "blocks.0.attn.to_k.weight", "offset": 18427,
                 "dtype": "I8", "shape": [48, 128]}],
    "compile_seconds": 0.5
  }]
})";

TEST(Manifest, ReadsVersion2) {
  Manifest m = parseManifest(kVersion2, kFile);
  EXPECT_EQ(m.version, 2);
  EXPECT_EQ(m.producer, "");
  EXPECT_EQ(m.llvmVersion, "");
  EXPECT_EQ(m.checkpointRelativePath, "../m.safetensors");
  EXPECT_EQ(m.checkpointSize, 1000u);
  ASSERT_TRUE(m.cpu);
  EXPECT_FALSE(m.cuda);
  EXPECT_EQ(m.cpu->library, "kernels.so");
  EXPECT_EQ(m.cpu->variants,
            (std::vector<std::string>{"x86-64-v3", "avx512-vnni"}));
  ASSERT_EQ(m.modules.size(), 1u);
  const ManifestModule &a = m.modules[0];
  EXPECT_EQ(a.cpuEntries.size(), 4u);
  EXPECT_TRUE(a.findCpuEntry("bf16", "x86-64-v3")->columnSplit);
  EXPECT_FALSE(a.findCpuEntry("bf16", "avx512-vnni")->columnSplit);
  EXPECT_EQ(a.findCpuEntry("f32", "avx512-vnni")->symbol, "cq_1_f32_vnni");
  EXPECT_TRUE(a.findCpuEntry("f32", "avx512-vnni")->columnSplit);
  EXPECT_FALSE(a.findCpuEntry("f32", "x86-64-v3")->columnSplit);
  ASSERT_EQ(a.weights.size(), 1u);
  EXPECT_EQ(a.weights[0].shape, (std::vector<int64_t>{48, 128}));
  // Written again (with a producer, which version 3 requires) it is a
  // version-4 manifest with the same content.
  m.producer = "comfyquant 9.8.7";
  Manifest v4 = parseManifest(writeManifest(m), kFile);
  EXPECT_EQ(v4.version, 4);
  EXPECT_EQ(writeManifest(v4), writeManifest(m));
}

// Version 3 is version 4 without min_rows: read with floors of 1, and a
// min_rows there is an unknown field.
TEST(Manifest, ReadsVersion3) {
  json j = sampleJson();
  j["version"] = 3;
  for (json &mod : j["modules"])
    for (json &e : mod["entries"])
      e.erase("min_rows");
  Manifest m = parseManifest(j.dump(), kFile);
  EXPECT_EQ(m.version, 3);
  for (const CpuEntry &e : m.modules[0].cpuEntries)
    EXPECT_EQ(e.minRows, 1);
  j["modules"][0]["entries"][0]["min_rows"] = 16;
  EXPECT_NE(errorOf(j).find("unknown field \"min_rows\""), std::string::npos)
      << errorOf(j);
}

TEST(Manifest, Version2Errors) {
  json j = json::parse(kVersion2);
  j["modules"][0]["column_split"] = {"cq_other"};
  EXPECT_NE(errorOf(j).find(
                "module 'blocks.0.attn.to_k': \"column_split\" names "
                "'cq_other', which is not an entry of this module"),
            std::string::npos);
}

struct BadCase {
  const char *name;
  std::function<void(json &)> mutate;
  const char *message; ///< a substring of the error
};

TEST(Manifest, RejectsBadFields) {
  const std::vector<BadCase> cases = {
      {"version", [](json &j) { j["version"] = 7; },
       "manifest: unsupported manifest version 7"},
      {"min_rows", [](json &j) { j["modules"][0]["entries"][1]["min_rows"] = 0; },
       "\"min_rows\" must be an integer >= 1"},
      {"unknown top-level field", [](json &j) { j["target"] = "cpu"; },
       "manifest: unknown field \"target\""},
      {"schema", [](json &j) { j["schema"] = "other"; },
       "manifest: \"schema\" 'other' is not \"comfyquant-manifest\""},
      {"producer missing", [](json &j) { j.erase("producer"); },
       "manifest: missing \"producer\""},
      {"llvm_version type", [](json &j) { j["llvm_version"] = 22; },
       "manifest: \"llvm_version\" must be a string"},
      {"checkpoint size",
       [](json &j) { j["checkpoint"]["size"] = -1; },
       "manifest: checkpoint: \"size\" must be an integer >= 0"},
      {"dtypes", [](json &j) { j["dtypes"] = {"f32", "i8"}; },
       "\"dtypes\": unknown dtype 'i8'"},
      {"dtypes twice", [](json &j) { j["dtypes"] = {"f32", "f32"}; },
       "\"dtypes\" lists 'f32' twice"},
      {"no backend", [](json &j) { j["backends"] = json::object(); },
       "\"backends\" must name at least one backend"},
      {"unknown backend",
       [](json &j) { j["backends"]["tpu"] = json::object(); },
       "\"backends\": unknown backend 'tpu'"},
      {"library outside",
       [](json &j) { j["backends"]["cpu"]["library"] = "../evil.so"; },
       "backends.cpu: \"library\" '../evil.so' must be a path inside the "
       "artifact directory"},
      {"library absolute",
       [](json &j) { j["backends"]["cpu"]["library"] = "/tmp/evil.so"; },
       "\"library\" '/tmp/evil.so' must be a path inside"},
      {"variants empty",
       [](json &j) { j["backends"]["cpu"]["variants"] = json::array(); },
       "backends.cpu: \"variants\" must be an array of distinct non-empty "
       "strings, at least one"},
      {"arch name",
       [](json &j) { j["backends"]["cuda"]["images"][0]["arch"] = "gfx90a"; },
       "backends.cuda.images[0]: \"arch\" 'gfx90a' is not an arch name"},
      {"arch twice",
       [](json &j) { j["backends"]["cuda"]["images"][1]["arch"] = "sm_80"; },
       "backends.cuda.images[1]: arch 'sm_80' is listed twice"},
      {"ptx_version",
       [](json &j) { j["backends"]["cuda"]["images"][0]["ptx_version"] = "87"; },
       "backends.cuda.images[0]: \"ptx_version\" '87' is not MAJOR.MINOR"},
      {"ptx missing",
       [](json &j) { j["backends"]["cuda"]["images"][0].erase("ptx"); },
       "backends.cuda.images[0]: missing \"ptx\""},
      {"unknown image field",
       [](json &j) { j["backends"]["cuda"]["images"][0]["fatbin"] = "x"; },
       "backends.cuda.images[0]: unknown field \"fatbin\""},
      {"module twice",
       [](json &j) { j["modules"][1]["name"] = "blocks.0.attn.to_k"; },
       "module 'blocks.0.attn.to_k': listed twice"},
      {"kind", [](json &j) { j["modules"][0]["kind"] = "conv"; },
       "\"kind\": unknown kind 'conv'"},
      {"experts on linear", [](json &j) { j["modules"][0]["experts"] = 2; },
       "\"experts\" must be set exactly for moe modules"},
      {"out_features", [](json &j) { j["modules"][0]["out_features"] = 0; },
       "\"out_features\" must be an integer >= 1"},
      {"row_independent",
       [](json &j) { j["modules"][0]["row_independent"] = 1; },
       "\"row_independent\" must be a boolean"},
      {"compile_seconds",
       [](json &j) { j["modules"][0]["compile_seconds"] = 1.5; },
       "unknown field \"compile_seconds\""},
      {"weight tensor",
       [](json &j) { j["modules"][0]["weights"][0].erase("tensor"); },
       "weights[0]: missing \"tensor\""},
      {"weight dtype",
       [](json &j) { j["modules"][0]["weights"][0]["dtype"] = "U9"; },
       "tensor 'blocks.0.attn.to_k.weight': \"dtype\": unknown dtype 'U9'"},
      {"weight shape",
       [](json &j) { j["modules"][0]["weights"][0]["shape"] = {4, -1}; },
       "\"shape\" must be an array of integers >= 0"},
      {"entry backend",
       [](json &j) { j["modules"][0]["entries"][0]["backend"] = "rocm"; },
       "entries[0]: \"backend\": unknown backend 'rocm'"},
      {"entry dtype",
       [](json &j) { j["modules"][0]["entries"][0]["dtype"] = "f16"; },
       "entries[0]: \"dtype\" 'f16' is not one of the manifest's \"dtypes\""},
      {"entry variant",
       [](json &j) { j["modules"][0]["entries"][1]["variant"] = "sse2"; },
       "entries[1]: \"variant\" 'sse2' is not a variant of backends.cpu"},
      {"entry symbol",
       [](json &j) { j["modules"][0]["entries"][0]["symbol"] = ""; },
       "entries[0]: \"symbol\" must be a non-empty string"},
      {"column_split",
       [](json &j) { j["modules"][0]["entries"][0]["column_split"] = "yes"; },
       "entries[0]: \"column_split\" must be a boolean"},
      {"unknown entry field",
       [](json &j) { j["modules"][0]["entries"][0]["arch"] = "sm_80"; },
       "entries[0]: unknown field \"arch\""},
      {"entry twice",
       [](json &j) {
         j["modules"][0]["entries"][1]["variant"] = "x86-64-v3";
       },
       "entries[1]: a second cpu entry for f32 and 'x86-64-v3'"},
      {"cpu entry without cpu backend",
       [](json &j) { j["backends"].erase("cpu"); },
       "entries[0]: a cpu entry, but \"backends\" has no cpu"},
      {"cuda arch",
       [](json &j) { j["modules"][0]["entries"][3]["arch"] = "sm_89"; },
       "entries[3]: \"arch\" 'sm_89' has no image in backends.cuda"},
      {"cuda kernels",
       [](json &j) { j["modules"][0]["entries"][3]["kernels"] = json::array(); },
       "entries[3]: \"kernels\" must be an array of distinct non-empty strings"},
      {"cuda host",
       [](json &j) { j["modules"][0]["entries"][3].erase("host"); },
       "entries[3]: missing \"host\""},
      {"workspace",
       [](json &j) { j["modules"][0]["entries"][3]["workspace_per_row"] = -8; },
       "entries[3]: \"workspace_per_row\" must be an integer >= 0"},
      {"workspace type",
       [](json &j) { j["modules"][0]["entries"][4]["workspace_fixed"] = 1.5; },
       "entries[4]: \"workspace_fixed\" must be an integer >= 0"},
      {"block names unknown module",
       [](json &j) {
         j["modules"][1]["entries"][1]["modules"] = {"blocks.0.moe", "zz"};
       },
       "module 'blocks.0.moe': entries[1]: \"modules\" names 'zz', which is "
       "not a module of the manifest"},
      {"block without its module",
       [](json &j) {
         j["modules"][1]["entries"][1]["modules"] = {"blocks.0.attn.to_k"};
       },
       "module 'blocks.0.moe': entries[1]: \"modules\" must include the "
       "module 'blocks.0.moe'"},
  };
  for (const BadCase &c : cases) {
    json j = sampleJson();
    ASSERT_EQ(errorOf(j), "") << c.name;
    c.mutate(j);
    const std::string msg = errorOf(j);
    EXPECT_NE(msg.find(c.message), std::string::npos)
        << c.name << ": " << (msg.empty() ? "(accepted)" : msg);
    EXPECT_EQ(msg.rfind(std::string(kFile) + ": manifest: ", 0), 0u)
        << c.name << ": " << msg;
    EXPECT_EQ(msg.find("manifest: manifest:"), std::string::npos) << msg;
  }
}

TEST(Manifest, RejectsNonObjectsAndBadJson) {
  for (const char *text : {"[]", "3", "{\"version\": 3,", "{}"}) {
    try {
      parseManifest(text, kFile);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()).rfind(kFile, 0), 0u) << e.what();
    }
  }
}

} // namespace
