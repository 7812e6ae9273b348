//===- PtxParser.cpp - PTX text to decoded kernels ------------------------===//
//
// A statement scanner over the whole text (statements span lines; comments
// and inline-asm `{ }` scopes with their own `.reg` are handled), then one
// decoder per opcode family that accepts exactly the modifiers the
// interpreter implements. Every refusal names the line.
//===----------------------------------------------------------------------===//
#include "ptxemu/PtxModule.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace comfyquant::ptxemu {

int tyBytes(Ty t) {
  switch (t) {
  case Ty::Pred: return 1;
  case Ty::B8: case Ty::U8: case Ty::S8: case Ty::E4M3: case Ty::E5M2:
  case Ty::UE8M0: case Ty::UE4M3: case Ty::E2M1: return 1;
  case Ty::B16: case Ty::U16: case Ty::S16: case Ty::F16: case Ty::BF16:
    return 2;
  case Ty::B32: case Ty::U32: case Ty::S32: case Ty::F32: case Ty::F16x2:
  case Ty::BF16x2: case Ty::S16x2: case Ty::U16x2: return 4;
  case Ty::B64: case Ty::U64: case Ty::S64: case Ty::F64: return 8;
  default: return 0;
  }
}

bool tyIsSigned(Ty t) {
  return t == Ty::S8 || t == Ty::S16 || t == Ty::S32 || t == Ty::S64 ||
         t == Ty::S16x2;
}

bool tyIsFloat(Ty t) {
  return t == Ty::F16 || t == Ty::F16x2 || t == Ty::BF16 || t == Ty::BF16x2 ||
         t == Ty::F32 || t == Ty::F64;
}

namespace {
struct TyName { const char *name; Ty ty; };
constexpr TyName kTypes[] = {
  {"pred", Ty::Pred}, {"b8", Ty::B8}, {"b16", Ty::B16}, {"b32", Ty::B32},
  {"b64", Ty::B64}, {"u8", Ty::U8}, {"u16", Ty::U16}, {"u32", Ty::U32},
  {"u64", Ty::U64}, {"s8", Ty::S8}, {"s16", Ty::S16}, {"s32", Ty::S32},
  {"s64", Ty::S64}, {"f16", Ty::F16}, {"f16x2", Ty::F16x2},
  {"bf16", Ty::BF16}, {"bf16x2", Ty::BF16x2}, {"f32", Ty::F32},
  {"f64", Ty::F64}, {"s16x2", Ty::S16x2}, {"u16x2", Ty::U16x2},
  {"e4m3", Ty::E4M3}, {"e5m2", Ty::E5M2}, {"e2m1", Ty::E2M1},
  {"ue8m0", Ty::UE8M0}, {"ue4m3", Ty::UE4M3},
};

Ty tyFromName(const std::string &s) {
  for (const TyName &t : kTypes)
    if (s == t.name)
      return t.ty;
  return Ty::None;
}
} // namespace

const char *tyName(Ty t) {
  for (const TyName &n : kTypes)
    if (n.ty == t)
      return n.name;
  return "none";
}

