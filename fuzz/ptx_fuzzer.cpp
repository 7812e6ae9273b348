//===- ptx_fuzzer.cpp - libFuzzer target for the PTX emulator's parser ----===//
//
// The input is PTX text. The parser may reject it only by throwing
// comfyquant::ptxemu::PtxError; any other exception, a crash or a sanitizer
// report is a bug. An accepted module's kernels are checked for the
// invariants the interpreter relies on (branch targets inside the code,
// register slots below the kernel's count, symbols and parameters in range).
//===----------------------------------------------------------------------===//
#include "ptxemu/PtxModule.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace comfyquant::ptxemu;

namespace {
void check(bool ok) {
  if (!ok)
    std::abort();
}

void checkOperand(const Kernel &k, const Operand &o) {
  switch (o.kind) {
  case Operand::Reg:
    check(o.reg < k.slots);
    break;
  case Operand::Addr:
    check(!o.hasBase || o.reg < k.slots);
    check(o.symbol < static_cast<int32_t>(k.symbols.size()));
    break;
  case Operand::Symbol:
    check(o.symbol >= 0 && o.symbol < static_cast<int32_t>(k.symbols.size()));
    break;
  case Operand::Label:
    check(o.label <= k.code.size());
    break;
  case Operand::Vec:
    for (const Operand &e : o.elems)
      checkOperand(k, e);
    break;
  default:
    break;
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    Module m = parsePtx(text, "fuzz.ptx");
    for (const Kernel &k : m.kernels) {
      check(k.slotNames.size() == k.slots);
      for (const Instr &in : k.code) {
        check(in.opcodeId < m.opcodes.size());
        checkOperand(k, in.guard);
        for (const Operand &o : in.ops)
          checkOperand(k, o);
      }
    }
  } catch (const PtxError &) {
  }
  return 0;
}
