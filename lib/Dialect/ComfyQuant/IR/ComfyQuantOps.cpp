//===- ComfyQuantOps.cpp - comfyquant operations --------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/Numerics.h"
#include "comfyquant/runtime/QuantConfig.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
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

/// The format-derived parts of a module description.
void describeFormat(rt::ModuleDesc &d, FormatAttr format,
                    RotationAttr rotation) {
  d.format = toRegistry(format.getKind());
  if (format.getGranularity() == ScaleGranularity::group)
    d.groupSize = format.getGroup();
  if (rotation)
    d.rotationGroup = rotation.getGroup();
  if (d.format == rt::Format::ConvRotW4A4)
    d.linearDtype = "int4";
}

/// Everything a module op states, as the registry's ModuleDesc (without
/// tensors).
rt::ModuleDesc describeModule(Operation *op, rt::ModuleKind kind,
                              FormatAttr format, int64_t experts, int64_t n,
                              int64_t k, RotationAttr rotation,
                              OptionsAttr options) {
  rt::ModuleDesc d;
  d.name = SymbolTable::getSymbolName(op).str();
  d.kind = kind;
  d.outFeatures = n;
  d.inFeatures = k;
  d.experts = experts;
  describeFormat(d, format, rotation);
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
  bool nvfp4 = scheme.getScheme() == ActScheme::nvfp4_block;
  if (Value g = getGlobalScale()) {
    if (!nvfp4)
      return emitOpError("only nvfp4_block returns a global scale");
    auto t = llvm::cast<RankedTensorType>(g.getType());
    if (t.getRank() != 0 || !t.getElementType().isF32())
      return emitOpError("global scale must be tensor<f32>");
  } else if (nvfp4) {
    return emitOpError("nvfp4_block returns the global scale as a third "
                       "result (tensor<f32>)");
  }
  if (RotationAttr rotation = getRotationAttr()) {
    if (scheme.getScheme() != ActScheme::int8_row &&
        scheme.getScheme() != ActScheme::int4_row)
      return emitOpError("rotation fuses only with the per-row integer "
                         "schemes (ConvRot formats)");
    if (!ShapedType::isDynamic(k) && k % rotation.getGroup())
      return emitOpError("K = ")
             << k << " must be divisible by the rotation group "
             << rotation.getGroup();
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
  case ActScheme::nvfp4_block: {
    // Codes and block scales have the types of the format's weight codes
    // and block scales (registry).
    const rt::FormatInfo &f = rt::formatInfo(*scheme.getBlockFormat());
    Type wantScale = getElementType(getContext(), f.blockScaleDType);
    bool codesOk = llvm::isa<FloatType>(ct) &&
                   ct.getIntOrFloatBitWidth() == unsigned(f.codeBits) &&
                   (f.codeBits != 8 ||
                    ct == getElementType(getContext(), f.weightDType));
    if (!codesOk || st != wantScale) {
      std::string scaleName;
      llvm::raw_string_ostream(scaleName) << wantScale;
      return emitOpError(nvfp4 ? "nvfp4" : "mxfp8")
             << " codes are " << (nvfp4 ? "f4E2M1FN" : "f8E4M3FN") << " with "
             << scaleName << " scales";
    }
    if (!sameShape(scales.getShape(), {m, blocks(scheme.getBlock())}))
      return emitOpError(nvfp4 ? "nvfp4" : "mxfp8")
             << " scales must be [M, ceil(K/" << scheme.getBlock() << ")]";
    if (hasStatic && !nvfp4)
      return emitOpError("mxfp8 ignores input_scale; blocks are dynamic");
    return success();
  }
  }
  return success();
}

