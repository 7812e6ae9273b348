//===- comfyquant-run.cpp - run modules of a Comfy quant checkpoint -------===//
//
//   comfyquant-run FILE --module NAME --dequantize -o OUT.safetensors
//                  [--dtype f32|bf16|f16]
//   comfyquant-run FILE --module NAME --input IN.safetensors -o OUT.safetensors
//                  [--artifact DIR | --target cpu | --reference] [--expert E]
//                  [--threads T] [--no-cache] [--backend cpu|cuda]
//                  [--device N]
//   (both: [--kind NAME=KIND]... [--shape NAME=NxK]... [--overwrite])
//   comfyquant-run --devices
//   comfyquant-run --cpu-variants
//
// --dequantize writes the reference dequantized weight of one module as
// tensor `weight` with the module's logical shape ([N, K]; MoE banks
// [E, N, K]). --input reads tensor `x` ([..., K] in F32/BF16/F16; I64
// indices for an embedding) and writes `y` ([..., N] in x's dtype): with
// --artifact by the compiled kernels of that artifact (comfyquant-compile),
// with --target cpu (the default) by kernels compiled for this CPU by the
// comfyquant-compile next to this binary and kept in a cache directory, with
// --reference by the runtime's reference path. --backend cuda runs the
// artifact's CUDA kernels on GPU --device N (--target cuda:ARCH compiles
// them on the fly); --devices lists the GPUs, or says in one line why there
// are none (exit 1). --cpu-variants prints each CPU kernel variant and
// whether this CPU and OS run it ("NAME yes", or "NAME no: why"), most
// portable first, as the runtime decides it (AMX: the tile-data permission
// is requested).
//
// The output is written atomically; it may not be an input (the checkpoint
// or a shard, x, the artifact's files) and an existing one is replaced only
// with --overwrite. Options parse like the LLVM-based tools' (--opt=value or
// --opt value); an option that does not apply to the mode or the module is
// an error. Any error: message on stderr, exit code 1.
//===----------------------------------------------------------------------===//
#include "comfyquant/runtime/CpuFeatures.h"
#include "comfyquant/runtime/Cuda.h"
#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Forward.h"
#include "comfyquant/runtime/OutputFile.h"
#include "comfyquant/runtime/Reference.h"
#include "comfyquant/runtime/Session.h"
#include "comfyquant/runtime/Targets.h"
#include "comfyquant/version.h"
#include "ToolCommandLine.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>

namespace rt = comfyquant::rt;
using comfyquant::tools::CommandLine;
using comfyquant::tools::OptionSpec;
using comfyquant::tools::parseCommandLine;
using comfyquant::tools::parseCount;

