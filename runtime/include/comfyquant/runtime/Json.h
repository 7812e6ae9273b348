//===- Json.h - strict JSON parsing for untrusted input ---------*- C++ -*-===//
//
// Headers, index files, comfy_quant configs and attention preferences are
// untrusted JSON. These helpers reject what nlohmann would otherwise accept
// or choke on: invalid UTF-8, a NUL byte (nlohmann's lexer ends the input
// there, so `{...}\0garbage` would parse), nesting deep enough to exhaust the
// stack in later recursive code (dump, comparisons), and — where asked —
// duplicate keys.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_JSON_H
#define COMFYQUANT_RUNTIME_JSON_H

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace comfyquant::rt {

/// Parses `text`; any failure throws Error(file, subject, "<what> ...").
nlohmann::json parseStrictJson(std::string_view text, const std::string &file,
                               const std::string &subject,
                               const std::string &what, int maxDepth,
                               bool rejectDuplicateKeys);

/// `s` made safe for a one-line message: control bytes and DEL become \xNN,
/// long strings are cut at a UTF-8 boundary with "...".
std::string printable(std::string_view s, size_t maxLen = 200);
/// printable(s) in double quotes.
std::string quotedStr(std::string_view s);
/// A JSON value for a message, cut to 80 bytes.
std::string jsonSnippet(const nlohmann::json &v);
/// "0xNN".
std::string hexByte(unsigned char c);
/// Offset of the first byte that breaks UTF-8 (RFC 3629), or npos.
size_t invalidUtf8At(std::string_view s);

} // namespace comfyquant::rt

#endif
