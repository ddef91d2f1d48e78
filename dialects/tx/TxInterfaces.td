// Op interfaces of the `tx` dialect.
#ifndef MEGAC_TX_INTERFACES_TD
#define MEGAC_TX_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Tx_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::megac::tx";
  let description = [{
    An op that knows its vector-Jacobian product: given the cotangents of its results, it
    builds the ops that compute the cotangents of its operands. `megac-autodiff` calls this
    on every op of a function, last to first.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the operand cotangents at the builder's insertion point. `resultCotangents`
        has one value per result (never null). Returns one value per operand, null where the
        operand is not differentiable (token ids, labels).
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultCotangents)>,
  ];
}

#endif // MEGAC_TX_INTERFACES_TD
