//===- WeightEncoder.cpp - encoder selection and shared rules -------------===//

#include "comfyquant/runtime/quantize/WeightEncoder.h"

#include "Encoders.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Numerics.h"

namespace comfyquant::rt {

WeightEncoder::~WeightEncoder() = default;

void WeightEncoder::addOutput(std::string key, DType dtype,
                              std::vector<int64_t> shape) {
  uint64_t numel = 1;
  for (int64_t d : shape)
    numel *= uint64_t(d);
  outputs_.push_back(
      {std::move(key), dtype, std::move(shape), numel * dtypeSize(dtype)});
}

std::string encodeShapeRule(const EncodeOptions &opts, int64_t n, int64_t k) {
  if (n < 1 || k < 1)
    return "a weight with an empty dimension is not quantized";
  const int64_t gr = opts.rotationGroup;
  auto rotationRule = [&]() -> std::string {
    if (!isPowerOf4(gr))
      return "ConvRot group " + std::to_string(gr) +
             " must be a power of 4 >= 4";
    if (k % gr)
      return "K = " + std::to_string(k) +
             " is not a multiple of the ConvRot group " + std::to_string(gr);
    return "";
  };
  switch (opts.format) {
  case Format::Float8E4M3FN:
  case Format::Float8E5M2:
  case Format::NVFP4:
  case Format::MXFP8:
    return "";
  case Format::Int8Tensorwise:
    return gr ? rotationRule() : "";
  case Format::ConvRotW4A4:
    if (k % kW4A4KMultiple)
      return "K = " + std::to_string(k) + " is not a multiple of " +
             std::to_string(kW4A4KMultiple) + " (convrot_w4a4)";
    return rotationRule();
  case Format::AsymW4A8Int8:
  case Format::W6A8Int8: {
    if (auto rule = verifyGroupSize(opts.format, opts.groupSize))
      return *rule;
    const int64_t kMul = opts.format == Format::W6A8Int8 ? 32 : 16;
    if (k % kMul)
      return "K = " + std::to_string(k) + " is not a multiple of " +
             std::to_string(kMul) + " (" + formatName(opts.format) + ")";
    if (k % opts.groupSize)
      return "K = " + std::to_string(k) + " is not a multiple of the group " +
             std::to_string(opts.groupSize);
    return rotationRule();
  }
  }
  return "unknown format";
}

std::unique_ptr<WeightEncoder>
WeightEncoder::create(const EncodeOptions &opts, int64_t n, int64_t k,
                      DType source, const std::string &module) {
  if (source != DType::BF16 && source != DType::F16 && source != DType::F32)
    throw Error("", moduleSubject(module),
                std::string("source dtype ") + dtypeName(source) +
                    " cannot be quantized (BF16, F16 or F32)");
  std::string rule = encodeShapeRule(opts, n, k);
  if (!rule.empty())
    throw Error("", moduleSubject(module),
                std::string(formatName(opts.format)) + ": " + rule);
  switch (opts.format) {
  case Format::Float8E4M3FN:
  case Format::Float8E5M2:
    return createFP8Encoder(opts, n, k, source);
  case Format::NVFP4:
    return createNVFP4Encoder(opts, n, k, source);
  case Format::MXFP8:
    return createMXFP8Encoder(opts, n, k, source);
  case Format::Int8Tensorwise:
    return createInt8Encoder(opts, n, k, source);
  case Format::ConvRotW4A4:
    return createW4A4Encoder(opts, n, k, source);
  case Format::AsymW4A8Int8:
  case Format::W6A8Int8:
    return createGroupedEncoder(opts, n, k, source);
  }
  throw Error("", moduleSubject(module), "unknown format");
}

} // namespace comfyquant::rt
