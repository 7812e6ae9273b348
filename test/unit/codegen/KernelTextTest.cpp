//===- KernelTextTest.cpp - kernel keys and worker text ignore --mlir-* ---===//
//
// Kernel keys decide which modules share a kernel, and worker text is what
// worker threads compile. Both must hold every constant whatever printing
// options a tool registered and was given: two kernels that differ only in a
// constant table get two keys, and the worker text parses back to the same
// kernel.
//===----------------------------------------------------------------------===//
#include "comfyquant/Compiler/KernelText.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::comfyquant;

namespace {

const char *kKernel = R"(
func.func @%s(%%x: tensor<8xf32>) -> tensor<8xf32> {
  %%table = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, %s]> : tensor<8xf32>
  %%y = arith.addf %%x, %%table : tensor<8xf32>
  return %%y : tensor<8xf32>
}
)";

OwningOpRef<ModuleOp> parseKernel(MLIRContext &ctx, const char *name,
                                  const char *last) {
  char text[512];
  std::snprintf(text, sizeof text, kKernel, name, last);
  return parseSourceString<ModuleOp>(text, &ctx);
}

func::FuncOp only(ModuleOp m) { return *m.getOps<func::FuncOp>().begin(); }

class KernelText : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    // What comfyquant-compile does: register the printing options, then
    // parse a command line that elides constants and prints debug info.
    registerAsmPrinterCLOptions();
    registerMLIRContextCLOptions();
    const char *argv[] = {"test", "--mlir-elide-elementsattrs-if-larger=1",
                          "--mlir-print-debuginfo",
                          "--mlir-print-local-scope"};
    ASSERT_TRUE(llvm::cl::ParseCommandLineOptions(4, argv, "", &llvm::errs()));
  }

  void SetUp() override {
    ctx.loadDialect<arith::ArithDialect, func::FuncDialect>();
  }

  MLIRContext ctx;
};

TEST_F(KernelText, TheOptionsWouldElideTheTable) {
  // The command line really took effect: default flags elide the table.
  OwningOpRef<ModuleOp> a = parseKernel(ctx, "a", "7.0");
  ASSERT_TRUE(a);
  std::string s;
  llvm::raw_string_ostream os(s);
  only(*a)->print(os, OpPrintingFlags());
  EXPECT_NE(s.find("__elided__"), std::string::npos) << s;
}

TEST_F(KernelText, KernelsDifferingInATableGetTwoKeys) {
  OwningOpRef<ModuleOp> a = parseKernel(ctx, "a", "7.0");
  OwningOpRef<ModuleOp> b = parseKernel(ctx, "b", "7.5");
  OwningOpRef<ModuleOp> c = parseKernel(ctx, "c", "7.0");
  ASSERT_TRUE(a && b && c);
  EXPECT_NE(kernelKey(only(*a)), kernelKey(only(*b)));
  // The symbol is not part of the key.
  EXPECT_EQ(kernelKey(only(*a)), kernelKey(only(*c)));
  EXPECT_EQ(kernelKey(only(*a)).find("__elided__"), std::string::npos);
  EXPECT_EQ(kernelKey(only(*a)).find("loc("), std::string::npos);
}

TEST_F(KernelText, WorkerTextParsesBackToTheSameKernel) {
  OwningOpRef<ModuleOp> b = parseKernel(ctx, "b", "7.5");
  ASSERT_TRUE(b);
  std::string text = printForWorker(only(*b));
  EXPECT_EQ(text.find("__elided__"), std::string::npos) << text;
  MLIRContext worker;
  worker.loadDialect<arith::ArithDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> back = parseSourceString<ModuleOp>(text, &worker);
  ASSERT_TRUE(back);
  EXPECT_EQ(printOp(only(*back)), printOp(only(*b)));
}

} // namespace
