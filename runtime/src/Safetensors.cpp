//===- Safetensors.cpp - mmap-backed safetensors reader / writer ----------===//
//
// The header is parsed with nlohmann's SAX interface and validated while it
// streams: the handler accepts exactly the shape of a safetensors header (an
// object of objects, arrays of integers, strings) and throws Error on the
// first event that does not fit. Memory stays proportional to the number of
// tensors, nesting can never exceed three levels, and duplicate keys (which a
// DOM parse would silently collapse, keeping the last) are detected at every
// level.
//
// Mapping: O_RDONLY + mmap(PROT_READ, MAP_PRIVATE); the file is never written.
// Like any mmap reader, a file truncated by another process while mapped can
// raise SIGBUS on access to the vanished pages; that is outside our control.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Safetensors.h"

#include "comfyquant/runtime/Json.h"
#include "comfyquant/runtime/OutputFile.h"
#include "comfyquant/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace comfyquant::rt {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxI64 =
    static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

//===----------------------------------------------------------------------===//
// Message helpers
//===----------------------------------------------------------------------===//



std::string subjectFor(const std::string &tensorName) {
  return tensorSubject(printable(tensorName));
}

std::string rangeStr(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}



std::string errnoText(int err) { return std::strerror(err); }


//===----------------------------------------------------------------------===//
// Header SAX validator
//===----------------------------------------------------------------------===//

/// Streams the header JSON and builds the SafetensorsHeader. Every unexpected
/// event throws Error; the state machine only knows the legal structure:
///
///   depth 0: the root object
///   depth 1: keys of the root; values are entry objects / __metadata__
///   depth 2: fields of an entry, or metadata key -> string
///   depth 3: elements of "shape" / "data_offsets" (integers only)
class HeaderSax : public nlohmann::json_sax<json> {
public:
  HeaderSax(const std::string &file, SafetensorsHeader &out)
      : file_(file), out_(out) {}

