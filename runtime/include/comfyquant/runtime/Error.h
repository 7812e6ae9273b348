//===- Error.h - Diagnostics of the comfyquant runtime ----------*- C++ -*-===//
//
// Every malformed input is reported as an Error whose message names the file,
// the subject (a tensor or a module) and the broken rule:
//
//   <file>: tensor 'blocks.0.qkv.weight': byte range [0, 96) overlaps ...
//   <file>: module 'blocks.0.qkv': format 'nvfp4': weight_scale must have ...
//
// The runtime throws Error internally; the C API and the tools catch it and
// turn it into a status code / exit status 1. An Error without a file reads
// "<subject>: <rule>". Its kind tells the C API which status to report.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_ERROR_H
#define COMFYQUANT_RUNTIME_ERROR_H

#include <stdexcept>
#include <cstdint>
#include <string>
#include <vector>

namespace comfyquant::rt {

/// What went wrong, coarsely: the C API maps it to a cq_status.
enum class ErrorKind {
  InvalidInput,    ///< a file or JSON text breaks a format rule (default)
  InvalidArgument, ///< a caller's argument: index, pointer, dtype, rows
  Io,              ///< a file cannot be opened, read, mapped or loaded
  Mismatch,        ///< checkpoint differs from the one an artifact binds
  Unsupported,     ///< CPU variant or dtype not available
};

class Error : public std::runtime_error {
public:
  Error(const std::string &file, const std::string &subject,
        const std::string &rule, ErrorKind kind = ErrorKind::InvalidInput)
      : std::runtime_error(format(file, subject, rule)), file_(file),
        subject_(subject), rule_(rule), kind_(kind) {}

  const std::string &file() const { return file_; }
  const std::string &subject() const { return subject_; }
  const std::string &rule() const { return rule_; }
  ErrorKind kind() const { return kind_; }

  static std::string format(const std::string &file, const std::string &subject,
                            const std::string &rule) {
    std::string s = file;
    if (!s.empty())
      s += ": ";
    if (!subject.empty()) {
      s += subject;
      s += ": ";
    }
    s += rule;
    return s;
  }

private:
  std::string file_, subject_, rule_;
  ErrorKind kind_;
};

/// "tensor 'name'" / "module 'name'": the subject strings used in messages.
inline std::string tensorSubject(const std::string &name) {
  return "tensor '" + name + "'";
}
inline std::string moduleSubject(const std::string &name) {
  return "module '" + name + "'";
}
/// "[4, 8]" — shapes in messages and reports.
inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_ERROR_H
