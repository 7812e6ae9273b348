//===- SafetensorsTest.cpp - reader/writer/index tests --------------------===//
#include "comfyquant/runtime/DType.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace comfyquant::rt;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") +
                       "/cq_st_test.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() { removeTree(path_); }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    if (DIR *d = opendir(path_.c_str())) {
      while (dirent *e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
          out.push_back(e->d_name);
      closedir(d);
    }
    return out;
  }

private:
  static void removeTree(const std::string &p) {
    if (DIR *d = opendir(p.c_str())) {
      while (dirent *e = readdir(d)) {
        if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, ".."))
          continue;
        std::string c = p + "/" + e->d_name;
        struct stat st;
        if (lstat(c.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
          removeTree(c);
        else
          unlink(c.c_str());
      }
      closedir(d);
    }
    rmdir(p.c_str());
  }
  std::string path_;
};

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

std::string readBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

/// A file image: length prefix + header + `dataSize` bytes of data.
std::string image(const std::string &header, size_t dataSize) {
  std::string data(dataSize, '\0');
  for (size_t i = 0; i < dataSize; ++i)
    data[i] = static_cast<char>(i * 7 + 1);
  return le64(header.size()) + header + data;
}

/// Runs `fn`, expects an Error whose message contains every `needle`.
void expectError(const std::function<void()> &fn,
                 std::vector<std::string> needles) {
  try {
    fn();
  } catch (const Error &e) {
    std::string msg = e.what();
    for (const std::string &n : needles)
      EXPECT_NE(msg.find(n), std::string::npos)
          << "message: " << msg << "\nmissing: " << n;
    return;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return;
  }
  ADD_FAILURE() << "no Error thrown; expected one mentioning " << needles[0];
}

void expectHeaderError(const std::string &header, uint64_t dataSize,
                       std::vector<std::string> needles) {
  SCOPED_TRACE(header);
  expectError([&] { parseSafetensorsHeader(header, dataSize, "mem.st"); },
              std::move(needles));
}

std::vector<uint8_t> f32Bytes(const std::vector<float> &v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> iota(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i)
    b[i] = static_cast<uint8_t>(start + i);
  return b;
}

//===----------------------------------------------------------------------===//
// DType
//===----------------------------------------------------------------------===//

TEST(DType, NamesRoundTripAndSizes) {
  struct Row {
    const char *name;
    DType t;
    size_t size;
  } rows[] = {
      {"BOOL", DType::BOOL, 1},       {"U8", DType::U8, 1},
      {"I8", DType::I8, 1},           {"F8_E4M3", DType::F8_E4M3, 1},
      {"F8_E5M2", DType::F8_E5M2, 1}, {"F8_E8M0", DType::F8_E8M0, 1},
      {"I16", DType::I16, 2},         {"U16", DType::U16, 2},
      {"F16", DType::F16, 2},         {"BF16", DType::BF16, 2},
      {"I32", DType::I32, 4},         {"U32", DType::U32, 4},
      {"F32", DType::F32, 4},         {"I64", DType::I64, 8},
      {"U64", DType::U64, 8},         {"F64", DType::F64, 8},
  };
  for (const Row &r : rows) {
    auto t = parseDType(r.name);
    ASSERT_TRUE(t.has_value()) << r.name;
    EXPECT_EQ(*t, r.t);
    EXPECT_STREQ(dtypeName(r.t), r.name);
    EXPECT_EQ(dtypeSize(r.t), r.size) << r.name;
  }
}

TEST(DType, RejectsUnknownNames) {
  for (const char *n : {"", "f32", "F8_E8M0FNU", "FP32", "F32 ", "float32",
                        "F4"})
    EXPECT_FALSE(parseDType(n).has_value()) << n;
  EXPECT_FALSE(parseDType(std::string_view("F32\0", 4)).has_value());
}

TEST(DType, IsFloat) {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    EXPECT_TRUE(isFloatDType(t));
    EXPECT_TRUE(isFloatDType(t, true));
  }
  for (DType t : {DType::F8_E4M3, DType::F8_E5M2, DType::F8_E8M0}) {
    EXPECT_FALSE(isFloatDType(t));
    EXPECT_TRUE(isFloatDType(t, true));
  }
  for (DType t : {DType::BOOL, DType::U8, DType::I8, DType::I16, DType::U16,
                  DType::I32, DType::U32, DType::I64, DType::U64}) {
    EXPECT_FALSE(isFloatDType(t));
    EXPECT_FALSE(isFloatDType(t, true));
  }
}

