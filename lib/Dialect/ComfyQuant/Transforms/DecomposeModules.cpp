//===- DecomposeModules.cpp - module ops to functions of computation ops --===//
//
// Each comfyquant.linear / embedding / moe becomes a func.func of the same
// name computing the forward of docs/CpuCodegen.md §1 with the computation
// ops. Format facts come from the registry (FormatInfo); the choice of
// activation scheme and epilogue per format is the table of CpuCodegen.md.
//===----------------------------------------------------------------------===//
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::comfyquant {
#define GEN_PASS_DEF_COMFYQUANTDECOMPOSEMODULES
#include "comfyquant/Dialect/ComfyQuant/Transforms/Passes.h.inc"
} // namespace mlir::comfyquant

using namespace mlir;
using namespace mlir::comfyquant;
namespace rt = ::comfyquant::rt;

namespace {

/// What a module op states, whatever its kind.
struct ModuleParts {
  ModuleKind kind;
  StringRef name;
  FormatAttr format;
  int64_t n, k, experts;
  RotationAttr rotation;
  OptionsAttr options;
  DictionaryAttr tensors;
};

template <typename OpT>
ModuleParts partsOf(OpT op, ModuleKind kind, int64_t experts) {
  return {kind,
          op.getSymName(),
          op.getFormat(),
          static_cast<int64_t>(op.getOutFeatures()),
          static_cast<int64_t>(op.getInFeatures()),
          experts,
          op.getRotationAttr(),
          op.getOptionsAttr(),
          op.getTensors()};
}

std::optional<ModuleParts> getParts(Operation *op) {
  if (auto l = dyn_cast<LinearOp>(op))
    return partsOf(l, ModuleKind::linear, 0);
  if (auto e = dyn_cast<EmbeddingOp>(op))
    return partsOf(e, ModuleKind::embedding, 0);
  if (auto m = dyn_cast<MoEOp>(op))
    return partsOf(m, ModuleKind::moe, static_cast<int64_t>(m.getExperts()));
  return std::nullopt;
}

/// `t` (a type or shaped type) with element type `e`.
Type withElementType(Type t, Type e) {
  if (auto s = dyn_cast<ShapedType>(t))
    return s.clone(e);
  return e;
}

/// Converts a float scalar or tensor to `to` through f32 (exact extension,
/// then one RNE rounding), as loading the value to f32 and rounding it once
/// to `to` does in the reference.
Value convertFloat(OpBuilder &b, Location loc, Value v, FloatType to) {
  auto from = cast<FloatType>(getElementTypeOrSelf(v.getType()));
  if (from == to)
    return v;
  FloatType f32 = b.getF32Type();
  if (from != f32)
    v = from.getWidth() < 32
            ? Value(arith::ExtFOp::create(b, loc,
                                          withElementType(v.getType(), f32), v))
            : Value(arith::TruncFOp::create(
                  b, loc, withElementType(v.getType(), f32), v));
  if (to == f32)
    return v;
  Type target = withElementType(v.getType(), to);
  return to.getWidth() < 32 ? Value(arith::TruncFOp::create(b, loc, target, v))
                            : Value(arith::ExtFOp::create(b, loc, target, v));
}

/// Builds the body of one module's function.
class BodyBuilder {
public:
  BodyBuilder(RewriterBase &b, Location loc, const ModuleParts &m,
              FloatType act)
      : b(b), loc(loc), m(m), f(m.format.getInfo()), T(act),
        f32(b.getF32Type()) {}

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// The one value of a one-element float tensor, as f32.
  Value scalarF32(Value t) {
    auto type = cast<RankedTensorType>(t.getType());
    SmallVector<Value> zeros;
    if (type.getRank() > 0)
      zeros.assign(type.getRank(), index(0));
    Value v = tensor::ExtractOp::create(b, loc, t, zeros);
    return convertFloat(b, loc, v, f32);
  }