const Kernel *Module::find(const std::string &name) const {
  for (const Kernel &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

namespace {

struct Token {
  std::string text;
  uint32_t line;
};

/// Splits the text into tokens; punctuation is one token each.
class Lexer {
public:
  Lexer(const std::string &text, const std::string &source)
      : s_(text), source_(source) {}

  [[noreturn]] void fail(uint32_t line, const std::string &msg) const {
    throw PtxError(source_ + ":" + std::to_string(line) + ": " + msg);
  }

  std::vector<Token> run() {
    std::vector<Token> out;
    size_t i = 0, n = s_.size();
    uint32_t line = 1;
    while (i < n) {
      char c = s_[i];
      if (c == '\n') { ++line; ++i; continue; }
      if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
      if (c == '/' && i + 1 < n && s_[i + 1] == '/') {
        while (i < n && s_[i] != '\n') ++i;
        continue;
      }
      if (c == '/' && i + 1 < n && s_[i + 1] == '*') {
        size_t end = s_.find("*/", i + 2);
        if (end == std::string::npos)
          fail(line, "unterminated /* comment");
        for (size_t j = i; j < end; ++j)
          line += s_[j] == '\n';
        i = end + 2;
        continue;
      }
      if (c == '"') {
        size_t end = s_.find('"', i + 1);
        if (end == std::string::npos)
          fail(line, "unterminated string");
        out.push_back({s_.substr(i, end + 1 - i), line});
        i = end + 1;
        continue;
      }
      if (std::strchr(",;{}[]()+-!@|<>:=", c)) {
        // `::` inside a word is handled below; a lone ':' ends a label.
        out.push_back({std::string(1, c), line});
        ++i;
        continue;
      }
      if (std::isalnum(static_cast<unsigned char>(c)) ||
          std::strchr("._%$", c)) {
        size_t j = i;
        while (j < n) {
          char d = s_[j];
          if (std::isalnum(static_cast<unsigned char>(d)) ||
              std::strchr("._%$", d)) {
            ++j;
            continue;
          }
          if (d == ':' && j + 1 < n && s_[j + 1] == ':') {
            j += 2;
            continue;
          }
          break;
        }
        out.push_back({s_.substr(i, j - i), line});
        i = j;
        continue;
      }
      fail(line, std::string("unexpected character '") + c + "'");
    }
    return out;
  }

private:
  const std::string &s_;
  const std::string &source_;
};

bool parseInt(const std::string &t, int64_t &v) {
  if (t.empty())
    return false;
  size_t i = 0;
  uint64_t x = 0;
  bool any = false;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    for (i = 2; i < t.size(); ++i) {
      char c = t[i];
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else if ((c == 'U' || c == 'u') && i + 1 == t.size()) break;
      else return false;
      if (x >> 60)
        return false;
      x = x * 16 + d;
      any = true;
    }
  } else {
    for (; i < t.size(); ++i) {
      char c = t[i];
      if ((c == 'U' || c == 'u') && i + 1 == t.size())
        break;
      if (c < '0' || c > '9')
        return false;
      uint64_t nx = x * 10 + (c - '0');
      if (nx / 10 != x)
        return false;
      x = nx;
      any = true;
    }
  }
  v = static_cast<int64_t>(x);
  return any;
}

/// 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX: IEEE bits.
bool parseFloatBits(const std::string &t, int64_t &v, bool &isDouble) {
  if (t.size() < 3 || t[0] != '0' || (t[1] != 'f' && t[1] != 'F' &&
                                      t[1] != 'd' && t[1] != 'D'))
    return false;
  isDouble = t[1] == 'd' || t[1] == 'D';
  if (t.size() != (isDouble ? 18u : 10u))
    return false;
  uint64_t x = 0;
  for (size_t i = 2; i < t.size(); ++i) {
    char c = t[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    x = x * 16 + d;
  }
  v = static_cast<int64_t>(x);
  return true;
}

struct SregName { const char *name; Sreg sreg; };
constexpr SregName kSregs[] = {
  {"%tid.x", Sreg::TidX}, {"%tid.y", Sreg::TidY}, {"%tid.z", Sreg::TidZ},
  {"%ntid.x", Sreg::NtidX}, {"%ntid.y", Sreg::NtidY},
  {"%ntid.z", Sreg::NtidZ}, {"%ctaid.x", Sreg::CtaidX},
  {"%ctaid.y", Sreg::CtaidY}, {"%ctaid.z", Sreg::CtaidZ},
  {"%nctaid.x", Sreg::NctaidX}, {"%nctaid.y", Sreg::NctaidY},
  {"%nctaid.z", Sreg::NctaidZ}, {"%laneid", Sreg::LaneId},
  {"%warpid", Sreg::WarpId}, {"%nwarpid", Sreg::NWarpId},
  {"%smid", Sreg::SmId}, {"%nsmid", Sreg::NSmId},
  {"%lanemask_lt", Sreg::LaneMaskLt}, {"%lanemask_le", Sreg::LaneMaskLe},
  {"%lanemask_eq", Sreg::LaneMaskEq}, {"%lanemask_ge", Sreg::LaneMaskGe},
  {"%lanemask_gt", Sreg::LaneMaskGt}, {"%clock", Sreg::Clock},
  {"%clock64", Sreg::Clock64}, {"%dynamic_smem_size", Sreg::DynSmemSize},
};

/// The parts of an opcode, consumed by the decoder; leftovers are refused.
class Parts {
public:
  explicit Parts(const std::string &opcode) {
    size_t i = 0;
    while (i <= opcode.size()) {
      size_t j = opcode.find('.', i);
      if (j == std::string::npos)
        j = opcode.size();
      parts_.push_back(opcode.substr(i, j - i));
      i = j + 1;
    }
    used_.assign(parts_.size(), false);
    used_[0] = true;
  }
  const std::string &base() const { return parts_[0]; }
  bool take(const std::string &p) {
    for (size_t i = 1; i < parts_.size(); ++i)
      if (!used_[i] && parts_[i] == p) {
        used_[i] = true;
        return true;
      }
    return false;
  }
  bool takePrefix(const std::string &prefix, std::string &rest) {
    for (size_t i = 1; i < parts_.size(); ++i)
      if (!used_[i] && parts_[i].compare(0, prefix.size(), prefix) == 0) {
        used_[i] = true;
        rest = parts_[i].substr(prefix.size());
        return true;
      }
    return false;
  }
  /// The types in the order written.
  std::vector<Ty> takeTypes() {
    std::vector<Ty> out;
    for (size_t i = 1; i < parts_.size(); ++i)
      if (!used_[i]) {
        Ty t = tyFromName(parts_[i]);
        if (t != Ty::None) {
          used_[i] = true;
          out.push_back(t);
        }
      }
    return out;
  }
  std::string leftover() const {
    for (size_t i = 1; i < parts_.size(); ++i)
      if (!used_[i])
        return parts_[i];
    return "";
  }

private:
  std::vector<std::string> parts_;
  std::vector<bool> used_;
};

class Parser {
public:
  Parser(const std::string &text, const std::string &source)
      : lex_(text, source), source_(source) {
    toks_ = lex_.run();
  }

  Module run() {
    Module m;
    m.source = source_;
    while (pos_ < toks_.size()) {
      const Token &t = peek();
      if (t.text == ".version") {
        next();
        next();
      } else if (t.text == ".target") {
        next();
        m.target = next().text;
        while (pos_ < toks_.size() && peek().text == ",") {
          next();
          next();
        }
        parseTarget(m, t.line);
      } else if (t.text == ".address_size") {
        next();
        if (next().text != "64")
          fail(t.line, "only .address_size 64 is supported");
      } else if (t.text == ".visible" || t.text == ".entry" ||
                 t.text == ".weak") {
        if (t.text != ".entry")
          next();
        if (peek().text != ".entry")
          fail(peek().line, "unsupported declaration '" + peek().text +
                                "' (the emulator runs .entry kernels only)");
        next();
        m.kernels.push_back(parseKernel(m));
      } else if (t.text == ".extern") {
        next();
        parseExternShared();
      } else if (t.text == ".global") {
        // Module-scope globals: only unreferenced ones are accepted (a
        // reference is an unknown symbol, refused by name).
        while (peek().text != ";")
          next();
        next();
      } else if (t.text == ".shared" || t.text == ".const") {
        fail(t.line, "unsupported module-scope variable (" + t.text + ")");
      } else if (t.text == ".func") {
        fail(t.line, "unsupported .func (device functions are not emulated)");
      } else {
        fail(t.line, "unexpected '" + t.text + "' at module scope");
      }
    }
    if (m.target.empty())
      fail(1, "no .target directive");
    m.opcodes = opcodes_;
    return m;
  }

private:
  [[noreturn]] void fail(uint32_t line, const std::string &msg) const {
    lex_.fail(line, msg);
  }
  const Token &peek() const {
    if (pos_ >= toks_.size())
      fail(toks_.empty() ? 1 : toks_.back().line, "unexpected end of file");
    return toks_[pos_];
  }
  const Token &next() {
    const Token &t = peek();
    ++pos_;
    return t;
  }
  void expect(const char *s) {
    const Token &t = next();
    if (t.text != s)
      fail(t.line, std::string("expected '") + s + "', found '" + t.text + "'");
  }

  void parseTarget(Module &m, uint32_t line) {
    const std::string &t = m.target;
    if (t.compare(0, 3, "sm_") != 0)
      fail(line, "unsupported .target " + t);
    size_t i = 3;
    int v = 0;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])))
      v = v * 10 + (t[i++] - '0');
    if (i == 3 || v < 70 || v > 200)
      fail(line, "unsupported .target " + t);
    m.smVersion = v;
    m.archSpecific = i < t.size() && t[i] == 'a';
    m.family = i < t.size() && t[i] == 'f';
  }

  // ---- declarations --------------------------------------------------------

  void parseExternShared() {
    const Token &t = next();
    if (t.text != ".shared")
      fail(t.line, "unsupported .extern " + t.text);
    uint32_t align = 1;
    if (peek().text == ".align") {
      next();
      int64_t a;
      if (!parseInt(next().text, a) || a <= 0 || a > 4096)
        fail(t.line, "bad .align");
      align = static_cast<uint32_t>(a);
    }
    next(); // element type
    std::string name = next().text;
    expect("[");
    expect("]");
    expect(";");
    dynamicShared_.push_back({name, align});
  }

  /// `.reg .b32 %r<262>;` or `.reg .pred p;` (a scoped name).
  void parseReg(Kernel &k) {
    next(); // .reg
    const Token &ty = next();
    if (tyFromName(ty.text.substr(1)) == Ty::None || ty.text[0] != '.')
      fail(ty.line, "unsupported .reg type " + ty.text);
    while (true) {
      const Token &name = next();
      if (peek().text == "<") {
        next();
        int64_t n;
        const Token &cnt = next();
        if (!parseInt(cnt.text, n) || n < 0 || n > (1 << 20))
          fail(cnt.line, "bad register count");
        expect(">");
        for (int64_t i = 0; i < n; ++i)
          declare(k, name.text + std::to_string(i), name.line);
      } else {
        declare(k, name.text, name.line);
      }
      if (peek().text == ",") {
        next();
        continue;
      }
      break;
    }
    expect(";");
  }

  void declare(Kernel &k, const std::string &name, uint32_t line) {
    auto &scope = scopes_.back();
    if (scope.count(name))
      fail(line, "register " + name + " declared twice");
    if (k.slots >= (1u << 22))
      fail(line, "too many registers");
    scope[name] = k.slots++;
    k.slotNames.push_back(name);
  }

  /// `.shared .align 4 .b8 name[16];` and `.local ...` inside a kernel.
  void parseVar(Kernel &k) {
    const Token &sp = next();
    Symbol s;
    s.space = sp.text == ".shared" ? Space::Shared : Space::Local;
    if (peek().text == ".align") {
      next();
      int64_t a;
      const Token &at = next();
      if (!parseInt(at.text, a) || a <= 0 || a > 4096 || (a & (a - 1)))
        fail(at.line, "bad .align");
      s.align = static_cast<uint32_t>(a);
    }
    const Token &ty = next();
    Ty t = ty.text.size() > 1 ? tyFromName(ty.text.substr(1)) : Ty::None;
    if (t == Ty::None || t == Ty::Pred)
      fail(ty.line, "unsupported variable type " + ty.text);
    s.name = next().text;
    int64_t count = 1;
    if (peek().text == "[") {
      next();
      const Token &c = next();
      if (!parseInt(c.text, count) || count <= 0 || count > (1 << 26))
        fail(c.line, "bad array size for " + s.name);
      expect("]");
    }
    if (peek().text == "=")
      fail(sp.line, "unsupported initializer of " + s.name);
    expect(";");
    s.bytes = static_cast<uint64_t>(count) * tyBytes(t);
    if (s.align < static_cast<uint32_t>(tyBytes(t)))
      s.align = tyBytes(t);
    uint64_t &top = s.space == Space::Shared ? k.staticShared : k.localBytes;
    top = (top + s.align - 1) / s.align * s.align;
    s.offset = top;
    top += s.bytes;
    addSymbol(k, s, sp.line);
  }

  void addSymbol(Kernel &k, const Symbol &s, uint32_t line) {
    for (const Symbol &o : k.symbols)
      if (o.name == s.name)
        fail(line, "symbol " + s.name + " declared twice");
    k.symbols.push_back(s);
  }

  Kernel parseKernel(Module &m) {
    Kernel k;
    const Token &nameTok = next();
    k.name = nameTok.text;
    k.firstLine = nameTok.line;
    scopes_.assign(1, {});
    labels_.clear();
    fixups_.clear();
    expect("(");
    while (peek().text != ")") {
      const Token &p = next();
      if (p.text != ".param")
        fail(p.line, "expected .param, found " + p.text);
      uint32_t align = 0;
      Ty t = Ty::None;
      int64_t count = 1;
      std::string name;
      while (true) {
        const Token &a = next();
        if (a.text == ".align") {
          int64_t v;
          if (!parseInt(next().text, v) || v <= 0 || v > 256)
            fail(a.line, "bad .align");
          align = static_cast<uint32_t>(v);
        } else if (a.text == ".ptr" || a.text == ".global" ||
                   a.text == ".shared" || a.text == ".const") {
          // pointer attributes: no effect on the value
        } else if (a.text[0] == '.' && tyFromName(a.text.substr(1)) != Ty::None) {
          t = tyFromName(a.text.substr(1));
        } else {
          name = a.text;
          break;
        }
      }
      if (peek().text == "[") {
        next();
        const Token &c = next();
        if (!parseInt(c.text, count) || count <= 0 || count > 4096)
          fail(c.line, "bad parameter array size");
        expect("]");
      }
      if (t == Ty::None || t == Ty::Pred)
        fail(p.line, "unsupported parameter type of " + name);
      uint32_t bytes = static_cast<uint32_t>(count * tyBytes(t));
      if (!align)
        align = tyBytes(t);
      k.paramBytes = (k.paramBytes + align - 1) / align * align;
      k.params.push_back({name, k.paramBytes, bytes});
      Symbol s;
      s.name = name;
      s.space = Space::Param;
      s.offset = k.paramBytes;
      s.bytes = bytes;
      addSymbol(k, s, p.line);
      k.paramBytes += bytes;
      if (peek().text == ",")
        next();
    }
    expect(")");
    while (peek().text != "{") {
      const Token &d = next();
      if (d.text == ".maxntid" || d.text == ".reqntid") {
        for (int i = 0; i < 3; ++i) {
          int64_t v;
          if (!parseInt(next().text, v) || v <= 0 || v > 1024)
            fail(d.line, "bad " + d.text);
          k.maxntid[i] = static_cast<int>(v);
          if (peek().text != ",")
            break;
          next();
        }
      } else if (d.text == ".minnctapersm" || d.text == ".maxnreg" ||
                 d.text == ".maxnctapersm") {
        next();
      } else {
        fail(d.line, "unsupported kernel directive " + d.text);
      }
    }
    next(); // {
    int depth = 1;
    while (depth > 0) {
      const Token &t = peek();
      if (t.text == "{") {
        next();
        scopes_.emplace_back();
        ++depth;
      } else if (t.text == "}") {
        next();
        scopes_.pop_back();
        --depth;
      } else if (t.text == ".reg") {
        parseReg(k);
      } else if (t.text == ".shared" || t.text == ".local") {
        parseVar(k);
      } else if (t.text == ".pragma") {
        next();
        const Token &text = next();
        const std::string kMask = "\"used_bytes_mask ";
        if (text.text.compare(0, kMask.size(), kMask) == 0) {
          int64_t mask;
          std::string v = text.text.substr(kMask.size());
          if (!v.empty() && v.back() == '"')
            v.pop_back();
          if (!parseInt(v, mask) || mask < 0 || mask > 0xFFFFFFFFll)
            fail(text.line, "bad used_bytes_mask " + text.text);
          pendingUsedBytes_ = static_cast<uint32_t>(mask);
        }
        expect(";");
      } else if (t.text[0] == '.') {
        fail(t.line, "unsupported directive " + t.text + " in a kernel");
      } else if (pos_ + 1 < toks_.size() && toks_[pos_ + 1].text == ":") {
        const Token &l = next();
        next();
        if (labels_.count(l.text))
          fail(l.line, "label " + l.text + " defined twice");
        labels_[l.text] = static_cast<uint32_t>(k.code.size());
      } else {
        k.code.push_back(parseInstr(k));
        k.code.back().usedBytes = pendingUsedBytes_;
        pendingUsedBytes_ = ~0u;
      }
    }
    for (auto &[idx, opIndex] : fixups_) {
      Operand &o = k.code[idx].ops[opIndex];
      auto it = labels_.find(labelNames_[idx]);
      if (it == labels_.end())
        fail(k.code[idx].line, "undefined label " + labelNames_[idx]);
      o.label = it->second;
    }
    labelNames_.clear();
    // Dynamic shared memory begins after the static declarations.
    for (auto &[name, align] : dynamicShared_) {
      Symbol s;
      s.name = name;
      s.space = Space::Shared;
      s.align = align < 16 ? 16 : align;
      s.offset = (k.staticShared + s.align - 1) / s.align * s.align;
      s.bytes = 0;
      bool dup = false;
      for (const Symbol &o : k.symbols)
        dup |= o.name == name;
      if (!dup)
        k.symbols.push_back(s);
    }
    (void)m;
    return k;
  }

  // ---- operands --------------------------------------------------------------

  uint32_t lookupReg(const std::string &name, uint32_t line) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end())
        return f->second;
    }
    fail(line, "undeclared register " + name);
  }

  int32_t lookupSymbol(const Kernel &k, const std::string &name) {
    for (size_t i = 0; i < k.symbols.size(); ++i)
      if (k.symbols[i].name == name)
        return static_cast<int32_t>(i);
    for (auto &[dname, align] : dynamicShared_)
      if (dname == name) {
        // Declared at module scope, placed when the kernel ends: record it
        // now so the index is stable.
        Symbol s;
        s.name = dname;
        s.space = Space::Shared;
        s.align = align < 16 ? 16 : align;
        s.offset = ~0ull; // fixed up below
        const_cast<Kernel &>(k).symbols.push_back(s);
        return static_cast<int32_t>(k.symbols.size() - 1);
      }
    return -1;
  }

  Operand parseOperand(Kernel &k, uint32_t line) {
    Operand o;
    const Token &t = next();
    if (t.text == "{") {
      o.kind = Operand::Vec;
      while (true) {
        if (peek().text == "_") {
          next();
          o.elems.push_back(Operand());
        } else {
          o.elems.push_back(parseOperand(k, line));
        }
        const Token &sep = next();
        if (sep.text == "}")
          break;
        if (sep.text != ",")
          fail(sep.line, "expected ',' or '}' in a vector operand");
      }
      return o;
    }
    if (t.text == "[") {
      o.kind = Operand::Addr;
      const Token &b = next();
      int64_t v;
      if (b.text[0] == '%') {
        o.hasBase = true;
        o.reg = lookupReg(b.text, b.line);
      } else if (parseInt(b.text, v)) {
        o.imm = v;
      } else {
        o.symbol = lookupSymbol(k, b.text);
        if (o.symbol < 0)
          fail(b.line, "unknown symbol " + b.text);
      }
      while (peek().text == "+" || peek().text == "-") {
        bool neg = next().text == "-";
        if (peek().text == "-") { // [%rd1+-16]
          next();
          neg = !neg;
        }
        const Token &off = next();
        if (!parseInt(off.text, v))
          fail(off.line, "bad address offset " + off.text);
        o.imm += neg ? -v : v;
      }
      expect("]");
      return o;
    }
    if (t.text == "!") {
      Operand p = parseOperand(k, line);
      if (p.kind != Operand::Reg)
        fail(t.line, "'!' applies to a predicate register");
      p.negate = true;
      return p;
    }
    if (t.text == "-") {
      const Token &n = next();
      int64_t v;
      bool dbl;
      if (parseInt(n.text, v)) {
        o.kind = Operand::Imm;
        o.imm = -v;
        return o;
      }
      if (parseFloatBits(n.text, v, dbl))
        fail(n.line, "negated float literal");
      fail(n.line, "bad operand -" + n.text);
    }
    if (t.text[0] == '%') {
      for (const SregName &s : kSregs)
        if (t.text == s.name) {
          o.kind = Operand::Special;
          o.sreg = s.sreg;
          return o;
        }
      o.kind = Operand::Reg;
      o.reg = lookupReg(t.text, t.line);
      return o;
    }
    int64_t v;
    bool dbl = false;
    if (parseFloatBits(t.text, v, dbl)) {
      o.kind = Operand::Imm;
      o.imm = v;
      return o;
    }
    if (parseInt(t.text, v)) {
      o.kind = Operand::Imm;
      o.imm = v;
      return o;
    }
    if (t.text[0] == '$' || std::isalpha(static_cast<unsigned char>(t.text[0])) ||
        t.text[0] == '_') {
      // A register declared without '%' (inline-asm scopes: `.reg .pred p`).
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
        if (auto f = it->find(t.text); f != it->end()) {
          o.kind = Operand::Reg;
          o.reg = f->second;
          return o;
        }
      int32_t sym = lookupSymbol(k, t.text);
      if (sym >= 0) {
        o.kind = Operand::Symbol;
        o.symbol = sym;
        return o;
      }
      o.kind = Operand::Label;
      pendingLabel_ = t.text;
      return o;
    }
    fail(t.line, "bad operand '" + t.text + "'");
  }

  // ---- instructions ----------------------------------------------------------

  Instr parseInstr(Kernel &k) {
    Instr in;
    const Token *t = &next();
    in.line = t->line;
    if (t->text == "@") {
      in.guard = parseOperand(k, t->line);
      if (in.guard.kind != Operand::Reg)
        fail(t->line, "a guard must be a predicate register");
      t = &next();
    }
    const std::string opcode = t->text;
    auto id = std::find(opcodes_.begin(), opcodes_.end(), opcode);
    in.opcodeId = static_cast<uint16_t>(id - opcodes_.begin());
    if (id == opcodes_.end())
      opcodes_.push_back(opcode);
    pendingLabel_.clear();
    while (peek().text != ";") {
      in.ops.push_back(parseOperand(k, in.line));
      if (in.ops.back().kind == Operand::Label) {
        labelNames_[k.code.size()] = pendingLabel_;
        fixups_[k.code.size()] = in.ops.size() - 1;
      }
      if (peek().text == ",")
        next();
      else if (peek().text == "|") {
        next(); // setp's second destination: d|q
      } else if (peek().text != ";")
        fail(peek().line, "expected ',' or ';' after an operand of " + opcode);
    }
    next();
    decode(in, opcode);
    return in;
  }

  [[noreturn]] void unsupported(const Instr &in, const std::string &opcode,
                                const std::string &what) {
    fail(in.line, "unsupported " + what + " in '" + opcode + "'");
  }

  void needOps(const Instr &in, const std::string &opcode, size_t n) {
    if (in.ops.size() != n)
      fail(in.line, "'" + opcode + "' takes " + std::to_string(n) +
                        " operands, found " + std::to_string(in.ops.size()));
  }

  void decode(Instr &in, const std::string &opcode);
  void decodeMma(Instr &in, Parts &p, const std::string &opcode);
  void decodeTcgen05(Instr &in, Parts &p, const std::string &opcode);

  Lexer lex_;
  std::string source_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::vector<std::map<std::string, uint32_t>> scopes_;
  std::map<std::string, uint32_t> labels_;
  std::map<size_t, size_t> fixups_; // instruction -> its label operand
  std::map<size_t, std::string> labelNames_;
  std::string pendingLabel_;
  std::vector<std::pair<std::string, uint32_t>> dynamicShared_;
  uint32_t pendingUsedBytes_ = ~0u;
  std::vector<std::string> opcodes_;
};

