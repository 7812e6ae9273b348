//===- ComfyQuantDialect.cpp - comfyquant dialect -------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantOpsDialect.cpp.inc"

void ComfyQuantDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantOps.cpp.inc"
      >();
  registerAttributes();
}

Type mlir::comfyquant::getElementType(MLIRContext *ctx, rt::DType dtype) {
  auto integer = [&](unsigned w, bool isUnsigned) -> Type {
    return IntegerType::get(ctx, w,
                            isUnsigned ? IntegerType::Unsigned
                                       : IntegerType::Signless);
  };
  switch (dtype) {
  case rt::DType::BOOL:
    return integer(1, false);
  case rt::DType::U8:
    return integer(8, true);
  case rt::DType::I8:
    return integer(8, false);
  case rt::DType::U16:
    return integer(16, true);
  case rt::DType::I16:
    return integer(16, false);
  case rt::DType::U32:
    return integer(32, true);
  case rt::DType::I32:
    return integer(32, false);
  case rt::DType::U64:
    return integer(64, true);
  case rt::DType::I64:
    return integer(64, false);
  case rt::DType::F8_E4M3:
    return Float8E4M3FNType::get(ctx);
  case rt::DType::F8_E5M2:
    return Float8E5M2Type::get(ctx);
  case rt::DType::F8_E8M0:
    return Float8E8M0FNUType::get(ctx);
  case rt::DType::F16:
    return Float16Type::get(ctx);
  case rt::DType::BF16:
    return BFloat16Type::get(ctx);
  case rt::DType::F32:
    return Float32Type::get(ctx);
  case rt::DType::F64:
    return Float64Type::get(ctx);
  }
  return {};
}

std::optional<rt::DType> mlir::comfyquant::getDType(Type t) {
  if (auto i = llvm::dyn_cast<IntegerType>(t)) {
    bool u = i.isUnsigned();
    if (i.isSigned())
      return std::nullopt; // safetensors integers are signless or unsigned
    switch (i.getWidth()) {
    case 1:
      return u ? std::nullopt : std::optional(rt::DType::BOOL);
    case 8:
      return u ? rt::DType::U8 : rt::DType::I8;
    case 16:
      return u ? rt::DType::U16 : rt::DType::I16;
    case 32:
      return u ? rt::DType::U32 : rt::DType::I32;
    case 64:
      return u ? rt::DType::U64 : rt::DType::I64;
    default:
      return std::nullopt;
    }
  }
  return llvm::TypeSwitch<Type, std::optional<rt::DType>>(t)
      .Case([](Float8E4M3FNType) { return rt::DType::F8_E4M3; })
      .Case([](Float8E5M2Type) { return rt::DType::F8_E5M2; })
      .Case([](Float8E8M0FNUType) { return rt::DType::F8_E8M0; })
      .Case([](Float16Type) { return rt::DType::F16; })
      .Case([](BFloat16Type) { return rt::DType::BF16; })
      .Case([](Float32Type) { return rt::DType::F32; })
      .Case([](Float64Type) { return rt::DType::F64; })
      .Default([](Type) { return std::nullopt; });
}
