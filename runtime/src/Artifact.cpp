//===- Artifact.cpp - an artifact directory and its CPU library -----------===//
#include "comfyquant/runtime/Artifact.h"

#include "comfyquant/runtime/Error.h"

#include <dlfcn.h>
#include <fstream>
#include <sstream>

namespace comfyquant::rt {

std::unique_ptr<Artifact> Artifact::open(const std::string &dir) {
  std::string manifestPath = dir + "/manifest.json";
  std::ifstream in(manifestPath, std::ios::binary);
  if (!in)
    throw Error(manifestPath, "", "cannot read the artifact manifest",
                ErrorKind::Io);
  std::stringstream ss;
  ss << in.rdbuf();
  std::unique_ptr<Artifact> a(new Artifact());
  a->dir_ = dir;
  a->manifest_ = parseManifest(ss.str(), manifestPath);
  if (!a->manifest_.cpu)
    return a; // no CPU kernels to load
  std::string so = dir + "/" + a->manifest_.cpu->library;
  a->handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!a->handle_) {
    const char *e = dlerror();
    throw Error(so, "",
                std::string("cannot load the kernels: ") +
                    (e ? e : "dlopen failed"),
                ErrorKind::Io);
  }
  return a;
}

Artifact::~Artifact() {
  if (handle_)
    dlclose(handle_);
}

const ManifestModule *Artifact::find(const std::string &name) const {
  return manifest_.find(name);
}

KernelEntry Artifact::entry(const std::string &symbol) const {
  if (!handle_)
    throw Error(dir_, "",
                "entry point '" + symbol +
                    "': the artifact has no CPU kernels (no cpu backend)",
                ErrorKind::Unsupported);
  dlerror();
  void *p = dlsym(handle_, symbol.c_str());
  if (!p)
    throw Error(dir_ + "/" + manifest_.cpu->library, "",
                "entry point '" + symbol + "' is missing");
  KernelEntry fn;
  static_assert(sizeof(fn) == sizeof(p), "function pointer size");
  __builtin_memcpy(&fn, &p, sizeof(fn));
  return fn;
}

} // namespace comfyquant::rt
