//===- CApiTest.cpp - the C API of the runtime ----------------------------===//
#include "comfyquant/comfyquant.h"
#include "comfyquant/runtime/Reference.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

const std::string kSample =
    std::string(COMFYQUANT_FIXTURES_DIR) + "/ckpt/sample_mixed.safetensors";

TEST(CApi, ListsAndDequantizesModules) {
  cq_checkpoint *c = cq_checkpoint_open(kSample.c_str());
  ASSERT_NE(c, nullptr) << cq_last_error();
  ASSERT_EQ(cq_module_count(c), 6u);
  int64_t idx = cq_module_find(c, "double_blocks.0.img_mlp.2");
  ASSERT_GE(idx, 0);
  cq_module_info info;
  ASSERT_EQ(cq_module_info_at(c, static_cast<size_t>(idx), &info), 0);
  EXPECT_STREQ(info.name, "double_blocks.0.img_mlp.2");
  EXPECT_STREQ(info.format, "asym_w4a8_int8");
  EXPECT_EQ(info.kind, CQ_KIND_LINEAR);
  EXPECT_EQ(info.out_features, 64);
  EXPECT_EQ(info.in_features, 256);
  EXPECT_EQ(info.rotation_group, 256);
  EXPECT_EQ(info.group_size, 16);

  // Rows 3..5 equal the same rows of the whole reference weight.
  std::vector<float> rows(3 * 256);
  ASSERT_EQ(cq_dequantize_rows(c, static_cast<size_t>(idx), 0, 3, 6,
                               rows.data(), rows.size()),
            0)
      << cq_last_error();
  auto ckpt = comfyquant::rt::Checkpoint::open(kSample);
  auto resolved = comfyquant::rt::resolveCheckpoint(*ckpt);
  std::vector<float> all =
      comfyquant::rt::dequantizeModule(*resolved.find("double_blocks.0.img_mlp.2"));
  EXPECT_EQ(std::memcmp(rows.data(), all.data() + 3 * 256, rows.size() * 4), 0);

  // Errors are reported, not crashes.
  EXPECT_NE(cq_dequantize_rows(c, static_cast<size_t>(idx), 0, 3, 6,
                               rows.data(), 10),
            0);
  EXPECT_NE(std::string(cq_last_error()).find("output buffer too small"),
            std::string::npos);
  EXPECT_NE(cq_dequantize_rows(c, static_cast<size_t>(idx), 1, 0, 1,
                               rows.data(), rows.size()),
            0);
  EXPECT_NE(cq_module_info_at(c, 99, &info), 0);
  EXPECT_EQ(cq_module_find(c, "nope"), -1);
  cq_checkpoint_close(c);
}

TEST(CApi, OpenFailureNamesTheFile) {
  EXPECT_EQ(cq_checkpoint_open("/nonexistent/x.safetensors"), nullptr);
  EXPECT_NE(std::string(cq_last_error()).find("/nonexistent/x.safetensors"),
            std::string::npos);
  EXPECT_EQ(cq_checkpoint_open(nullptr), nullptr);
}

} // namespace
