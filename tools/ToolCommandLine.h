//===- ToolCommandLine.h - the runtime tools' option parsing ----*- C++ -*-===//
//
// comfyquant-run and comfyquant-quantize parse like the LLVM-based tools:
// --opt=value or --opt value, known options only, a value where one is due
// and nowhere else, single-valued options at most once, one positional
// FILE.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_TOOLS_TOOLCOMMANDLINE_H
#define COMFYQUANT_TOOLS_TOOLCOMMANDLINE_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace comfyquant::tools {

struct OptionSpec {
  const char *name;
  const char *meta; ///< the value's placeholder; null for a flag
  bool repeatable;
  const char *help;
};

/// The parsed command line: the positional FILE and each option's values.
struct CommandLine {
  std::string file;
  std::map<std::string, std::vector<std::string>> values;

  bool has(const std::string &name) const { return values.count(name) != 0; }
  std::string get(const std::string &name, const std::string &def = "") const {
    auto it = values.find(name);
    return it == values.end() ? def : it->second.back();
  }
};

/// Parses argv strictly: known options only, values where they are due and
/// nowhere else, single-valued options at most once. Returns the error, or
/// "" on success.
template <size_t N>
inline std::string parseCommandLine(int argc, char **argv,
                                    const OptionSpec (&options)[N],
                                    CommandLine &cl) {
  bool optionsEnded = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!optionsEnded && arg == "--") {
      optionsEnded = true;
      continue;
    }
    if (optionsEnded || arg.size() < 2 || arg[0] != '-') {
      if (!cl.file.empty())
        return "unexpected argument '" + arg + "' (one checkpoint FILE)";
      cl.file = arg;
      continue;
    }
    std::string name = arg, value;
    size_t eq = arg.find('=');
    bool inlineValue = eq != std::string::npos;
    if (inlineValue) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (name == "-h")
      name = "--help";
    const OptionSpec *spec = nullptr;
    for (const OptionSpec &o : options)
      if (name == o.name)
        spec = &o;
    if (!spec)
      return "unknown option '" + name + "' (see --help)";
    if (!spec->meta && inlineValue)
      return name + " takes no value";
    if (spec->meta && !inlineValue) {
      if (i + 1 >= argc)
        return name + " needs a value (" + name + " " + spec->meta + ")";
      value = argv[++i];
    }
    if (spec->meta && value.empty())
      return name + " needs a non-empty value (" + name + " " + spec->meta +
             ")";
    std::vector<std::string> &values = cl.values[name];
    if (!values.empty() && !spec->repeatable)
      return name + " may be given only once";
    values.push_back(value);
  }
  return "";
}

/// A decimal integer in [0, max]: digits only, no sign, no overflow.
inline bool parseCount(const std::string &text, int64_t max, int64_t &out) {
  if (text.empty() || text.size() > 18)
    return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + (c - '0');
  }
  if (v > max)
    return false;
  out = v;
  return true;
}

} // namespace comfyquant::tools

#endif // COMFYQUANT_TOOLS_TOOLCOMMANDLINE_H