//===----------------------------------------------------------------------===//
// Round trip
//===----------------------------------------------------------------------===//

TEST(Safetensors, RoundTrip) {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  std::vector<OutputTensor> ts;
  ts.push_back({"b.weight", DType::F32, {2, 3},
                f32Bytes({1.f, 2.f, 3.f, -4.f, 0.5f, 1e-3f})});
  ts.push_back({"a.scale", DType::F32, {}, f32Bytes({0.25f})}); // 0-dim
  ts.push_back({"empty", DType::F16, {0, 5}, {}});              // zero-size
  ts.push_back({"c.q", DType::F8_E4M3, {3}, iota(3, 10)});
  ts.push_back({"d.bf", DType::BF16, {1, 2}, iota(4, 100)});
  ts.push_back({"e.i64", DType::I64, {1}, iota(8, 200)});
  std::map<std::string, std::string> md = {
      {"format", "pt"}, {"_quantization_metadata", "{\"layers\": {}}"}};
  writeSafetensors(path, ts, md);

  // No temp file left behind.
  EXPECT_EQ(dir.list(), std::vector<std::string>{"model.safetensors"});

  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->metadata(), md);
  EXPECT_EQ((8 + f->headerSize()) % 8, 0u) << "data section not aligned";
  std::string_view hj = f->headerJson();
  ASSERT_EQ(hj.size(), f->headerSize());
  EXPECT_EQ(hj.front(), '{');
  EXPECT_NE(hj.find("__metadata__"), std::string_view::npos);
  size_t last = hj.find_last_not_of(' ');
  EXPECT_EQ(hj[last], '}');
  EXPECT_LT(hj.size() - last - 1, 8u);

  ASSERT_EQ(f->tensors().size(), ts.size());
  // File order == the given order == ascending begin.
  uint64_t expectBegin = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo &t = f->tensors()[i];
    SCOPED_TRACE(ts[i].name);
    EXPECT_EQ(t.name, ts[i].name);
    EXPECT_EQ(t.dtype, ts[i].dtype);
    EXPECT_EQ(t.shape, ts[i].shape);
    EXPECT_EQ(t.begin, expectBegin);
    EXPECT_EQ(t.nbytes(), ts[i].bytes.size());
    EXPECT_EQ(t.rank(), static_cast<int64_t>(ts[i].shape.size()));
    EXPECT_EQ(t.fileOffset, 8 + f->headerSize() + t.begin);
    ASSERT_NE(t.file, nullptr);
    EXPECT_EQ(*t.file, path);
    ASSERT_NE(t.data, nullptr);
    if (!ts[i].bytes.empty()) // memcmp with a null vector pointer is UB
      EXPECT_EQ(std::memcmp(t.data, ts[i].bytes.data(), ts[i].bytes.size()), 0);
    EXPECT_EQ(f->find(ts[i].name), &t);
    expectBegin = t.end;
  }
  EXPECT_EQ(f->fileSize(), 8 + f->headerSize() + expectBegin);
  EXPECT_EQ(f->find("a.scale")->numel(), 1);
  EXPECT_EQ(f->find("a.scale")->rank(), 0);
  EXPECT_EQ(f->find("empty")->numel(), 0);
  EXPECT_EQ(f->find("b.weight")->numel(), 6);
  EXPECT_EQ(f->find("nope"), nullptr);
  float v[6];
  std::memcpy(v, f->find("b.weight")->data, sizeof v);
  EXPECT_EQ(v[3], -4.f);

  // The raw file agrees with fileOffset.
  std::string raw = readBytes(path);
  const TensorInfo *c = f->find("c.q");
  EXPECT_EQ(static_cast<uint8_t>(raw[c->fileOffset]), 10);
}

TEST(Safetensors, WriteEmptyAndNoMetadata) {
  TempDir dir;
  std::string path = dir.file("empty.safetensors");
  writeSafetensors(path, {});
  std::string raw = readBytes(path);
  ASSERT_EQ(raw.size(), 16u); // "{}" padded to 8
  EXPECT_EQ(raw.substr(8), "{}      ");
  auto f = SafetensorsFile::open(path);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_EQ(f->headerJson().find("__metadata__"), std::string_view::npos);
}