  /// The part of bank tensor `t` that belongs to `expert`. Every per-expert
  /// tensor of a bank holds E equal row-major chunks ([E, ...] stacked or
  /// [E·rows, ...] flattened, docs/Formats.md §7.2); one-element tensors of
  /// the consumer's rank are shared. `rank` is the per-expert rank the
  /// consumer needs (-1: any).
  Value expertSlice(Value t, Value expert, int64_t rank) {
    auto type = cast<RankedTensorType>(t.getType());
    const int64_t E = m.experts;
    // A one-element tensor already of the consumer's rank is shared; one of
    // a higher rank is a one-row stacked or flattened bank (E = N = 1).
    if (type.getNumElements() == 1 &&
        (rank < 0 || type.getRank() == rank || type.getRank() == 0))
      return t;
    ArrayRef<int64_t> s = type.getShape();
    bool stackedOk = s[0] == E;
    int64_t stackedRank = s.size() == 1 ? 1 : int64_t(s.size()) - 1;
    bool stacked = stackedOk && (rank < 0 || rank == stackedRank);
    SmallVector<OpFoldResult> offsets(s.size(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes, strides(s.size(), b.getIndexAttr(1));
    for (int64_t d : s)
      sizes.push_back(b.getIndexAttr(d));
    SmallVector<int64_t> out;
    if (stacked) {
      offsets[0] = expert;
      sizes[0] = b.getIndexAttr(1);
      out.assign(s.begin() + (s.size() == 1 ? 0 : 1), s.end());
      if (s.size() == 1)
        out[0] = 1;
    } else {
      const int64_t rows = s[0] / E;
      Value &first = firstRow[rows]; // expert · rows, built once per size
      if (!first)
        first = arith::MulIOp::create(b, loc, expert, index(rows));
      offsets[0] = first;
      sizes[0] = b.getIndexAttr(rows);
      out.assign(s.begin(), s.end());
      out[0] = rows;
    }
    auto resultType = RankedTensorType::get(out, type.getElementType());
    return tensor::ExtractSliceOp::create(b, loc, resultType, t, offsets, sizes,
                                          strides);
  }

  /// x · T(pqs) per column, the product rounded once to T (nvfp4 AWQ
  /// smoothing, docs/Formats.md §5 step 1).
  Value scaleColumns(Value x, Value pqs) {
    auto xt = cast<RankedTensorType>(x.getType());
    MLIRContext *ctx = b.getContext();
    Value rows = tensor::DimOp::create(b, loc, x, 0);
    Value init =
        tensor::EmptyOp::create(b, loc, xt.getShape(), T, ValueRange{rows});
    AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
    AffineMap col = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
    SmallVector<utils::IteratorType> iters(2, utils::IteratorType::parallel);
    FloatType act = T, f32Type = f32;
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange{xt}, ValueRange{x, pqs}, ValueRange{init},
        ArrayRef<AffineMap>{id, col, id}, iters,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          // Operands in named locals: argument evaluation order is
          // unspecified, and the IR must not depend on the host compiler.
          Value p = convertFloat(nb, nl, args[1], act);
          Value xWide = convertFloat(nb, nl, args[0], f32Type);
          Value pWide = convertFloat(nb, nl, p, f32Type);
          Value prod = arith::MulFOp::create(nb, nl, xWide, pWide);
          linalg::YieldOp::create(nb, nl, convertFloat(nb, nl, prod, act));
        });
    return generic.getResult(0);
  }

  RankedTensorType rowsOf(int64_t cols, Type e) {
    return RankedTensorType::get({ShapedType::kDynamic, cols}, e);
  }

  /// The side operands of a dequantize-like op: bound roles other than the
  /// weight and those `skip` names, in registry order.
  void sides(const llvm::StringMap<Value> &t, ArrayRef<StringRef> skip,
             SmallVectorImpl<Value> &values,
             SmallVectorImpl<Attribute> &roles) {
    for (const rt::TensorRole &r : f.roles) {
      StringRef key = r.key;
      auto it = t.find(key);
      if (key == "weight" || it == t.end() || llvm::is_contained(skip, key))
        continue;
      values.push_back(it->second);
      roles.push_back(b.getStringAttr(key));
    }
  }

