//===- policy_fuzzer.cpp - libFuzzer target for the quantizer's plan step -===//
//
// The input is a policy file and a list of tensor names: "<policy JSON>\0
// <name>\n<name>\n...". The policy goes through PolicySet::add (only
// comfyquant::rt::Error may escape); then detection and classification run
// over the names with the built-in policies plus the fuzzed one, and the
// format shape rules over sizes decoded from the names. Lengths are capped:
// std::regex backtracks, and a pattern is a user's own file, not a
// checkpoint. Detection may throw Error (several policies at one priority).
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/quantize/Policy.h"
#include "comfyquant/runtime/quantize/WeightEncoder.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace comfyquant::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const PolicySet builtin = PolicySet::builtin();
  std::string text(reinterpret_cast<const char *>(data), size);
  size_t split = text.find('\0');
  std::string policy = text.substr(0, split);
  std::string rest = split == std::string::npos ? "" : text.substr(split + 1);
  if (policy.size() > 2048)
    return 0;
  std::vector<std::string> names;
  for (size_t b = 0; b < rest.size() && names.size() < 64;) {
    size_t e = rest.find('\n', b);
    if (e == std::string::npos)
      e = rest.size();
    if (e - b <= 128)
      names.push_back(rest.substr(b, e - b));
    b = e + 1;
  }
  // The fuzzed policy alone (its "include" names no fragment there, which
  // is itself a rule the parser checks) ...
  PolicySet own;
  try {
    own.add(policy, "fuzz.json");
    std::string why;
    if (const ArchitecturePolicy *p = own.detect(names, why))
      for (const auto &n : names)
        (void)own.classify(*p, n);
  } catch (const Error &) {
  }
  // ... and the built-in policies over the fuzzed names.
  try {
    std::string why;
    if (const ArchitecturePolicy *p = builtin.detect(names, why))
      for (const auto &n : names)
        (void)builtin.classify(*p, n);
  } catch (const Error &) {
  }
  // Shape rules never throw and never overflow.
  for (const auto &n : names) {
    EncodeOptions e;
    e.format = Format(uint8_t(n.size()) % kNumFormats);
    e.rotationGroup = int64_t(n.size() * 4);
    e.groupSize = int64_t(n.size());
    (void)encodeShapeRule(e, int64_t(n.size()) * 7, int64_t(n.size()) << 40);
  }
  return 0;
}
