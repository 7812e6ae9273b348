//===- comfyquant-run.cpp - run modules of a Comfy quant checkpoint -------===//
//
//   comfyquant-run FILE --module NAME --dequantize -o OUT.safetensors
//                  [--dtype f32|bf16|f16] [--kind NAME=KIND] [--shape NAME=NxK]
//
// Writes the reference dequantized weight of one module as tensor `weight`
// with the module's logical shape ([N, K]; MoE banks [E, N, K]). Output is
// written atomically. Any error: message on stderr, exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Reference.h"

#include <cstdio>
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
    "                      [--dtype f32|bf16|f16] [--kind NAME=linear|embedding|moe]\n"
    "                      [--shape NAME=NxK]\n";

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

} // namespace

int main(int argc, char **argv) {
  std::string file, module, output, dtype = "f32";
  bool dequantize = false;
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
  if (file.empty() || module.empty() || output.empty() || !dequantize)
    return fail(std::string("missing arguments\n") + kUsage);
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