  bool null() override { return value("null"); }
  bool boolean(bool) override { return value("a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (v >= 0)
      return number(static_cast<uint64_t>(v), true, "");
    return number(0, false, std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return number(v, true, "");
  }
  bool number_float(number_float_t, const string_t &s) override {
    return number(0, false, s);
  }
  bool string(string_t &s) override {
    switch (state_) {
    case State::MetaValue:
      out_.metadata[metaKey_] = s;
      state_ = State::MetaKey;
      return true;
    case State::FieldValue:
      if (field_ == Field::DType) {
        std::optional<DType> dt = parseDType(s);
        if (!dt)
          fail(subjectFor(entry_.name),
               "unknown dtype " + quotedStr(s) +
                   " (known: BOOL, U8, I8, F8_E4M3, F8_E5M2, F8_E8M0, I16, "
                   "U16, F16, BF16, I32, U32, F32, I64, U64, F64)");
        entry_.dtype = *dt;
        state_ = State::FieldKey;
        return true;
      }
      break;
    default:
      break;
    }
    return value("a string");
  }
  bool binary(binary_t &) override { return value("binary data"); }

  bool start_object(std::size_t) override {
    switch (state_) {
    case State::Root:
      state_ = State::TopKey;
      return true;
    case State::TopValue:
      if (topKey_ == "__metadata__") {
        state_ = State::MetaKey;
        return true;
      }
      entry_ = TensorInfo();
      entry_.name = topKey_;
      seenFields_ = 0;
      state_ = State::FieldKey;
      return true;
    default:
      return value("an object");
    }
  }

  bool key(string_t &k) override {
    switch (state_) {
    case State::TopKey:
      if (!topKeys_.insert(k).second)
        fail("header", "duplicate key " + quotedStr(k) + " in the header JSON");
      topKey_ = k;
      state_ = State::TopValue;
      return true;
    case State::MetaKey:
      if (out_.metadata.count(k))
        fail("header", "duplicate key " + quotedStr(k) + " in __metadata__");
      metaKey_ = k;
      state_ = State::MetaValue;
      return true;
    case State::FieldKey: {
      if (k == "dtype")
        field_ = Field::DType;
      else if (k == "shape")
        field_ = Field::Shape;
      else if (k == "data_offsets")
        field_ = Field::Offsets;
      else
        fail(subjectFor(entry_.name),
             "unknown field " + quotedStr(k) +
                 " (an entry has exactly \"dtype\", \"shape\" and "
                 "\"data_offsets\")");
      unsigned bit = 1u << static_cast<unsigned>(field_);
      if (seenFields_ & bit)
        fail(subjectFor(entry_.name),
             "duplicate field " + quotedStr(k) + " in the entry");
      seenFields_ |= bit;
      state_ = State::FieldValue;
      return true;
    }
    default:
      // Keys are only reported inside objects, and every object we enter
      // moves to one of the *Key states above.
      fail("header", "internal error: unexpected key");
    }
    return false;
  }

  bool end_object() override {
    switch (state_) {
    case State::TopKey:
      state_ = State::Done;
      return true;
    case State::MetaKey:
      state_ = State::TopKey;
      return true;
    case State::FieldKey:
      finishEntry();
      state_ = State::TopKey;
      return true;
    default:
      fail("header", "internal error: unexpected end of object");
    }
    return false;
  }

  bool start_array(std::size_t) override {
    if (state_ == State::FieldValue &&
        (field_ == Field::Shape || field_ == Field::Offsets)) {
      elems_.clear();
      state_ = State::ArrayElem;
      return true;
    }
    return value("an array");
  }

  bool end_array() override {
    if (state_ != State::ArrayElem)
      fail("header", "internal error: unexpected end of array");
    if (field_ == Field::Shape) {
      entry_.shape.clear();
      for (uint64_t d : elems_)
        entry_.shape.push_back(static_cast<int64_t>(d));
    } else {
      if (elems_.size() != 2)
        fail(subjectFor(entry_.name),
             "data_offsets must be [begin, end] (2 integers), got " +
                 std::to_string(elems_.size()) + " element(s)");
      entry_.begin = elems_[0];
      entry_.end = elems_[1];
      if (entry_.begin > entry_.end)
        fail(subjectFor(entry_.name),
             "data_offsets [" + std::to_string(entry_.begin) + ", " +
                 std::to_string(entry_.end) + "] have begin > end");
    }
    state_ = State::FieldKey;
    return true;
  }

  bool parse_error(std::size_t position, const std::string &,
                   const nlohmann::detail::exception &ex) override {
    fail("header", "header is not valid JSON (at byte " +
                       std::to_string(position) + "): " + printable(ex.what()));
    return false;
  }

  bool done() const { return state_ == State::Done; }

private:
  enum class State {
    Root,
    TopKey,
    TopValue,
    MetaKey,
    MetaValue,
    FieldKey,
    FieldValue,
    ArrayElem,
    Done
  };
  enum class Field : unsigned { DType = 0, Shape = 1, Offsets = 2 };

  [[noreturn]] void fail(const std::string &subject, const std::string &rule) {
    throw Error(file_, subject, rule);
  }

  static const char *fieldName(Field f) {
    switch (f) {
    case Field::DType:
      return "dtype";
    case Field::Shape:
      return "shape";
    case Field::Offsets:
      return "data_offsets";
    }
    return "?";
  }

  /// A value of kind `what` where the current state does not allow it.
  bool value(const char *what) {
    switch (state_) {
    case State::Root:
      fail("header", std::string("header JSON is ") + what +
                         ", not an object");
    case State::TopValue:
      if (topKey_ == "__metadata__")
        fail("header",
             std::string("__metadata__ is ") + what + ", not an object");
      fail(subjectFor(topKey_),
           std::string("entry is ") + what +
               ", not an object with dtype/shape/data_offsets");
    case State::MetaValue:
      fail("header", "__metadata__ value for key " + quotedStr(metaKey_) +
                         " is " + what + ", not a string");
    case State::FieldValue:
      if (field_ == Field::DType)
        fail(subjectFor(entry_.name),
             std::string("dtype is ") + what + ", not a string");
      fail(subjectFor(entry_.name), std::string(fieldName(field_)) + " is " +
                                        what + ", not an array of integers");
    case State::ArrayElem:
      fail(subjectFor(entry_.name),
           std::string(fieldName(field_)) + "[" +
               std::to_string(elems_.size()) + "] is " + what +
               ", not a non-negative integer");
    default:
      fail("header", std::string("unexpected ") + what + " in the header JSON");
    }
    return false;
  }

  /// A number: `ok` when it is a non-negative integer that fits uint64
  /// (`v`); otherwise `text` spells it.
  bool number(uint64_t v, bool ok, const std::string &text) {
    if (state_ != State::ArrayElem)
      return value("a number");
    std::string where = std::string(fieldName(field_)) + "[" +
                        std::to_string(elems_.size()) + "]";
    if (!ok)
      fail(subjectFor(entry_.name),
           where + " is " + printable(text, 64) +
               ", not a non-negative integer");
    if (field_ == Field::Shape && v > kMaxI64)
      fail(subjectFor(entry_.name),
           where + " is " + std::to_string(v) + ", larger than 2^63-1");
    if (field_ == Field::Offsets && elems_.size() >= 2)
      fail(subjectFor(entry_.name),
           "data_offsets must be [begin, end] (2 integers), got more");
    elems_.push_back(v);
    return true;
  }

  void finishEntry() {
    const std::string subject = subjectFor(entry_.name);
    static const char *names[] = {"dtype", "shape", "data_offsets"};
    for (unsigned i = 0; i < 3; ++i)
      if (!(seenFields_ & (1u << i)))
        fail(subject, std::string("entry lacks \"") + names[i] + "\"");
    int64_t numel = 1;
    for (int64_t d : entry_.shape)
      if (__builtin_mul_overflow(numel, d, &numel))
        fail(subject, "shape " + shapeString(entry_.shape) +
                          " has more than 2^63-1 elements");
    uint64_t need = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel),
                               static_cast<uint64_t>(dtypeSize(entry_.dtype)),
                               &need))
      fail(subject, "shape " + shapeString(entry_.shape) + " x " +
                        dtypeName(entry_.dtype) + " needs more than 2^64-1 "
                        "bytes");
    if (need != entry_.end - entry_.begin)
      fail(subject, "data_offsets " + rangeStr(entry_.begin, entry_.end) +
                        " hold " + std::to_string(entry_.end - entry_.begin) +
                        " bytes but shape " + shapeString(entry_.shape) + " x " +
                        dtypeName(entry_.dtype) + " needs " +
                        std::to_string(need) + " bytes");
    out_.tensors.push_back(std::move(entry_));
    entry_ = TensorInfo();
  }

  const std::string &file_;
  SafetensorsHeader &out_;
  State state_ = State::Root;
  std::unordered_set<std::string> topKeys_;
  std::string topKey_, metaKey_;
  TensorInfo entry_;
  unsigned seenFields_ = 0;
  Field field_ = Field::DType;
  std::vector<uint64_t> elems_;
};

