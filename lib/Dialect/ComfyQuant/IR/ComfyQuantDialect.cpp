//===- ComfyQuantDialect.cpp - comfyquant dialect -------------------------===//
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
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

LogicalResult
ComfyQuantDialect::verifyOperationAttribute(Operation *op,
                                            NamedAttribute attribute) {
  StringRef name = attribute.getName().strref();
  Attribute value = attribute.getValue();
  // The code generators' records: typed, whatever op carries them.
  if (name == ComfyQuantDialect::getTargetAttrName()) {
    if (!llvm::isa<TargetAttr>(value))
      return op->emitOpError("'comfyquant.target' must be a "
                             "#comfyquant.target");
    return success();
  }
  if (name == ComfyQuantDialect::getGemmAttrName()) {
    if (!llvm::isa<GemmConfigAttrInterface>(value))
      return op->emitOpError("'comfyquant.gemm' must be a GEMM config "
                             "(#comfyquant.cpu_gemm, #comfyquant.gpu_gemm)");
    return success();
  }
  if (name == ComfyQuantDialect::getGemmInfoAttrName()) {
    if (!llvm::isa<GemmInfoAttr>(value))
      return op->emitOpError("'comfyquant.gemm_info' must be a "
                             "#comfyquant.gemm_info");
    return success();
  }
  if (name == ComfyQuantDialect::getGemmsAttrName()) {
    auto array = llvm::dyn_cast<ArrayAttr>(value);
    if (!array || !llvm::all_of(array, [](Attribute a) {
          return llvm::isa<GemmConfigAttrInterface>(a);
        }))
      return op->emitOpError("'comfyquant.gemms' must be an array of GEMM "
                             "configs");
    return success();
  }
  if (name != getModuleAttrName())
    return success(); // other comfyquant.* records
  auto info = llvm::dyn_cast<ModuleInfoAttr>(attribute.getValue());
  if (!info)
    return op->emitOpError("'")
           << getModuleAttrName() << "' must be a #comfyquant.module";
  auto fn = llvm::dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return op->emitOpError("'")
           << getModuleAttrName() << "' is only valid on a function";
  // The kernel contract of the module kind (docs/CpuCodegen.md §2).
  ArrayRef<Type> in = fn.getArgumentTypes(), out = fn.getResultTypes();
  const int64_t n = info.getOutFeatures(), k = info.getInFeatures();
  auto fail = [&]() {
    InFlightDiagnostic d = op->emitOpError("signature of a ");
    d << stringifyModuleKind(info.getKind()) << " module must be ";
    switch (info.getKind()) {
    case ModuleKind::linear:
      d << "(tensor<Mx" << k << "xT>) -> tensor<Mx" << n << "xT>";
      break;
    case ModuleKind::moe:
      d << "(tensor<Mx" << k << "xT>, index) -> tensor<Mx" << n << "xT>";
      break;
    case ModuleKind::embedding:
      d << "(tensor<Mxi64>) -> tensor<Mx" << k << "xT>";
      break;
    }
    d << " with T = f32, bf16 or f16";
    return d;
  };
  if (out.size() != 1)
    return fail();
  auto y = llvm::dyn_cast<RankedTensorType>(out[0]);
  if (!y || y.getRank() != 2 ||
      !llvm::isa<Float32Type, BFloat16Type, Float16Type>(y.getElementType()))
    return fail();
  int64_t m = y.getDimSize(0);
  if (info.getKind() == ModuleKind::embedding) {
    auto idx = in.size() == 1 ? llvm::dyn_cast<RankedTensorType>(in[0])
                              : RankedTensorType();
    if (!idx || idx.getRank() != 1 || !idx.getElementType().isInteger(64) ||
        idx.getDimSize(0) != m || y.getDimSize(1) != k)
      return fail();
    return success();
  }
  size_t wantArgs = info.getKind() == ModuleKind::moe ? 2 : 1;
  if (in.size() != wantArgs)
    return fail();
  auto x = llvm::dyn_cast<RankedTensorType>(in[0]);
  if (!x || x.getRank() != 2 || x.getDimSize(0) != m || x.getDimSize(1) != k ||
      x.getElementType() != y.getElementType() || y.getDimSize(1) != n)
    return fail();
  if (wantArgs == 2 && !in[1].isIndex())
    return fail();
  return success();
}

FloatType mlir::comfyquant::getActivationElementType(MLIRContext *ctx,
                                                    ActivationType type) {
  switch (type) {
  case ActivationType::f32:
    return Float32Type::get(ctx);
  case ActivationType::bf16:
    return BFloat16Type::get(ctx);
  case ActivationType::f16:
    return Float16Type::get(ctx);
  }
  llvm_unreachable("unknown activation type");
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
