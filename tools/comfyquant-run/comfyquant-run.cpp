//===- comfyquant-run.cpp - run modules of a Comfy quant checkpoint -------===//
//
//   comfyquant-run FILE --module NAME --dequantize -o OUT.safetensors
//                  [--dtype f32|bf16|f16]
//   comfyquant-run FILE --module NAME --input IN.safetensors -o OUT.safetensors
//                  [--artifact DIR | --target cpu | --reference] [--expert E]
//                  [--threads T]
//   (both: [--kind NAME=KIND] [--shape NAME=NxK])
//
// --dequantize writes the reference dequantized weight of one module as
// tensor `weight` with the module's logical shape ([N, K]; MoE banks
// [E, N, K]). --input reads tensor `x` ([..., K] in F32/BF16/F16; I64
// indices for an embedding) and writes `y` ([..., N] in x's dtype): with
// --artifact by the compiled kernels of that artifact (comfyquant-compile),
// with --target cpu (the default) by kernels compiled for this CPU into a
// temporary artifact by the comfyquant-compile next to this binary, with
// --reference by the runtime's reference path. Output is written
// atomically. Any error: message on stderr, exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/Session.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

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
    "                      -o OUT.safetensors [--artifact DIR | --target cpu |\n"
    "                      --reference] [--expert E] [--threads T]\n"
    "       common: [--kind NAME=linear|embedding|moe] [--shape NAME=NxK]\n";

/// y = module(x) with the reference path (`session` null) or compiled
/// kernels.
rt::OutputTensor forward(const rt::ResolvedModule &m, const std::string &input,
                         int64_t expert, const rt::Session *session) {
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
    if (session) {
      y.bytes.resize(idx.size() * d.inFeatures * 4);
      session->lookup(static_cast<size_t>(session->findModule(d.name)),
                      y.dtype, idx.data(), static_cast<int64_t>(idx.size()),
                      y.bytes.data());
    } else {
      y.bytes = rt::referenceEmbedding(
          m, idx.data(), static_cast<int64_t>(idx.size()), y.dtype);
    }
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
  if (session) {
    int64_t index = session->findModule(d.name);
    if (index < 0)
      throw rt::Error(input, rt::moduleSubject(d.name),
                      "is not in the artifact (compile it with --modules)");
    y.bytes.resize(view.rows * d.outFeatures * rt::dtypeSize(x->dtype));
    session->run(static_cast<size_t>(index), x->dtype, x->data, view.rows,
                 y.bytes.data(), expert);
  } else {
    y.bytes = rt::referenceLinear(m, view, expert);
  }
  return y;
}

/// A temporary directory removed on scope exit.
struct TempDir {
  std::string path;
  void create() {
    std::string tmpl = (std::filesystem::temp_directory_path() /
                        "comfyquant-run-XXXXXX")
                           .string();
    if (!mkdtemp(tmpl.data()))
      throw rt::Error(tmpl, "", "cannot create a temporary directory");
    path = tmpl;
  }
  ~TempDir() {
    if (!path.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  }
};

/// Compiles `module` for the host CPU with the comfyquant-compile installed
/// beside this binary (a temporary AOT artifact: the runtime itself never
/// needs MLIR or LLVM).
void compileArtifact(const char *argv0, const std::string &file,
                     const std::string &module, const rt::ResolveOptions &opts,
                     const std::string &dir) {
  std::filesystem::path self = std::filesystem::canonical("/proc/self/exe");
  std::string compiler = (self.parent_path() / "comfyquant-compile").string();
  if (access(compiler.c_str(), X_OK) != 0)
    throw rt::Error(compiler, "",
                    "not found: --target cpu compiles with comfyquant-compile; "
                    "use --artifact DIR or --reference");
  std::vector<std::string> args = {compiler, file,   "--target", "cpu",
                                   "--modules", module, "-o",      dir};
  for (const auto &[name, kind] : opts.kinds)
    args.insert(args.end(), {"--kind", name + "=" + rt::moduleKindName(kind)});
  for (const auto &[name, nk] : opts.shapes)
    args.insert(args.end(), {"--shape", name + "=" + std::to_string(nk.first) +
                                            "x" + std::to_string(nk.second)});
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  (void)argv0;
  pid_t pid = fork();
  if (pid == 0) {
    execv(compiler.c_str(), cargs.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    throw rt::Error(file, rt::moduleSubject(module),
                    "comfyquant-compile failed (see its message above)");
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
  std::string artifact, target, threadsText = "0";
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
    } else if (a == "--artifact") {
      if (!value(artifact))
        return fail("--artifact needs a value");
    } else if (a == "--target") {
      if (!value(target))
        return fail("--target needs a value");
    } else if (a == "--threads") {
      if (!value(threadsText))
        return fail("--threads needs a value");
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
  if (int(reference) + int(!artifact.empty()) + int(!target.empty()) > 1)
    return fail("give at most one of --artifact, --target and --reference");
  if (!target.empty() && target != "cpu")
    return fail("--target must be cpu, got '" + target + "'");
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
      std::unique_ptr<rt::Session> session;
      TempDir temp;
      if (!reference) {
        std::string dir = artifact;
        if (dir.empty()) { // compile for this CPU into a temporary artifact
          temp.create();
          dir = temp.path + "/artifact";
          compileArtifact(argv[0], file, module, opts, dir);
        }
        rt::SessionOptions so;
        so.checkpoint = file;
        so.threads = std::atoi(threadsText.c_str());
        session = rt::Session::open(dir, so);
      }
      rt::writeSafetensors(
          output, {forward(*m, input, expert, session.get())},
          {{"module", module},
           {"format", rt::formatName(m->desc.format)},
           {"path", session ? "compiled:" + session->variant() : "reference"},
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
