//===- DType.cpp - safetensors element types ------------------------------===//
#include "comfyquant/runtime/DType.h"

namespace comfyquant::rt {

namespace {
struct DTypeEntry {
  DType type;
  const char *name;
  size_t size;
};

// Indexed by the enum value; keep in enum order.
constexpr DTypeEntry kDTypes[] = {
    {DType::BOOL, "BOOL", 1},       {DType::U8, "U8", 1},
    {DType::I8, "I8", 1},           {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::F8_E5M2, "F8_E5M2", 1}, {DType::F8_E8M0, "F8_E8M0", 1},
    {DType::I16, "I16", 2},         {DType::U16, "U16", 2},
    {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4},         {DType::U32, "U32", 4},
    {DType::F32, "F32", 4},         {DType::I64, "I64", 8},
    {DType::U64, "U64", 8},         {DType::F64, "F64", 8},
};
constexpr size_t kNumDTypes = sizeof(kDTypes) / sizeof(kDTypes[0]);

constexpr bool tableInEnumOrder() {
  for (size_t i = 0; i < kNumDTypes; ++i)
    if (static_cast<size_t>(kDTypes[i].type) != i)
      return false;
  return true;
}
static_assert(tableInEnumOrder(), "kDTypes must follow the DType enum order");
static_assert(kNumDTypes == static_cast<size_t>(DType::F64) + 1,
              "kDTypes must list every DType");

const DTypeEntry *entryOf(DType t) {
  auto i = static_cast<size_t>(t);
  return i < kNumDTypes ? &kDTypes[i] : nullptr;
}
} // namespace

std::optional<DType> parseDType(std::string_view name) {
  // Exact, case-sensitive on-disk spellings only.
  for (const DTypeEntry &e : kDTypes)
    if (name == e.name)
      return e.type;
  return std::nullopt;
}

const char *dtypeName(DType t) {
  const DTypeEntry *e = entryOf(t);
  return e ? e->name : "<invalid dtype>";
}

size_t dtypeSize(DType t) {
  const DTypeEntry *e = entryOf(t);
  return e ? e->size : 0;
}

bool isFloatDType(DType t, bool withFp8) {
  switch (t) {
  case DType::F16:
  case DType::BF16:
  case DType::F32:
  case DType::F64:
    return true;
  case DType::F8_E4M3:
  case DType::F8_E5M2:
  case DType::F8_E8M0:
    return withFp8;
  default:
    return false;
  }
}

} // namespace comfyquant::rt