TEST(Safetensors, OnlyZeroSizeTensorsEmptyDataSection) {
  TempDir dir;
  std::string path = dir.file("z.safetensors");
  writeSafetensors(path, {{"a", DType::F32, {0}, {}},
                          {"b", DType::U8, {3, 0, 2}, {}}});
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->fileSize(), 8 + f->headerSize());
  ASSERT_EQ(f->tensors().size(), 2u);
  for (const TensorInfo &t : f->tensors()) {
    EXPECT_EQ(t.nbytes(), 0u);
    EXPECT_EQ(t.numel(), 0);
  }
}

TEST(Safetensors, OverwriteIsAtomicReplace) {
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  writeSafetensors(path, {{"x", DType::U8, {4}, iota(4)}});
  auto old = SafetensorsFile::open(path); // keeps the old inode mapped
  writeSafetensors(path, {{"y", DType::U8, {2}, iota(2, 50)}});
  EXPECT_EQ(old->find("x")->data[3], 3); // old mapping intact
  auto now = SafetensorsFile::open(path);
  ASSERT_NE(now->find("y"), nullptr);
  EXPECT_EQ(now->find("x"), nullptr);
  EXPECT_EQ(dir.list().size(), 1u);
}

TEST(Safetensors, WriteErrors) {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  expectError([&] { writeSafetensors(path, {{"a", DType::F32, {2}, iota(7)}}); },
              {"tensor 'a'", "has 7 bytes but shape [2] x F32 needs 8"});
  expectError(
      [&] {
        writeSafetensors(path, {{"a", DType::U8, {1}, iota(1)},
                                {"a", DType::U8, {1}, iota(1)}});
      },
      {"duplicate tensor name"});
  expectError([&] { writeSafetensors(path, {{"a", DType::U8, {-1}, {}}}); },
              {"negative dimension"});
  expectError(
      [&] { writeSafetensors(path, {{"__metadata__", DType::U8, {0}, {}}}); },
      {"not a tensor name"});
  expectError(
      [&] {
        writeSafetensors(path, {{"a", DType::U8, {1LL << 40, 1LL << 40}, {}}});
      },
      {"more than 2^63-1 elements"});
  expectError(
      [&] { writeSafetensors(path, {{"bad\xff", DType::U8, {0}, {}}}); },
      {"not valid UTF-8"});
  // Nothing was created by the failed writes.
  EXPECT_TRUE(dir.list().empty());
  expectError(
      [&] {
        writeSafetensors(dir.file("no/such/dir/x.safetensors"),
                         {{"a", DType::U8, {1}, iota(1)}});
      },
      {"cannot create temporary file"});
}

TEST(Safetensors, OpenDoesNotModifyFile) {
  TempDir dir;
  std::string path = dir.file("ro.safetensors");
  writeSafetensors(path, {{"a", DType::U8, {3}, iota(3)}}, {{"k", "v"}});
  ASSERT_EQ(chmod(path.c_str(), 0444), 0); // read-only must still open
  std::string before = readBytes(path);
  struct stat st0;
  ASSERT_EQ(stat(path.c_str(), &st0), 0);
  {
    auto f = SafetensorsFile::open(path);
    auto ck = Checkpoint::open(path);
    EXPECT_EQ(ck->tensors().size(), 1u);
  }
  struct stat st1;
  ASSERT_EQ(stat(path.c_str(), &st1), 0);
  EXPECT_EQ(readBytes(path), before);
  EXPECT_EQ(st0.st_mtime, st1.st_mtime);
}

//===----------------------------------------------------------------------===//
// Header validation (in memory)
//===----------------------------------------------------------------------===//

TEST(SafetensorsHeader, AcceptsValidAndPadding) {
  auto h = parseSafetensorsHeader(
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
      R"("a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
      R"("__metadata__":{"x":"y"}}    )",
      12, "f");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a"); // sorted by begin
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.metadata.at("x"), "y");
  // Trailing whitespace of every JSON kind is fine.
  EXPECT_NO_THROW(parseSafetensorsHeader("{} \t\r\n ", 0, "f"));
  // Keys in any order; whitespace inside.
  auto h2 = parseSafetensorsHeader(
      R"({ "t" : { "data_offsets" : [ 0 , 8 ] , "shape" : [ ] ,)"
      R"( "dtype" : "F64" } })" "\n",
      8, "f");
  ASSERT_EQ(h2.tensors.size(), 1u);
  EXPECT_EQ(h2.tensors[0].dtype, DType::F64);
  EXPECT_TRUE(h2.tensors[0].shape.empty());
}