namespace {

/// Adds the weight and the role-named side operands of a dequantize-like op
/// to `d` (checking roles are distinct and not 'weight').
LogicalResult describeOperands(Operation *op, rt::ModuleDesc &d, Value weight,
                               ArrayAttr roles, ValueRange side) {
  if (roles.size() != side.size())
    return op->emitOpError("names ")
           << roles.size() << " roles for " << side.size() << " side tensors";
  llvm::SmallDenseSet<StringRef> seen;
  for (Attribute role : roles) {
    StringRef name = llvm::cast<StringAttr>(role).getValue();
    if (name == "weight")
      return op->emitOpError(
          "role 'weight' is the first operand, not a side tensor");
    if (!seen.insert(name).second)
      return op->emitOpError("role '") << name << "' is named twice";
  }
  auto add = [&](StringRef role, Type t) -> LogicalResult {
    auto rtt = llvm::cast<RankedTensorType>(t);
    std::optional<rt::DType> dt = getDType(rtt.getElementType());
    if (!dt)
      return op->emitOpError("operand '")
             << role << "' element type is not a safetensors dtype";
    d.tensors[role.str()] = rt::TensorDesc{
        *dt, std::vector<int64_t>(rtt.getShape().begin(), rtt.getShape().end())};
    return success();
  };
  if (failed(add("weight", weight.getType())))
    return failure();
  for (auto [role, value] : llvm::zip(roles, side))
    if (failed(add(llvm::cast<StringAttr>(role).getValue(), value.getType())))
      return failure();
  return success();
}

/// The weight-side rules of a dequantize-like op (dequantize, lookup): the
/// operands described under their roles, every registry rule, and the format
/// attribute matching the tensors.
LogicalResult verifyOperandsWithRegistry(Operation *op, rt::ModuleDesc &d,
                                         FormatAttr format, Value weight,
                                         ArrayAttr roles, ValueRange side) {
  if (failed(describeOperands(op, d, weight, roles, side)))
    return failure();
  if (auto err = rt::verifyModule(d))
    return op->emitOpError("format '")
           << rt::formatName(d.format) << "': " << *err;
  return verifyFormatMatchesTensors(op, format, d);
}

} // namespace

LogicalResult DequantizeOp::verify() {
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  if (!llvm::isa<FloatType>(result.getElementType()))
    return emitOpError("result must be a float tensor");
  if (!result.hasStaticShape() || (result.getRank() != 2 && result.getRank() != 3))
    return emitOpError("result must be a static [N, K] or [E, N, K]");
  bool bank = result.getRank() == 3;
  ArrayRef<int64_t> shape = result.getShape();
  rt::ModuleDesc d;
  d.name = "dequantize";
  d.kind = bank ? rt::ModuleKind::MoE : rt::ModuleKind::Linear;
  d.experts = bank ? shape[0] : 0;
  d.outFeatures = shape[bank ? 1 : 0];
  d.inFeatures = shape[bank ? 2 : 1];
  describeFormat(d, getFormat(), getRotationAttr());
  return verifyOperandsWithRegistry(*this, d, getFormat(), getWeight(),
                                    getRoles(), getSide());
}

LogicalResult LookupOp::verify() {
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  auto idx = llvm::cast<RankedTensorType>(getIndices().getType());
  auto weight = llvm::cast<RankedTensorType>(getWeight().getType());
  if (idx.getRank() != 1)
    return emitOpError("indices must be 1-D");
  if (!llvm::isa<FloatType>(result.getElementType()) || result.getRank() != 2 ||
      ShapedType::isDynamic(result.getDimSize(1)))
    return emitOpError("result must be a float [M, D] with static D");
  if (!sameShape({result.getDimSize(0)}, {idx.getDimSize(0)}))
    return emitOpError("result has one row per index");
  if (weight.getRank() != 2)
    return emitOpError("weight must be a 2-D table [V, D] (storage)");
  // An embedding table: V from the storage rows (embedding formats are
  // unpadded), D from the result; every rule is the registry's.
  rt::ModuleDesc d;
  d.name = "lookup";
  d.kind = rt::ModuleKind::Embedding;
  d.outFeatures = weight.getDimSize(0);
  d.inFeatures = result.getDimSize(1);
  describeFormat(d, getFormat(), getRotationAttr());
  d.linearDtype.clear(); // not a linear
  return verifyOperandsWithRegistry(*this, d, getFormat(), getWeight(),
                                    getRoles(), getSide());
}

