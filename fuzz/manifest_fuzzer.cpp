//===- manifest_fuzzer.cpp - libFuzzer target for the artifact manifest ---===//
//
// The input is a manifest.json text. parseManifest may reject it only by
// throwing comfyquant::rt::Error; any other exception, a crash or a
// sanitizer report is a bug. An accepted manifest must write back to JSON
// that parses to the same number of modules.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Manifest.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace comfyquant::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    Manifest m = parseManifest(text, "fuzz/manifest.json");
    Manifest again = parseManifest(writeManifest(m), "fuzz/again.json");
    if (again.modules.size() != m.modules.size())
      std::abort();
  } catch (const Error &) {
  }
  return 0;
}
