// #tx.sharding: parsing, printing, checks.
#include "tx/TxDialect.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h" // the generated attribute printer and parser use it

using namespace mlir;
using namespace megac::tx;

#define GET_ATTRDEF_CLASSES
#include "tx/TxAttrs.cpp.inc"

void TxDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tx/TxAttrs.cpp.inc"
      >();
}

namespace {

/// `{"tp", "dp"}` or `{}`.
ParseResult parseAxisSet(AsmParser &parser, ArrayAttr &axes) {
  SmallVector<Attribute> names;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, [&]() -> ParseResult {
        std::string name;
        if (parser.parseString(&name))
          return failure();
        names.push_back(parser.getBuilder().getStringAttr(name));
        return success();
      }))
    return failure();
  axes = parser.getBuilder().getArrayAttr(names);
  return success();
}

void printAxisSet(AsmPrinter &printer, ArrayAttr axes) {
  printer << "{";
  llvm::interleaveComma(axes, printer, [&](Attribute a) { printer << a; });
  printer << "}";
}

} // namespace

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  SmallVector<Attribute> dims;
  ArrayAttr partial = parser.getBuilder().getArrayAttr({});
  if (parser.parseLess() || parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        ArrayAttr axes;
        if (parseAxisSet(parser, axes))
          return failure();
        dims.push_back(axes);
        return success();
      }))
    return {};
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("partial") || parser.parseEqual() || parseAxisSet(parser, partial)))
    return {};
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(parser.getContext(), parser.getBuilder().getArrayAttr(dims), partial);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getDims(), printer, [&](Attribute axes) { printAxisSet(printer, cast<ArrayAttr>(axes)); });
  printer << "]";
  if (!getPartial().empty()) {
    printer << ", partial=";
    printAxisSet(printer, getPartial());
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr dims, ArrayAttr partial) {
  llvm::SmallDenseSet<StringRef> used;
  auto check = [&](ArrayAttr axes) -> LogicalResult {
    for (Attribute a : axes) {
      auto name = dyn_cast<StringAttr>(a);
      if (!name)
        return emitError() << "a grid axis must be a string, got " << a;
      if (!used.insert(name.getValue()).second)
        return emitError() << "grid axis \"" << name.getValue() << "\" is used twice; a value is split over an axis, "
                           << "or partial over it, at most once";
    }
    return success();
  };
  for (Attribute d : dims) {
    auto axes = dyn_cast<ArrayAttr>(d);
    if (!axes)
      return emitError() << "each dimension's entry must be a list of grid axes, got " << d;
    if (failed(check(axes)))
      return failure();
  }
  return check(partial);
}

namespace {
SmallVector<StringRef, 2> axesOf(Attribute list) {
  SmallVector<StringRef, 2> axes;
  for (Attribute a : cast<ArrayAttr>(list))
    axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}
ArrayAttr namesOf(MLIRContext *context, ArrayRef<StringRef> axes) {
  SmallVector<Attribute> names;
  for (StringRef a : axes)
    names.push_back(StringAttr::get(context, a));
  return ArrayAttr::get(context, names);
}
} // namespace

SmallVector<SmallVector<StringRef, 2>, 4> ShardingAttr::dimAxes() const {
  SmallVector<SmallVector<StringRef, 2>, 4> dims;
  for (Attribute d : getDims())
    dims.push_back(axesOf(d));
  return dims;
}

SmallVector<StringRef, 2> ShardingAttr::partialAxes() const { return axesOf(getPartial()); }

ShardingAttr ShardingAttr::get(MLIRContext *context, ArrayRef<SmallVector<StringRef, 2>> dims,
                               ArrayRef<StringRef> partial) {
  SmallVector<Attribute> perDim;
  for (const SmallVector<StringRef, 2> &axes : dims)
    perDim.push_back(namesOf(context, axes));
  return get(context, ArrayAttr::get(context, perDim), namesOf(context, partial));
}

std::optional<int64_t> ShardingAttr::splitDim(StringRef axis) const {
  for (auto [i, d] : llvm::enumerate(getDims()))
    for (Attribute a : cast<ArrayAttr>(d))
      if (cast<StringAttr>(a).getValue() == axis)
        return static_cast<int64_t>(i);
  return std::nullopt;
}
