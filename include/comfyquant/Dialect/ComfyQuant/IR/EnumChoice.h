//===- EnumChoice.h - an option naming one case of a dialect enum -*- C++ -*-=//
//
// Strategy overrides (a micro-kernel, where B is decoded, the accumulator
// form) are cases of the dialect's ODS enums. `EnumChoice<E>` is an option
// value holding one such case or none ("the strategy decides"), parsed and
// printed through the enum's generated `symbolizeEnum`/`stringifyEnum`, so
// the list of cases is stated once, in ODS, for the attribute, the pass
// option and the tool's flag alike.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_DIALECT_COMFYQUANT_IR_ENUMCHOICE_H
#define COMFYQUANT_DIALECT_COMFYQUANT_IR_ENUMCHOICE_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace mlir::comfyquant {

/// One case of the ODS enum `E`, or none.
template <typename E> struct EnumChoice {
  std::optional<E> value;

  EnumChoice() = default;
  EnumChoice(E e) : value(e) {}
  explicit operator bool() const { return value.has_value(); }
  E operator*() const { return *value; }
  bool operator==(const EnumChoice &other) const {
    return value == other.value;
  }
  bool operator!=(const EnumChoice &other) const { return !(*this == other); }

  /// The case spelled `name` (its ODS string; `-` may stand for `_`, as on
  /// command lines); the empty string is none. Null when no case is spelled
  /// so.
  static std::optional<EnumChoice> parse(llvm::StringRef name) {
    if (name.empty())
      return EnumChoice();
    std::string spelling = name.str();
    for (char &c : spelling)
      if (c == '-')
        c = '_';
    std::optional<E> e = symbolizeEnum<E>(spelling);
    if (!e)
      return std::nullopt;
    return EnumChoice(*e);
  }

  /// The case as command lines spell it (`i8-vnni`), which `parse` reads
  /// back; empty for none.
  std::string str() const {
    std::string out = value ? stringifyEnum(*value).str() : std::string();
    for (char &c : out)
      if (c == '_')
        c = '-';
    return out;
  }

  /// Every case as command lines spell it, comma-separated (for errors).
  static std::string cases() {
    std::string out;
    for (uint32_t i = 0;; ++i) {
      std::optional<E> e = symbolizeEnum<E>(
          stringifyEnum(static_cast<E>(i)));
      if (!e || static_cast<uint32_t>(*e) != i)
        break;
      out += (i ? ", " : "") + EnumChoice(*e).str();
    }
    return out;
  }
};

template <typename E>
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const EnumChoice<E> &c) {
  return os << c.str();
}

} // namespace mlir::comfyquant

namespace llvm::cl {

/// Parses `EnumChoice<E>` for pass options and command-line flags; an
/// unknown spelling is an error listing the cases.
template <typename E>
class parser<mlir::comfyquant::EnumChoice<E>>
    : public basic_parser<mlir::comfyquant::EnumChoice<E>> {
public:
  using Choice = mlir::comfyquant::EnumChoice<E>;
  parser(Option &o) : basic_parser<Choice>(o) {}

  bool parse(Option &o, StringRef, StringRef arg, Choice &value) {
    std::optional<Choice> c = Choice::parse(arg);
    if (!c)
      return o.error("'" + arg + "' is not one of: " + Choice::cases());
    value = *c;
    return false;
  }
  StringRef getValueName() const override { return "case"; }
  void printOptionDiff(const Option &o, const Choice &value,
                       const OptionValue<Choice> &, size_t globalWidth) const {
    this->printOptionName(o, globalWidth);
    outs() << "= " << value << "\n";
  }
};

} // namespace llvm::cl

#endif // COMFYQUANT_DIALECT_COMFYQUANT_IR_ENUMCHOICE_H