Rnd takeRnd(Parts &p) {
  static const std::pair<const char *, Rnd> kRnd[] = {
      {"rn", Rnd::Rn}, {"rz", Rnd::Rz}, {"rm", Rnd::Rm}, {"rp", Rnd::Rp},
      {"rni", Rnd::Rni}, {"rzi", Rnd::Rzi}, {"rmi", Rnd::Rmi},
      {"rpi", Rnd::Rpi}};
  for (auto &[n, r] : kRnd)
    if (p.take(n))
      return r;
  return Rnd::None;
}

Space takeSpace(Parts &p) {
  if (p.take("global")) return Space::Global;
  if (p.take("shared") || p.take("shared::cta")) return Space::Shared;
  if (p.take("param")) return Space::Param;
  if (p.take("local")) return Space::Local;
  if (p.take("const")) return Space::Const;
  return Space::Generic;
}

void Parser::decode(Instr &in, const std::string &opcode) {
  Parts p(opcode);
  const std::string &b = p.base();
  auto finish = [&](size_t nops) {
    std::string left = p.leftover();
    if (!left.empty())
      unsupported(in, opcode, "modifier ." + left);
    if (nops != size_t(-1))
      needOps(in, opcode, nops);
  };
  auto oneType = [&]() {
    std::vector<Ty> ts = p.takeTypes();
    if (ts.size() != 1)
      unsupported(in, opcode, "type combination");
    in.type = ts[0];
  };
  static const std::map<std::string, Op> kSimple = {
      {"add", Op::Add}, {"sub", Op::Sub}, {"mul", Op::Mul}, {"mad", Op::Mad},
      {"div", Op::Div}, {"rem", Op::Rem}, {"min", Op::Min}, {"max", Op::Max},
      {"neg", Op::Neg}, {"abs", Op::Abs}, {"fma", Op::Fma}, {"rcp", Op::Rcp},
      {"sqrt", Op::Sqrt}, {"and", Op::And}, {"or", Op::Or}, {"xor", Op::Xor},
      {"not", Op::Not}, {"shl", Op::Shl}, {"shr", Op::Shr}, {"cnot", Op::Cnot},
      {"popc", Op::Popc}, {"clz", Op::Clz}, {"brev", Op::Brev},
      {"bfe", Op::Bfe}, {"bfi", Op::Bfi}, {"prmt", Op::Prmt}};
  if (auto it = kSimple.find(b); it != kSimple.end()) {
    in.op = it->second;
    in.rnd = takeRnd(p);
    in.sat = p.take("sat");
    in.ftz = p.take("ftz");
    if (in.op == Op::Mul || in.op == Op::Mad) {
      in.wide = p.take("wide");
      in.lo = p.take("lo");
      in.hi = p.take("hi");
    }
    if (in.op == Op::Rcp || in.op == Op::Sqrt)
      p.take("approx") ? (void)(in.rnd = Rnd::None) : (void)0;
    std::vector<Ty> ts = p.takeTypes();
    if (ts.size() == 2 && in.op == Op::Add && ts[0] == Ty::F32 &&
        (ts[1] == Ty::F16 || ts[1] == Ty::BF16)) {
      in.type = Ty::F32;
      in.type2 = ts[1];
    } else if (ts.size() == 1) {
      in.type = ts[0];
    } else {
      unsupported(in, opcode, "type combination");
    }
    if (in.op == Op::Prmt && p.leftover() != "")
      unsupported(in, opcode, "prmt mode");
    static const int kArity[] = {3, 3, 3, 4, 3, 3, 3, 3, 2, 2, 4, 2, 2,
                                 3, 3, 3, 2, 3, 3, 2, 2, 2, 2};
    size_t n;
    switch (in.op) {
    case Op::Bfe: n = 4; break;
    case Op::Bfi: n = 5; break;
    case Op::Prmt: n = 4; break;
    default: n = kArity[static_cast<int>(in.op)];
    }
    if (in.op == Op::Rcp && in.rnd == Rnd::None)
      unsupported(in, opcode, "rcp without a rounding mode (.approx)");
    if ((in.op == Op::Div || in.op == Op::Sqrt) && tyIsFloat(in.type) &&
        in.rnd == Rnd::None)
      unsupported(in, opcode, "approximate division/square root");
    finish(n);
    return;
  }
  if (b == "setp") {
    in.op = Op::Setp;
    static const std::pair<const char *, Cmp> kCmp[] = {
        {"eq", Cmp::Eq}, {"ne", Cmp::Ne}, {"lt", Cmp::Lt}, {"le", Cmp::Le},
        {"gt", Cmp::Gt}, {"ge", Cmp::Ge}, {"lo", Cmp::Lo}, {"ls", Cmp::Ls},
        {"hi", Cmp::Hi}, {"hs", Cmp::Hs}, {"equ", Cmp::Equ},
        {"neu", Cmp::Neu}, {"ltu", Cmp::Ltu}, {"leu", Cmp::Leu},
        {"gtu", Cmp::Gtu}, {"geu", Cmp::Geu}, {"num", Cmp::Num},
        {"nan", Cmp::Nan}};
    bool found = false;
    for (auto &[n, c] : kCmp)
      if (p.take(n)) {
        in.cmp = c;
        found = true;
        break;
      }
    if (!found)
      unsupported(in, opcode, "comparison");
    if (p.take("and")) in.boolOp = 1;
    else if (p.take("or")) in.boolOp = 2;
    else if (p.take("xor")) in.boolOp = 3;
    in.ftz = p.take("ftz");
    oneType();
    finish(size_t(-1));
    if (in.ops.size() < 3 || in.ops.size() > 5)
      fail(in.line, "bad operand count of " + opcode);
    return;
  }
  if (b == "selp") {
    in.op = Op::Selp;
    oneType();
    finish(4);
    return;
  }
  if (b == "mov") {
    in.op = Op::Mov;
    oneType();
    finish(2);
    return;
  }
  if (b == "cvt") {
    in.op = Op::Cvt;
    in.rnd = takeRnd(p);
    in.sat = p.take("sat") || p.take("satfinite");
    in.ftz = p.take("ftz");
    in.relu = p.take("relu");
    std::vector<Ty> ts = p.takeTypes();
    if (ts.size() != 2)
      unsupported(in, opcode, "type combination");
    in.type = ts[0];
    in.type2 = ts[1];
    finish(size_t(-1));
    size_t want = (in.type == Ty::F16x2 || in.type == Ty::BF16x2) &&
                          in.type2 == Ty::F32
                      ? 3
                      : 2;
    needOps(in, opcode, want);
    return;
  }
  if (b == "cvta") {
    in.op = Op::Cvta;
    if (!p.take("to"))
      unsupported(in, opcode, "cvta to generic");
    in.space = takeSpace(p);
    if (in.space != Space::Global)
      unsupported(in, opcode, "state space (only .to.global)");
    oneType();
    finish(2);
    return;
  }
  if (b == "ld" || b == "st") {
    in.op = b == "ld" ? Op::Ld : Op::St;
    in.space = takeSpace(p);
    if (in.space == Space::Const)
      unsupported(in, opcode, "state space (const addressing)");
    if (in.op == Op::St && in.space == Space::Param)
      unsupported(in, opcode, "st.param");
    // Cache and visibility hints do not change what is read in one thread.
    for (const char *h : {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc",
                          "relaxed", "weak", "cta", "gpu"})
      p.take(h);
    std::string rest;
    if (p.takePrefix("L1::", rest) || p.takePrefix("L2::", rest)) {}
    if (p.take("v2")) in.vec = 2;
    else if (p.take("v4")) in.vec = 4;
    oneType();
    finish(2);
    return;
  }
  if (b == "bra") {
    in.op = Op::Bra;
    in.uni = p.take("uni");
    finish(1);
    if (in.ops[0].kind != Operand::Label)
      fail(in.line, "bra needs a label");
    return;
  }
  if (b == "ret" || b == "exit") {
    in.op = b == "ret" ? Op::Ret : Op::Exit;
    finish(0);
    return;
  }
  if (b == "bar" || b == "barrier") {
    if (p.take("warp")) {
      p.take("sync");
      in.op = Op::BarWarpSync;
      finish(1);
      return;
    }
    in.op = Op::BarSync;
    if (!p.take("sync") && b == "bar")
      unsupported(in, opcode, "barrier flavour (only bar.sync)");
    p.take("aligned");
    finish(size_t(-1));
    if (in.ops.empty() || in.ops.size() > 2)
      fail(in.line, "bar.sync takes a barrier and an optional count");
    return;
  }
  if (b == "shfl") {
    in.op = Op::Shfl;
    if (!p.take("sync"))
      unsupported(in, opcode, "shfl without .sync");
    if (p.take("up")) in.shflMode = 0;
    else if (p.take("down")) in.shflMode = 1;
    else if (p.take("bfly")) in.shflMode = 2;
    else if (p.take("idx")) in.shflMode = 3;
    else unsupported(in, opcode, "shfl mode");
    oneType();
    finish(size_t(-1));
    if (in.ops.size() != 5 && in.ops.size() != 6)
      fail(in.line, "bad operand count of " + opcode);
    return;
  }
  if (b == "vote") {
    in.op = Op::Vote;
    if (!p.take("sync"))
      unsupported(in, opcode, "vote without .sync");
    if (p.take("all")) in.voteMode = 0;
    else if (p.take("any")) in.voteMode = 1;
    else if (p.take("uni")) in.voteMode = 2;
    else if (p.take("ballot")) in.voteMode = 3;
    else unsupported(in, opcode, "vote mode");
    oneType();
    finish(3);
    return;
  }
  if (b == "membar" || (b == "fence" && !p.take("proxy"))) {
    in.op = Op::Membar;
    for (const char *s : {"cta", "gl", "sys", "gpu", "sc", "acq_rel"})
      p.take(s);
    finish(0);
    return;
  }
  if (b == "fence") { // fence.proxy.*
    in.op = Op::FenceProxyAsync;
    if (!p.take("async"))
      unsupported(in, opcode, "proxy fence");
    p.take("shared::cta") || p.take("shared::cluster") || p.take("global");
    finish(0);
    return;
  }
  if (b == "mma" || b == "wgmma") {
    decodeMma(in, p, opcode);
    return;
  }
  if (b == "mbarrier") {
    p.take("shared") || p.take("shared::cta");
    p.take("acquire"), p.take("cta");
    p.takeTypes();
    if (p.take("init")) {
      in.op = Op::MbarInit;
      finish(2);
    } else if (p.take("try_wait") || p.take("test_wait")) {
      in.op = Op::MbarTryWait;
      if (!p.take("parity"))
        unsupported(in, opcode, "mbarrier wait without .parity");
      finish(size_t(-1));
      if (in.ops.size() != 3 && in.ops.size() != 4)
        fail(in.line, "bad operand count of " + opcode);
    } else if (p.take("arrive")) {
      in.op = Op::MbarArrive;
      finish(size_t(-1));
    } else {
      unsupported(in, opcode, "mbarrier operation");
    }
    in.space = Space::Shared;
    return;
  }
  if (b == "tcgen05") {
    decodeTcgen05(in, p, opcode);
    return;
  }
  if (b == "ldmatrix") {
    in.op = Op::Ldmatrix;
    if (!p.take("sync") || !p.take("aligned") || !p.take("m8n8"))
      unsupported(in, opcode, "ldmatrix form (only .sync.aligned.m8n8)");
    if (p.take("x1")) in.vec = 1;
    else if (p.take("x2")) in.vec = 2;
    else if (p.take("x4")) in.vec = 4;
    else unsupported(in, opcode, "ldmatrix count");
    in.trans = p.take("trans");
    p.take("shared") || p.take("shared::cta");
    in.space = Space::Shared;
    oneType();
    if (in.type != Ty::B16)
      unsupported(in, opcode, "ldmatrix element type (only .b16)");
    finish(2);
    return;
  }
  if (b == "cp" && p.take("async")) {
    if (p.take("commit_group")) {
      in.op = Op::CpAsyncCommit;
      finish(0);
      return;
    }
    if (p.take("wait_group")) {
      in.op = Op::CpAsyncWait;
      finish(1);
      return;
    }
    if (p.take("wait_all")) {
      in.op = Op::CpAsyncWait;
      in.vec = 0; // all
      finish(0);
      return;
    }
    in.op = Op::CpAsync;
    if (!p.take("ca") && !p.take("cg"))
      unsupported(in, opcode, "cp.async form (bulk/tensor copies are not emulated)");
    p.take("shared") || p.take("shared::cta");
    p.take("global");
    std::string rest;
    p.takePrefix("L2::", rest);
    finish(size_t(-1));
    if (in.ops.size() < 3 || in.ops.size() > 4)
      fail(in.line, "bad operand count of " + opcode);
    return;
  }
  if (b == "atom" || b == "red") {
    unsupported(in, opcode, "atomic (not emulated yet)");
  }
  unsupported(in, opcode, "instruction");
}