namespace {

int fail(const std::string &msg) {
  std::fprintf(stderr, "comfyquant-run: error: %s\n", msg.c_str());
  return 1;
}

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//



const OptionSpec kOptions[] = {
    {"--module", "NAME", false, "The quantized module"},
    {"-o", "FILE", false, "Output safetensors file (written atomically)"},
    {"--overwrite", nullptr, false, "Replace an existing output file"},
    {"--dequantize", nullptr, false,
     "Write the reference dequantized weight as tensor 'weight'"},
    {"--dtype", "f32|bf16|f16", false,
     "With --dequantize: dtype of the written weight (default f32)"},
    {"--input", "FILE", false,
     "Safetensors file with tensor 'x'; writes y = module(x) as tensor 'y'"},
    {"--artifact", "DIR", false,
     "Run the compiled kernels of this artifact (comfyquant-compile)"},
    {"--target", "cpu|cuda:ARCH", false,
     "Compile the module for this CPU (the default) or for CUDA archs "
     "(sm_90a,...; implies --backend cuda) and run it (cached)"},
    {"--backend", "cpu|cuda", false,
     "Run the CPU kernels (default) or the CUDA kernels of the artifact"},
    {"--device", "N", false, "With --backend cuda: the GPU (default 0)"},
    {"--emulate", "ARCH", false,
     "With --backend cuda: run that arch's PTX on the PTX emulator "
     "instead of a GPU (archs: listed below)"},
    {"--emu-stats", "FILE", false,
     "With --emulate: write what the kernels executed as JSON"},
    {"--devices", nullptr, false,
     "List the CUDA devices (exit 1, with the reason, when there are none)"},
    {"--cpu-variants", nullptr, false,
     "List the CPU kernel variants and whether this CPU runs each"},
    {"--reference", nullptr, false, "Run the reference path"},
    {"--no-cache", nullptr, false,
     "With --target: compile into a temporary directory, bypassing the "
     "cache ($COMFYQUANT_CACHE_DIR, else $XDG_CACHE_HOME/comfyquant, else "
     "~/.cache/comfyquant)"},
    {"--expert", "E", false, "MoE modules: the expert to run (default 0)"},
    {"--threads", "T", false,
     "Compiled kernels: threads per call (default 0: $COMFYQUANT_THREADS, "
     "else every core available)"},
    {"--kind", "NAME=linear|embedding|moe", true,
     "Module kind override (repeatable)"},
    {"--shape", "NAME=NxK", true, "Logical shape override (repeatable)"},
    {"--version", nullptr, false, "Print the comfyquant version"},
    {"--help", nullptr, false, "Print this help (also -h)"},
};

const char *kUsage =
    "usage: comfyquant-run FILE --module NAME --dequantize -o OUT.safetensors\n"
    "                      [--dtype f32|bf16|f16]\n"
    "       comfyquant-run FILE --module NAME --input IN.safetensors\n"
    "                      -o OUT.safetensors [--artifact DIR | --target cpu |\n"
    "                      --reference] [--expert E] [--threads T] [--no-cache]\n"
    "                      [--backend cpu|cuda] [--device N]\n"
    "                      [--emulate ARCH [--emu-stats FILE]]\n"
    "       comfyquant-run --devices\n"
    "       comfyquant-run --cpu-variants\n"
    "       common: [--kind NAME=KIND]... [--shape NAME=NxK]... [--overwrite]\n";

void printHelp() {
  std::fputs("comfyquant-run: run or dequantize one module of a Comfy quant "
             "checkpoint\n\n",
             stdout);
  std::fputs(kUsage, stdout);
  std::fputs("\ncomfyquant-run options:\n", stdout);
  for (const OptionSpec &o : kOptions) {
    std::string left = o.name;
    if (o.meta)
      left += std::string("=") + o.meta;
    std::printf("  %-36s %s\n", left.c_str(), o.help);
  }
  // From the runtime's table, so the list cannot fall behind it.
  std::string archs;
  for (const rt::CudaArchInfo &a : rt::cudaArchs())
    archs += std::string(archs.empty() ? "" : ", ") + a.name;
  std::printf("\nCUDA archs (--target cuda:ARCH, --emulate): %s\n",
              archs.c_str());
  std::fputs("\nFILE is a .safetensors file or a *.safetensors.index.json. "
             "Options take\ntheir value as --opt=value or --opt value.\n",
             stdout);
}

/// The artifact's module `d` names. The kernels were compiled for the
/// manifest's kind and shape, and x and y are sized from `d`: a module
/// resolved differently here (another --shape or --kind) is refused, never
/// run on buffers of the wrong size.
size_t compiledModule(const rt::Session &session, const rt::ModuleDesc &d,
                      const std::string &input) {
  int64_t index = session.findModule(d.name);
  if (index < 0)
    throw rt::Error(input, rt::moduleSubject(d.name),
                    "is not in the artifact (compile it with --modules)");
  const rt::ManifestModule &a = session.module(static_cast<size_t>(index));
  const std::string here = std::string(rt::moduleKindName(d.kind)) + " " +
                           std::to_string(d.outFeatures) + "x" +
                           std::to_string(d.inFeatures);
  const std::string there = std::string(rt::moduleKindName(a.kind)) + " " + std::to_string(a.outFeatures) +
                            "x" + std::to_string(a.inFeatures);
  if (here != there || (d.kind == rt::ModuleKind::MoE && a.experts != d.experts))
    throw rt::Error(session.artifactDir(), rt::moduleSubject(d.name),
                    "was compiled as " + there + " but resolves here as " +
                        here + " (check --shape and --kind)");
  return static_cast<size_t>(index);
}

/// y = module(x) with the reference path (`session` null) or compiled
/// kernels.
/// `ran`: the variant whose kernel computed y (the session's, or the one a
/// call of these rows runs).
rt::OutputTensor forward(const rt::ResolvedModule &m, const std::string &input,
                         int64_t expert, const rt::Session *session,
                         std::string &ran) {
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
      size_t index = compiledModule(*session, d, input);
      ran = session->variant();
      y.bytes.resize(idx.size() * d.inFeatures * 4);
      session->lookup(index, y.dtype, idx.data(),
                      static_cast<int64_t>(idx.size()), y.bytes.data());
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
    size_t index = compiledModule(*session, d, input);
    ran = session->variantFor(index, x->dtype, view.rows);
    y.bytes.resize(view.rows * d.outFeatures * rt::dtypeSize(x->dtype));
    session->run(index, x->dtype, x->data, view.rows, y.bytes.data(), expert);
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

/// The comfyquant-compile installed beside this binary.
std::string compilerPath() {
  std::filesystem::path self = std::filesystem::canonical("/proc/self/exe");
  std::string compiler = (self.parent_path() / "comfyquant-compile").string();
  if (access(compiler.c_str(), X_OK) != 0)
    throw rt::Error(compiler, "",
                    "not found: --target cpu compiles with comfyquant-compile; "
                    "use --artifact DIR or --reference");
  return compiler;
}

/// Compiles `module` for the host CPU into the artifact directory `dir`
/// (the runtime itself never needs MLIR or LLVM).
void compileArtifact(const std::string &compiler, const std::string &file,
                     const std::string &module, const rt::ResolveOptions &opts,
                     const std::string &target, const std::string &dir,
                     bool replace) {
  std::vector<std::string> args = {compiler,    file, "--target", target,
                                   "--modules", module, "--quiet", "-o",
                                   dir};
  if (replace)
    args.push_back("--overwrite");
  for (const auto &[name, kind] : opts.kinds)
    args.insert(args.end(), {"--kind", name + "=" + rt::moduleKindName(kind)});
  for (const auto &[name, nk] : opts.shapes)
    args.insert(args.end(), {"--shape", name + "=" + std::to_string(nk.first) +
                                            "x" + std::to_string(nk.second)});
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(nullptr);
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

//===----------------------------------------------------------------------===//
// Artifact cache
//===----------------------------------------------------------------------===//

/// $COMFYQUANT_CACHE_DIR, else $XDG_CACHE_HOME/comfyquant, else
/// ~/.cache/comfyquant; "" when none is defined.
std::string cacheRoot() {
  if (const char *d = std::getenv("COMFYQUANT_CACHE_DIR"); d && *d)
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/comfyquant";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/comfyquant";
  return "";
}

uint64_t fnv1a64(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// The cache entry of one module: its name hashes everything the compiled
/// code depends on. The compiler reads only the checkpoint's headers (the
/// kernels bind weights at run time), so the checkpoint's identity is the
/// manifest's (total size + header hash, re-checked when the session
/// opens); the compiler's is its version plus its binary's size and mtime,
/// so a rebuilt compiler never reuses stale kernels.
std::string cacheEntry(const std::string &root, const std::string &compiler,
                       const rt::Checkpoint &checkpoint,
                       const std::string &module,
                       const rt::ResolveOptions &opts,
                       const std::string &target) {
  struct stat st {};
  ::stat(compiler.c_str(), &st);
  std::string key = "comfyquant-run cache 1\ncompiler " CQ_VERSION_STRING " " +
                    compiler + " " + std::to_string(st.st_size) + " " +
                    std::to_string(st.st_mtim.tv_sec) + "." +
                    std::to_string(st.st_mtim.tv_nsec) + "\ncheckpoint " +
                    std::to_string(checkpoint.totalSize()) + " " +
                    std::to_string(checkpoint.headerHash()) + " " +
                    std::to_string(checkpoint.shards().size()) + "\nmodule " +
                    module + "\n";
  // The CPU key is unchanged from before targets were part of it, so
  // existing cache entries stay valid.
  if (target != "cpu")
    key += "target " + target + "\n";
  for (const auto &[name, kind] : opts.kinds)
    key += "kind " + name + "=" + rt::moduleKindName(kind) + "\n";
  for (const auto &[name, nk] : opts.shapes)
    key += "shape " + name + "=" + std::to_string(nk.first) + "x" +
           std::to_string(nk.second) + "\n";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a64(key)));
  return root + "/" + hex;
}

/// Opens the cached artifact of `module`, compiling it into the cache first
/// when it is absent or unusable.
std::unique_ptr<rt::Session>
openCached(const std::string &root, const std::string &file,
           const rt::Checkpoint &checkpoint, const std::string &module,
           const rt::ResolveOptions &opts, const std::string &target,
           const rt::SessionOptions &so) {
  std::string compiler = compilerPath();
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec)
    throw rt::Error(root, "",
                    "cannot create the cache directory: " + ec.message() +
                        " (set COMFYQUANT_CACHE_DIR or pass --no-cache)");
  std::string dir =
      cacheEntry(root, compiler, checkpoint, module, opts, target);
  if (std::filesystem::exists(dir + "/manifest.json", ec)) {
    try {
      auto session = rt::Session::open(dir, so);
      std::fprintf(stderr, "comfyquant-run: using cached artifact %s\n",
                   dir.c_str());
      return session;
    } catch (const rt::Error &e) {
      std::fprintf(stderr,
                   "comfyquant-run: warning: cached artifact %s is unusable "
                   "(%s); recompiling\n",
                   dir.c_str(), e.what());
    }
  }
  compileArtifact(compiler, file, module, opts, target, dir,
                  /*replace=*/true);
  std::fprintf(stderr, "comfyquant-run: compiled to cache %s\n", dir.c_str());
  return rt::Session::open(dir, so);
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// --help, --version, --cpu-variants and --devices: answered without a
/// checkpoint. The exit code, or none for any other command.
std::optional<int> answerQuery(const CommandLine &cl) {
  if (cl.has("--help")) {
    printHelp();
    return 0;
  }
  if (cl.has("--version")) {
    std::printf("comfyquant %s\n", CQ_VERSION_STRING);
    return 0;
  }
  if (cl.has("--cpu-variants")) {
    if (cl.values.size() != 1 || !cl.file.empty())
      return fail("--cpu-variants takes no other argument");
    for (const rt::CpuVariantInfo &v : rt::cpuVariants()) {
      std::string why;
      bool ok = rt::cpuSupportsVariant(v.name, &why) &&
                (!v.amxTiles || rt::enableAmx(&why));
      std::printf("%s %s\n", v.name, ok ? "yes" : ("no: " + why).c_str());
    }
    return 0;
  }
  if (cl.has("--devices")) {
    if (cl.values.size() != 1 || !cl.file.empty())
      return fail("--devices takes no other argument");
    try {
      for (const rt::CudaDeviceInfo &d : rt::cudaDevices())
        std::printf("%s\n", d.describe().c_str());
      return 0;
    } catch (const rt::Error &e) {
      return fail(e.what());
    }
  }

  return std::nullopt;
}

/// A run's command line, checked: the mode and every option that applies
/// to it.
struct RunPlan {
  std::string file, module, output, input, artifact, target, backend, dtype;
  std::string cache; ///< the artifact cache (empty: not used)
  bool dequantize = false, reference = false, cudaTarget = false;
  bool useCache = false;
  int64_t device = 0, expert = 0, threads = 0;
  std::string emulate, emuStats; ///< --emulate ARCH, --emu-stats FILE
  rt::ResolveOptions opts;
};

/// --emulate: the runtime loads the emulator's driver shim instead of
/// libcuda.so.1 and runs the arch's PTX ($COMFYQUANT_PTXEMU names the shim,
/// else lib/ beside this tool's bin/). Explicit only: without --emulate a
/// missing driver stays an error.
std::string useEmulator(const RunPlan &p) {
  std::string lib;
  if (const char *env = std::getenv("COMFYQUANT_PTXEMU"); env && *env) {
    lib = env;
  } else {
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec)
      return "--emulate: cannot locate this executable: " + ec.message();
    lib = (self.parent_path().parent_path() / "lib" / "libcomfyquant-ptxemu.so")
              .string();
  }
  if (!std::filesystem::exists(lib))
    return "--emulate: the PTX emulator " + lib +
           " is missing (set COMFYQUANT_PTXEMU to libcomfyquant-ptxemu.so)";
  ::setenv("COMFYQUANT_LIBCUDA", lib.c_str(), 1);
  ::setenv("COMFYQUANT_EMU_ARCH", p.emulate.c_str(), 1);
  ::setenv("COMFYQUANT_CUDA_IMAGE", p.emulate.c_str(), 1);
  if (!p.emuStats.empty())
    ::setenv("COMFYQUANT_EMU_STATS", p.emuStats.c_str(), 1);
  else
    ::unsetenv("COMFYQUANT_EMU_STATS");
  return "";
}

/// Fills `p` from `cl`; an error message, or empty.
std::string planRun(const CommandLine &cl, RunPlan &p) {
  p.file = cl.file;
  p.module = cl.get("--module");
  p.output = cl.get("-o");
  p.input = cl.get("--input");
  p.artifact = cl.get("--artifact");
  p.dequantize = cl.has("--dequantize");
  p.reference = cl.has("--reference");
  const std::string &file = p.file, &module = p.module, &output = p.output;
  const bool dequantize = p.dequantize, reference = p.reference;
  if (file.empty())
    return std::string("missing the checkpoint FILE\n") + kUsage;
  if (module.empty())
    return std::string("missing --module NAME\n") + kUsage;
  if (output.empty())
    return std::string("missing -o OUT.safetensors\n") + kUsage;
  if (dequantize == cl.has("--input"))
    return std::string("give exactly one of --dequantize and --input\n") +
                kUsage;
  if (dequantize) {
    for (const char *o : {"--artifact", "--target", "--reference",
                          "--no-cache", "--expert", "--threads", "--backend",
                          "--device"})
      if (cl.has(o))
        return std::string(o) +
                    " does not apply to --dequantize (it runs the module on "
                    "--input)";
  } else if (cl.has("--dtype")) {
    return "--dtype applies only to --dequantize (y is written in x's "
                "dtype)";
  }
  if (int(reference) + int(cl.has("--artifact")) + int(cl.has("--target")) > 1)
    return "give at most one of --artifact, --target and --reference";
  p.target = cl.get("--target", "cpu");
  const std::string &target = p.target;
  p.cudaTarget = target.rfind("cuda:", 0) == 0 && target.size() > 5;
  const bool cudaTarget = p.cudaTarget;
  if (target != "cpu" && !cudaTarget)
    return "--target must be cpu or cuda:ARCH[,ARCH...], got '" + target +
                "'";
  p.backend = cl.get("--backend", cudaTarget ? "cuda" : "cpu");
  const std::string &backend = p.backend;
  if (backend != "cpu" && backend != "cuda")
    return "--backend must be cpu or cuda, got '" + backend + "'";
  if (cudaTarget && backend != "cuda")
    return "--target " + target + " runs on --backend cuda";
  if (reference && (cl.has("--backend") || cl.has("--device")))
    return "--backend and --device apply only to compiled kernels, not "
                "to --reference";
  if (cl.has("--device") && backend != "cuda")
    return "--device applies only to --backend cuda";
  if (cl.has("--device") && !parseCount(cl.get("--device"), 1023, p.device))
    return "--device must be a GPU index in [0, 1023], got '" +
                cl.get("--device") + "'";
  if (backend == "cuda" && cl.has("--target") && !cudaTarget)
    return "--backend cuda runs CUDA kernels: give --artifact DIR or "
                "--target cuda:ARCH, not --target cpu";
  if (cl.has("--no-cache") && (reference || cl.has("--artifact")))
    return "--no-cache applies only to --target cpu or cuda:ARCH "
                "(compiling on the fly)";
  if (cl.has("--threads") && reference)
    return "--threads applies only to compiled kernels, not to "
                "--reference";
  if (cl.has("--threads") && backend == "cuda")
    return "--threads applies only to --backend cpu";
  if (cl.has("--expert") &&
      !parseCount(cl.get("--expert"), INT64_MAX / 2, p.expert))
    return "--expert must be a non-negative integer, got '" +
                cl.get("--expert") + "'";
  if (cl.has("--threads") && !parseCount(cl.get("--threads"), 65536, p.threads))
    return "--threads must be an integer in [0, 65536], got '" +
                cl.get("--threads") + "'";
  if (cl.has("--emulate") && backend != "cuda")
    return "--emulate runs the CUDA kernels on the PTX emulator: add "
           "--backend cuda";
  if (cl.has("--emulate") && cl.has("--device"))
    return "--emulate runs on the emulator, which has no --device";
  if (cl.has("--emu-stats") && !cl.has("--emulate"))
    return "--emu-stats applies only to --emulate";
  if (cl.has("--emulate")) {
    const std::string arch = cl.get("--emulate");
    // The archs images are compiled for (a family arch emulates its
    // first member).
    std::string names;
    for (const rt::CudaArchInfo &a : rt::cudaArchs())
      names += (names.empty() ? "" : ", ") + std::string(a.name);
    if (!rt::findCudaArch(arch))
      return "--emulate must be one of " + names + ", got '" + arch + "'";
    p.emulate = arch;
    p.emuStats = cl.get("--emu-stats");
  }
  p.dtype = cl.get("--dtype", "f32");
  if (p.dtype != "f32" && p.dtype != "bf16" && p.dtype != "f16")
    return "--dtype must be f32, bf16 or f16, got '" + p.dtype + "'";
  for (const char *o : {"--kind", "--shape"})
    if (cl.has(o))
      for (const std::string &v : cl.values.at(o))
        if (std::string err = std::string(o) == "--kind"
                                  ? rt::addKindOverride(p.opts, v)
                                  : rt::addShapeOverride(p.opts, v);
            !err.empty())
          return err;
  p.useCache =
      !dequantize && !reference && p.artifact.empty() && !cl.has("--no-cache");
  p.cache = p.useCache ? cacheRoot() : "";
  if (p.useCache && p.cache.empty())
    return "no cache directory: set COMFYQUANT_CACHE_DIR, XDG_CACHE_HOME "
                "or HOME, or pass --no-cache";
  return "";
}

/// Runs the planned command; the exit code.
int runPlanned(const CommandLine &cl, const RunPlan &p) {
  const std::string &file = p.file, &module = p.module, &output = p.output,
                    &input = p.input, &artifact = p.artifact,
                    &target = p.target, &backend = p.backend,
                    &dtype = p.dtype, &cache = p.cache;
  const bool dequantize = p.dequantize, reference = p.reference,
             cudaTarget = p.cudaTarget, useCache = p.useCache;
  const int64_t device = p.device, expert = p.expert, threads = p.threads;
  const rt::ResolveOptions &opts = p.opts;
  try {
    // Without a usable GPU, say so before any other work.
    if (!dequantize && backend == "cuda")
      rt::cudaDevices();
    if (!dequantize && backend == "cuda" && !cl.has("--artifact") &&
        !cudaTarget)
      throw rt::Error("", "",
                      "--backend cuda runs CUDA kernels: give --artifact DIR "
                      "or --target cuda:ARCH");
    auto checkpoint = rt::Checkpoint::open(file);
    // Never write over what we read: the checkpoint (every shard), x and
    // the artifact's files.
    std::vector<std::string> inputs = rt::checkpointFiles(*checkpoint);
    if (!input.empty())
      inputs.push_back(input);
    if (!artifact.empty())
      for (const char *f : {"/manifest.json", "/kernels.so", "/cuda/host.so"})
        inputs.push_back(artifact + f);
    rt::checkNotAnInput(output, inputs);
    rt::checkOverwrite(output, cl.has("--overwrite"));

    rt::ResolvedCheckpoint resolved = rt::resolveCheckpoint(*checkpoint, opts);
    const rt::ResolvedModule *m = resolved.find(module);
    if (!m)
      throw rt::Error(file, rt::moduleSubject(module),
                      "no such quantized module (see --inspect)");
    if (cl.has("--expert") && m->desc.kind != rt::ModuleKind::MoE)
      throw rt::Error(file, rt::moduleSubject(module),
                      std::string("--expert applies only to MoE modules; "
                                  "this one is ") +
                          rt::moduleKindName(m->desc.kind));
    if (cl.has("--threads") && m->desc.kind == rt::ModuleKind::Embedding)
      throw rt::Error(file, rt::moduleSubject(module),
                      "--threads applies only to linear and MoE modules (an "
                      "embedding lookup runs on the calling thread)");
    for (const std::string &w : m->warnings)
      std::fprintf(stderr, "comfyquant-run: warning: %s\n", w.c_str());
    if (!input.empty()) {
      std::unique_ptr<rt::Session> session;
      TempDir temp;
      if (!reference) {
        rt::SessionOptions so;
        so.checkpoint = file;
        so.threads = static_cast<int>(threads);
        so.backend = backend;
        so.device = static_cast<int>(device);
        if (!artifact.empty()) {
          session = rt::Session::open(artifact, so);
        } else if (useCache) {
          session =
              openCached(cache, file, *checkpoint, module, opts, target, so);
        } else { // compile for this machine into a temporary artifact
          temp.create();
          std::string dir = temp.path + "/artifact";
          compileArtifact(compilerPath(), file, module, opts, target, dir,
                          /*replace=*/false);
          session = rt::Session::open(dir, so);
        }
      }
      if (session)
        for (const std::string &w : session->warnings())
          std::fprintf(stderr, "comfyquant-run: warning: %s\n", w.c_str());
      std::string ran;
      rt::OutputTensor y = forward(*m, input, expert, session.get(), ran);
      rt::writeSafetensors(
          output, {std::move(y)},
          {{"module", module},
           {"format", rt::formatName(m->desc.format)},
           {"path", !session ? "reference"
                    : session->backend() == rt::SessionBackend::Cuda
                        ? "compiled:cuda:" + ran
                        : "compiled:" + ran},
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

} // namespace

int main(int argc, char **argv) {
  CommandLine cl;
  if (std::string err = parseCommandLine(argc, argv, kOptions, cl); !err.empty())
    return fail(err);
  if (std::optional<int> code = answerQuery(cl))
    return *code;
  RunPlan plan;
  if (std::string err = planRun(cl, plan); !err.empty())
    return fail(err);
  if (!plan.emulate.empty())
    if (std::string err = useEmulator(plan); !err.empty())
      return fail(err);
  return runPlanned(cl, plan);
}