TEST(SafetensorsHeader, ScalarNeedsOneElement) {
  expectHeaderError(
      R"({"t":{"dtype":"F64","shape":[],"data_offsets":[0,0]}})", 0,
      {"tensor 't'", "data_offsets [0, 0) hold 0 bytes but shape [] x F64 "
                     "needs 8 bytes"});
  auto h = parseSafetensorsHeader(
      R"({"t":{"dtype":"F64","shape":[],"data_offsets":[0,8]}})", 8, "f");
  EXPECT_EQ(h.tensors.at(0).numel(), 1);
}

TEST(SafetensorsHeader, JsonLevelErrors) {
  expectHeaderError("", 0, {"mem.st: header: ", "header is not valid JSON"});
  expectHeaderError("{", 0, {"header is not valid JSON"});
  expectHeaderError("{}x", 0, {"header is not valid JSON"});
  expectHeaderError("{} {}", 0, {"header is not valid JSON"});
  expectHeaderError("[]", 0, {"header JSON is an array, not an object"});
  expectHeaderError("42", 0, {"header JSON is a number, not an object"});
  expectHeaderError("\"s\"", 0, {"header JSON is a string, not an object"});
  expectHeaderError("null", 0, {"header JSON is null, not an object"});
  expectHeaderError(" {}", 0, {"header JSON must begin with '{'"});
  expectHeaderError("\xEF\xBB\xBF{}", 0, {"header JSON must begin with '{'"});
  expectHeaderError("{\"a\xff\":1}", 0,
                    {"header is not valid UTF-8 (byte 0xFF at offset 3)"});
  expectHeaderError("{\"\xC0\x80\":1}", 0, {"not valid UTF-8"}); // overlong
  expectHeaderError("{\"\xED\xA0\x80\":1}", 0, {"not valid UTF-8"}); // surrogate
  expectHeaderError(R"({"\ud800":1})", 0, {"header is not valid JSON"});
  expectHeaderError(std::string("{\0}", 3), 0, {"header contains a NUL byte at offset 1"});
  // nlohmann's lexer ends the input at NUL: garbage after it must not parse.
  expectHeaderError(std::string("{}\0garbage", 10), 0, {"NUL byte at offset 2"});
  expectHeaderError("{/*c*/}", 0, {"header is not valid JSON"});
  expectHeaderError("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],"
                    "\"data_offsets\":[0,0]},}",
                    0, {"header is not valid JSON"});
}

TEST(SafetensorsHeader, DuplicateKeys) {
  const std::string e = R"({"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  expectHeaderError("{\"a\":" + e + ",\"a\":" + e + "}", 0,
                    {"duplicate key \"a\" in the header JSON"});
  expectHeaderError(
      R"({"a":{"dtype":"U8","dtype":"U8","shape":[0],"data_offsets":[0,0]}})",
      0, {"tensor 'a'", "duplicate field \"dtype\""});
  expectHeaderError(R"({"__metadata__":{"k":"1","k":"2"}})", 0,
                    {"duplicate key \"k\" in __metadata__"});
  expectHeaderError(R"({"__metadata__":{},"__metadata__":{}})", 0,
                    {"duplicate key \"__metadata__\""});
}

