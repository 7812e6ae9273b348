//===- Ours.cpp - compiled kernels through the artifact Session API -------===//
//
// Placeholder until runtime/include/comfyquant/runtime/Session.h exists.
// Expected shape of the real implementation (adapt to the final API):
//
//   #include "comfyquant/runtime/Session.h"
//   class SessionKernel : public OursKernel {
//     std::shared_ptr<rt::Session> s_; <entry handle> e_;
//     void run(const void *x, void *y, int64_t M) override {
//       s_->runLinear(e_, x, y, M);   // packs the memref descriptors
//     }
//     std::string describe() const override { return <variant, threads>; }
//   };
//   makeOurs: open ctx.artifactDir once (cache it in a static), check that
//   the manifest's checkpoint matches ctx.checkpoint, look up m.desc.name,
//   return a SessionKernel.
//===----------------------------------------------------------------------===//
#include "Ours.h"

namespace cqbench {

std::unique_ptr<OursKernel> makeOurs(const OursContext &ctx,
                                     const comfyquant::rt::ResolvedModule &,
                                     std::string &whyNot) {
  whyNot = ctx.artifactDir.empty()
               ? "no compiled artifact (Session API not available yet)"
               : "--artifact given, but this build has no Session API yet";
  return nullptr;
}

} // namespace cqbench
