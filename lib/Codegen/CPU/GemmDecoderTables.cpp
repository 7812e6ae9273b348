//===- GemmDecoderTables.cpp - B's decoder as register tables -------------===//
#include "GemmDecoderTables.h"

#include "comfyquant/Codegen/CPU/Passes.h"
#include "comfyquant/Dialect/ComfyQuant/IR/ComfyQuant.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/TilingInterface.h"

using namespace mlir;
using namespace mlir::comfyquant;
using namespace mlir::comfyquant::detail;

namespace mlir::comfyquant::detail {

/// The f32 `x` of a value yielded as bitcast<bf16>(trunci<i16>(shrui(
/// bitcast<i32>(x), 16))): the high half of an f32's bits, the narrowing
/// convert-comfyquant-to-linalg gives decoded values that are bf16s exactly
/// (FP8 and E2M1 codes, E2M1 x E4M3, FP8 x E8M0; Emitter::exactBF16).
/// Null for anything else.
Value exactNarrowing(Value v) {
  auto toBf16 = v.getDefiningOp<arith::BitcastOp>();
  if (!toBf16 || !toBf16.getType().isBF16())
    return {};
  auto half = toBf16.getIn().getDefiningOp<arith::TruncIOp>();
  if (!half || !half.getType().isInteger(16))
    return {};
  auto high = half.getIn().getDefiningOp<arith::ShRUIOp>();
  APInt shift;
  if (!high || !high.getType().isInteger(32) ||
      !matchPattern(high.getRhs(), m_ConstantInt(&shift)) || shift != 16)
    return {};
  auto bits = high.getLhs().getDefiningOp<arith::BitcastOp>();
  if (!bits || !bits.getIn().getType().isF32())
    return {};
  return bits.getIn();
}

/// The f32 that `producer` (elementwise, one init, whose block argument is
/// unused: a copy may change its type) yields narrowed exactly to bf16
/// (exactNarrowing), or null.
Value producerNarrowedF32(linalg::GenericOp producer) {
  if (producer.getNumDpsInits() != 1)
    return {};
  Block &body = producer.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (!body.getArgument(body.getNumArguments() - 1).use_empty())
    return {};
  return exactNarrowing(yield.getOperand(0));
}

/// A copy of `producer` (elementwise, its init's block argument unused)
/// yielding `v`, an f32 of its body, beside it.
linalg::GenericOp copyYieldingF32(RewriterBase &rw,
                                         linalg::GenericOp producer, Value v) {
  OpBuilder::InsertionGuard guard(rw);
  rw.setInsertionPoint(producer);
  Location loc = producer.getLoc();
  Block &body = producer.getRegion().front();
  auto type = cast<RankedTensorType>(producer->getResult(0).getType())
                  .clone(rw.getF32Type());
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(rw, loc, producer.getDpsInits()[0]);
  Value init = tensor::EmptyOp::create(rw, loc, sizes, rw.getF32Type());
  return linalg::GenericOp::create(
      rw, loc, TypeRange{type}, producer.getDpsInputs(), ValueRange{init},
      producer.getIndexingMapsArray(), producer.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location, ValueRange args) {
        IRMapping map;
        map.map(body.getArguments(), args);
        for (Operation &op : body.without_terminator())
          nb.clone(op, map);
        linalg::YieldOp::create(nb, loc, map.lookup(v));
      });
}

/// A copy of `producer` (elementwise, one bf16 result) that yields the f32
/// its body narrows exactly, or null. Made beside the producer; unused
/// copies are dead code.
linalg::GenericOp widenExactNarrowing(RewriterBase &rw,
                                             linalg::GenericOp producer) {
  Value wide = producerNarrowedF32(producer);
  if (!wide)
    return {};
  return copyYieldingF32(rw, producer, wide);
}

/// An elementwise generic beside `producer` (its byte input first, its
/// init) reading `entries`, the bf16s of the 256 codes, at each byte.
linalg::GenericOp byteTableLookup(RewriterBase &rw,
                                         linalg::GenericOp producer,
                                         ArrayRef<Attribute> entries) {
  OpBuilder::InsertionGuard guard(rw);
  rw.setInsertionPoint(producer);
  Location loc = producer.getLoc();
  auto tableType = RankedTensorType::get({256}, rw.getBF16Type());
  Value table = arith::ConstantOp::create(
      rw, loc, tableType, DenseElementsAttr::get(tableType, entries));
  SmallVector<AffineMap> maps = {producer.getIndexingMapsArray().front(),
                                 producer.getIndexingMapsArray().back()};
  return linalg::GenericOp::create(
      rw, loc, producer->getResultTypes(), producer.getDpsInputs().front(),
      producer.getDpsInits(), maps, producer.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value code = arith::ExtUIOp::create(nb, l, nb.getI32Type(), args[0]);
        Value index =
            arith::IndexCastOp::create(nb, l, nb.getIndexType(), code);
        Value entry = tensor::ExtractOp::create(nb, l, table, index);
        linalg::YieldOp::create(nb, l, entry);
      });
}