void Parser::decodeMma(Instr &in, Parts &p, const std::string &opcode) {
  auto finish = [&]() {
    std::string left = p.leftover();
    if (!left.empty())
      unsupported(in, opcode, "modifier ." + left);
  };
  MmaInfo &mi = in.mma;
  auto shape = [&]() {
    std::string s;
    if (!p.takePrefix("m", s))
      unsupported(in, opcode, "shape");
    int m = 0, n = 0, k = 0;
    if (std::sscanf(s.c_str(), "%dn%dk%d", &m, &n, &k) != 3)
      unsupported(in, opcode, "shape");
    mi.m = m;
    mi.n = n;
    mi.k = k;
  };
  if (p.base() == "wgmma") {
    if (p.take("fence")) {
      in.op = Op::WgmmaFence;
    } else if (p.take("commit_group")) {
      in.op = Op::WgmmaCommit;
    } else if (p.take("wait_group")) {
      in.op = Op::WgmmaWait;
    } else if (p.take("mma_async")) {
      in.op = Op::WgmmaMma;
      shape();
      mi.satfinite = p.take("satfinite");
      std::vector<Ty> ts = p.takeTypes();
      if (ts.size() != 3)
        unsupported(in, opcode, "type combination");
      mi.d = mi.c = ts[0];
      mi.a = ts[1];
      mi.b = ts[2];
      if (mi.m != 64 || mi.n < 8 || mi.n > 256 || mi.n % 8)
        unsupported(in, opcode, "shape");
    } else {
      unsupported(in, opcode, "wgmma operation");
    }
    if (!p.take("sync") || !p.take("aligned"))
      unsupported(in, opcode, "wgmma without .sync.aligned");
    finish();
    return;
  }
  in.op = Op::MmaSync;
  if (!p.take("sync") || !p.take("aligned"))
    unsupported(in, opcode, "mma without .sync.aligned");
  shape();
  if (!p.take("row") || !p.take("col"))
    unsupported(in, opcode, "layout (only .row.col)");
  mi.satfinite = p.take("satfinite");
  std::string kind;
  if (p.takePrefix("kind::", kind)) {
    if (kind == "mxf8f6f4") mi.kind = MmaInfo::MxF8F6F4;
    else if (kind == "mxf4nvf4") mi.kind = MmaInfo::MxF4NvF4;
    else unsupported(in, opcode, "kind::" + kind);
    if (!p.take("block_scale"))
      unsupported(in, opcode, "kind without .block_scale");
    std::string sv;
    if (!p.takePrefix("scale_vec::", sv) || sv.size() != 2 || sv[1] != 'X')
      unsupported(in, opcode, "scale_vec");
    mi.scaleVec = sv[0] - '0';
  }
  std::vector<Ty> ts = p.takeTypes();
  if (mi.kind == MmaInfo::Plain ? ts.size() != 4 : ts.size() != 5)
    unsupported(in, opcode, "type combination");
  mi.d = ts[0];
  mi.a = ts[1];
  mi.b = ts[2];
  mi.c = ts[3];
  if (mi.kind != MmaInfo::Plain)
    mi.scale = ts[4];
  finish();
  bool ok = false;
  if (mi.m == 16 && mi.n == 8 && mi.k == 16)
    ok = (mi.a == Ty::F16 || mi.a == Ty::BF16) && mi.a == mi.b &&
         mi.d == Ty::F32 && mi.c == Ty::F32;
  else if (mi.m == 16 && mi.n == 8 && mi.k == 32)
    ok = ((mi.a == Ty::S8 || mi.a == Ty::U8) && mi.d == Ty::S32) ||
         ((mi.a == Ty::E4M3 || mi.a == Ty::E5M2) && mi.d == Ty::F32);
  else if (mi.m == 16 && mi.n == 8 && mi.k == 64)
    ok = mi.a == Ty::E2M1 && mi.b == Ty::E2M1 && mi.d == Ty::F32;
  if (mi.kind == MmaInfo::MxF8F6F4)
    ok = ok && mi.k == 32 && mi.scaleVec == 1 && mi.scale == Ty::UE8M0;
  if (mi.kind == MmaInfo::MxF4NvF4)
    ok = ok && mi.k == 64 &&
         ((mi.scaleVec == 4 && mi.scale == Ty::UE4M3) ||
          (mi.scaleVec == 2 && mi.scale == Ty::UE8M0));
  if (!ok)
    unsupported(in, opcode, "mma shape/type combination");
  needOps(in, opcode, mi.kind == MmaInfo::Plain ? 4 : 8);
}

