//===- ComfyQuantAttrs.cpp - comfyquant attributes ------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "comfyquant/runtime/Numerics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrs.cpp.inc"

void ComfyQuantDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// FormatAttr
//===----------------------------------------------------------------------===//

FormatAttr FormatAttr::get(MLIRContext *ctx, FormatKind kind,
                           ScaleGranularity granularity, int64_t group) {
  rt::FormatParams p = rt::defaultFormatParams(toRegistry(kind));
  Type scale = p.scaleDType ? getElementType(ctx, *p.scaleDType) : Type();
  return Base::get(ctx, kind, granularity, group, scale,
                   static_cast<NibbleOrder>(p.nibbles));
}

const rt::FormatInfo &FormatAttr::getInfo() const {
  return rt::formatInfo(toRegistry(getKind()));
}

LogicalResult
FormatAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                   FormatKind kind, ScaleGranularity granularity, int64_t group,
                   Type scale, NibbleOrder nibbles) {
  rt::FormatParams p;
  p.granularity = static_cast<rt::ScaleGranularity>(granularity);
  p.group = group;
  p.nibbles = static_cast<rt::NibbleOrder>(nibbles);
  if (scale) {
    std::optional<rt::DType> d = getDType(scale);
    if (!d)
      return emitError() << "scale type " << scale
                         << " is not a safetensors element type";
    p.scaleDType = *d;
  }
  if (auto err = rt::verifyFormatParams(toRegistry(kind), p))
    return emitError() << *err;
  return success();
}

//===----------------------------------------------------------------------===//
// RotationAttr
//===----------------------------------------------------------------------===//

LogicalResult
RotationAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t group) {
  if (!rt::isPowerOf4(group))
    return emitError() << "convrot group size " << group
                       << " must be a power of 4 >= 4";
  return success();
}

//===----------------------------------------------------------------------===//
// ActQuantAttr
//===----------------------------------------------------------------------===//

LogicalResult
ActQuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     ActScheme scheme, Type type, int64_t block) {
  int64_t wantBlock = scheme == ActScheme::nvfp4_block   ? 16
                      : scheme == ActScheme::mxfp8_block ? 32
                                                         : 0;
  if (block != wantBlock)
    return emitError() << stringifyActScheme(scheme) << " takes block size "
                       << wantBlock << ", not " << block;
  if (scheme == ActScheme::fp8_static) {
    if (!type || !llvm::isa<Float8E4M3FNType, Float8E5M2Type>(type))
      return emitError()
             << "fp8_static needs type = f8E4M3FN or f8E5M2 (the weight's)";
  } else if (type) {
    return emitError() << stringifyActScheme(scheme)
                       << " has a fixed code type; drop `type`";
  }
  return success();
}