LogicalResult UnpackOp::verify() {
  const rt::FormatInfo &f = getFormat().getInfo();
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  auto weight = llvm::cast<RankedTensorType>(getWeight().getType());
  if (f.codeBits >= 8)
    return emitOpError("format '")
           << f.name << "' stores its GEMM operand directly (8-bit codes); "
           << "only packed formats unpack";
  if (result.getRank() != 2)
    return emitOpError("result must be the [N, K] GEMM operand");
  const int64_t n = result.getDimSize(0), k = result.getDimSize(1);
  // Storage shape and dtype from the registry.
  std::optional<rt::DType> wd = getDType(weight.getElementType());
  SmallVector<int64_t, 2> want = {rt::storageRows(f, n), rt::storageCols(f, k)};
  if (!wd || *wd != f.weightDType || weight.getShape() != ArrayRef<int64_t>(want))
    return emitOpError("format '")
           << f.name << "' stores [" << n << ", " << k << "] as "
           << rt::dtypeName(f.weightDType) << " " << f.roles[0].shape << " = ["
           << want[0] << ", " << want[1] << "], got " << weight;
  // The operand's element type.
  Type et = result.getElementType();
  switch (f.granularity) {
  case rt::ScaleGranularity::Block: // E2M1 codes
    if (!llvm::isa<Float4E2M1FNType>(et))
      return emitOpError("format '") << f.name << "' unpacks to f4E2M1FN codes";
    break;
  case rt::ScaleGranularity::Row: // signed nibbles, native or widened
    if (!et.isSignlessInteger(f.codeBits) && !et.isSignlessInteger(8))
      return emitOpError("format '")
             << f.name << "' unpacks to i" << f.codeBits
             << " or sign-extended i8 codes";
    break;
  default: // the int8 grid
    if (!et.isSignlessInteger(8))
      return emitOpError("format '")
             << f.name << "' unpacks to its int8 grid (i8)";
    break;
  }
  // Side operands: the group scales (and codebook) of grouped formats.
  if (getRoles().size() != getSide().size())
    return emitOpError("names ")
           << getRoles().size() << " roles for " << getSide().size()
           << " side tensors";
  bool grouped = f.granularity == rt::ScaleGranularity::Group;
  bool hasRel = false;
  llvm::SmallDenseSet<StringRef> seen;
  for (auto [roleAttr, value] : llvm::zip(getRoles(), getSide())) {
    StringRef role = llvm::cast<StringAttr>(roleAttr).getValue();
    if (!seen.insert(role).second)
      return emitOpError("role '") << role << "' is named twice";
    if (!grouped || (role != "weight_s_rel" && role != "weight_codebook"))
      return emitOpError("'")
             << role << "' is not an operand of unpack for '" << f.name
             << "' (" << (grouped ? "weight_s_rel and weight_codebook only"
                                  : "it takes no side tensors")
             << ")";
    const rt::TensorRole *r = nullptr;
    for (const rt::TensorRole &candidate : f.roles)
      if (role == candidate.key)
        r = &candidate;
    if (!r)
      return emitOpError("tensor '")
             << role << "' is not part of format '" << f.name << "'";
    auto t = llvm::cast<RankedTensorType>(value.getType());
    std::optional<rt::DType> dt = getDType(t.getElementType());
    if (!dt || llvm::find(r->dtypes, *dt) == r->dtypes.end())
      return emitOpError("'") << role << "' has element type "
                              << t.getElementType()
                              << ", not one the registry accepts";
    if (role == "weight_s_rel") {
      hasRel = true;
      int64_t g = getFormat().getGroup();
      if (g <= 0 || k % g ||
          t.getShape() != ArrayRef<int64_t>({n, k / g}))
        return emitOpError("weight_s_rel must be [N, K/G] = [")
               << n << ", " << (g > 0 ? k / g : 0) << "], got " << t;
    } else if (t.getShape() != ArrayRef<int64_t>({int64_t(1) << f.codeBits})) {
      return emitOpError("weight_codebook must be one level per code: [")
             << (int64_t(1) << f.codeBits) << "], got " << t;
    }
  }
  if (grouped && !hasRel)
    return emitOpError("format '") << f.name
                                   << "' unpacks through weight_s_rel";
  return success();
}

LogicalResult UnswizzleOp::verify() {
  auto in = llvm::cast<RankedTensorType>(getInput().getType());
  auto out = llvm::cast<RankedTensorType>(getResult().getType());
  if (out.getRank() != 2)
    return emitOpError("result must be the logical [rows, blocks] matrix");
  // A block-scaled registry format whose block scales have this type.
  const rt::FormatInfo *f = nullptr;
  for (const rt::FormatInfo &candidate : rt::allFormats())
    if (candidate.granularity == rt::ScaleGranularity::Block &&
        getElementType(getContext(), candidate.blockScaleDType) ==
            out.getElementType())
      f = &candidate;
  if (!f)
    return emitOpError("result element type ")
           << out.getElementType()
           << " is not the block-scale type of a block-scaled format";
  // The stored dtype must be one the registry accepts for weight_scale.
  std::optional<rt::DType> dt = getDType(in.getElementType());
  bool dtypeOk = false;
  for (const rt::TensorRole &r : f->roles)
    if (std::string_view(r.key) == "weight_scale" && dt)
      dtypeOk = llvm::find(r.dtypes, *dt) != r.dtypes.end();
  if (!dtypeOk)
    return emitOpError("input element type ")
           << in.getElementType() << " cannot hold " << f->name
           << " block scales";
  const int64_t rows = out.getDimSize(0), cols = out.getDimSize(1);
  const int64_t want = static_cast<int64_t>(
      rt::swizzledScaleCount(uint64_t(rows), uint64_t(cols)));
  if (in.getNumElements() != want)
    return emitOpError("a swizzled [")
           << rows << ", " << cols << "] scale matrix holds " << want
           << " entries, got " << in;
  return success();
}

