//===- DType.h - safetensors element types ----------------------*- C++ -*-===//
#ifndef COMFYQUANT_RUNTIME_DTYPE_H
#define COMFYQUANT_RUNTIME_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace comfyquant::rt {

/// Element types a safetensors header may name. Names are the on-disk
/// spellings ("F8_E4M3", "BF16", ...).
enum class DType : uint8_t {
  BOOL,
  U8,
  I8,
  F8_E4M3,
  F8_E5M2,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  I64,
  U64,
  F64,
};

/// Parses an on-disk dtype name; nullopt for an unknown name.
std::optional<DType> parseDType(std::string_view name);
/// The on-disk name of `t`.
const char *dtypeName(DType t);
/// Bytes per element.
size_t dtypeSize(DType t);
/// True for F16/BF16/F32/F64 (and the 1-byte float formats when `withFp8`).
bool isFloatDType(DType t, bool withFp8 = false);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_DTYPE_H