TEST(SafetensorsHeader, EntryShapeErrors) {
  expectHeaderError(R"({"a":[1,2]})", 0,
                    {"tensor 'a'", "entry is an array, not an object"});
  expectHeaderError(R"({"a":"x"})", 0, {"entry is a string, not an object"});
  expectHeaderError(R"({"a":null})", 0, {"entry is null, not an object"});
  expectHeaderError(R"({"a":{"shape":[0],"data_offsets":[0,0]}})", 0,
                    {"tensor 'a'", "entry lacks \"dtype\""});
  expectHeaderError(R"({"a":{"dtype":"U8","data_offsets":[0,0]}})", 0,
                    {"entry lacks \"shape\""});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[0]}})", 0,
                    {"entry lacks \"data_offsets\""});
  expectHeaderError(
      R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":1}})", 0,
      {"tensor 'a'", "unknown field \"x\""});
  expectHeaderError(R"({"a":{"dtype":"F8_E8M0FNU","shape":[0],)"
                    R"("data_offsets":[0,0]}})",
                    0, {"unknown dtype \"F8_E8M0FNU\""});
  expectHeaderError(R"({"a":{"dtype":5,"shape":[0],"data_offsets":[0,0]}})",
                    0, {"dtype is a number, not a string"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":3,"data_offsets":[0,0]}})",
                    0, {"shape is a number, not an array of integers"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})",
                    0, {"tensor 'a'", "shape[0] is -1, not a non-negative"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}})",
                    0, {"shape[0] is 2.0, not a non-negative integer"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[1e2],"data_offsets":[0,2]}})",
                    0, {"shape[0] is 1e2, not a non-negative integer"});
  expectHeaderError(
      R"({"a":{"dtype":"U8","shape":[1,"2"],"data_offsets":[0,2]}})", 0,
      {"shape[1] is a string, not a non-negative integer"});
  expectHeaderError(
      R"({"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", 0,
      {"shape[0] is an array, not a non-negative integer"});
  expectHeaderError(
      R"({"a":{"dtype":"U8","shape":[true],"data_offsets":[0,1]}})", 0,
      {"shape[0] is a boolean"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[9223372036854775808],)"
                    R"("data_offsets":[0,0]}})",
                    0, {"shape[0] is 9223372036854775808, larger than 2^63-1"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[99999999999999999999],)"
                    R"("data_offsets":[0,0]}})",
                    0, {"shape[0] is 99999999999999999999, not a non-negative"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[1099511627776,)"
                    R"(1099511627776],"data_offsets":[0,0]}})",
                    0,
                    {"shape [1099511627776, 1099511627776] has more than "
                     "2^63-1 elements"});
  expectHeaderError(R"({"a":{"dtype":"F64","shape":[4611686018427387904],)"
                    R"("data_offsets":[0,0]}})",
                    0, {"x F64 needs more than 2^64-1 bytes"});
  // A leading 0 dim keeps the running product at 0: no overflow.
  EXPECT_NO_THROW(parseSafetensorsHeader(
      R"({"a":{"dtype":"U8","shape":[0,9223372036854775807,)"
      R"(9223372036854775807],"data_offsets":[0,0]}})",
      0, "f"));
}

TEST(SafetensorsHeader, OffsetErrors) {
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})",
                    1, {"data_offsets must be [begin, end] (2 integers), got 1"});
  expectHeaderError(
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 2,
      {"data_offsets must be [begin, end] (2 integers), got more"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":{}}})", 1,
                    {"data_offsets is an object, not an array of integers"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})",
                    1, {"data_offsets[0] is -1, not a non-negative integer"});
  expectHeaderError(
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.5]}})", 1,
      {"data_offsets[1] is 1.5, not a non-negative integer"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})",
                    4, {"tensor 'a'", "data_offsets [4, 2] have begin > end"});
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[4,8],)"
                    R"("data_offsets":[0,96]}})",
                    96,
                    {"tensor 'a'", "data_offsets [0, 96) hold 96 bytes but "
                                   "shape [4, 8] x F32 needs 128 bytes"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                    4,
                    {"tensor 'a'", "data_offsets [0, 8) extend past the data "
                                   "section of 4 bytes"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[0],)"
                    R"("data_offsets":[18446744073709551615,)"
                    R"(18446744073709551615]}})",
                    0, {"extend past the data section of 0 bytes"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
                    12,
                    {"tensor 'b'", "data_offsets [4, 12) overlap tensor 'a' "
                                   "at [0, 8)"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                    8, {"overlap tensor"});
  // An empty range strictly inside another tensor counts as overlap.
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                    R"("z":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
                    8, {"tensor 'z'", "overlap tensor 'a'"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
                    12,
                    {"tensor 'b'", "bytes [4, 8) of the data section belong "
                                   "to no tensor"});
  expectHeaderError(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                    8, {"bytes [0, 4) of the data section belong to no tensor"});
  expectHeaderError(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                    6,
                    {"mem.st: header: bytes [4, 6) of the data section belong "
                     "to no tensor (trailing"});
  expectHeaderError("{}", 3, {"bytes [0, 3) of the data section belong"});
  // Zero-size tensors at the boundaries are fine.
  auto h = parseSafetensorsHeader(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
      R"("z0":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
      R"("z4":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
      4, "f");
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "z0");
  EXPECT_EQ(h.tensors[1].name, "a");
  EXPECT_EQ(h.tensors[2].name, "z4");
}