namespace {

/// The GEMM rules shared by qmatmul and qgemm; `acc` is the accumulator
/// element type (the qmatmul result, or implied for qgemm).
LogicalResult verifyGemm(Operation *op, Value lhs, Value rhs, Value lhsScales,
                         Value rhsScales, std::optional<uint64_t> block,
                         Type acc) {
  auto a = llvm::cast<RankedTensorType>(lhs.getType());
  auto b = llvm::cast<RankedTensorType>(rhs.getType());
  if (a.getRank() != 2 || b.getRank() != 2)
    return op->emitOpError("operands are A [M, K] and B [N, K]");
  if (!sameShape({a.getShape()[1]}, {b.getShape()[1]}))
    return op->emitOpError("K of A and B differ");
  Type ea = a.getElementType(), eb = b.getElementType();
  bool ints = ea.isSignlessInteger() && eb.isSignlessInteger();
  bool floats = llvm::isa<FloatType>(ea) && llvm::isa<FloatType>(eb);
  if (ints) {
    if (ea.getIntOrFloatBitWidth() > 8 || eb.getIntOrFloatBitWidth() > 8)
      return op->emitOpError("integer operands are at most 8 bits");
    if (!acc.isSignlessInteger(32))
      return op->emitOpError("integer operands accumulate exactly in i32");
  } else if (floats) {
    if (!acc.isF32())
      return op->emitOpError("float operands accumulate in f32");
  } else {
    return op->emitOpError("operands must both be integers or both floats");
  }
  if (static_cast<bool>(lhsScales) != static_cast<bool>(rhsScales) ||
      static_cast<bool>(lhsScales) != block.has_value())
    return op->emitOpError("block scales come as a pair with their block size");
  if (!block)
    return success();
  // A block-scaled registry format: its block, code width, scale type.
  auto sa = llvm::cast<RankedTensorType>(lhsScales.getType());
  auto sb = llvm::cast<RankedTensorType>(rhsScales.getType());
  const rt::FormatInfo *f = nullptr;
  for (const rt::FormatInfo &candidate : rt::allFormats())
    if (candidate.granularity == rt::ScaleGranularity::Block &&
        uint64_t(candidate.blockSize) == *block &&
        getElementType(op->getContext(), candidate.blockScaleDType) ==
            sa.getElementType())
      f = &candidate;
  if (!f)
    return op->emitOpError("block ")
           << *block << " with " << sa.getElementType()
           << " scales is not a block-scaled format";
  if (!floats || ea != eb || ea.getIntOrFloatBitWidth() != unsigned(f->codeBits))
    return op->emitOpError("'")
           << f->name << "' block-scaled operands are " << f->codeBits
           << "-bit float codes of one type";
  if (sb.getElementType() != sa.getElementType())
    return op->emitOpError("block scales of A and B differ in type");
  int64_t k = a.getShape()[1];
  int64_t blocks = ShapedType::isDynamic(k)
                       ? ShapedType::kDynamic
                       : (k + int64_t(*block) - 1) / int64_t(*block);
  if (sa.getRank() != 2 || !sameShape(sa.getShape(), {a.getShape()[0], blocks}))
    return op->emitOpError("A block scales must be [M, ceil(K/")
           << *block << ")]";
  if (sb.getRank() != 2 || !sameShape(sb.getShape(), {b.getShape()[0], blocks}))
    return op->emitOpError("B block scales must be [N, ceil(K/")
           << *block << ")]";
  return success();
}

/// The epilogue rules shared by epilogue and qgemm.
LogicalResult verifyEpilogue(Operation *op, RankedTensorType acc,
                             RankedTensorType res, Value rowScale,
                             Value colScale, Value bias) {
  if (acc.getRank() != 2 || !sameShape(acc.getShape(), res.getShape()))
    return op->emitOpError("result must have the accumulator's [M, N] shape");
  if (!acc.getElementType().isSignlessInteger(32) && !acc.getElementType().isF32())
    return op->emitOpError("accumulator must be i32 or f32");
  if (!llvm::isa<FloatType>(res.getElementType()))
    return op->emitOpError("result must be float");
  int64_t m = acc.getShape()[0], n = acc.getShape()[1];
  auto scalarOr = [&](Value v, ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    return t.getElementType().isF32() &&
           (isOneElement(t) || sameShape(t.getShape(), a) ||
            (!b.empty() && sameShape(t.getShape(), b)));
  };
  if (rowScale && !scalarOr(rowScale, {m, 1}, {}))
    return op->emitOpError("row_scale must be f32 [M, 1] or a scalar");
  if (colScale && !scalarOr(colScale, {n}, {n, 1}))
    return op->emitOpError("col_scale must be f32 [N], [N, 1] or a scalar");
  if (bias) {
    auto t = llvm::cast<RankedTensorType>(bias.getType());
    if (t.getElementType() != res.getElementType() ||
        !sameShape(t.getShape(), {n}))
      return op->emitOpError("bias must be [N] of the result element type ")
             << res.getElementType();
  }
  return success();
}

} // namespace

