//===- Ours.cpp - compiled kernels through the artifact Session API -------===//
#include "Ours.h"

#include "comfyquant/runtime/Session.h"

#include <map>

namespace cqbench {

namespace rt = comfyquant::rt;

namespace {

class SessionKernel : public OursKernel {
public:
  SessionKernel(std::shared_ptr<rt::Session> s, size_t index, rt::DType dtype)
      : s_(std::move(s)), index_(index), dtype_(dtype) {}
  void run(const void *x, void *y, int64_t M) override {
    s_->run(index_, dtype_, x, M, y);
  }
  std::string describe(int64_t M) const override {
    return s_->variantFor(index_, dtype_, M) + ", " +
           std::to_string(s_->threads()) + " threads";
  }

private:
  std::shared_ptr<rt::Session> s_;
  size_t index_;
  rt::DType dtype_;
};

} // namespace

std::unique_ptr<OursKernel> makeOurs(const OursContext &ctx,
                                     const rt::ResolvedModule &m,
                                     std::string &whyNot) {
  if (ctx.artifactDir.empty()) {
    whyNot = "no --artifact (compile with comfyquant-compile --target cpu)";
    return nullptr;
  }
  // One session per (artifact, threads), opened once.
  static std::map<std::pair<std::string, int>, std::shared_ptr<rt::Session>>
      sessions;
  auto &s = sessions[{ctx.artifactDir, ctx.threads}];
  try {
    if (!s) {
      rt::SessionOptions o;
      o.checkpoint = ctx.checkpoint;
      o.threads = ctx.threads;
      s = rt::Session::open(ctx.artifactDir, o);
    }
  } catch (const std::exception &e) {
    whyNot = e.what();
    return nullptr;
  }
  int64_t index = s->findModule(m.desc.name);
  if (index < 0) {
    whyNot = "module not in the artifact";
    return nullptr;
  }
  return std::make_unique<SessionKernel>(s, static_cast<size_t>(index),
                                         ctx.activation);
}

} // namespace cqbench
