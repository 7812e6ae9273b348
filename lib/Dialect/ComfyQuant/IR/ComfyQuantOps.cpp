//===- ComfyQuantOps.cpp - comfyquant operations --------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/QuantConfig.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

//===----------------------------------------------------------------------===//
// CheckpointOp / TensorOp / AttentionOp
//===----------------------------------------------------------------------===//

void CheckpointOp::build(OpBuilder &b, OperationState &state,
                         StringRef symName, StringRef path, int64_t size,
                         StringRef hash) {
  state.addAttribute(getSymNameAttrName(state.name), b.getStringAttr(symName));
  state.addAttribute(getPathAttrName(state.name), b.getStringAttr(path));
  state.addAttribute(getSizeAttrName(state.name), b.getI64IntegerAttr(size));
  state.addAttribute(getHashAttrName(state.name), b.getStringAttr(hash));
  state.addRegion()->emplaceBlock();
}

LogicalResult CheckpointOp::verify() {
  // I64Attr accessors return uint64_t; read the signed value.
  if (getSizeAttr().getInt() < 0)
    return emitOpError("size must be non-negative");
  for (Operation &op : getBody().front())
    if (!isa<TensorOp>(op))
      return op.emitOpError("is not allowed in a checkpoint (only "
                            "comfyquant.tensor)");
  return success();
}

LogicalResult TensorOp::verify() {
  RankedTensorType type = getTensorType();
  if (!getDType(type.getElementType()))
    return emitOpError("element type ")
           << type.getElementType() << " is not a safetensors dtype";
  if (getOffsetAttr().getInt() < 0)
    return emitOpError("offset must be non-negative");
  return success();
}

LogicalResult AttentionOp::verify() {
  std::vector<std::string> warnings;
  try {
    rt::parseAttentionPreference(getConfig().str(), getModule().str(), "",
                                 warnings);
  } catch (const rt::Error &e) {
    return emitOpError(e.rule());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Module ops
//===----------------------------------------------------------------------===//

namespace {

/// Everything a module op states, as the registry's ModuleDesc (without
/// tensors).
rt::ModuleDesc describeModule(Operation *op, rt::ModuleKind kind,
                              FormatAttr format, int64_t experts, int64_t n,
                              int64_t k, RotationAttr rotation,
                              OptionsAttr options) {
  rt::ModuleDesc d;
  d.name = SymbolTable::getSymbolName(op).str();
  d.kind = kind;
  d.format = toRegistry(format.getKind());
  d.outFeatures = n;
  d.inFeatures = k;
  d.experts = experts;
  if (format.getGranularity() == ScaleGranularity::group)
    d.groupSize = format.getGroup();
  if (rotation)
    d.rotationGroup = rotation.getGroup();
  if (d.format == rt::Format::ConvRotW4A4)
    d.linearDtype = "int4";
  if (options) {
    d.fullPrecision = options.getFullPrecisionMatrixMult();
    if (std::optional<LinearDtype> ld = options.getLinearDtype())
      d.linearDtype = stringifyLinearDtype(*ld).str();
  }
  return d;
}

/// The format attribute's parameters must describe the tensors it is applied
/// to (run after the registry accepted `desc`): int8_tensorwise granularity
/// says whether weight_scale is per row, and the group scale type is the
/// weight_s_rel dtype (U8 holds E4M3 bits).
LogicalResult verifyFormatMatchesTensors(Operation *op, FormatAttr format,
                                         const rt::ModuleDesc &desc) {
  if (desc.format == rt::Format::Int8Tensorwise) {
    auto s = desc.tensors.find("weight_scale");
    bool present = s != desc.tensors.end();
    bool perRow = present && rt::int8ScaleGranularity(s->second.shape) ==
                                 rt::ScaleGranularity::Row;
    ScaleGranularity want =
        perRow ? ScaleGranularity::row : ScaleGranularity::tensor;
    if (format.getGranularity() != want)
      return op->emitOpError("int8_tensorwise weight_scale is ")
             << (perRow ? "per-row" : present ? "a scalar" : "absent (1.0)")
             << ", so granularity must be " << stringifyScaleGranularity(want);
  }
  if (format.getGranularity() == ScaleGranularity::group) {
    auto s = desc.tensors.find("weight_s_rel");
    if (s != desc.tensors.end()) {
      rt::DType stored = s->second.dtype == rt::DType::U8 ? rt::DType::F8_E4M3
                                                          : s->second.dtype;
      if (getDType(format.getScale()) != stored)
        return op->emitOpError("format scale type ")
               << format.getScale() << " does not match weight_s_rel ("
               << rt::dtypeName(s->second.dtype) << ")";
    }
  }
  return success();
}

/// Resolves the role -> tensor bindings and runs every registry rule.
LogicalResult verifyModuleUses(Operation *op, rt::ModuleDesc desc,
                               FormatAttr format, DictionaryAttr tensors,
                               SymbolTableCollection &symbolTable) {
  for (NamedAttribute entry : tensors) {
    auto ref = llvm::dyn_cast<SymbolRefAttr>(entry.getValue());
    if (!ref)
      return op->emitOpError("tensor binding '")
             << entry.getName().getValue() << "' must be a symbol reference";
    auto tensor = symbolTable.lookupNearestSymbolFrom<TensorOp>(op, ref);
    if (!tensor)
      return op->emitOpError("tensor binding '")
             << entry.getName().getValue() << "' references " << ref
             << ", which is not a comfyquant.tensor";
    RankedTensorType type = tensor.getTensorType();
    desc.tensors[entry.getName().str()] = rt::TensorDesc{
        *getDType(type.getElementType()),
        std::vector<int64_t>(type.getShape().begin(), type.getShape().end())};
  }
  if (auto err = rt::verifyModule(desc))
    return op->emitOpError("format '")
           << rt::formatName(desc.format) << "': " << *err;
  return verifyFormatMatchesTensors(op, format, desc);
}

LogicalResult verifyModuleAttrs(Operation *op, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0)
    return op->emitOpError("logical shape [")
           << n << ", " << k << "] must be positive";
  return success();
}

} // namespace

LogicalResult LinearOp::verify() {
  return verifyModuleAttrs(*this, getOutFeatures(), getInFeatures());
}
LogicalResult EmbeddingOp::verify() {
  return verifyModuleAttrs(*this, getOutFeatures(), getInFeatures());
}
LogicalResult MoEOp::verify() {
  if (getExpertsAttr().getInt() <= 0)
    return emitOpError("experts must be positive");
  return verifyModuleAttrs(*this, getOutFeatures(), getInFeatures());
}

LogicalResult LinearOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyModuleUses(
      *this,
      describeModule(*this, rt::ModuleKind::Linear, getFormat(), 0,
                     getOutFeatures(), getInFeatures(), getRotationAttr(),
                     getOptionsAttr()),
      getFormat(), getTensors(), symbolTable);
}

