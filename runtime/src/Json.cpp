//===- Json.cpp - strict JSON parsing for untrusted input -----------------===//
#include "comfyquant/runtime/Json.h"

#include "comfyquant/runtime/Error.h"

#include <set>
#include <vector>

namespace comfyquant::rt {

using json = nlohmann::json;

/// A string made safe for a one-line message: control bytes and DEL become
/// \xNN, and long strings are cut (at a UTF-8 boundary) with "...".
std::string printable(std::string_view s, size_t maxLen) {
  std::string out;
  size_t n = s.size();
  bool cut = false;
  if (n > maxLen) {
    n = maxLen;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
      --n;
    cut = true;
  }
  static const char *hex = "0123456789ABCDEF";
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut)
    out += "...";
  return out;
}

std::string hexByte(unsigned char c) {
  static const char *hex = "0123456789ABCDEF";
  return std::string("0x") + hex[c >> 4] + hex[c & 15];
}

/// Offset of the first byte that breaks UTF-8 (RFC 3629: no overlongs, no
/// surrogates, nothing above U+10FFFF), or npos when `s` is valid.
size_t invalidUtf8At(std::string_view s) {
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0)
        lo = 0xA0; // overlong
      else if (c == 0xED)
        hi = 0x9F; // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0)
        lo = 0x90; // overlong
      else if (c == 0xF4)
        hi = 0x8F; // > U+10FFFF
    } else {
      return i;
    }
    if (n - i < len)
      return i;
    if (p[i + 1] < lo || p[i + 1] > hi)
      return i;
    for (size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80)
        return i;
    i += len;
  }
  return std::string_view::npos;
}

/// Parses `text` into a DOM, rejecting invalid UTF-8, duplicate keys (at any
/// level) and nesting deeper than `maxDepth`.
json parseStrictJson(std::string_view text, const std::string &file,
                     const std::string &subject, const std::string &what,
                     int maxDepth, bool rejectDuplicateKeys) {
  size_t bad = invalidUtf8At(text);
  if (bad != std::string_view::npos)
    throw Error(file, subject, what + " is not valid UTF-8 (byte " +
                              hexByte(static_cast<unsigned char>(text[bad])) +
                              " at offset " + std::to_string(bad) + ")");
  // nlohmann's lexer takes a NUL byte for the end of input; JSON text has
  // none (docs/Formats.md §1.1: no terminator), so garbage after it must fail.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw Error(file, subject,
                what + " contains a NUL byte at offset " + std::to_string(nul) +
                    " (JSON text has no terminator)");
  std::vector<std::set<std::string>> keys;
  auto cb = [&](int depth, json::parse_event_t ev, json &parsed) -> bool {
    switch (ev) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      if (depth >= maxDepth)
        throw Error(file, subject, what + " nests deeper than " +
                                  std::to_string(maxDepth) + " levels");
      if (ev == json::parse_event_t::object_start)
        keys.emplace_back();
      break;
    case json::parse_event_t::object_end:
      if (!keys.empty())
        keys.pop_back();
      break;
    case json::parse_event_t::key:
      if (rejectDuplicateKeys && !keys.empty() && parsed.is_string() &&
          !keys.back().insert(parsed.get<std::string>()).second)
        throw Error(file, subject,
                    "duplicate key " + quotedStr(parsed.get<std::string>()) +
                        " in " + what);
      break;
    default:
      break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception &e) {
    throw Error(file, subject, what + " is not valid JSON: " + printable(e.what()));
  }
}

std::string quotedStr(std::string_view s) { return "\"" + printable(s) + "\""; }

std::string jsonSnippet(const json &v) { return printable(v.dump(), 80); }

} // namespace comfyquant::rt