/// The bf16s of `producer` (elementwise, one i8 input, one bf16 result of
/// that byte alone and constants) at each of the 256 codes; none otherwise.
std::optional<SmallVector<Attribute>>
byteTableEntries(linalg::GenericOp producer) {
  if (producer.getNumDpsInputs() != 1 || producer.getNumDpsInits() != 1)
    return std::nullopt;
  Block &body = producer.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Value out = yield.getOperand(0);
  if (!out.getType().isBF16() || !body.getArgument(1).use_empty())
    return std::nullopt;
  SmallVector<Attribute> values = evaluateAtEveryCode(producer, out, 0);
  if (values.size() != 256 || !llvm::all_of(values, [](Attribute a) {
        auto f = dyn_cast<FloatAttr>(a);
        return f && f.getType().isBF16();
      }))
    return std::nullopt;
  return values;
}

/// A copy of `producer` (elementwise, one i8 input, one bf16 result of
/// that byte alone and constants) reading its result at each of the 256
/// codes from a constant table, or null. Made beside the producer; unused
/// copies are dead code.
linalg::GenericOp tabulateByteDecoder(RewriterBase &rw,
                                             linalg::GenericOp producer) {
  std::optional<SmallVector<Attribute>> entries = byteTableEntries(producer);
  if (!entries)
    return {};
  return byteTableLookup(rw, producer, *entries);
}

/// The read of an f32 [R, C] table defined outside `producer`'s body whose
/// exact narrowing `producer` yields; null otherwise.
tensor::ExtractOp narrowedTableRead(linalg::GenericOp producer) {
  Value wide = producerNarrowedF32(producer);
  auto read = wide ? wide.getDefiningOp<tensor::ExtractOp>() : nullptr;
  if (!read)
    return {};
  Value table = read.getTensor();
  auto tableType = dyn_cast<RankedTensorType>(table.getType());
  if (!tableType || tableType.getRank() != 2 || !tableType.hasStaticShape() ||
      !tableType.getElementType().isF32() ||
      producer->isAncestor(table.getParentBlock()->getParentOp()))
    return {};
  return read;
}

/// For a producer (elementwise, one bf16 result) yielding the exact
/// narrowing (exactNarrowing) of a read of an f32 [R, C] table defined
/// outside its body (comfyquant-cpu-tabulate-decoders' E2M1 x E4M3 rows of
/// NVFP4): a copy reading the same entry of the table narrowed once (a
/// generic beside the table), so a bf16 kernel reads bf16 rows. Null
/// otherwise.
linalg::GenericOp narrowTableRows(RewriterBase &rw,
                                         linalg::GenericOp producer) {
  tensor::ExtractOp read = narrowedTableRead(producer);
  if (!read)
    return {};
  Block &body = producer.getRegion().front();
  Value table = read.getTensor();
  auto tableType = cast<RankedTensorType>(table.getType());
  OpBuilder::InsertionGuard guard(rw);
  rw.setInsertionPointAfterValue(table);
  Location loc = table.getLoc();
  Value empty =
      tensor::EmptyOp::create(rw, loc, tableType.getShape(), rw.getBF16Type());
  auto identity = rw.getMultiDimIdentityMap(2);
  auto narrowed = linalg::GenericOp::create(
      rw, loc, TypeRange{empty.getType()}, ValueRange{table}, ValueRange{empty},
      ArrayRef<AffineMap>{identity, identity},
      SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value bits = arith::BitcastOp::create(nb, l, nb.getI32Type(), args[0]);
        Value sixteen =
            arith::ConstantOp::create(nb, l, nb.getI32IntegerAttr(16));
        Value high = arith::ShRUIOp::create(nb, l, bits, sixteen);
        Value half = arith::TruncIOp::create(nb, l, nb.getI16Type(), high);
        Value bf = arith::BitcastOp::create(nb, l, nb.getBF16Type(), half);
        linalg::YieldOp::create(nb, l, bf);
      });
  Value rows = narrowed.getResult(0);
  rw.setInsertionPoint(producer);
  return linalg::GenericOp::create(
      rw, producer.getLoc(), producer->getResultTypes(),
      producer.getDpsInputs(), producer.getDpsInits(),
      producer.getIndexingMapsArray(), producer.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        IRMapping map;
        map.map(body.getArguments(), args);
        for (Operation &op : body.without_terminator())
          nb.clone(op, map);
        SmallVector<Value> at;
        for (Value i : read.getIndices())
          at.push_back(map.lookupOrDefault(i));
        Value entry = tensor::ExtractOp::create(nb, l, rows, at);
        linalg::YieldOp::create(nb, l, entry);
      });
}