LogicalResult
EmbeddingOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyModuleUses(
      *this,
      describeModule(*this, rt::ModuleKind::Embedding, getFormat(), 0,
                     getOutFeatures(), getInFeatures(), getRotationAttr(),
                     getOptionsAttr()),
      getFormat(), getTensors(), symbolTable);
}

LogicalResult MoEOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyModuleUses(
      *this,
      describeModule(*this, rt::ModuleKind::MoE, getFormat(), getExperts(),
                     getOutFeatures(), getInFeatures(), getRotationAttr(),
                     getOptionsAttr()),
      getFormat(), getTensors(), symbolTable);
}

//===----------------------------------------------------------------------===//
// Computation ops
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto tensor = symbolTable.lookupNearestSymbolFrom<TensorOp>(*this, getTensor());
  if (!tensor)
    return emitOpError("references ")
           << getTensor() << ", which is not a comfyquant.tensor";
  if (tensor.getTensorType() != getResult().getType())
    return emitOpError("result type ")
           << getResult().getType() << " differs from the checkpoint tensor "
           << tensor.getTensorType();
  return success();
}

LogicalResult RotateOp::verify() {
  auto type = llvm::cast<RankedTensorType>(getInput().getType());
  if (type.getRank() < 1)
    return emitOpError("input must have rank >= 1");
  int64_t k = type.getShape().back();
  int64_t g = getRotation().getGroup();
  if (!ShapedType::isDynamic(k) && k % g)
    return emitOpError("last dimension ")
           << k << " must be divisible by the rotation group " << g;
  if (!llvm::isa<FloatType>(type.getElementType()))
    return emitOpError("rotates float activations");
  return success();
}

namespace {
/// A statically shaped tensor of exactly one element (any rank).
bool isOneElement(RankedTensorType t) {
  return t.hasStaticShape() && t.getNumElements() == 1;
}

bool sameShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y)
      return false;
  return true;
}
} // namespace