TEST(SafetensorsHeader, MetadataErrors) {
  expectHeaderError(R"({"__metadata__":[]})", 0,
                    {"header: __metadata__ is an array, not an object"});
  expectHeaderError(R"({"__metadata__":"x"})", 0,
                    {"__metadata__ is a string, not an object"});
  expectHeaderError(R"({"__metadata__":{"k":1}})", 0,
                    {"__metadata__ value for key \"k\" is a number, not a "
                     "string"});
  expectHeaderError(R"({"__metadata__":{"k":{"n":"v"}}})", 0,
                    {"__metadata__ value for key \"k\" is an object"});
  expectHeaderError(R"({"__metadata__":{"k":null}})", 0,
                    {"value for key \"k\" is null, not a string"});
  auto h = parseSafetensorsHeader(R"({"__metadata__":{"a":"","b":"\u00e9\n"}})",
                                  0, "f");
  EXPECT_EQ(h.metadata.at("a"), "");
  EXPECT_EQ(h.metadata.at("b"), "\xC3\xA9\n");
}

TEST(SafetensorsHeader, MessagesEscapeControlBytes) {
  try {
    parseSafetensorsHeader(R"({"a\u001b[31m":{"dtype":"X"}})", 0, "f");
    FAIL() << "no error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor 'a\\x1B[31m'"), std::string::npos) << msg;
  }
}

TEST(SafetensorsHeader, DeepNestingIsRejectedCheaply) {
  std::string deep(100000, '[');
  expectHeaderError(deep, 0, {"header JSON is an array, not an object"});
  std::string deep2 = "{\"a\":{\"dtype\":\"U8\",\"shape\":" +
                      std::string(100000, '[');
  expectHeaderError(deep2, 0, {"shape[0] is an array"});
}

//===----------------------------------------------------------------------===//
// File-level errors
//===----------------------------------------------------------------------===//

TEST(SafetensorsFile, FileLevelErrors) {
  TempDir dir;
  auto open = [&](const std::string &name, const std::string &bytes) {
    writeBytes(dir.file(name), bytes);
    return [&dir, name] { SafetensorsFile::open(dir.file(name)); };
  };
  expectError(open("empty", ""),
              {"file is 0 bytes, shorter than the 8-byte header length"});
  expectError(open("short", "abc"),
              {"file is 3 bytes, shorter than the 8-byte header length"});
  expectError(open("huge", le64(~0ull) + "{}"),
              {"header length 18446744073709551615 exceeds the limit of "
               "104857600 bytes"});
  expectError(open("limit", le64(kMaxHeaderBytes + 1) + "{}"),
              {"exceeds the limit of"});
  expectError(open("past", le64(100) + "{}"),
              {"header length 100 exceeds the file size 10 minus 8"});
  expectError(open("zero", le64(0)), {"header is not valid JSON"});
  expectError(open("hole", image("{}", 5)),
              {"bytes [0, 5) of the data section belong to no tensor"});
  expectError([&] { SafetensorsFile::open(dir.file("missing")); },
              {"missing", "cannot open for reading"});
  expectError([&] { SafetensorsFile::open(dir.path()); },
              {"not a regular file"});
  // Messages name the file.
  expectError(open("named.safetensors", image("[]", 0)),
              {dir.file("named.safetensors") + ": header: header JSON is an "
                                               "array"});
}

TEST(SafetensorsFile, ExactFileWithPaddedHeaderOpens) {
  TempDir dir;
  std::string hdr = R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  hdr.append(3, ' ');
  writeBytes(dir.file("p"), image(hdr, 2));
  auto f = SafetensorsFile::open(dir.file("p"));
  ASSERT_EQ(f->tensors().size(), 1u);
  EXPECT_EQ(f->tensors()[0].fileOffset, 8 + hdr.size());
  EXPECT_EQ(f->tensors()[0].data[1], 8); // image(): byte i = i*7+1
}

//===----------------------------------------------------------------------===//
// Checkpoint / index
//===----------------------------------------------------------------------===//

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    writeSafetensors(dir.file("model-00001.safetensors"),
                     {{"a.weight", DType::F32, {2}, f32Bytes({1, 2})},
                      {"extra", DType::U8, {1}, iota(1)}},
                     {{"format", "pt"}, {"s1", "one"}});
    writeSafetensors(dir.file("model-00002.safetensors"),
                     {{"b.weight", DType::U8, {3}, iota(3, 7)},
                      {"c.weight", DType::BF16, {}, iota(2)}},
                     {{"format", "pt"}});
  }
  std::string index(const std::string &json, const std::string &name =
                                                  "model.safetensors.index.json") {
    writeBytes(dir.file(name), json);
    return dir.file(name);
  }
  TempDir dir;
};