  Value linear(Value x, const llvm::StringMap<Value> &t);

private:
  RewriterBase &b;
  Location loc;
  const ModuleParts &m;
  const rt::FormatInfo &f;
  FloatType T;
  FloatType f32;
  llvm::DenseMap<int64_t, Value> firstRow;
};

Value BodyBuilder::linear(Value x, const llvm::StringMap<Value> &t) {
  MLIRContext *ctx = b.getContext();
  auto get = [&](StringRef role) {
    auto it = t.find(role);
    return it == t.end() ? Value() : it->second;
  };
  const int64_t N = m.n, K = m.k;
  Value weight = get("weight");
  RankedTensorType result = rowsOf(N, T);
  if (Value pqs = get("pre_quant_scale"))
    x = scaleColumns(x, pqs);
  Value bias = get("bias") ? convertFloat(b, loc, get("bias"), T) : Value();

  // Dequantize to T and a float GEMM (docs/Formats.md §5.8).
  if (m.options && m.options.getFullPrecisionMatrixMult()) {
    SmallVector<Value> side;
    SmallVector<Attribute> roles;
    sides(t, {"bias", "input_scale", "pre_quant_scale"}, side, roles);
    // An int8 expert of one row has a one-element per-row scale, which the
    // registry reads as a scalar: state that granularity for the slice.
    FormatAttr format = m.format;
    if (f.format == rt::Format::Int8Tensorwise && get("weight_scale")) {
      auto st = cast<RankedTensorType>(get("weight_scale").getType());
      std::vector<int64_t> shape(st.getShape().begin(), st.getShape().end());
      auto g = static_cast<ScaleGranularity>(rt::int8ScaleGranularity(shape));
      if (g != format.getGranularity())
        format = FormatAttr::get(ctx, format.getKind(), g, format.getGroup(),
                                 format.getScale(), format.getNibbles());
    }
    Value w =
        DequantizeOp::create(b, loc, RankedTensorType::get({N, K}, T), weight,
                             side, b.getArrayAttr(roles), format, m.rotation);
    Value acc = QMatmulOp::create(b, loc, rowsOf(N, f32), x, w, Value(),
                                  Value(), IntegerAttr());
    return EpilogueOp::create(b, loc, result, acc, Value(), Value(), bias);
  }

  switch (f.format) {
  case rt::Format::Float8E4M3FN:
  case rt::Format::Float8E5M2: {
    // Static per-tensor scale (input_scale, else 1.0), codes of the
    // weight's FP8 type; epilogue (acc·s)·s_w.
    Type code = getElementType(ctx, f.weightDType);
    auto scheme = ActQuantAttr::get(ctx, ActScheme::fp8_static, code, 0);
    Value inScale = get("input_scale")
                        ? convertFloat(b, loc, get("input_scale"), f32)
                        : Value();
    auto q = QuantizeOp::create(b, loc, rowsOf(K, code),
                                RankedTensorType::get({}, f32), Type(), x,
                                scheme, RotationAttr(), inScale);
    Value acc = QMatmulOp::create(b, loc, rowsOf(N, f32), q.getCodes(), weight,
                                  Value(), Value(), IntegerAttr());
    return EpilogueOp::create(b, loc, result, acc, q.getScales(),
                              convertFloat(b, loc, get("weight_scale"), f32),
                              bias);
  }
  case rt::Format::NVFP4:
  case rt::Format::MXFP8: {
    // Block-scaled: activations quantized like the weight, the weight's
    // codes and (unswizzled) block scales, a block-scaled GEMM.
    const bool nvfp4 = f.format == rt::Format::NVFP4;
    const int64_t B = f.blockSize, C = (K + B - 1) / B;
    Type code = nvfp4 ? Type(Float4E2M1FNType::get(ctx))
                      : getElementType(ctx, f.weightDType);
    Type blockScale = getElementType(ctx, f.blockScaleDType);
    auto scheme = ActQuantAttr::get(
        ctx, nvfp4 ? ActScheme::nvfp4_block : ActScheme::mxfp8_block, Type(),
        B);
    // NVFP4 takes input_scale as its global scale; MXFP8 ignores it.
    Value inScale = nvfp4 && get("input_scale")
                        ? convertFloat(b, loc, get("input_scale"), f32)
                        : Value();
    auto q = QuantizeOp::create(b, loc, rowsOf(K, code), rowsOf(C, blockScale),
                                nvfp4 ? Type(RankedTensorType::get({}, f32))
                                      : Type(),
                                x, scheme, RotationAttr(), inScale);
    auto operand = RankedTensorType::get({N, K}, code);
    Value w;
    if (nvfp4)
      w = UnpackOp::create(b, loc, operand, weight, ValueRange{},
                           b.getArrayAttr({}), m.format);
    else if (cast<RankedTensorType>(weight.getType()).getShape() !=
             operand.getShape())
      w = tensor::ExtractSliceOp::create(
          b, loc, operand, weight,
          SmallVector<OpFoldResult>(2, b.getIndexAttr(0)),
          SmallVector<OpFoldResult>{b.getIndexAttr(N), b.getIndexAttr(K)},
          SmallVector<OpFoldResult>(2, b.getIndexAttr(1)));
    else
      w = weight;
    Value wScales = UnswizzleOp::create(
        b, loc, RankedTensorType::get({N, C}, blockScale), get("weight_scale"));
    Value acc =
        QMatmulOp::create(b, loc, rowsOf(N, f32), q.getCodes(), w,
                          q.getScales(), wScales, b.getI64IntegerAttr(B));
    if (!nvfp4)
      return EpilogueOp::create(b, loc, result, acc, Value(), Value(), bias);
    // alpha = g · weight_scale_2, formed first (kitchen's GEMM alpha).
    Value g =
        tensor::ExtractOp::create(b, loc, q.getGlobalScale(), ValueRange{});
    Value alpha =
        arith::MulFOp::create(b, loc, g, scalarF32(get("weight_scale_2")));
    Value alphaT = tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, f32), ValueRange{alpha});
    return EpilogueOp::create(b, loc, result, acc, Value(), alphaT, bias);
  }
  case rt::Format::Int8Tensorwise:
  case rt::Format::ConvRotW4A4:
  case rt::Format::AsymW4A8Int8:
  case rt::Format::W6A8Int8: {
    // Rotate (ConvRot), per-row dynamic int quantization, i32 GEMM,
    // epilogue (acc·s_x)·s_w.
    Value xr = m.rotation
                   ? Value(RotateOp::create(b, loc, x.getType(), x, m.rotation))
                   : x;
    std::optional<LinearDtype> ld =
        m.options ? m.options.getLinearDtype() : std::nullopt;
    const bool int4 = f.format == rt::Format::ConvRotW4A4 &&
                      ld.value_or(LinearDtype::int4) == LinearDtype::int4;
    Type code = b.getIntegerType(int4 ? 4 : 8);
    auto scheme = ActQuantAttr::get(
        ctx, int4 ? ActScheme::int4_row : ActScheme::int8_row, Type(), 0);
    auto q = QuantizeOp::create(b, loc, rowsOf(K, code), rowsOf(1, f32), Type(),
                                xr, scheme, RotationAttr(), Value());
    Value w = weight;
    Value colScale = get("weight_scale");
    if (f.granularity == rt::ScaleGranularity::Group) {
      // The int8 grid from codes, group scales (and codebook).
      SmallVector<Value> side;
      SmallVector<Attribute> roles;
      sides(t, {"weight_s_channel", "bias"}, side, roles);
      w = UnpackOp::create(b, loc, RankedTensorType::get({N, K}, code), weight,
                           side, b.getArrayAttr(roles), m.format);
      colScale = get("weight_s_channel");
    } else if (f.codeBits < 8) {
      // Signed nibbles, as wide as the activation codes.
      w = UnpackOp::create(b, loc, RankedTensorType::get({N, K}, code), weight,
                           ValueRange{}, b.getArrayAttr({}), m.format);
    }
    Value acc =
        QMatmulOp::create(b, loc, rowsOf(N, b.getI32Type()), q.getCodes(), w,
                          Value(), Value(), IntegerAttr());
    return EpilogueOp::create(b, loc, result, acc, q.getScales(),
                              convertFloat(b, loc, colScale, f32), bias);
  }
  }
  llvm_unreachable("unknown format");
}