LogicalResult QuantizeOp::verify() {
  auto in = llvm::cast<RankedTensorType>(getInput().getType());
  auto codes = llvm::cast<RankedTensorType>(getCodes().getType());
  auto scales = llvm::cast<RankedTensorType>(getScales().getType());
  if (in.getRank() != 2)
    return emitOpError("input must be [M, K]");
  if (!llvm::isa<FloatType>(in.getElementType()))
    return emitOpError("quantizes float activations");
  if (!sameShape(in.getShape(), codes.getShape()))
    return emitOpError("codes must have the input's shape");
  ActQuantAttr scheme = getScheme();
  Type ct = codes.getElementType(), st = scales.getElementType();
  int64_t m = in.getShape()[0], k = in.getShape()[1];
  auto blocks = [&](int64_t b) {
    return ShapedType::isDynamic(k) ? ShapedType::kDynamic : (k + b - 1) / b;
  };
  bool hasStatic = static_cast<bool>(getStaticScale());
  if (hasStatic) {
    auto t = llvm::cast<RankedTensorType>(getStaticScale().getType());
    if (!t.getElementType().isF32() || !isOneElement(t))
      return emitOpError("static scale (input_scale) must be one f32");
  }
  switch (scheme.getScheme()) {
  case ActScheme::int8_row:
  case ActScheme::int4_row: {
    unsigned w = scheme.getScheme() == ActScheme::int8_row ? 8 : 4;
    if (!ct.isSignlessInteger(w))
      return emitOpError("codes must be i") << w;
    if (!st.isF32() || !sameShape(scales.getShape(), {m, 1}))
      return emitOpError("per-row scales must be f32 [M, 1]");
    if (hasStatic)
      return emitOpError("per-row activation scales are dynamic");
    return success();
  }
  case ActScheme::fp8_static:
    if (ct != scheme.getType())
      return emitOpError("codes must be ") << scheme.getType();
    if (!st.isF32() || !isOneElement(scales))
      return emitOpError("fp8 activation scale must be one f32");
    return success();
  case ActScheme::mxfp8_block:
    if (!llvm::isa<Float8E4M3FNType>(ct) || !llvm::isa<Float8E8M0FNUType>(st))
      return emitOpError("mxfp8 codes are f8E4M3FN with f8E8M0FNU scales");
    if (!sameShape(scales.getShape(), {m, blocks(32)}))
      return emitOpError("mxfp8 scales must be [M, ceil(K/32)]");
    if (hasStatic)
      return emitOpError("mxfp8 ignores input_scale; blocks are dynamic");
    return success();
  case ActScheme::nvfp4_block:
    if (!llvm::isa<Float4E2M1FNType>(ct) || !llvm::isa<Float8E4M3FNType>(st))
      return emitOpError("nvfp4 codes are f4E2M1FN with f8E4M3FN scales");
    if (!sameShape(scales.getShape(), {m, blocks(16)}))
      return emitOpError("nvfp4 scales must be [M, ceil(K/16)]");
    return success();
  }
  return success();
}