TEST_F(CheckpointTest, SingleFile) {
  auto ck = Checkpoint::open(dir.file("model-00002.safetensors"));
  ASSERT_EQ(ck->shards().size(), 1u);
  ASSERT_EQ(ck->tensors().size(), 2u);
  EXPECT_EQ(ck->tensors()[0]->name, "b.weight");
  EXPECT_EQ(ck->tensors()[1]->name, "c.weight");
  EXPECT_EQ(ck->metadata().at("format"), "pt");
  EXPECT_EQ(ck->totalSize(), ck->shards()[0]->fileSize());
  EXPECT_EQ(ck->path(), dir.file("model-00002.safetensors"));
}

TEST_F(CheckpointTest, ShardedIndex) {
  std::string idx = index(R"({
    "metadata": {"total_size": 123, "origin": "unit"},
    "weight_map": {
      "b.weight": "model-00002.safetensors",
      "a.weight": "./model-00001.safetensors",
      "c.weight": "model-00002.safetensors"
    }})");
  auto ck = Checkpoint::open(idx);
  ASSERT_EQ(ck->shards().size(), 2u); // each shard opened once
  EXPECT_EQ(ck->shards()[0]->path(), dir.file("model-00001.safetensors"));
  EXPECT_EQ(ck->shards()[1]->path(), dir.file("model-00002.safetensors"));
  std::vector<std::string> names;
  for (const TensorInfo *t : ck->tensors())
    names.push_back(t->name);
  // "extra" is not in weight_map but lives in one shard only: included.
  EXPECT_EQ(names, (std::vector<std::string>{"a.weight", "b.weight",
                                             "c.weight", "extra"}));
  const TensorInfo *b = ck->find("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(*b->file, dir.file("model-00002.safetensors"));
  EXPECT_EQ(b->data[2], 9);
  EXPECT_EQ(ck->find("zzz"), nullptr);
  EXPECT_EQ(ck->metadata().at("origin"), "unit");
  EXPECT_EQ(ck->metadata().at("s1"), "one");
  EXPECT_EQ(ck->metadata().at("format"), "pt");
  EXPECT_EQ(ck->metadata().count("total_size"), 0u); // not a string
  EXPECT_EQ(ck->totalSize(),
            ck->shards()[0]->fileSize() + ck->shards()[1]->fileSize());

  // headerHash: FNV-1a 64 over the shard headers in shard order.
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto &s : ck->shards())
    for (unsigned char c : s->headerJson()) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
  EXPECT_EQ(ck->headerHash(), h);
  EXPECT_EQ(Checkpoint::open(idx)->headerHash(), h); // deterministic
  EXPECT_NE(Checkpoint::open(dir.file("model-00001.safetensors"))->headerHash(),
            h);
}

TEST_F(CheckpointTest, IndexInCurrentDirectoryAndSubdir) {
  ASSERT_EQ(mkdir(dir.file("sub").c_str(), 0755), 0);
  writeSafetensors(dir.file("sub/s.safetensors"),
                   {{"q", DType::U8, {1}, iota(1)}});
  auto ck = Checkpoint::open(
      index(R"({"weight_map":{"q":"sub/s.safetensors"}})", "i.json"));
  EXPECT_EQ(ck->tensors().size(), 1u);
}