void Parser::decodeTcgen05(Instr &in, Parts &p, const std::string &opcode) {
  auto finish = [&]() {
    std::string left = p.leftover();
    if (!left.empty())
      unsupported(in, opcode, "modifier ." + left);
  };
  MmaInfo &mi = in.mma;
  std::string group;
  bool hasGroup = p.takePrefix("cta_group::", group);
  if (hasGroup && group != "1")
    unsupported(in, opcode, "cta_group::" + group + " (2-CTA pairs)");
  if (p.take("alloc")) {
    in.op = Op::TcAlloc;
    p.take("sync"), p.take("aligned"), p.take("shared::cta");
    p.takeTypes();
    finish();
    needOps(in, opcode, 2);
  } else if (p.take("dealloc")) {
    in.op = Op::TcDealloc;
    p.take("sync"), p.take("aligned");
    p.takeTypes();
    finish();
    needOps(in, opcode, 2);
  } else if (p.take("relinquish_alloc_permit")) {
    in.op = Op::TcRelinquish;
    p.take("sync"), p.take("aligned");
    finish();
  } else if (p.take("fence::before_thread_sync") ||
             p.take("fence::after_thread_sync")) {
    in.op = Op::TcFence;
    finish();
  } else if (p.take("wait::ld") || p.take("wait::st")) {
    in.op = opcode.find("wait::ld") != std::string::npos ? Op::TcWaitLd
                                                         : Op::TcWaitSt;
    p.take("sync"), p.take("aligned");
    finish();
  } else if (p.take("ld") || p.take("st")) {
    in.op = opcode.find(".ld.") != std::string::npos ? Op::TcLd : Op::TcSt;
    p.take("sync"), p.take("aligned");
    static const std::pair<const char *, std::pair<int, int>> kShapes[] = {
        {"16x64b", {16, 64}}, {"16x128b", {16, 128}}, {"16x256b", {16, 256}},
        {"32x32b", {32, 32}}};
    for (auto &[n, s] : kShapes)
      if (p.take(n)) {
        mi.lanes = s.first;
        mi.bits = s.second;
      }
    std::string num;
    if (!mi.lanes || !p.takePrefix("x", num))
      unsupported(in, opcode, "tcgen05.ld/st shape");
    mi.num = std::atoi(num.c_str());
    if (mi.num < 1 || mi.num > 128 || (mi.num & (mi.num - 1)))
      unsupported(in, opcode, "repetition .x" + num);
    if (p.take("pack::16b") || p.take("unpack::16b"))
      unsupported(in, opcode, "16-bit packing");
    p.takeTypes();
    finish();
    needOps(in, opcode, 2);
  } else if (p.take("commit")) {
    in.op = Op::TcCommit;
    if (!p.take("mbarrier::arrive::one"))
      unsupported(in, opcode, "commit without mbarrier::arrive::one");
    p.take("shared::cluster") || p.take("shared::cta");
    if (p.take("multicast::cluster"))
      unsupported(in, opcode, "multicast commit");
    p.takeTypes();
    finish();
    needOps(in, opcode, 1);
  } else if (p.take("mma")) {
    in.op = Op::TcMma;
    std::string kind;
    if (!p.takePrefix("kind::", kind))
      unsupported(in, opcode, "tcgen05.mma without a kind");
    if (kind == "f16") mi.kind = MmaInfo::F16;
    else if (kind == "tf32") mi.kind = MmaInfo::Tf32;
    else if (kind == "f8f6f4") mi.kind = MmaInfo::F8F6F4;
    else if (kind == "i8") mi.kind = MmaInfo::I8;
    else if (kind == "mxf8f6f4") mi.kind = MmaInfo::MxF8F6F4;
    else if (kind == "mxf4nvf4") mi.kind = MmaInfo::MxF4NvF4;
    else unsupported(in, opcode, "kind::" + kind);
    bool scaled = p.take("block_scale");
    if (scaled != (mi.kind == MmaInfo::MxF8F6F4 || mi.kind == MmaInfo::MxF4NvF4))
      unsupported(in, opcode, "block scaling for this kind");
    if (p.take("block16")) mi.scaleVec = 16;
    else if (p.take("block32")) mi.scaleVec = 32;
    else if (scaled) mi.scaleVec = mi.kind == MmaInfo::MxF8F6F4 ? 32 : 0;
    std::string collector;
    if (p.takePrefix("collector::a::", collector) && collector != "discard" &&
        collector != "fill" && collector != "use" && collector != "lastuse")
      unsupported(in, opcode, "collector::a::" + collector);
    finish();
    size_t want = scaled ? 7 : 5;
    if (in.ops.size() != want)
      unsupported(in, opcode, "operand form (disable-output-lane/A in TMEM)");
  } else if (p.take("cp") || p.take("shift")) {
    unsupported(in, opcode, "tcgen05.cp/shift (not emulated yet)");
  } else {
    unsupported(in, opcode, "tcgen05 operation");
  }
  if (!hasGroup && (in.op == Op::TcAlloc || in.op == Op::TcDealloc ||
                    in.op == Op::TcMma || in.op == Op::TcCommit))
    unsupported(in, opcode, "tcgen05 without .cta_group");
}

} // namespace

Module parsePtx(const std::string &text, const std::string &source) {
  Parser p(text, source);
  Module m = p.run();
  // Dynamic shared symbols referenced before their kernel closed carry a
  // placeholder offset: they start after the static declarations.
  for (Kernel &k : m.kernels)
    for (Symbol &s : k.symbols)
      if (s.space == Space::Shared && s.offset == ~0ull)
        s.offset = (k.staticShared + s.align - 1) / s.align * s.align;
  return m;
}

} // namespace comfyquant::ptxemu
