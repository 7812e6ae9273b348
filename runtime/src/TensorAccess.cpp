//===- TensorAccess.cpp - element reads from tensor views -----------------===//
#include "comfyquant/runtime/TensorAccess.h"

#include "comfyquant/runtime/Numerics.h"

#include <cstring>

namespace comfyquant::rt {

namespace {
template <typename T> T loadRaw(const TensorInfo &t, int64_t i) {
  T v;
  std::memcpy(&v, t.data + i * sizeof(T), sizeof(T)); // unaligned-safe
  return v;
}
} // namespace

float loadF32(const TensorInfo &t, int64_t i) {
  switch (t.dtype) {
  case DType::F32:
    return loadRaw<float>(t, i);
  case DType::F64:
    return static_cast<float>(loadRaw<double>(t, i));
  case DType::F16:
    return halfToFloat(loadRaw<uint16_t>(t, i));
  case DType::BF16:
    return bfloat16ToFloat(loadRaw<uint16_t>(t, i));
  case DType::F8_E4M3:
    return decodeE4M3(t.data[i]);
  case DType::F8_E5M2:
    return decodeE5M2(t.data[i]);
  case DType::F8_E8M0:
    return decodeE8M0(t.data[i]);
  case DType::BOOL:
  case DType::U8:
    return static_cast<float>(t.data[i]);
  case DType::I8:
    return static_cast<float>(static_cast<int8_t>(t.data[i]));
  case DType::I16:
    return static_cast<float>(loadRaw<int16_t>(t, i));
  case DType::U16:
    return static_cast<float>(loadRaw<uint16_t>(t, i));
  case DType::I32:
    return static_cast<float>(loadRaw<int32_t>(t, i));
  case DType::U32:
    return static_cast<float>(loadRaw<uint32_t>(t, i));
  case DType::I64:
    return static_cast<float>(loadRaw<int64_t>(t, i));
  case DType::U64:
    return static_cast<float>(loadRaw<uint64_t>(t, i));
  }
  return 0.0f;
}

} // namespace comfyquant::rt
