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

def Tx_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::megac::tx";
  let description = [{
    An op that knows how Megatron's tensor parallelism shards it: from its operands' shardings
    (replicated, split along a dimension, or partial sums) it picks its results' shardings and
    asks for a collective where an operand must change, naming the Megatron rule that needs it.
    `megac-tensor-parallel` calls this on every op of the joint forward + backward, in order.
    The rules live in dialects/tx/TxSharding.cpp.
  }];
  let methods = [
    InterfaceMethod<[{
        Sets the sharding of every result through `rewriter` (and may require other shardings
        of the operands, or replace the op by a sharded equivalent).
      }],
      "::mlir::LogicalResult", "shard", (ins "::megac::tx::ShardingRewriter &":$rewriter)>,
    InterfaceMethod<[{
        The op's sharding rule as data, in factors (dialects/tx/TxFactorRule.h): which
        dimensions of its operands and results move together, which it sums over and which
        it cannot split. What the maths allows, for propagation to choose from; printed by
        `megac-test-factor-rules`.
      }],
      "::megac::tx::FactorRule", "getFactorRule", (ins)>,
  ];
}

def Tx_GemmOpInterface : OpInterface<"GemmOpInterface"> {
  let cppNamespace = "::megac::tx";
  let description = [{
    An op that is one GEMM (or a batch of equal ones): its m, n, k and batch, computed once from
    its operands' shapes and transpose flags (dialects/tx/TxGemm.h). The verifier, the sharding
    rule, the VJP, the emitter's kernel arguments and the cost model's FLOPs read them here.
  }];
  let methods = [
    InterfaceMethod<[{
        The GEMM's sizes and the operand dimensions they come from.
      }],
      "::megac::tx::GemmShape", "getGemmShape", (ins)>,
  ];
}

def Tx_KernelCallOpInterface : OpInterface<"KernelCallOpInterface"> {
  let cppNamespace = "::megac::tx";
  let description = [{
    An op that runs as one call of a runtime kernel: the kernel (dialects/tx/RuntimeKernels.def)
    and its arguments in order — buffers, the sizes the kernel takes computed from the op's
    shapes, its attributes — as data (dialects/tx/TxKernelCall.h). The implementations live in
    dialects/tx/TxKernelCalls.cpp; the C++ and CUDA emitters print any op that has one, and
    `megac-test-kernel-calls` prints them for lit tests.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's kernel call; `decode` when the function is generation's decode step (one
        position, reading and extending the KV cache). Fails, with an error on the op, for
        what the kernels cannot run.
      }],
      "::mlir::FailureOr<::megac::tx::KernelCall>", "getKernelCall", (ins "bool":$decode)>,
  ];
}

def Tx_AttentionOpInterface : OpInterface<"AttentionOpInterface"> {
  let cppNamespace = "::megac::tx";
  let description = [{
    Scaled dot-product attention or its gradient: the sizes of its score matrix and the share of
    it a flash-style kernel computes (dialects/tx/TxAttention.h), which the cost model reads. An
    attention variant (a mask, a window) changes its own implementation, not the cost model.
  }];
  let methods = [
    InterfaceMethod<[{
        The score matrix's sizes, the share computed and the GEMMs run over it.
      }],
      "::megac::tx::AttentionShape", "getAttentionShape", (ins)>,
    InterfaceMethod<[{
        The queries, [batch, seq, heads, head_dim].
      }],
      "::mlir::Value", "getQuery", (ins), [{ return $_op.getQuery(); }]>,
  ];
}

def Tx_ReferenceEvalOpInterface : OpInterface<"ReferenceEvalOpInterface"> {
  let cppNamespace = "::megac::tx";
  let description = [{
    An op the double-precision reference interpreter (lib/Eval, megac-gradcheck) can run: it
    checks what its verifier cannot (ids in range) and calls its reference kernel
    (include/megac/Eval/Kernels.h). The implementations live in dialects/tx/TxReferenceEval.cpp.
  }];
  let methods = [
    InterfaceMethod<[{
        One result tensor per op result, from one tensor per operand; failure after an error
        on the op.
      }],
      "::mlir::FailureOr<::llvm::SmallVector<::megac::eval::Tensor>>", "evaluate",
      (ins "::llvm::ArrayRef<const ::megac::eval::Tensor *>":$operands)>,
  ];
}

/// The trait of an op the reference interpreter runs.
defvar Tx_ReferenceEval = DeclareOpInterfaceMethods<Tx_ReferenceEvalOpInterface>;

/// The trait of an op that lowers to one runtime kernel call.
defvar Tx_KernelCall = DeclareOpInterfaceMethods<Tx_KernelCallOpInterface>;

/// The trait of an op with a tensor-parallel sharding rule.
defvar Tx_ShardingRule = DeclareOpInterfaceMethods<Tx_ShardingRuleOpInterface>;

#endif // MEGAC_TX_INTERFACES_TD
