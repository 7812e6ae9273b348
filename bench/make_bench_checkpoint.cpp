//===- make_bench_checkpoint.cpp - synthetic checkpoint for bench_linear --===//
//
// Writes a valid, sharded Comfy-quant checkpoint with one Linear module per
// (variant, N, K): random codes that avoid every NaN/Inf encoding, valid
// scales and comfy_quant JSON. One shard per module (rt::writeSafetensors
// takes a module's bytes in memory; the largest, 12288x12288 int8/fp8, is
// ~151 MB), then OUT/bench.safetensors.index.json. The result is re-opened
// and resolved through the runtime before the tool reports success.
//
//   make_bench_checkpoint --out DIR [--shapes 3072x3072,...]
//                         [--n 3072,12288 --k 3072,12288] [--formats a,b]
//                         [--seed S]
//===----------------------------------------------------------------------===//
#include "BenchCommon.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/ModuleResolver.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace rt = comfyquant::rt;
using cqbench::Rng;
using cqbench::Variant;
using rt::DType;

namespace {

void usage() {
  std::cerr
      << "usage: make_bench_checkpoint --out DIR [--shapes NxK,...]\n"
         "         [--n LIST --k LIST] [--formats LABEL,...] [--seed S]\n"
         "  default shapes: every (N, K) in {3072, 12288}^2; formats:";
  for (const Variant &v : cqbench::allVariants())
    std::cerr << ' ' << v.label;
  std::cerr << "\n  writes DIR/bench.safetensors.index.json and one shard "
               "per module\n";
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> randomBytes(Rng &rng, size_t n) {
  std::vector<uint8_t> b(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t r = rng.next();
    std::memcpy(b.data() + i, &r, 8);
  }
  for (uint64_t r = rng.next(); i < n; ++i, r >>= 8)
    b[i] = static_cast<uint8_t>(r);
  return b;
}

/// FP8 E4M3FN codes without NaN (S.1111.111 -> S.1111.110 = ±448).
std::vector<uint8_t> randomE4M3(Rng &rng, size_t n) {
  std::vector<uint8_t> b = randomBytes(rng, n);
  for (uint8_t &x : b)
    if ((x & 0x7F) == 0x7F)
      x &= 0xFE;
  return b;
}

/// FP8 E5M2 codes without Inf/NaN (exponent 31 -> 15).
std::vector<uint8_t> randomE5M2(Rng &rng, size_t n) {
  std::vector<uint8_t> b = randomBytes(rng, n);
  for (uint8_t &x : b)
    if (((x >> 2) & 0x1F) == 0x1F)
      x &= static_cast<uint8_t>(~0x40);
  return b;
}

rt::OutputTensor scalarF32(const std::string &name, float v) {
  return {name, DType::F32, {}, bytesOf(std::vector<float>{v})};
}

rt::OutputTensor f32Tensor(const std::string &name,
                           std::vector<int64_t> shape,
                           const std::vector<float> &v) {
  return {name, DType::F32, std::move(shape), bytesOf(v)};
}

std::vector<float> uniformF32(Rng &rng, size_t n, double lo, double hi) {
  std::vector<float> v(n);
  for (float &x : v)
    x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

/// A swizzled block-scale tensor [roundup(R,128), roundup(C,4)]: logical
/// entries from `gen`, pad entries 0 (docs/Formats.md §4.0).
template <typename Gen>
rt::OutputTensor swizzledScales(const std::string &name, DType dt, int64_t R,
                                int64_t C, Gen gen) {
  const int64_t rows = (R + 127) / 128 * 128, cols = (C + 3) / 4 * 4;
  std::vector<uint8_t> s(static_cast<size_t>(rows * cols), 0);
  if (static_cast<uint64_t>(s.size()) != rt::swizzledScaleCount(R, C))
    throw std::logic_error("swizzled scale count mismatch");
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      s[rt::swizzledScaleOffset(r, c, C)] = gen();
  return {name, dt, {rows, cols}, std::move(s)};
}

rt::OutputTensor comfyQuant(const std::string &prefix,
                            const nlohmann::ordered_json &j) {
  // Python json.dumps separators, as ComfyUI writes them.
  std::string s = j.dump();
  std::string out;
  bool inString = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    out += c;
    if (c == '"' && (i == 0 || s[i - 1] != '\\'))
      inString = !inString;
    if (!inString && (c == ',' || c == ':'))
      out += ' ';
  }
  std::vector<uint8_t> b(out.begin(), out.end());
  return {prefix + ".comfy_quant", DType::U8,
          {static_cast<int64_t>(b.size())}, std::move(b)};
}

/// The tensors of one module.
std::vector<rt::OutputTensor> makeModule(const Variant &v, int64_t N,
                                         int64_t K, Rng &rng,
                                         const std::string &P) {
  std::vector<rt::OutputTensor> t;
  const std::string fmt = v.format;
  const std::string label = v.label;
  nlohmann::ordered_json cq;
  cq["format"] = fmt;
  const size_t NK = static_cast<size_t>(N * K);
  // Activations in the bench are uniform in [-1, 1].
  if (fmt == "float8_e4m3fn" || fmt == "float8_e5m2") {
    t.push_back({P + ".weight",
                 fmt == "float8_e4m3fn" ? DType::F8_E4M3 : DType::F8_E5M2,
                 {N, K},
                 fmt == "float8_e4m3fn" ? randomE4M3(rng, NK)
                                        : randomE5M2(rng, NK)});
    t.push_back(scalarF32(P + ".weight_scale", 1.0f / 4096.0f));
    t.push_back(scalarF32(
        P + ".input_scale",
        fmt == "float8_e4m3fn" ? 1.0f / 448.0f : 1.0f / 57344.0f));
  } else if (fmt == "nvfp4") {
    // Every E2M1 nibble is a valid code.
    t.push_back({P + ".weight", DType::U8, {N, K / 2}, randomBytes(rng, NK / 2)});
    t.push_back(swizzledScales(P + ".weight_scale", DType::F8_E4M3, N, K / 16,
                               [&] {
                                 return rt::encodeE4M3(static_cast<float>(
                                     rng.uniform(0.5, 8.0)));
                               }));
    t.push_back(scalarF32(P + ".weight_scale_2", 1.0f / 1024.0f));
    t.push_back(scalarF32(P + ".input_scale", 1.0f / 2688.0f));
  } else if (fmt == "mxfp8") {
    t.push_back({P + ".weight", DType::F8_E4M3, {N, K}, randomE4M3(rng, NK)});
    // E8M0 exponents as U8, in [118, 126] (never 255).
    t.push_back(swizzledScales(P + ".weight_scale", DType::U8, N, K / 32, [&] {
      return static_cast<uint8_t>(118 + rng.below(9));
    }));
  } else if (fmt == "int8_tensorwise") {
    std::vector<uint8_t> w = randomBytes(rng, NK);
    for (uint8_t &x : w)
      if (x == 0x80) // -128 -> -127 (the encoder's symmetric range)
        x = 0x81;
    t.push_back({P + ".weight", DType::I8, {N, K}, std::move(w)});
    t.push_back(f32Tensor(P + ".weight_scale", {N, 1},
                          uniformF32(rng, N, 1e-3, 1e-2)));
    if (label == "int8_tensorwise_convrot256") {
      cq["convrot"] = true;
      cq["convrot_groupsize"] = 256;
    }
  } else if (fmt == "convrot_w4a4") {
    std::vector<uint8_t> w(NK / 2);
    for (uint8_t &x : w) {
      int lo = static_cast<int>(rng.below(15)) - 7;
      int hi = static_cast<int>(rng.below(15)) - 7;
      x = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    }
    t.push_back({P + ".weight", DType::I8, {N, K / 2}, std::move(w)});
    t.push_back(
        f32Tensor(P + ".weight_scale", {N}, uniformF32(rng, N, 1e-3, 1e-2)));
    cq["convrot_groupsize"] = 256;
  } else if (fmt == "asym_w4a8_int8") {
    const int64_t G = 16;
    t.push_back({P + ".weight", DType::I8, {N, K / 2}, randomBytes(rng, NK / 2)});
    std::vector<uint8_t> srel(static_cast<size_t>(N * (K / G)));
    for (uint8_t &x : srel)
      x = rt::encodeE4M3(static_cast<float>(rng.uniform(32.0, 120.0)));
    t.push_back({P + ".weight_s_rel", DType::F8_E4M3, {N, K / G}, std::move(srel)});
    t.push_back(f32Tensor(P + ".weight_s_channel", {N},
                          uniformF32(rng, N, 5e-4, 2e-3)));
    // Lloyd-Max levels of a unit Gaussian, scaled to ±0.98, ascending.
    static const double lm[8] = {0.1284, 0.3881, 0.6568, 0.9424,
                                 1.2562, 1.6181, 2.0690, 2.7326};
    std::vector<float> cb(16);
    for (int i = 0; i < 8; ++i) {
      cb[8 + i] = static_cast<float>(lm[i] / 2.7326 * 0.98);
      cb[7 - i] = -cb[8 + i];
    }
    t.push_back(f32Tensor(P + ".weight_codebook", {16}, cb));
    cq["group_size"] = G;
    cq["convrot_groupsize"] = 256;
  } else if (fmt == "w6a8_int8") {
    const int64_t G = 16;
    // Row: K/2 bytes of low nibbles, then K/4 bytes of 2-bit high fields;
    // codes 1..63 (v = code - 32 in [-31, 31]).
    const int64_t rowBytes = 3 * K / 4;
    std::vector<uint8_t> w(static_cast<size_t>(N * rowBytes), 0);
    for (int64_t n = 0; n < N; ++n) {
      uint8_t *row = w.data() + n * rowBytes;
      for (int64_t c = 0; c < K; ++c) {
        unsigned code = 1 + rng.below(63);
        row[c / 2] |= static_cast<uint8_t>((code & 0xF) << (4 * (c % 2)));
        row[K / 2 + c / 4] |=
            static_cast<uint8_t>(((code >> 4) & 3) << (2 * (c % 4)));
      }
    }
    t.push_back({P + ".weight", DType::I8, {N, rowBytes}, std::move(w)});
    std::vector<uint8_t> srel(static_cast<size_t>(N * (K / G)));
    for (uint8_t &x : srel)
      x = rt::encodeE4M3(static_cast<float>(rng.uniform(1.0, 4.0)));
    t.push_back({P + ".weight_s_rel", DType::F8_E4M3, {N, K / G}, std::move(srel)});
    t.push_back(f32Tensor(P + ".weight_s_channel", {N},
                          uniformF32(rng, N, 5e-4, 2e-3)));
    cq["group_size"] = G;
    cq["convrot_groupsize"] = 256;
  } else {
    throw std::logic_error("no generator for format " + fmt);
  }
  t.push_back(comfyQuant(P, cq));
  return t;
}

void writeFileAtomically(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f)
      throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

} // namespace

int main(int argc, char **argv) {
  std::string out;
  std::vector<int64_t> ns = {3072, 12288}, ks = {3072, 12288};
  std::vector<std::pair<int64_t, int64_t>> shapes;
  std::vector<const Variant *> variants;
  uint64_t seed = 20240611;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc)
          throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--out")
        out = value();
      else if (a == "--shapes")
        shapes = cqbench::parseShapeList(value());
      else if (a == "--n")
        ns = cqbench::parseIntList(value());
      else if (a == "--k")
        ks = cqbench::parseIntList(value());
      else if (a == "--formats") {
        for (const std::string &l : cqbench::parseStringList(value())) {
          const Variant *v = cqbench::findVariant(l);
          if (!v)
            throw std::invalid_argument("unknown format label '" + l + "'");
          variants.push_back(v);
        }
      } else if (a == "--seed")
        seed = std::stoull(value());
      else if (a == "-h" || a == "--help") {
        usage();
        return 0;
      } else
        throw std::invalid_argument("unknown argument " + a);
    }
    if (out.empty())
      throw std::invalid_argument("--out DIR is required");
  } catch (const std::exception &e) {
    std::cerr << "make_bench_checkpoint: " << e.what() << "\n";
    usage();
    return 1;
  }
  if (shapes.empty())
    for (int64_t n : ns)
      for (int64_t k : ks)
        shapes.push_back({n, k});
  if (variants.empty())
    for (const Variant &v : cqbench::allVariants())
      variants.push_back(&v);
  for (auto [n, k] : shapes)
    // N % 128 and K % 256: no NVFP4/MXFP8 padding (logical shape = storage),
    // ConvRot 256 and the W4A4 K % 64 rule hold.
    if (n % 128 || k % 256) {
      std::cerr << "make_bench_checkpoint: shape " << n << "x" << k
                << ": N must be a multiple of 128 and K of 256\n";
      return 1;
    }

  try {
    namespace fs = std::filesystem;
    fs::create_directories(out);
    nlohmann::ordered_json index;
    index["metadata"] = {{"generator", "comfyquant bench/make_bench_checkpoint"},
                         {"seed", std::to_string(seed)}};
    nlohmann::ordered_json weightMap = nlohmann::ordered_json::object();
    std::map<std::string, std::tuple<std::string, int64_t, int64_t>> expected;
    uint64_t total = 0;
    auto t0 = std::chrono::steady_clock::now();
    Rng rng(seed);
    for (auto [n, k] : shapes)
      for (const Variant *v : variants) {
        std::string P = cqbench::moduleName(*v, n, k);
        std::string shard = P + ".safetensors";
        std::vector<rt::OutputTensor> ts = makeModule(*v, n, k, rng, P);
        uint64_t bytes = 0;
        for (const rt::OutputTensor &t : ts) {
          weightMap[t.name] = shard;
          bytes += t.bytes.size();
        }
        rt::writeSafetensors((fs::path(out) / shard).string(), ts);
        total += bytes;
        expected[P] = {v->format, n, k};
        std::fprintf(stderr, "  wrote %-45s %9.1f MB\n", shard.c_str(),
                     bytes / 1e6);
      }
    index["weight_map"] = weightMap;
    std::string indexPath =
        (fs::path(out) / "bench.safetensors.index.json").string();
    writeFileAtomically(indexPath, index.dump(2) + "\n");

    // Re-open and resolve: every module present, right format and shape.
    auto ckpt = rt::Checkpoint::open(indexPath);
    rt::ResolvedCheckpoint rc = rt::resolveCheckpoint(*ckpt);
    size_t found = 0;
    for (const rt::ResolvedModule &m : rc.modules) {
      auto it = expected.find(m.desc.name);
      if (it == expected.end())
        continue;
      auto [fmt, n, k] = it->second;
      if (fmt != rt::formatName(m.desc.format) || m.desc.outFeatures != n ||
          m.desc.inFeatures != k || m.desc.kind != rt::ModuleKind::Linear) {
        std::cerr << "make_bench_checkpoint: module " << m.desc.name
                  << " resolved as " << rt::formatName(m.desc.format) << " "
                  << m.desc.outFeatures << "x" << m.desc.inFeatures << "\n";
        return 1;
      }
      for (const std::string &w : m.warnings)
        std::cerr << "make_bench_checkpoint: warning: " << m.desc.name << ": "
                  << w << "\n";
      ++found;
    }
    for (const std::string &w : rc.warnings)
      std::cerr << "make_bench_checkpoint: warning: " << w << "\n";
    if (found != expected.size()) {
      std::cerr << "make_bench_checkpoint: resolved " << found << " of "
                << expected.size() << " modules\n";
      return 1;
    }
    double secs = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
    std::printf("%s: %zu modules, %.1f MB, verified (%.1f s)\n",
                indexPath.c_str(), found, total / 1e6, secs);
  } catch (const std::exception &e) {
    std::cerr << "make_bench_checkpoint: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
