//===- EncodeGrouped.cpp - W4A8 and W6A8 weight encoders ------------------===//

#include "Encoders.h"

#include "comfyquant/runtime/Error.h"

namespace comfyquant::rt {

std::unique_ptr<WeightEncoder> createGroupedEncoder(const EncodeOptions &opts,
                                                    int64_t, int64_t, DType) {
  throw Error("", "--format",
              std::string(formatName(opts.format)) +
                  ": this build has no encoder for the grouped formats yet");
}

} // namespace comfyquant::rt
