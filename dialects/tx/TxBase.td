// The `tx` dialect: transformer training graphs on ranked tensors with value semantics.
#ifndef MEGAC_TX_BASE_TD
#define MEGAC_TX_BASE_TD

include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Tx_Dialect : Dialect {
  let name = "tx";
  let cppNamespace = "::megac::tx";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
  let summary = "Transformer training graphs: parameters, layers and loss on ranked tensors";
  let description = [{
    The `tx` dialect describes one microbatch of a transformer's forward pass (and, after
    `megac-autodiff`, its backward pass) as value-semantics operations on statically shaped
    ranked tensors. Every operation is one step of the math a model author would write down:
    an embedding lookup, a matmul, a norm, an activation, attention, the loss.

    Layout conventions used by all ops:
    - activations are `[batch, seq, hidden]`;
    - attention heads are split as `[batch, seq, heads, head_dim]`;
    - weights are stored `[in, out]` (so `y = x @ W`), unless a matmul says `transpose_rhs`;
    - token ids and labels are `i32` or `i64` tensors `[batch, seq]`.

    Verifiers reject bad shapes with messages naming the operand, the shape found and the
    shape expected.
  }];
}

class Tx_Op<string mnemonic, list<Trait> traits = []> : Op<Tx_Dialect, mnemonic, traits>;

def Tx_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def Tx_IdTensor : StaticShapeTensorOf<[I32, I64]>;
def Tx_FloatScalar : 0DTensorOf<[AnyFloat]>;

def Tx_ParamInit : I32EnumAttr<"ParamInit", "how a parameter is initialised without a checkpoint", [
    I32EnumAttrCase<"Normal", 0, "normal">,
    I32EnumAttrCase<"Zeros", 1, "zeros">,
    I32EnumAttrCase<"Ones", 2, "ones">,
    // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in the full tensor's last dimension: PyTorch's
    // kaiming_uniform_(a = sqrt 5), nn.Linear's default and PEFT's for LoRA's A
    I32EnumAttrCase<"KaimingUniform", 3, "kaiming_uniform">,
  ]> {
  let cppNamespace = "::megac::tx";
}

def Tx_ParamRole : I32EnumAttr<"ParamRole", "what a parameter is in Megatron's tensor-parallel placement", [
    // [vocab, hidden] word embedding or LM head: split on the vocabulary (VocabParallelEmbedding)
    I32EnumAttrCase<"VocabEmbedding", 0, "vocab_embedding">,
    // learned positions: whole on every rank
    I32EnumAttrCase<"PositionEmbedding", 1, "position_embedding">,
    // ColumnParallelLinear (q, k, v, fc1, gate, up): weight and bias split on the output features
    I32EnumAttrCase<"ColumnParallelWeight", 2, "column_parallel_weight">,
    I32EnumAttrCase<"ColumnParallelBias", 3, "column_parallel_bias">,
    // RowParallelLinear (attention output, fc2, down): weight split on the input features, bias
    // whole (added once, after the sum over ranks)
    I32EnumAttrCase<"RowParallelWeight", 4, "row_parallel_weight">,
    I32EnumAttrCase<"RowParallelBias", 5, "row_parallel_bias">,
    // a norm's weight or bias: whole on every rank
    I32EnumAttrCase<"Norm", 6, "norm">,
    // a mixture of experts' router (gate) [experts, hidden]: whole on every rank
    I32EnumAttrCase<"Router", 7, "router">,
    // the experts' weights stacked [experts, ...] (one checkpoint tensor per expert: `*` in the
    // name is its index); with expert tensor parallelism split on parallel_dim (each expert's ffn
    // features), else whole on every tensor-parallel rank
    I32EnumAttrCase<"ExpertWeight", 8, "expert_weight">,
  ]> {
  let cppNamespace = "::megac::tx";
}

def Tx_Metric : I32EnumAttr<"Metric", "a value the training log reports besides the language model's loss", [
    // a mixture of experts' load-balancing loss, before its coefficient (as the model defines it)
    I32EnumAttrCase<"LoadBalancingLoss", 0, "load_balancing_loss">,
    // a mixture of experts' router z-loss, before its coefficient (summed over the layers)
    I32EnumAttrCase<"ZLoss", 1, "z_loss">,
  ]> {
  let cppNamespace = "::megac::tx";
}

def Tx_GeluApproximation : I32EnumAttr<"GeluApproximation", "which GELU formula", [
    I32EnumAttrCase<"Tanh", 0, "tanh">,
    I32EnumAttrCase<"Erf", 1, "erf">,
  ]> {
  let cppNamespace = "::megac::tx";
}

#endif // MEGAC_TX_BASE_TD
