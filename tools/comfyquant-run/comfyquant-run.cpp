//===- comfyquant-run.cpp - run modules of a Comfy quant checkpoint -------===//
//
//   comfyquant-run FILE --module NAME --dequantize -o OUT.safetensors
//                  [--dtype f32|bf16|f16]
//   comfyquant-run FILE --module NAME --input IN.safetensors -o OUT.safetensors
//                  --reference [--expert E]
//   (both: [--kind NAME=KIND] [--shape NAME=NxK])
//
// --dequantize writes the reference dequantized weight of one module as
// tensor `weight` with the module's logical shape ([N, K]; MoE banks
// [E, N, K]). --input reads tensor `x` ([..., K] in F32/BF16/F16; I64
// indices for an embedding) and writes `y` ([..., N] in x's dtype) computed
// by the reference forward path. Output is written atomically. Any error:
// message on stderr, exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/Reference.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rt = comfyquant::rt;

namespace {

int fail(const std::string &msg) {
  std::fprintf(stderr, "comfyquant-run: error: %s\n", msg.c_str());
  return 1;
}

const char *kUsage =
    "usage: comfyquant-run FILE --module NAME --dequantize -o OUT.safetensors\n"
    "                      [--dtype f32|bf16|f16]\n"
    "       comfyquant-run FILE --module NAME --input IN.safetensors\n"
    "                      -o OUT.safetensors --reference [--expert E]\n"
    "       common: [--kind NAME=linear|embedding|moe] [--shape NAME=NxK]\n";

/// The reference forward of `m` on tensor `x` of `input`; returns `y`.
rt::OutputTensor forward(const rt::ResolvedModule &m, const std::string &input,
                         int64_t expert) {
  auto in = rt::SafetensorsFile::open(input);
  const rt::TensorInfo *x = in->find("x");
  if (!x)
    throw rt::Error(input, "", "has no tensor 'x'");
  const rt::ModuleDesc &d = m.desc;
  rt::OutputTensor y{"y", x->dtype, x->shape, {}};
  if (d.kind == rt::ModuleKind::Embedding) {
    if (x->dtype != rt::DType::I64)
      throw rt::Error(input, rt::tensorSubject("x"),
                      std::string("embedding indices must be I64, got ") +
                          rt::dtypeName(x->dtype));
    std::vector<int64_t> idx(static_cast<size_t>(x->numel()));
    if (!idx.empty())
      std::memcpy(idx.data(), x->data, x->nbytes());
    y.dtype = rt::DType::F32;
    y.shape.push_back(d.inFeatures);
    y.bytes = rt::referenceEmbedding(m, idx.data(),
                                     static_cast<int64_t>(idx.size()), y.dtype);
    return y;
  }
  if (!rt::isActivationDType(x->dtype) || x->rank() < 1 ||
      x->shape.back() != d.inFeatures)
    throw rt::Error(input, rt::tensorSubject("x"),
                    "must be F32, BF16 or F16 [..., K] with K = " +
                        std::to_string(d.inFeatures) + ", got " +
                        rt::dtypeName(x->dtype) + " " +
                        rt::shapeString(x->shape));
  rt::ActivationView view{x->dtype, x->numel() / d.inFeatures, d.inFeatures,
                          x->data};
  y.shape.back() = d.outFeatures;
  y.bytes = rt::referenceLinear(m, view, expert);
  return y;
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

} // namespace

int main(int argc, char **argv) {
  std::string file, module, output, dtype = "f32", input, expertText = "0";
  bool dequantize = false, reference = false;
  rt::ResolveOptions opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &dst) {
      if (i + 1 >= argc)
        return false;
      dst = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--module") {
      if (!value(module))
        return fail("--module needs a value");
    } else if (a == "-o") {
      if (!value(output))
        return fail("-o needs a value");
    } else if (a == "--dtype") {
      if (!value(dtype))
        return fail("--dtype needs a value");
    } else if (a == "--dequantize") {
      dequantize = true;
    } else if (a == "--reference") {
      reference = true;
    } else if (a == "--input") {
      if (!value(input))
        return fail("--input needs a value");
    } else if (a == "--expert") {
      if (!value(expertText))
        return fail("--expert needs a value");
    } else if (a == "--kind" || a == "--shape") {
      if (!value(v))
        return fail(a + " needs a value");
      std::string err = a == "--kind" ? rt::addKindOverride(opts, v)
                                      : rt::addShapeOverride(opts, v);
      if (!err.empty())
        return fail(err);
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "'\n" + kUsage);
    } else if (file.empty()) {
      file = a;
    } else {
      return fail("unexpected argument '" + a + "'\n" + kUsage);
    }
  }
  if (file.empty() || module.empty() || output.empty() ||
      dequantize == !input.empty())
    return fail(std::string("missing arguments\n") + kUsage);
  if (!input.empty() && !reference)
    return fail("--input needs --reference (compiled execution: --artifact "
                "is not available in this build)");
  char *end = nullptr;
  long long expert = std::strtoll(expertText.c_str(), &end, 10);
  if (end == expertText.c_str() || *end || expert < 0)
    return fail("--expert must be a non-negative integer, got '" +
                expertText + "'");
  if (dtype != "f32" && dtype != "bf16" && dtype != "f16")
    return fail("--dtype must be f32, bf16 or f16, got '" + dtype + "'");

  try {
    auto checkpoint = rt::Checkpoint::open(file);
    rt::ResolvedCheckpoint resolved = rt::resolveCheckpoint(*checkpoint, opts);
    const rt::ResolvedModule *m = resolved.find(module);
    if (!m)
      throw rt::Error(file, rt::moduleSubject(module),
                      "no such quantized module (see --inspect)");
    for (const std::string &w : m->warnings)
      std::fprintf(stderr, "comfyquant-run: warning: %s\n", w.c_str());
    if (!input.empty()) {
      rt::writeSafetensors(output, {forward(*m, input, expert)},
                           {{"module", module},
                            {"format", rt::formatName(m->desc.format)},
                            {"path", "reference"},
                            {"source", file}});
      return 0;
    }
    std::vector<float> w = rt::dequantizeModule(*m);
    rt::OutputTensor t{"weight", rt::DType::F32, rt::dequantizedShape(m->desc),
                       {}};
    if (dtype == "f32") {
      t.bytes = bytesOf(w);
    } else if (dtype == "bf16") {
      t.dtype = rt::DType::BF16;
      t.bytes = bytesOf(rt::toBFloat16(w));
    } else {
      t.dtype = rt::DType::F16;
      t.bytes = bytesOf(rt::toHalf(w));
    }
    rt::writeSafetensors(output, {t},
                         {{"module", module},
                          {"format", rt::formatName(m->desc.format)},
                          {"source", file}});
    return 0;
  } catch (const rt::Error &e) {
    return fail(e.what());
  } catch (const std::exception &e) {
    return fail(file + ": " + e.what());
  }
}
