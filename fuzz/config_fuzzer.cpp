//===- config_fuzzer.cpp - libFuzzer target for configuration rules -------===//
//
// The first byte picks what the rest of the input feeds:
//   0: a comfy_quant JSON object (parseQuantConfig);
//   1: an attention preference (parseAttentionPreference);
//   2: a module description — format, kind, N, K, E, G, Gr and tensor
//      dtypes/shapes decoded from the bytes — through inferLogicalShape and
//      verifyModule, which the dialect verifiers also run on arbitrary IR.
// Only comfyquant::rt::Error may escape the parsers; the rule checkers must
// return, never throw, for any input. Sanitizers catch the rest.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/FormatRegistry.h"
#include "comfyquant/runtime/QuantConfig.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

using namespace comfyquant::rt;

namespace {

struct Reader {
  const uint8_t *p;
  size_t n;
  uint8_t byte() { return n ? (--n, *p++) : 0; }
  int64_t dim() {
    // Mostly small, sometimes huge or negative: overflow paths matter.
    uint8_t sel = byte();
    int64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v = (v << 8) | byte();
    switch (sel % 4) {
    case 0:
      return sel / 4;
    case 1:
      return (v & 0xFFF);
    case 2:
      return v;
    default:
      return -(v & 0xFF);
    }
  }
};

void fuzzModule(Reader r) {
  ModuleDesc d;
  d.format = static_cast<Format>(r.byte() % kNumFormats);
  d.kind = static_cast<ModuleKind>(r.byte() % 3);
  if (r.byte() & 1) {
    d.outFeatures = r.dim();
    d.inFeatures = r.dim();
  }
  d.experts = d.kind == ModuleKind::MoE ? r.dim() : 0;
  d.groupSize = r.dim();
  d.rotationGroup = r.dim();
  d.linearDtype = (r.byte() & 1) ? "int4" : "int8";
  const FormatInfo &f = formatInfo(d.format);
  for (const TensorRole &role : f.roles) {
    if (!(r.byte() & 3))
      continue;
    TensorDesc t;
    t.dtype = static_cast<DType>(r.byte() % 16);
    int rank = r.byte() % 4;
    for (int i = 0; i < rank; ++i)
      t.shape.push_back(r.dim());
    d.tensors[role.key] = t;
  }
  (void)inferLogicalShape(d);
  (void)verifyModule(d);
  FormatParams p;
  p.granularity = static_cast<ScaleGranularity>(r.byte() % 4);
  p.group = r.dim();
  p.nibbles = static_cast<NibbleOrder>(r.byte() % 3);
  if (r.byte() & 1)
    p.scaleDType = static_cast<DType>(r.byte() % 16);
  (void)verifyFormatParams(d.format, p);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view text(reinterpret_cast<const char *>(data + 1), size - 1);
  try {
    switch (data[0] % 3) {
    case 0:
      parseQuantConfig(text, "fuzz.module", "fuzz.safetensors");
      break;
    case 1: {
      std::vector<std::string> warnings;
      parseAttentionPreference(text, "fuzz.attn", "fuzz.safetensors",
                               warnings);
      break;
    }
    default:
      fuzzModule(Reader{data + 1, size - 1});
      break;
    }
  } catch (const Error &) {
    // Expected: malformed configuration is reported as an Error.
  }
  return 0;
}
