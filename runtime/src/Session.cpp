//===- Session.cpp - run compiled modules on a mapped checkpoint ----------===//
#include "comfyquant/runtime/Session.h"

#include "comfyquant/runtime/Error.h"
#include "exec/Executor.h"

#include <cinttypes>
#include <cstdio>

#include <sys/stat.h>

namespace comfyquant::rt {

namespace {

std::string hashString(uint64_t h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016" PRIx64, h);
  return buf;
}

bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

const char *sessionBackendName(SessionBackend backend) {
  return backend == SessionBackend::Cuda ? "cuda" : "cpu";
}

bool parseSessionBackend(const std::string &name, SessionBackend &backend) {
  if (name.empty() || name == "cpu")
    backend = SessionBackend::Cpu;
  else if (name == "cuda")
    backend = SessionBackend::Cuda;
  else
    return false;
  return true;
}

std::unique_ptr<Session> Session::open(const std::string &artifactDir,
                                       const SessionOptions &options) {
  std::unique_ptr<Session> s(new Session());
  s->artifact_ = Artifact::open(artifactDir);
  const Manifest &mf = s->artifact_->manifest();

  // The checkpoint, and its identity against the manifest. Without an
  // explicit one: the manifest's path relative to the artifact first (the
  // pair was moved together), then its absolute path.
  auto openChecked = [&](const std::string &path) {
    std::unique_ptr<Checkpoint> c = Checkpoint::open(path);
    const uint64_t size = c->totalSize();
    const std::string hash = hashString(c->headerHash());
    if (size != mf.checkpointSize || hash != mf.checkpointHash)
      throw Error(path, "",
                  "checkpoint does not match the artifact '" + artifactDir +
                      "' (compiled for " + mf.checkpointPath + ": size " +
                      std::to_string(mf.checkpointSize) + ", " +
                      mf.checkpointHash + "; this file: size " +
                      std::to_string(size) + ", " + hash + ")",
                  ErrorKind::Mismatch);
    return c;
  };
  std::string path = options.checkpoint;
  if (!path.empty()) {
    s->checkpoint_ = openChecked(path);
  } else {
    std::vector<std::string> candidates;
    if (!mf.checkpointRelativePath.empty())
      candidates.push_back(artifactDir + "/" + mf.checkpointRelativePath);
    candidates.push_back(mf.checkpointPath);
    std::unique_ptr<Error> firstMismatch;
    for (const std::string &c : candidates) {
      if (!isFile(c))
        continue;
      try {
        s->checkpoint_ = openChecked(c);
        path = c;
        break;
      } catch (const Error &e) {
        if (!firstMismatch)
          firstMismatch = std::make_unique<Error>(e);
      }
    }
    if (!s->checkpoint_) {
      if (firstMismatch)
        throw *firstMismatch;
      std::string tried;
      for (const std::string &c : candidates)
        tried += (tried.empty() ? "'" : ", '") + c + "'";
      throw Error(artifactDir, "",
                  "the checkpoint the artifact was compiled for is not at " +
                      tried,
                  ErrorKind::Io);
    }
    if (path != candidates.front())
      s->warnings_.push_back("checkpoint not found next to the artifact ('" +
                             candidates.front() + "'); opened '" + path + "'");
  }
  s->checkpointPath_ = path;

  SessionBackend backend;
  if (!parseSessionBackend(options.backend, backend))
    throw Error(artifactDir, "",
                "unknown backend '" + options.backend + "' (cpu or cuda)",
                ErrorKind::InvalidArgument);
  s->executor_ = openExecutor(
      backend, {*s->artifact_, *s->checkpoint_, s->checkpointPath_, options});
  const std::vector<std::string> &more = s->executor_->warnings();
  s->warnings_.insert(s->warnings_.end(), more.begin(), more.end());
  return s;
}

Session::~Session() = default; // stops the executor's workers

SessionBackend Session::backend() const { return executor_->backend(); }

const std::string &Session::variant() const { return executor_->target(); }

const std::string &Session::variantFor(size_t index, DType dtype,
                                       int64_t m) const {
  module(index); // range-checked
  return executor_->targetFor(index, dtype, m);
}

std::string Session::deviceDescription() const {
  return executor_->deviceDescription();
}

int Session::threads() const { return executor_->threads(); }

void Session::setThreads(int threads) { executor_->setThreads(threads); }

const Manifest &Session::manifest() const { return artifact_->manifest(); }

const std::string &Session::artifactDir() const { return artifact_->dir(); }

size_t Session::moduleCount() const { return manifest().modules.size(); }

const ManifestModule &Session::module(size_t index) const {
  if (index >= moduleCount())
    throw Error(artifact_->dir(), "",
                "module index " + std::to_string(index) + " out of range [0, " +
                    std::to_string(moduleCount()) + ")",
                ErrorKind::InvalidArgument);
  return manifest().modules[index];
}

int64_t Session::findModule(const std::string &name) const {
  const std::vector<ManifestModule> &modules = manifest().modules;
  for (size_t i = 0; i < modules.size(); ++i)
    if (modules[i].name == name)
      return static_cast<int64_t>(i);
  return -1;
}

const ManifestModule &Session::checked(size_t index, bool embedding) const {
  const ManifestModule &m = module(index);
  if (embedding && m.kind != ModuleKind::Embedding)
    throw Error(artifact_->dir(), moduleSubject(m.name), "is not an embedding",
                ErrorKind::InvalidArgument);
  if (!embedding && m.kind == ModuleKind::Embedding)
    throw Error(artifact_->dir(), moduleSubject(m.name),
                "an embedding takes indices (lookup)",
                ErrorKind::InvalidArgument);
  return m;
}

void Session::run(size_t module, DType dtype, const void *x, int64_t m,
                  void *y, int64_t expert) const {
  checked(module, /*embedding=*/false);
  executor_->run(module, dtype, x, m, y, expert);
}

void Session::lookup(size_t module, DType dtype, const int64_t *indices,
                     int64_t m, void *y) const {
  checked(module, /*embedding=*/true);
  executor_->lookup(module, dtype, indices, m, y);
}

void Session::runDevice(size_t module, DType dtype, uint64_t x, int64_t m,
                        uint64_t y, int64_t expert) const {
  checked(module, /*embedding=*/false);
  executor_->runDevice(module, dtype, x, m, y, expert);
}

void Session::lookupDevice(size_t module, DType dtype, uint64_t indices,
                           int64_t m, uint64_t y) const {
  checked(module, /*embedding=*/true);
  executor_->lookupDevice(module, dtype, indices, m, y);
}

void Session::synchronize() const { executor_->synchronize(); }

} // namespace comfyquant::rt