LogicalResult QMatmulOp::verify() {
  auto a = llvm::cast<RankedTensorType>(getLhs().getType());
  auto b = llvm::cast<RankedTensorType>(getRhs().getType());
  auto c = llvm::cast<RankedTensorType>(getResult().getType());
  if (c.getRank() != 2 || a.getRank() != 2 || b.getRank() != 2)
    return emitOpError("operands are A [M, K], B [N, K] and C [M, N]");
  if (failed(verifyGemm(*this, getLhs(), getRhs(), getLhsBlockScales(),
                        getRhsBlockScales(), getBlock(), c.getElementType())))
    return failure();
  if (!sameShape(c.getShape(), {a.getShape()[0], b.getShape()[0]}))
    return emitOpError("result must be [M, N]");
  return success();
}

LogicalResult EpilogueOp::verify() {
  return verifyEpilogue(*this, llvm::cast<RankedTensorType>(getAcc().getType()),
                        llvm::cast<RankedTensorType>(getResult().getType()),
                        getRowScale(), getColScale(), getBias());
}

Type QGemmOp::getAccumulatorType() {
  Type e = llvm::cast<RankedTensorType>(getLhs().getType()).getElementType();
  Builder b(getContext());
  return e.isSignlessInteger() ? Type(b.getI32Type()) : Type(b.getF32Type());
}

LogicalResult QGemmOp::verify() {
  auto a = llvm::cast<RankedTensorType>(getLhs().getType());
  auto b = llvm::cast<RankedTensorType>(getRhs().getType());
  auto res = llvm::cast<RankedTensorType>(getResult().getType());
  if (failed(verifyGemm(*this, getLhs(), getRhs(), getLhsBlockScales(),
                        getRhsBlockScales(), getBlock(),
                        getAccumulatorType())))
    return failure();
  auto acc = RankedTensorType::get({a.getShape()[0], b.getShape()[0]},
                                   getAccumulatorType());
  if (!sameShape(res.getShape(), acc.getShape()) || res.getRank() != 2)
    return emitOpError("result must be [M, N]");
  return verifyEpilogue(*this, acc, res, getRowScale(), getColScale(),
                        getBias());
}

//===----------------------------------------------------------------------===//
// MmaFP8Op
//===----------------------------------------------------------------------===//

StringRef MmaFP8Op::getPtxTypeName(Type fp8) {
  return isa<Float8E5M2Type>(fp8) ? "e5m2" : "e4m3";
}

LogicalResult MmaFP8Op::verify() {
  for (Type t : {getAType(), getBType()})
    if (!isa<Float8E4M3FNType, Float8E5M2Type>(t))
      return emitOpError("operand type must be f8E4M3FN or f8E5M2, not ")
             << t;
  auto shapeIs = [](Value v, ArrayRef<int64_t> shape) {
    return cast<VectorType>(v.getType()).getShape() == shape;
  };
  if (!shapeIs(getA(), {4, 4}))
    return emitOpError("a must be vector<4x4xi8> (four registers of four "
                       "codes)");
  if (!shapeIs(getB(), {2, 4}))
    return emitOpError("b must be vector<2x4xi8> (two registers of four "
                       "codes)");
  if (!shapeIs(getResult(), {2, 2}))
    return emitOpError("result must be vector<2x2xf32>");
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError("acc must have the result type");
  return success();
}

