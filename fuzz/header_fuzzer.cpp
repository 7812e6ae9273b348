//===- header_fuzzer.cpp - libFuzzer target for the safetensors header ----===//
//
// The input is a whole safetensors file image: 8-byte little-endian header
// length, header JSON, data section. Each input is fed to one or more
// "parsers" below. A parser may reject the input only by throwing
// comfyquant::rt::Error; any other exception, a crash, a sanitizer report or a
// broken invariant of an accepted result is a bug.
//
// To add a target (e.g. the quant-config parser), write another
// `void fuzzXxx(const uint8_t *data, size_t size)` and append it to
// kParsers; it is then run on every input under the same rules.
//
//   clang++-22 -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -Iruntime/include runtime/src/DType.cpp runtime/src/Safetensors.cpp \
//     fuzz/header_fuzzer.cpp -o /tmp/hf && mkdir -p /tmp/hf-work &&
//     /tmp/hf -max_total_time=20 -dict=fuzz/header.dict /tmp/hf-work fuzz/corpus/header
//   (a scratch directory first: libFuzzer writes new inputs to the first one)
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Safetensors.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

using namespace comfyquant::rt;

namespace {

[[noreturn]] void invariantBroken(const char *what) {
  std::fprintf(stderr, "fuzzer: invariant broken: %s\n", what);
  std::abort();
}

#define FUZZ_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      invariantBroken(#cond);                                                  \
  } while (0)

/// What an accepted header promises: sorted, contiguous ranges that exactly
/// tile [0, dataSize), each of numel x element-size bytes.
void checkAccepted(const SafetensorsHeader &h, uint64_t dataSize,
                   uint64_t headerSize) {
  uint64_t cursor = 0;
  for (const TensorInfo &t : h.tensors) {
    FUZZ_CHECK(t.begin <= t.end);
    FUZZ_CHECK(t.begin == cursor);
    FUZZ_CHECK(t.end <= dataSize);
    FUZZ_CHECK(t.numel() >= 0);
    FUZZ_CHECK(static_cast<uint64_t>(t.numel()) * dtypeSize(t.dtype) ==
               t.nbytes());
    FUZZ_CHECK(t.fileOffset == 8 + headerSize + t.begin);
    FUZZ_CHECK(parseDType(dtypeName(t.dtype)) == t.dtype);
    FUZZ_CHECK(t.name != "__metadata__");
    for (int64_t d : t.shape)
      FUZZ_CHECK(d >= 0);
    cursor = t.end;
  }
  FUZZ_CHECK(cursor == dataSize);
}

/// The container: mirror SafetensorsFile::open's prefix checks, then parse
/// the header against the real data-section size. A prefix that open() would
/// reject (most random mutations break it) does not waste the input: the
/// rest is then parsed as a header with an empty data section.
void fuzzContainer(const uint8_t *data, size_t size) {
  if (size < 8)
    return;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | data[i];
  if (n > kMaxHeaderBytes || n > size - 8)
    n = size - 8; // lenient mode: everything after the prefix is header
  std::string_view json(reinterpret_cast<const char *>(data + 8),
                        static_cast<size_t>(n));
  uint64_t dataSize = size - 8 - n;
  static const std::string kFile = "<fuzz>";
  SafetensorsHeader h;
  try {
    h = parseSafetensorsHeader(json, dataSize, kFile);
  } catch (const Error &e) {
    // Rejections must name the file and say something.
    FUZZ_CHECK(e.file() == kFile);
    FUZZ_CHECK(!e.rule().empty());
    return;
  }
  checkAccepted(h, dataSize, n);
}

// void fuzzQuantConfig(const uint8_t *data, size_t size) {
//   try {
//     parseQuantConfigForFuzzing(std::string_view(
//         reinterpret_cast<const char *>(data), size));
//   } catch (const Error &) {
//   }
// }

using Parser = void (*)(const uint8_t *, size_t);
constexpr Parser kParsers[] = {
    fuzzContainer,
    // fuzzQuantConfig,
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (Parser p : kParsers) {
    try {
      p(data, size);
    } catch (const Error &) {
      // A rejection that escaped a parser wrapper: still fine.
    } catch (const std::exception &e) {
      std::fprintf(stderr, "fuzzer: non-Error exception escaped: %s\n",
                   e.what());
      std::abort();
    } catch (...) {
      std::fprintf(stderr, "fuzzer: unknown exception escaped\n");
      std::abort();
    }
  }
  return 0;
}
