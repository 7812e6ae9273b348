//===- KernelResourcesTest.cpp - ptxas report vs recorded block sizes -----===//
#include "comfyquant/Codegen/GPU/GPUCodegen.h"

#include <gtest/gtest.h>

using namespace mlir::comfyquant;

namespace {

const char *kPtx = R"(.version 8.4
.target sm_90a
.visible .entry small(
	.param .u64 small_param_0
)
.maxntid 128, 1, 1
{
	ret;
}
.visible .entry wide(
	.param .u64 wide_param_0
)
.reqntid 32, 32, 1
{
	ret;
}
.visible .entry unbounded(
	.param .u64 unbounded_param_0
)
{
	.maxntid 64, 1, 1
	ret;
}
)";

std::string report(const char *name, int registers, int spill = 0) {
  return std::string("ptxas info    : Compiling entry function '") + name +
         "' for 'sm_90a'\nptxas info    : Function properties for " + name +
         "\n    0 bytes stack frame, " + std::to_string(spill) +
         " bytes spill stores, " + std::to_string(spill) +
         " bytes spill loads\nptxas info    : Used " +
         std::to_string(registers) +
         " registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]\n";
}

const CUDAArch &sm90a() { return *lookupCUDAArch("sm_90a"); }

TEST(KernelResources, ReadsBlockSizesFromThePtx) {
  std::map<std::string, int64_t> sizes = recordedBlockSizes(kPtx);
  EXPECT_EQ(sizes.at("small"), 128);
  EXPECT_EQ(sizes.at("wide"), 1024);
  // A directive inside the body is not the entry's bound.
  EXPECT_EQ(sizes.count("unbounded"), 0u);
}

TEST(KernelResources, ParsesThePtxasReport) {
  auto used = parsePtxasReport(report("small", 72, 12) + report("wide", 40));
  ASSERT_EQ(used.size(), 2u);
  EXPECT_EQ(used.at("small").registers, 72);
  EXPECT_EQ(used.at("small").spillStoreBytes, 12);
  EXPECT_EQ(used.at("small").spillLoadBytes, 12);
  EXPECT_EQ(used.at("small").sharedBytes, 2048);
  EXPECT_EQ(used.at("wide").registers, 40);
}

TEST(KernelResources, RegistersAgainstTheRecordedBlockSize) {
  std::string error;
  auto sizes = recordedBlockSizes(kPtx);
  // 128 threads x 255 registers fit 65536; 1024 threads x 64 registers
  // exactly fill them; 1024 x 72 do not.
  EXPECT_TRUE(checkKernelResources(parsePtxasReport(report("small", 255)),
                                   sizes, sm90a(), error))
      << error;
  EXPECT_TRUE(checkKernelResources(parsePtxasReport(report("wide", 64)), sizes,
                                   sm90a(), error))
      << error;
  EXPECT_FALSE(checkKernelResources(parsePtxasReport(report("wide", 72)),
                                    sizes, sm90a(), error));
  EXPECT_NE(error.find("kernel 'wide' uses 72 registers per thread, more than "
                       "a 1024-thread block may"),
            std::string::npos)
      << error;
}

TEST(KernelResources, EveryKernelNeedsARecordedBlockSize) {
  std::string error;
  EXPECT_FALSE(checkKernelResources(parsePtxasReport(report("unbounded", 8)),
                                    recordedBlockSizes(kPtx), sm90a(), error));
  EXPECT_NE(error.find("kernel 'unbounded' has no recorded block size"),
            std::string::npos)
      << error;
}

} // namespace
