// Attributes of the `tx` dialect.
#ifndef MEGAC_TX_ATTRS_TD
#define MEGAC_TX_ATTRS_TD

include "tx/TxBase.td"
include "mlir/IR/AttrTypeBase.td"

def Tx_ShardingAttr : AttrDef<Tx_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a value is spread over the axes of @grid";
  // (No closing brace right before a closing bracket below: TableGen ends the text there.)
  let description = [{
    One entry per dimension of the value, listing the grid axes that dimension is split over
    (`{ }`: whole), and `partial` the axes over which the value is a partial sum (each rank holds
    a part; the value is their sum). Read like Shardy's `sdy.sharding`:

    ```mlir
    #tx.sharding<[{}, {"tp"}, {} ]>              // [batch, seq, hidden] split along the sequence
    #tx.sharding<[{}, {}, {} ], partial={"tp"}>  // partial sums of a row-parallel layer
    #tx.sharding<[{}, {} ]>                      // whole on every rank
    ```

    megac-tensor-parallel puts one on every value it shards (`megac.sharding` on an op, one per
    result, and on function arguments and results); the types there are the rank-local shapes.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$partial);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The dimension split over `axis`, if any.
    std::optional<int64_t> splitDim(::llvm::StringRef axis) const;
    /// The axes of each dimension, and those of the partial sum, as lists (what the sharding
    /// passes compute with); `get` makes the attribute back from them.
    ::llvm::SmallVector<::llvm::SmallVector<::llvm::StringRef, 2>, 4> dimAxes() const;
    ::llvm::SmallVector<::llvm::StringRef, 2> partialAxes() const;
    static ShardingAttr get(::mlir::MLIRContext *context,
                            ::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef, 2>> dims,
                            ::llvm::ArrayRef<::llvm::StringRef> partial);
  }];
}

#endif // MEGAC_TX_ATTRS_TD
