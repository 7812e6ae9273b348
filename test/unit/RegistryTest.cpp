//===- RegistryTest.cpp - format registry rules ---------------------------===//
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/QuantConfig.h"

#include <gtest/gtest.h>

using namespace comfyquant::rt;

namespace {

ModuleDesc linear(Format f, int64_t n, int64_t k) {
  ModuleDesc d;
  d.name = "m";
  d.format = f;
  d.outFeatures = n;
  d.inFeatures = k;
  return d;
}

/// Expects `verifyModule` to fail with a message containing `text`.
void expectRule(const ModuleDesc &d, const std::string &text) {
  auto err = verifyModule(d);
  ASSERT_TRUE(err.has_value()) << "expected failure containing: " << text;
  EXPECT_NE(err->find(text), std::string::npos) << *err;
}

TEST(Registry, EveryFormatHasAnEntryInEnumOrder) {
  ASSERT_EQ(allFormats().size(), static_cast<size_t>(kNumFormats));
  for (int i = 0; i < kNumFormats; ++i) {
    const FormatInfo &f = allFormats()[i];
    EXPECT_EQ(static_cast<int>(f.format), i);
    EXPECT_EQ(parseFormat(f.name), f.format);
    EXPECT_STREQ(f.roles[0].key, "weight");
  }
  EXPECT_FALSE(parseFormat("awq_w4a16").has_value());
  EXPECT_FALSE(parseFormat("").has_value());
}

TEST(Registry, Fp8Linear) {
  ModuleDesc d = linear(Format::Float8E4M3FN, 64, 32);
  d.tensors["weight"] = {DType::F8_E4M3, {64, 32}};
  d.tensors["weight_scale"] = {DType::F32, {}};
  EXPECT_FALSE(verifyModule(d)) << *verifyModule(d);
  d.tensors["input_scale"] = {DType::F32, {1}};
  EXPECT_FALSE(verifyModule(d));
  d.tensors["weight"] = {DType::U8, {64, 32}};
  expectRule(d, "weight must be F8_E4M3");
  d.tensors["weight"] = {DType::F8_E4M3, {64, 33}};
  expectRule(d, "weight must be storage [N, K]");
  d.tensors["weight"] = {DType::F8_E4M3, {64, 32}};
  d.tensors["weight_scale"] = {DType::F32, {64}};
  expectRule(d, "weight_scale must be a scalar");
  d.tensors.erase("weight_scale");
  expectRule(d, "missing required tensor weight_scale");
}

TEST(Registry, Nvfp4PaddingAndSwizzledScales) {
  // N = 40, K = 72 -> storage [48, 40], scales 128 x 8 swizzled.
  ModuleDesc d = linear(Format::NVFP4, 40, 72);
  d.tensors["weight"] = {DType::U8, {48, 40}};
  d.tensors["weight_scale"] = {DType::F8_E4M3, {128, 8}};
  d.tensors["weight_scale_2"] = {DType::F32, {}};
  EXPECT_FALSE(verifyModule(d)) << *verifyModule(d);
  // Any shape with the swizzled element count is accepted (ComfyUI views it).
  d.tensors["weight_scale"] = {DType::U8, {1024}};
  EXPECT_FALSE(verifyModule(d));
  // The plain [N, K/16] layout is not.
  d.tensors["weight_scale"] = {DType::F8_E4M3, {40, 5}};
  expectRule(d, "swizzled block scales: 1024 entries");
  d.tensors["weight_scale"] = {DType::F8_E4M3, {128, 8}};
  d.tensors["pre_quant_scale"] = {DType::BF16, {72}};
  EXPECT_FALSE(verifyModule(d));
  d.tensors["pre_quant_scale"] = {DType::BF16, {80}};
  expectRule(d, "pre_quant_scale must be [K]");
}

TEST(Registry, InferLogicalShapeFromPaddedStorage) {
  ModuleDesc d;
  d.format = Format::NVFP4;
  d.tensors["weight"] = {DType::U8, {48, 40}};
  d.tensors["bias"] = {DType::BF16, {40}};
  d.tensors["pre_quant_scale"] = {DType::F32, {72}};
  ASSERT_FALSE(inferLogicalShape(d));
  EXPECT_EQ(d.outFeatures, 40);
  EXPECT_EQ(d.inFeatures, 72);
  // Without bias / pre_quant_scale the storage shape is the logical one.
  ModuleDesc e;
  e.format = Format::MXFP8;
  e.tensors["weight"] = {DType::F8_E4M3, {64, 96}};
  ASSERT_FALSE(inferLogicalShape(e));
  EXPECT_EQ(e.outFeatures, 64);
  EXPECT_EQ(e.inFeatures, 96);
  // An explicit override must fit the storage.
  ModuleDesc o = e;
  o.outFeatures = 40;
  o.inFeatures = 80;
  EXPECT_FALSE(inferLogicalShape(o));
  o.outFeatures = 20;
  EXPECT_TRUE(inferLogicalShape(o));
  // Storage must be padded.
  ModuleDesc p;
  p.format = Format::MXFP8;
  p.tensors["weight"] = {DType::F8_E4M3, {40, 96}};
  EXPECT_TRUE(inferLogicalShape(p));
}

TEST(Registry, PackedWidthsGiveK) {
  ModuleDesc w4;
  w4.format = Format::ConvRotW4A4;
  w4.tensors["weight"] = {DType::I8, {16, 128}};
  ASSERT_FALSE(inferLogicalShape(w4));
  EXPECT_EQ(w4.inFeatures, 256);
  ModuleDesc w6;
  w6.format = Format::W6A8Int8;
  w6.tensors["weight"] = {DType::I8, {16, 192}};
  ASSERT_FALSE(inferLogicalShape(w6));
  EXPECT_EQ(w6.inFeatures, 256);
  w6.tensors["weight"] = {DType::I8, {16, 190}};
  w6.inFeatures = 0;
  EXPECT_TRUE(inferLogicalShape(w6));
}

TEST(Registry, Int8ScalesAndConvRot) {
  ModuleDesc d = linear(Format::Int8Tensorwise, 16, 64);
  d.tensors["weight"] = {DType::I8, {16, 64}};
  d.tensors["weight_scale"] = {DType::F32, {16, 1}};
  EXPECT_FALSE(verifyModule(d));
  d.tensors["weight_scale"] = {DType::F32, {16}};
  expectRule(d, "1-D [N] scale");
  d.tensors["weight_scale"] = {DType::F32, {}};
  EXPECT_FALSE(verifyModule(d));
  d.rotationGroup = 64;
  expectRule(d, "ConvRot int8 weight_scale must be per-row");
  d.tensors["weight_scale"] = {DType::F32, {16, 1}};
  EXPECT_FALSE(verifyModule(d));
  d.rotationGroup = 32;
  expectRule(d, "must be a power of 4");
  d.rotationGroup = 256;
  expectRule(d, "must be divisible by convrot_groupsize 256");
}

TEST(Registry, ConvRotW4A4) {
  ModuleDesc d = linear(Format::ConvRotW4A4, 8, 128);
  d.rotationGroup = 64;
  d.linearDtype = "int4";
  d.tensors["weight"] = {DType::I8, {8, 64}};
  d.tensors["weight_scale"] = {DType::F32, {8}};
  EXPECT_FALSE(verifyModule(d)) << *verifyModule(d);
  d.linearDtype = "fp8";
  expectRule(d, "linear_dtype 'fp8'");
  d.linearDtype = "int8";
  d.rotationGroup = 0;
  expectRule(d, "requires a ConvRot group size");
  ModuleDesc k = linear(Format::ConvRotW4A4, 8, 48);
  k.rotationGroup = 16;
  k.linearDtype = "int4";
  k.tensors["weight"] = {DType::I8, {8, 24}};
  k.tensors["weight_scale"] = {DType::F32, {8}};
  expectRule(k, "must be divisible by 64");
}

TEST(Registry, GroupedFormats) {
  ModuleDesc d = linear(Format::AsymW4A8Int8, 8, 256);
  d.rotationGroup = 256;
  d.groupSize = 16;
  d.tensors["weight"] = {DType::I8, {8, 128}};
  d.tensors["weight_s_rel"] = {DType::F8_E4M3, {8, 16}};
  d.tensors["weight_s_channel"] = {DType::F32, {8}};
  d.tensors["weight_codebook"] = {DType::F32, {16}};
  EXPECT_FALSE(verifyModule(d)) << *verifyModule(d);
  d.groupSize = 8;
  expectRule(d, "weight_s_rel must be [N, K/G]");
  d.tensors["weight_s_rel"] = {DType::F8_E4M3, {8, 32}};
  EXPECT_FALSE(verifyModule(d));
  d.groupSize = 2;
  expectRule(d, "must be >= 4");
  d.groupSize = 24;
  expectRule(d, "must divide 16 or be a multiple of 16");
  d.groupSize = 16;
  d.tensors["weight_s_rel"] = {DType::F8_E4M3, {8, 16}};
  d.tensors["weight_codebook"] = {DType::F32, {15}};
  expectRule(d, "weight_codebook must be F32 [16]");

  ModuleDesc w6 = linear(Format::W6A8Int8, 8, 256);
  w6.rotationGroup = 256;
  w6.groupSize = 16;
  w6.tensors["weight"] = {DType::I8, {8, 192}};
  w6.tensors["weight_s_rel"] = {DType::F8_E4M3, {8, 16}};
  w6.tensors["weight_s_channel"] = {DType::F32, {8}};
  EXPECT_FALSE(verifyModule(w6)) << *verifyModule(w6);
  w6.tensors["weight_codebook"] = {DType::F32, {16}};
  expectRule(w6, "not part of format 'w6a8_int8'");
  w6.tensors.erase("weight_codebook");
  w6.groupSize = 8;
  expectRule(w6, "must be a multiple of 16");
}

TEST(Registry, MoEBanks) {
  ModuleDesc d = linear(Format::Float8E4M3FN, 16, 32);
  d.kind = ModuleKind::MoE;
  d.experts = 3;
  d.tensors["weight"] = {DType::F8_E4M3, {3, 16, 32}};
  d.tensors["weight_scale"] = {DType::F32, {3}};
  EXPECT_FALSE(verifyModule(d));
  d.tensors["weight_scale"] = {DType::F32, {2}};
  expectRule(d, "scalar or [E]");
  // Flattened banks accept [E*N, ...] per-row tensors.
  ModuleDesc g = linear(Format::AsymW4A8Int8, 8, 256);
  g.kind = ModuleKind::MoE;
  g.experts = 2;
  g.rotationGroup = 256;
  g.groupSize = 16;
  g.tensors["weight"] = {DType::I8, {2, 8, 128}};
  g.tensors["weight_s_rel"] = {DType::F8_E4M3, {2, 8, 16}};
  g.tensors["weight_s_channel"] = {DType::F32, {16}};
  EXPECT_FALSE(verifyModule(g)) << *verifyModule(g);
}

TEST(Registry, EmbeddingRules) {
  ModuleDesc d = linear(Format::NVFP4, 32, 32);
  d.kind = ModuleKind::Embedding;
  d.tensors["weight"] = {DType::U8, {32, 16}};
  expectRule(d, "cannot be used by an embedding");
  ModuleDesc e = linear(Format::Float8E4M3FN, 32, 16);
  e.kind = ModuleKind::Embedding;
  e.tensors["weight"] = {DType::F8_E4M3, {32, 16}};
  EXPECT_FALSE(verifyModule(e)); // the scale is optional for embeddings
  e.tensors["input_scale"] = {DType::F32, {}};
  expectRule(e, "only valid on Linear");
}

TEST(Registry, FormatParams) {
  for (const FormatInfo &f : allFormats())
    EXPECT_FALSE(verifyFormatParams(f.format, defaultFormatParams(f.format)))
        << f.name;
  FormatParams p = defaultFormatParams(Format::NVFP4);
  p.nibbles = NibbleOrder::LowFirst;
  EXPECT_TRUE(verifyFormatParams(Format::NVFP4, p));
  p = defaultFormatParams(Format::MXFP8);
  p.group = 16;
  EXPECT_TRUE(verifyFormatParams(Format::MXFP8, p));
  p = defaultFormatParams(Format::Int8Tensorwise);
  p.granularity = ScaleGranularity::Row;
  EXPECT_FALSE(verifyFormatParams(Format::Int8Tensorwise, p));
  p.granularity = ScaleGranularity::Block;
  EXPECT_TRUE(verifyFormatParams(Format::Int8Tensorwise, p));
}

TEST(QuantConfig, ParamsFallbackAndTruthiness) {
  QuantConfig c = parseQuantConfig(
      R"({"format":"int8_tensorwise","params":{"convrot":1,"convrot_groupsize":64}})",
      "m", "f");
  EXPECT_EQ(c.format, "int8_tensorwise");
  EXPECT_TRUE(c.convrot);
  EXPECT_EQ(c.convrotGroupSize, 64);
  EXPECT_FALSE(c.convrotTopLevel); // embeddings do not read params
  QuantConfig top = parseQuantConfig(
      R"({"format":"convrot_w4a4","convrot_groupsize":16,"params":{"convrot_groupsize":64},"linear_dtype":"int8"})",
      "m", "f");
  EXPECT_EQ(top.convrotGroupSize, 16);
  EXPECT_EQ(top.linearDtype, "int8");
  QuantConfig fp = parseQuantConfig(
      R"({"format":"float8_e4m3fn","full_precision_matrix_mult":"yes"})", "m",
      "f");
  EXPECT_TRUE(fp.fullPrecisionMatrixMult);
}

TEST(QuantConfig, ComfyOrgInt8MarkerWithoutFormat) {
  QuantConfig c = parseQuantConfig(
      R"({"convrot":true,"convrot_groupsize":256,"per_row":true})", "m", "f");
  EXPECT_EQ(c.format, "int8_tensorwise");
  ASSERT_EQ(c.warnings.size(), 1u);
}

TEST(QuantConfig, Errors) {
  auto msg = [](const std::string &json) -> std::string {
    try {
      parseQuantConfig(json, "blk.0", "file.safetensors");
    } catch (const std::exception &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(msg("{").find("file.safetensors: module 'blk.0': comfy_quant is "
                          "not valid JSON"),
            std::string::npos);
  EXPECT_NE(msg("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(msg("{}").find("no \"format\""), std::string::npos);
  EXPECT_NE(msg(R"({"format":3})").find("\"format\" must be a string"),
            std::string::npos);
  EXPECT_NE(msg(std::string("{\"format\":\"x\"}\0garbage", 23))
                .find("NUL byte at offset 14"),
            std::string::npos);
  std::string deep(100000, '[');
  EXPECT_NE(msg("{\"format\":" + deep).find("nests deeper than 32"),
            std::string::npos);
}

TEST(QuantConfig, MistypedOptionsAreRecordedNotThrown) {
  // ComfyUI ignores options a format does not read; the resolver rejects a
  // mistyped one only where the format reads it.
  QuantConfig c = parseQuantConfig(
      R"({"format":"nvfp4","group_size":"16","convrot_groupsize":2.5,"linear_dtype":4,"num_experts":"x"})",
      "m", "f");
  EXPECT_EQ(c.optionErrors.at("group_size"),
            "group_size must be an integer, got \"16\"");
  EXPECT_EQ(c.optionErrors.at("convrot_groupsize"),
            "convrot_groupsize must be an integer, got 2.5");
  EXPECT_EQ(c.optionErrors.at("linear_dtype"),
            "linear_dtype must be a string, got 4");
  EXPECT_FALSE(c.optionErrors.count("num_experts")); // informational
  EXPECT_FALSE(c.numExperts.has_value());
}

} // namespace