LogicalResult DequantizeOp::verify() {
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  if (!llvm::isa<FloatType>(result.getElementType()))
    return emitOpError("result must be a float tensor");
  if (!result.hasStaticShape() || (result.getRank() != 2 && result.getRank() != 3))
    return emitOpError("result must be a static [N, K] or [E, N, K]");
  if (getRoles().size() != getSide().size())
    return emitOpError("names ")
           << getRoles().size() << " roles for " << getSide().size()
           << " side tensors";
  llvm::SmallDenseSet<StringRef> seen;
  for (Attribute role : getRoles()) {
    StringRef name = llvm::cast<StringAttr>(role).getValue();
    if (name == "weight")
      return emitOpError(
          "role 'weight' is the first operand, not a side tensor");
    if (!seen.insert(name).second)
      return emitOpError("role '") << name << "' is named twice";
  }
  bool bank = result.getRank() == 3;
  ArrayRef<int64_t> shape = result.getShape();
  rt::ModuleDesc d;
  d.name = "dequantize";
  d.kind = bank ? rt::ModuleKind::MoE : rt::ModuleKind::Linear;
  d.format = toRegistry(getFormat().getKind());
  d.experts = bank ? shape[0] : 0;
  d.outFeatures = shape[bank ? 1 : 0];
  d.inFeatures = shape[bank ? 2 : 1];
  if (getFormat().getGranularity() == ScaleGranularity::group)
    d.groupSize = getFormat().getGroup();
  if (auto r = getRotationAttr())
    d.rotationGroup = r.getGroup();
  if (d.format == rt::Format::ConvRotW4A4)
    d.linearDtype = "int4";
  auto add = [&](StringRef role, Type t) -> LogicalResult {
    auto rtt = llvm::cast<RankedTensorType>(t);
    std::optional<rt::DType> dt = getDType(rtt.getElementType());
    if (!dt)
      return emitOpError("operand '")
             << role << "' element type is not a safetensors dtype";
    d.tensors[role.str()] = rt::TensorDesc{
        *dt, std::vector<int64_t>(rtt.getShape().begin(), rtt.getShape().end())};
    return success();
  };
  if (failed(add("weight", getWeight().getType())))
    return failure();
  for (auto [role, value] : llvm::zip(getRoles(), getSide()))
    if (failed(add(llvm::cast<StringAttr>(role).getValue(), value.getType())))
      return failure();
  if (auto err = rt::verifyModule(d))
    return emitOpError("format '") << rt::formatName(d.format) << "': " << *err;
  return verifyFormatMatchesTensors(*this, getFormat(), d);
}

LogicalResult QMatmulOp::verify() {
  auto a = llvm::cast<RankedTensorType>(getLhs().getType());
  auto b = llvm::cast<RankedTensorType>(getRhs().getType());
  auto c = llvm::cast<RankedTensorType>(getResult().getType());
  if (a.getRank() != 2 || b.getRank() != 2 || c.getRank() != 2)
    return emitOpError("operands are A [M, K], B [N, K] and C [M, N]");
  if (!sameShape({a.getShape()[1]}, {b.getShape()[1]}))
    return emitOpError("K of A and B differ");
  if (!sameShape(c.getShape(), {a.getShape()[0], b.getShape()[0]}))
    return emitOpError("result must be [M, N]");
  Type ea = a.getElementType(), eb = b.getElementType();
  Type acc = c.getElementType();
  bool ints = ea.isSignlessInteger() && eb.isSignlessInteger();
  bool floats = llvm::isa<FloatType>(ea) && llvm::isa<FloatType>(eb);
  if (ints) {
    if (ea.getIntOrFloatBitWidth() > 8 || eb.getIntOrFloatBitWidth() > 8)
      return emitOpError("integer operands are at most 8 bits");
    if (!acc.isSignlessInteger(32))
      return emitOpError("integer operands accumulate exactly in i32");
  } else if (floats) {
    if (!acc.isF32())
      return emitOpError("float operands accumulate in f32");
  } else {
    return emitOpError("operands must both be integers or both floats");
  }
  return success();
}

LogicalResult EpilogueOp::verify() {
  auto acc = llvm::cast<RankedTensorType>(getAcc().getType());
  auto res = llvm::cast<RankedTensorType>(getResult().getType());
  if (acc.getRank() != 2 || !sameShape(acc.getShape(), res.getShape()))
    return emitOpError("result must have the accumulator's [M, N] shape");
  if (!acc.getElementType().isSignlessInteger(32) && !acc.getElementType().isF32())
    return emitOpError("accumulator must be i32 or f32");
  if (!llvm::isa<FloatType>(res.getElementType()))
    return emitOpError("result must be float");
  int64_t m = acc.getShape()[0], n = acc.getShape()[1];
  auto scalarOr = [&](Value v, ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    return t.getElementType().isF32() &&
           (isOneElement(t) || sameShape(t.getShape(), a) ||
            (!b.empty() && sameShape(t.getShape(), b)));
  };
  if (getRowScale() && !scalarOr(getRowScale(), {m, 1}, {}))
    return emitOpError("row_scale must be f32 [M, 1] or a scalar");
  if (getColScale() && !scalarOr(getColScale(), {n}, {n, 1}))
    return emitOpError("col_scale must be f32 [N], [N, 1] or a scalar");
  if (Value bias = getBias()) {
    auto t = llvm::cast<RankedTensorType>(bias.getType());
    if (!llvm::isa<FloatType>(t.getElementType()) ||
        !sameShape(t.getShape(), {n}))
      return emitOpError("bias must be float [N]");
  }
  return success();
}

#define GET_OP_CLASSES
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantOps.cpp.inc"