//===----------------------------------------------------------------------===//
// Generic strict JSON (index files)
//===----------------------------------------------------------------------===//


//===----------------------------------------------------------------------===//
// File helpers
//===----------------------------------------------------------------------===//

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
};

/// Opens a regular file read-only; returns the fd and its size.
int openRegularReadOnly(const std::string &path, uint64_t &size) {
  int fd;
  do
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    throw Error(path, "", "cannot open for reading: " + errnoText(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(path, "", "cannot stat: " + errnoText(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path, "", "not a regular file");
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

std::string readWholeFile(const std::string &path, uint64_t maxBytes) {
  uint64_t size = 0;
  Fd fd(openRegularReadOnly(path, size));
  if (size > maxBytes)
    throw Error(path, "", "file is " + std::to_string(size) +
                              " bytes, more than the limit of " +
                              std::to_string(maxBytes));
  std::string buf(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t r = ::read(fd.fd, &buf[got], buf.size() - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      throw Error(path, "", "read failed: " + errnoText(errno));
    if (r == 0)
      break; // shrank while reading
    got += static_cast<size_t>(r);
  }
  buf.resize(got);
  return buf;
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return "";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

/// Validates a weight_map shard name and normalizes it ("./a//b" -> "a/b").
/// Returns an empty string and sets `why` when it is not acceptable.
std::string normalizeShardName(const std::string &name, std::string &why) {
  if (name.empty()) {
    why = "is empty";
    return "";
  }
  if (name.find('\0') != std::string::npos) {
    why = "contains a NUL byte";
    return "";
  }
  if (name[0] == '/') {
    why = "is an absolute path (shards must lie in the index's directory)";
    return "";
  }
  if (name.find('\\') != std::string::npos) {
    why = "contains a backslash";
    return "";
  }
  std::string out;
  size_t i = 0;
  while (i <= name.size()) {
    size_t j = name.find('/', i);
    if (j == std::string::npos)
      j = name.size();
    std::string_view comp(name.data() + i, j - i);
    if (comp == "..") {
      why = "has a \"..\" component (shards must lie in the index's "
            "directory)";
      return "";
    }
    if (!comp.empty() && comp != ".") {
      if (!out.empty())
        out += '/';
      out.append(comp.data(), comp.size());
    }
    i = j + 1;
  }
  if (out.empty())
    why = "names no file";
  return out;
}

uint64_t fnv1a(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

} // namespace

//===----------------------------------------------------------------------===//
// TensorInfo
//===----------------------------------------------------------------------===//

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}

//===----------------------------------------------------------------------===//
// parseSafetensorsHeader
//===----------------------------------------------------------------------===//

SafetensorsHeader parseSafetensorsHeader(std::string_view text,
                                         uint64_t dataSize,
                                         const std::string &file) {
  SafetensorsHeader out;
  size_t bad = invalidUtf8At(text);
  if (bad != std::string_view::npos)
    throw Error(file, "header",
                "header is not valid UTF-8 (byte " +
                    hexByte(static_cast<unsigned char>(text[bad])) +
                    " at offset " + std::to_string(bad) + ")");
  if (size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw Error(file, "header",
                "header contains a NUL byte at offset " + std::to_string(nul) +
                    " (JSON text has no terminator)");
  HeaderSax sax(file, out);
  json::sax_parse(text.begin(), text.end(), &sax);
  if (!sax.done()) // unreachable: parse_error throws
    throw Error(file, "header", "header is not valid JSON (incomplete)");
  // Like the reference implementation, the JSON must start right away (no
  // BOM, no leading whitespace); trailing whitespace (padding) is allowed.
  if (text[0] != '{')
    throw Error(file, "header",
                "header JSON must begin with '{' (found byte " +
                    hexByte(static_cast<unsigned char>(text[0])) + ")");

  auto &ts = out.tensors;
  std::sort(ts.begin(), ts.end(),
            [](const TensorInfo &a, const TensorInfo &b) {
              if (a.begin != b.begin)
                return a.begin < b.begin;
              if (a.end != b.end)
                return a.end < b.end;
              return a.name < b.name;
            });
  // Ranges: inside [0, dataSize), contiguous, no overlap, no hole. Like the
  // reference reader, a tensor must start exactly where the previous one
  // ended (so even an empty range inside another tensor is an overlap).
  uint64_t cursor = 0;
  const TensorInfo *prev = nullptr;
  for (TensorInfo &t : ts) {
    if (t.end > dataSize)
      throw Error(file, subjectFor(t.name),
                  "data_offsets " + rangeStr(t.begin, t.end) +
                      " extend past the data section of " +
                      std::to_string(dataSize) + " bytes");
    if (t.begin < cursor)
      throw Error(file, subjectFor(t.name),
                  "data_offsets " + rangeStr(t.begin, t.end) +
                      " overlap tensor '" + printable(prev->name) + "' at " +
                      rangeStr(prev->begin, prev->end));
    if (t.begin > cursor)
      throw Error(file, subjectFor(t.name),
                  "bytes " + rangeStr(cursor, t.begin) +
                      " of the data section belong to no tensor (hole before "
                      "data_offsets " +
                      rangeStr(t.begin, t.end) + ")");
    cursor = t.end;
    prev = &t;
    t.fileOffset = 8 + static_cast<uint64_t>(text.size()) + t.begin;
  }
  if (cursor != dataSize)
    throw Error(file, "header",
                "bytes " + rangeStr(cursor, dataSize) +
                    " of the data section belong to no tensor (trailing "
                    "bytes after the last tensor)");
  return out;
}

//===----------------------------------------------------------------------===//
// SafetensorsFile
//===----------------------------------------------------------------------===//

std::unique_ptr<SafetensorsFile>
SafetensorsFile::open(const std::string &path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  uint64_t size = 0;
  Fd fd(openRegularReadOnly(path, size));
  if (size < 8)
    throw Error(path, "header",
                "file is " + std::to_string(size) +
                    " bytes, shorter than the 8-byte header length");
  if (size > static_cast<uint64_t>(std::numeric_limits<size_t>::max()))
    throw Error(path, "", "file too large to map");
  void *p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE,
                   fd.fd, 0);
  if (p == MAP_FAILED)
    throw Error(path, "", "mmap failed: " + errnoText(errno));
  // From here on the destructor unmaps.
  f->base_ = static_cast<const uint8_t *>(p);
  f->size_ = size;

  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | f->base_[i];
  if (n > kMaxHeaderBytes)
    throw Error(path, "header",
                "header length " + std::to_string(n) + " exceeds the limit of " +
                    std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > size - 8)
    throw Error(path, "header",
                "header length " + std::to_string(n) +
                    " exceeds the file size " + std::to_string(size) +
                    " minus 8");
  f->headerSize_ = n;
  f->header_ = parseSafetensorsHeader(f->headerJson(), size - 8 - n, f->path_);
  const uint8_t *data = f->base_ + 8 + n;
  for (size_t i = 0; i < f->header_.tensors.size(); ++i) {
    TensorInfo &t = f->header_.tensors[i];
    t.data = data + t.begin;
    t.file = &f->path_;
    f->index_.emplace(t.name, i);
  }
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_)
    ::munmap(const_cast<uint8_t *>(base_), static_cast<size_t>(size_));
}

std::string_view SafetensorsFile::headerJson() const {
  if (!base_)
    return {};
  return std::string_view(reinterpret_cast<const char *>(base_ + 8),
                          static_cast<size_t>(headerSize_));
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

//===----------------------------------------------------------------------===//
// Checkpoint
//===----------------------------------------------------------------------===//

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string &path) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->path_ = path;

  // (tensor, normalized shard name) pairs of the weight_map.
  std::vector<std::pair<std::string, std::string>> required;
  std::map<std::string, std::string> indexMeta;
  std::map<std::string, size_t> shardByName; // normalized name -> shards_ idx

  if (endsWith(path, ".json")) {
    std::string text = readWholeFile(path, kMaxHeaderBytes);
    json j = parseStrictJson(text, path, "index", "index JSON", 8,
                             /*rejectDuplicateKeys=*/true);
    if (!j.is_object())
      throw Error(path, "index",
                  std::string("index JSON is ") + j.type_name() +
                      ", not an object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "weight_map" && it.key() != "metadata")
        throw Error(path, "index",
                    "unknown top-level key " + quotedStr(it.key()) +
                        " (expected \"weight_map\" and optional "
                        "\"metadata\")");
    auto wm = j.find("weight_map");
    if (wm == j.end())
      throw Error(path, "index", "index JSON lacks \"weight_map\"");
    if (!wm->is_object())
      throw Error(path, "index",
                  std::string("weight_map is ") + wm->type_name() +
                      ", not an object");
    if (wm->empty())
      throw Error(path, "index", "weight_map is empty");
    auto md = j.find("metadata");
    if (md != j.end()) {
      if (!md->is_object())
        throw Error(path, "index",
                    std::string("index \"metadata\" is ") + md->type_name() +
                        ", not an object");
      for (auto it = md->begin(); it != md->end(); ++it)
        if (it->is_string()) // e.g. "total_size" is a number: ignored
          indexMeta[it.key()] = it->get<std::string>();
    }
    std::map<std::string, std::string> shardNames; // -> first tensor in it
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string())
        throw Error(path, subjectFor(it.key()),
                    std::string("weight_map value is ") + it->type_name() +
                        ", not a shard file name");
      std::string why;
      std::string norm = normalizeShardName(it->get<std::string>(), why);
      if (norm.empty())
        throw Error(path, subjectFor(it.key()),
                    "weight_map shard " + quotedStr(it->get<std::string>()) +
                        " " + why);
      shardNames.emplace(norm, it.key());
      required.emplace_back(it.key(), norm);
    }
    std::string dir = dirOf(path);
    for (const auto &[name, firstTensor] : shardNames) { // shard-path order
      std::string full =
          dir.empty() ? name : (dir == "/" ? "/" + name : dir + "/" + name);
      // A shard that is not there is the index's fault: name the index.
      // (SafetensorsFile::open re-checks; this only improves the message.)
      struct stat st;
      if (::stat(full.c_str(), &st) != 0)
        throw Error(path, subjectFor(firstTensor),
                    "weight_map shard " + quotedStr(name) + " (" +
                        quotedStr(full) +
                        ") cannot be opened: " + errnoText(errno));
      shardByName[name] = ck->shards_.size();
      ck->shards_.push_back(SafetensorsFile::open(full));
    }
    for (const auto &[tensor, shard] : required) {
      const SafetensorsFile &sf = *ck->shards_[shardByName[shard]];
      if (!sf.find(tensor))
        throw Error(path, subjectFor(tensor),
                    "listed in weight_map under shard " + quotedStr(shard) +
                        " but absent from that shard");
    }
  } else {
    ck->shards_.push_back(SafetensorsFile::open(path));
  }

  // Tensors: every tensor of every shard, each name in one shard only.
  for (const auto &sf : ck->shards_) {
    for (const TensorInfo &t : sf->tensors()) {
      auto [it, inserted] = ck->byName_.emplace(t.name, &t);
      if (!inserted)
        throw Error(path, subjectFor(t.name),
                    "present in two shards: " + quotedStr(*it->second->file) +
                        " and " + quotedStr(sf->path()));
    }
  }
  ck->sorted_.reserve(ck->byName_.size());
  for (const auto &kv : ck->byName_)
    ck->sorted_.push_back(kv.second);

  // Metadata: index strings, then each shard; equal duplicates are fine.
  ck->metadata_ = indexMeta;
  for (const auto &sf : ck->shards_) {
    for (const auto &[k, v] : sf->metadata()) {
      auto [it, inserted] = ck->metadata_.emplace(k, v);
      if (!inserted && it->second != v)
        throw Error(path, "header",
                    "__metadata__ key " + quotedStr(k) +
                        " has conflicting values across shards (" +
                        quotedStr(sf->path()) + " says " + quotedStr(v) +
                        ", another source says " + quotedStr(it->second) + ")");
    }
  }
  return ck;
}

const TensorInfo *Checkpoint::find(std::string_view name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

std::vector<std::string> checkpointFiles(const Checkpoint &checkpoint) {
  std::vector<std::string> files = {checkpoint.path()};
  for (const auto &shard : checkpoint.shards())
    if (shard->path() != checkpoint.path())
      files.push_back(shard->path());
  return files;
}

uint64_t Checkpoint::totalSize() const {
  uint64_t total = 0;
  for (const auto &sf : shards_)
    total += sf->fileSize();
  return total;
}

uint64_t Checkpoint::headerHash() const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto &sf : shards_)
    h = fnv1a(h, sf->headerJson());
  return h;
}

//===----------------------------------------------------------------------===//
// writeSafetensors
//===----------------------------------------------------------------------===//

std::string safetensorsHeader(const std::string &path,
                              const std::vector<TensorLayout> &tensors,
                              const std::map<std::string, std::string> &metadata,
                              std::vector<uint64_t> *offsets) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json md = nlohmann::ordered_json::object();
    for (const auto &[k, v] : metadata) {
      if (invalidUtf8At(k) != std::string::npos ||
          invalidUtf8At(v) != std::string::npos)
        throw Error(path, "header",
                    "__metadata__ key " + quotedStr(k) +
                        ": key and value must be valid UTF-8");
      md[k] = v;
    }
    header["__metadata__"] = std::move(md);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  if (offsets)
    offsets->clear();
  for (const TensorLayout &t : tensors) {
    const std::string subject = subjectFor(t.name);
    if (t.name == "__metadata__")
      throw Error(path, subject, "\"__metadata__\" is not a tensor name");
    if (invalidUtf8At(t.name) != std::string::npos)
      throw Error(path, subject, "tensor name is not valid UTF-8");
    if (!names.insert(t.name).second)
      throw Error(path, subject, "duplicate tensor name");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        throw Error(path, subject,
                    "shape " + shapeString(t.shape) + " has a negative dimension");
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) ||
          numel > kMaxI64)
        throw Error(path, subject,
                    "shape " + shapeString(t.shape) +
                        " has more than 2^63-1 elements");
    }
    uint64_t need = 0;
    if (__builtin_mul_overflow(numel, dtypeSize(t.dtype), &need))
      throw Error(path, subject,
                  "shape " + shapeString(t.shape) + " x " + dtypeName(t.dtype) +
                      " needs more than 2^64-1 bytes");
    if (need != t.nbytes)
      throw Error(path, subject,
                  "has " + std::to_string(t.nbytes) +
                      " bytes but shape " + shapeString(t.shape) + " x " +
                      dtypeName(t.dtype) + " needs " + std::to_string(need));
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = dtypeName(t.dtype);
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + need};
    header[t.name] = std::move(e);
    if (offsets)
      offsets->push_back(offset);
    offset += need;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception &e) {
    throw Error(path, "header", std::string("cannot encode header: ") + e.what());
  }
  // Pad with spaces so the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes)
    throw Error(path, "header",
                "header would be " + std::to_string(text.size()) +
                    " bytes, more than the limit of " +
                    std::to_string(kMaxHeaderBytes));
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(n >> (8 * i));
  return out + text;
}

void writeSafetensors(const std::string &path,
                      const std::vector<OutputTensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  // Validate everything before touching the file system.
  std::vector<TensorLayout> layout;
  layout.reserve(tensors.size());
  for (const OutputTensor &t : tensors)
    layout.push_back({t.name, t.dtype, t.shape, t.bytes.size()});
  const std::string header = safetensorsHeader(path, layout, metadata);
  AtomicFile out(path);
  out.write(header);
  for (const OutputTensor &t : tensors)
    out.write(t.bytes.data(), t.bytes.size());
  out.commit();
}

} // namespace comfyquant::rt