//===----------------------------------------------------------------------===//
// WarpgroupMmaOp
//===----------------------------------------------------------------------===//

LogicalResult WarpgroupMmaOp::verify() {
  Type a = getAType(), b = getBType();
  Type acc = cast<VectorType>(getResult().getType()).getElementType();
  bool fp8 = isa<Float8E4M3FNType, Float8E5M2Type>(a) &&
             isa<Float8E4M3FNType, Float8E5M2Type>(b);
  bool s8 = a.isInteger(8) && b.isInteger(8);
  bool f16 = (a.isF16() && b.isF16()) || (a.isBF16() && b.isBF16());
  bool fp4 = isa<Float4E2M1FNType>(a) && isa<Float4E2M1FNType>(b);
  if (!fp8 && !s8 && !f16 && !fp4)
    return emitOpError("operands must be i8 x i8, FP8 x FP8, f16 x f16, "
                       "bf16 x bf16 or f4E2M1FN x f4E2M1FN, not ")
           << a << " x " << b;
  if (acc != (s8 ? Type(IntegerType::get(getContext(), 32))
                 : Type(Float32Type::get(getContext()))))
    return emitOpError("accumulates into ")
           << (s8 ? "i32" : "f32") << " for these operands";
  auto shape = cast<VectorType>(getResult().getType()).getShape();
  int64_t n = getColumns();
  if (shape[1] != 2 || shape[2] != 2 || n < 16 || n > 256 || n % 16)
    return emitOpError("result must be vector<(N/8)x2x2> with N a multiple "
                       "of 16 in [16, 256]");
  auto bytes = [](Value v) {
    auto t = cast<MemRefType>(v.getType());
    return t.hasStaticShape() && t.getLayout().isIdentity()
               ? t.getNumElements() * 4
               : int64_t(-1);
  };
  int64_t aBytes = bytes(getA());
  if (aBytes <= 0 || aBytes % (kRows * kStepBytes) ||
      aBytes / (kRows * kStepBytes) > kMaxWarpgroups)
    return emitOpError("a must hold 64 rows of 32 bytes per warpgroup, at "
                       "most ")
           << kMaxWarpgroups << " warpgroups";
  if (aBytes != kRows * kStepBytes && (getAScales() || fp4))
    return emitOpError("scales and FP4 operands take one warpgroup (a of 64 "
                       "rows)");
  if (bytes(getB()) != n * kStepBytes)
    return emitOpError("b must hold N = ") << n << " rows of 32 bytes";
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError("acc must have the result type");
  if (!getAScales() != !getBScales())
    return emitOpError("takes both scale tiles or neither");
  if (fp4 && !getAScales())
    return emitOpError("FP4 operands take scales");
  if (getAScales()) {
    if (!fp8 && !fp4)
      return emitOpError("scales apply to FP8 and FP4 operands only");
    auto count = [](Value v) {
      auto t = cast<MemRefType>(v.getType());
      return t.hasStaticShape() ? t.getNumElements() : int64_t(-1);
    };
    int64_t perRow = fp4 ? kStepBytes * 2 / kFP4Block : 1;
    if (count(getAScales()) != kRows * perRow ||
        count(getBScales()) != n * perRow)
      return emitOpError("scales must be ")
             << perRow << " byte(s) per row of A (" << kRows * perRow
             << ") and per column of B (" << n * perRow << ")";
  }
  // The tiles are the block's: workgroup memory.
  for (Value tile : {getA(), getB(), getAScales(), getBScales()}) {
    if (!tile)
      continue;
    auto space = llvm::dyn_cast_or_null<gpu::AddressSpaceAttr>(
        cast<MemRefType>(tile.getType()).getMemorySpace());
    if (!space || space.getValue() != gpu::AddressSpace::Workgroup)
      return emitOpError("tiles must be in workgroup memory "
                         "(#gpu.address_space<workgroup>)");
  }
  return success();
}

#define GET_OP_CLASSES
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuantOps.cpp.inc"