TEST_F(CheckpointTest, IndexErrors) {
  std::string idx;
  idx = index(R"({"weight_map":{"a.weight":"model-00009.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); },
              {idx + ": tensor 'a.weight': weight_map shard "
                     "\"model-00009.safetensors\"",
               "cannot be opened: No such file or directory"});
  idx = index(R"({"weight_map":{"zz":"model-00001.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); },
              {idx, "tensor 'zz'", "listed in weight_map under shard "
                                   "\"model-00001.safetensors\" but absent"});
  idx = index(R"({"weight_map":{"a.weight":"../model-00001.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); }, {"has a \"..\" component"});
  idx = index(R"({"weight_map":{"a.weight":"x/../../m.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); }, {"has a \"..\" component"});
  idx = index(R"({"weight_map":{"a.weight":"/etc/passwd"}})");
  expectError([&] { Checkpoint::open(idx); }, {"is an absolute path"});
  idx = index(R"({"weight_map":{"a.weight":"a\\b"}})");
  expectError([&] { Checkpoint::open(idx); }, {"contains a backslash"});
  idx = index(R"({"weight_map":{"a.weight":"m\u0000.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); }, {"contains a NUL byte"});
  idx = index(R"({"weight_map":{"a.weight":""}})");
  expectError([&] { Checkpoint::open(idx); }, {"is empty"});
  idx = index(R"({"weight_map":{"a.weight":"./"}})");
  expectError([&] { Checkpoint::open(idx); }, {"names no file"});
  idx = index(R"({"weight_map":{"a.weight":3}})");
  expectError([&] { Checkpoint::open(idx); },
              {"weight_map value is number, not a shard file name"});
  idx = index(R"({"weight_map":{}})");
  expectError([&] { Checkpoint::open(idx); }, {"weight_map is empty"});
  idx = index(R"({"weight_map":[]})");
  expectError([&] { Checkpoint::open(idx); }, {"weight_map is array"});
  idx = index(R"({"metadata":{}})");
  expectError([&] { Checkpoint::open(idx); }, {"lacks \"weight_map\""});
  idx = index(R"({"weight_map":{"a.weight":"model-00001.safetensors"},)"
              R"("metadata":[]})");
  expectError([&] { Checkpoint::open(idx); }, {"\"metadata\" is array"});
  idx = index(R"({"weight_map":{"a.weight":"model-00001.safetensors"},"x":1})");
  expectError([&] { Checkpoint::open(idx); }, {"unknown top-level key \"x\""});
  idx = index(R"([1,2])");
  expectError([&] { Checkpoint::open(idx); },
              {"index JSON is array, not an object"});
  idx = index(R"({"weight_map": {"a.weight": )");
  expectError([&] { Checkpoint::open(idx); }, {"index JSON is not valid JSON"});
  idx = index("{\"weight_map\":{\"a\xfe\":\"x\"}}");
  expectError([&] { Checkpoint::open(idx); }, {"index JSON is not valid UTF-8"});
  idx = index(R"({"weight_map":{"a.weight":"model-00001.safetensors",)"
              R"("a.weight":"model-00002.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); },
              {"duplicate key \"a.weight\" in index JSON"});
  idx = index(R"({"weight_map":{"a.weight":"model-00001.safetensors"},)"
              R"("metadata":{"d":[[[[[[[[[[1]]]]]]]]]]}})");
  expectError([&] { Checkpoint::open(idx); }, {"nests deeper than"});
}

TEST_F(CheckpointTest, DuplicateAcrossShards) {
  writeSafetensors(dir.file("dup.safetensors"),
                   {{"a.weight", DType::F32, {2}, f32Bytes({5, 6})}});
  // Listed in one shard, but present in two.
  std::string idx = index(R"({"weight_map":{
      "a.weight":"model-00001.safetensors",
      "x":"dup.safetensors"}})");
  writeSafetensors(dir.file("dup.safetensors"),
                   {{"a.weight", DType::F32, {2}, f32Bytes({5, 6})},
                    {"x", DType::U8, {0}, {}}});
  expectError([&] { Checkpoint::open(idx); },
              {idx, "tensor 'a.weight'", "present in two shards"});
}

TEST_F(CheckpointTest, MetadataConflict) {
  writeSafetensors(dir.file("m3.safetensors"), {{"z", DType::U8, {0}, {}}},
                   {{"format", "np"}});
  std::string idx = index(R"({"weight_map":{
      "a.weight":"model-00001.safetensors", "z":"m3.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); },
              {"__metadata__ key \"format\" has conflicting values"});
  idx = index(R"({"metadata":{"s1":"two"},"weight_map":{
      "a.weight":"model-00001.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); },
              {"__metadata__ key \"s1\" has conflicting values"});
}

TEST_F(CheckpointTest, BadShardErrorNamesShard) {
  writeBytes(dir.file("bad.safetensors"), image("[]", 0));
  std::string idx = index(R"({"weight_map":{"a":"bad.safetensors"}})");
  expectError([&] { Checkpoint::open(idx); },
              {dir.file("bad.safetensors"), "header JSON is an array"});
}

} // namespace
