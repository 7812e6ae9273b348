//===- ToolVersion.h - --version of the LLVM-based tools --------*- C++ -*-===//
//
// `--version` prints the comfyquant version first, then the LLVM/MLIR it was
// built against, instead of LLVM's own banner alone.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_TOOLS_TOOLVERSION_H
#define COMFYQUANT_TOOLS_TOOLVERSION_H

#include "comfyquant/version.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace comfyquant::tools {

/// Call before parsing the command line.
inline void setVersionPrinter() {
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "comfyquant " << CQ_VERSION_STRING << "\n"
       << "  LLVM/MLIR " << LLVM_VERSION_STRING << "\n";
  });
}

} // namespace comfyquant::tools

#endif // COMFYQUANT_TOOLS_TOOLVERSION_H
