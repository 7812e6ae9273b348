//===- HostileCApiTest.cpp - every hostile input through the C API --------===//
//
// Each file listed in test/hostile/{container,module}/EXPECTED.txt must make
// cq_checkpoint_open fail cleanly: an error status (CQ_ERROR_IO or
// CQ_ERROR_INVALID_INPUT), no handle, and cq_last_error() naming the file and
// the broken rule (the sanitizer build runs this under ASan/UBSan).
//===----------------------------------------------------------------------===//
#include "comfyquant/comfyquant.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

namespace {

struct HostileFile {
  std::string path, rule;
};

std::vector<HostileFile> hostileFiles() {
  std::vector<HostileFile> files;
  const std::string root = COMFYQUANT_HOSTILE_DIR;
  for (const char *sub : {"container", "module"}) {
    std::ifstream in(root + "/" + sub + "/EXPECTED.txt");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty())
        continue;
      std::string name = line.substr(0, line.find('\t'));
      std::string rule = line.substr(line.rfind('\t') + 1);
      files.push_back({root + "/" + sub + "/" + name, rule});
    }
  }
  return files;
}

TEST(HostileCApi, EveryFileIsRefusedWithItsRule) {
  std::vector<HostileFile> files = hostileFiles();
  ASSERT_GT(files.size(), 100u) << "EXPECTED.txt lists went missing";
  for (const HostileFile &f : files) {
    SCOPED_TRACE(f.path);
    cq_checkpoint *c = nullptr;
    cq_status status = cq_checkpoint_open(f.path.c_str(), &c);
    if (status == CQ_OK || c) {
      ADD_FAILURE() << "opened without an error (status " << status << ")";
      cq_checkpoint_close(c);
      continue;
    }
    EXPECT_TRUE(status == CQ_ERROR_IO || status == CQ_ERROR_INVALID_INPUT)
        << "status " << status;
    std::string err = cq_last_error();
    EXPECT_NE(err.find(f.path), std::string::npos) << err;
    EXPECT_NE(err.find(f.rule), std::string::npos) << err;
  }
}

} // namespace