/// Whether `v` (in `producer`'s body) is the same at every element of a
/// kv-vector along K that starts at a multiple of kv: it reads the K index
/// (loop 1) only as k floordiv G (arith.divui), G a multiple of kv, and not
/// the byte (argument 0).
bool uniformOverKVectors(linalg::GenericOp producer, Value v,
                                int64_t kv) {
  Block &body = producer.getRegion().front();
  auto blockOfKv = [&](Value divisor) {
    APInt g;
    return matchPattern(divisor, m_ConstantInt(&g)) && g.getSExtValue() > 0 &&
           g.getSExtValue() % kv == 0;
  };
  llvm::SmallPtrSet<Operation *, 16> slice = bodySlice(producer, v);
  auto reads = [&](Value x) {
    return x == v || llvm::any_of(x.getUsers(), [&](Operation *user) {
             return slice.contains(user);
           });
  };
  if (reads(body.getArgument(0)))
    return false;
  // S is evaluated by emitEpilogueAt, which reads operands at maps of loop
  // dims and constants; one S reads must not index K.
  for (OpOperand *in : producer.getDpsInputOperands()) {
    const bool read = in->getOperandNumber() != 0 &&
                      reads(body.getArgument(in->getOperandNumber()));
    for (AffineExpr e : producer.getMatchingIndexingMap(in).getResults())
      if (!isa<AffineDimExpr, AffineConstantExpr>(e) ||
          (read && e.isFunctionOfDim(1)))
        return false;
  }
  for (Operation *op : slice) {
    auto index = dyn_cast<linalg::IndexOp>(op);
    if (!index || index.getDim() != 1)
      continue;
    for (Operation *user : index->getUsers()) {
      auto div = dyn_cast<arith::DivUIOp>(user);
      if (slice.contains(user) &&
          (!div || div.getLhs() != index || !blockOfKv(div.getRhs())))
        return false;
    }
  }
  return true;
}

/// The bf16 table of X and the value S where `producer` (elementwise, its
/// byte first, one bf16 result) narrows exactly (exactNarrowing) a product
/// X · S, X a function of the byte alone that is a bf16 at every code and S
/// uniform over kv-vectors; none when it is not of that form.
std::optional<std::pair<SmallVector<Attribute>, Value>>
scaledByteTable(linalg::GenericOp producer, int64_t kv) {
  // Loop 1 must be K, as uniformOverKVectors and emitEpilogueAt read it.
  if (producer.getNumDpsInputs() < 1 ||
      !producer.getIndexingMapsArray().back().isIdentity())
    return std::nullopt;
  Value wide = producerNarrowedF32(producer);
  auto product = wide ? wide.getDefiningOp<arith::MulFOp>() : nullptr;
  Block &body = producer.getRegion().front();
  if (!product || !body.getArgument(0).getType().isInteger(8))
    return std::nullopt;
  Builder b(producer.getContext());
  for (auto [x, scale] : {std::pair(product.getLhs(), product.getRhs()),
                          std::pair(product.getRhs(), product.getLhs())}) {
    if (!scale.getType().isF32() || !uniformOverKVectors(producer, scale, kv))
      continue;
    SmallVector<Attribute> values = evaluateAtEveryCode(producer, x, 0);
    SmallVector<Attribute> narrowed;
    for (Attribute a : values) {
      auto f = dyn_cast<FloatAttr>(a);
      if (!f || !f.getType().isF32())
        break;
      APFloat bf = f.getValue();
      bool lost = false;
      bf.convert(APFloat::BFloat(), APFloat::rmTowardZero, &lost);
      if (lost && !f.getValue().isNaN())
        break;
      narrowed.push_back(b.getFloatAttr(b.getBF16Type(), bf));
    }
    if (narrowed.size() == 256)
      return std::pair(std::move(narrowed), scale);
  }
  return std::nullopt;
}

/// For a producer (elementwise, its byte first, one bf16 result) that
/// narrows exactly (exactNarrowing) a product X · S, X a function of the
/// byte alone that is a bf16 at every code and S uniform over kv-vectors:
/// {a table copy yielding bf16(X), a copy yielding S}. Null when it is not
/// of that form.
std::pair<linalg::GenericOp, linalg::GenericOp>
splitScaledByteDecoder(RewriterBase &rw, linalg::GenericOp producer,
                       int64_t kv) {
  std::optional<std::pair<SmallVector<Attribute>, Value>> found =
      scaledByteTable(producer, kv);
  if (!found)
    return {};
  linalg::GenericOp codes = byteTableLookup(rw, producer, found->first);
  linalg::GenericOp scales = copyYieldingF32(rw, producer, found->second);
  return {codes, scales};
}

} // namespace mlir::comfyquant::detail

bool mlir::comfyquant::detail::decodesThroughTable(linalg::GenericOp producer,
                                                   int64_t kv) {
  return byteTableEntries(producer) || scaledByteTable(producer, kv) ||
         narrowedTableRead(producer);
}