/// The per-expert rank a bank role's slice must have where stacked and
/// flattened layouts could be confused (one row per expert); -1: any.
int64_t perExpertRank(StringRef role) {
  return llvm::StringSwitch<int64_t>(role)
      .Case("weight", 2)
      .Case("weight_s_rel", 2)
      .Case("bias", 1)
      .Case("weight_s_channel", 1)
      .Default(-1);
}

struct DecomposeModulesPass
    : mlir::comfyquant::impl::ComfyQuantDecomposeModulesBase<
          DecomposeModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    FloatType act = getActivationElementType(ctx, activationType);
    SmallVector<Operation *> modules;
    for (Operation &op : getOperation().getBody()->getOperations())
      if (isa<LinearOp, EmbeddingOp, MoEOp>(op))
        modules.push_back(&op);
    IRRewriter rewriter(ctx);
    SymbolTableCollection symbolTables;
    for (Operation *op : modules)
      if (failed(decomposeModule(rewriter, op, act, symbolTables)))
        return signalPassFailure();
  }
};

} // namespace

FailureOr<func::FuncOp>
mlir::comfyquant::decomposeModule(RewriterBase &rewriter, Operation *op,
                                  FloatType act,
                                  SymbolTableCollection &symbolTables) {
  std::optional<ModuleParts> parts = getParts(op);
  if (!parts)
    return op->emitOpError("is not a comfyquant module op");
  if (!isa<Float32Type, BFloat16Type, Float16Type>(act))
    return op->emitOpError("activation type must be f32, bf16 or f16");
  const ModuleParts &m = *parts;
  const rt::FormatInfo &f = m.format.getInfo();
  MLIRContext *ctx = op->getContext();
  Location loc = op->getLoc();

  // The bound tensors, in registry role order.
  SmallVector<std::pair<StringRef, TensorOp>> bound;
  for (const rt::TensorRole &r : f.roles) {
    Attribute a = m.tensors.get(r.key);
    if (!a)
      continue;
    auto ref = dyn_cast<SymbolRefAttr>(a);
    auto tensor =
        ref ? symbolTables.lookupNearestSymbolFrom<TensorOp>(op, ref) : nullptr;
    if (!tensor)
      return op->emitOpError("tensor binding '")
             << r.key << "' does not name a comfyquant.tensor";
    bound.push_back({r.key, tensor});
  }
  if (bound.size() != m.tensors.size())
    return op->emitOpError("binds a tensor role that format '")
           << f.name << "' does not have";

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  const int64_t dyn = ShapedType::kDynamic;
  SmallVector<Type> inputs;
  Type result;
  if (m.kind == ModuleKind::embedding) {
    inputs.push_back(RankedTensorType::get({dyn}, rewriter.getI64Type()));
    result = RankedTensorType::get({dyn, m.k}, act);
  } else {
    inputs.push_back(RankedTensorType::get({dyn, m.k}, act));
    if (m.kind == ModuleKind::moe)
      inputs.push_back(rewriter.getIndexType());
    result = RankedTensorType::get({dyn, m.n}, act);
  }
  auto fn = func::FuncOp::create(rewriter, loc, m.name,
                                 FunctionType::get(ctx, inputs, {result}));
  fn->setAttr(ComfyQuantDialect::getModuleAttrName(),
              ModuleInfoAttr::get(ctx, m.kind, m.format, m.n, m.k, m.experts,
                                  m.rotation, m.options));
  Block *entry = fn.addEntryBlock();
  rewriter.setInsertionPointToStart(entry);

  // Every bound tensor as a value (what the kernel binds, in order).
  llvm::StringMap<Value> t;
  for (auto [role, tensor] : bound)
    t[role] = WeightOp::create(rewriter, loc, tensor.getTensorType(),
                               cast<SymbolRefAttr>(m.tensors.get(role)));

  BodyBuilder body(rewriter, loc, m, act);
  Value arg = entry->getArgument(0);
  Value y;
  if (m.kind == ModuleKind::embedding) {
    SmallVector<Value> side;
    SmallVector<Attribute> roles;
    body.sides(t, {}, side, roles);
    y = LookupOp::create(rewriter, loc, result, t["weight"], arg, side,
                         rewriter.getArrayAttr(roles), m.format, m.rotation);
  } else {
    if (m.kind == ModuleKind::moe) {
      // Expert `expert` of the bank; the codebook is one table for all.
      Value expert = entry->getArgument(1);
      for (auto [role, tensor] : bound)
        if (role != "weight_codebook")
          t[role] = body.expertSlice(t[role], expert, perExpertRank(role));
    }
    y = body.linear(arg, t);
  }
  func::ReturnOp::create(rewriter, loc, y);
  rewriter.eraseOp(op);
  return fn;
}
