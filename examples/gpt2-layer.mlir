// One GPT-2 (124M) transformer layer, forward, for a microbatch of 8 x 1024 tokens.
// Hand-written to show the `tx` dialect; `megac compile` generates the same from a spec (its
// 00-frontend.mlir), each parameter with its role in Megatron's tensor-parallel placement.
// The fused checkpoint tensor c_attn [768, 2304] is read as three blocks: query, key, value.
func.func @gpt2_layer(%x: tensor<8x1024x768xf32>) -> tensor<8x1024x768xf32> {
  %ln1_w = tx.param "transformer.h.0.ln_1.weight" role norm init(ones) : tensor<768xf32>
  %ln1_b = tx.param "transformer.h.0.ln_1.bias" role norm init(zeros) : tensor<768xf32>
  %wq = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 0] of [768, 2304] role column_parallel_weight parallel_dim 1 init(normal, std = 0.02) : tensor<768x768xf32>
  %wk = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 768] of [768, 2304] role column_parallel_weight parallel_dim 1 init(normal, std = 0.02) : tensor<768x768xf32>
  %wv = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 1536] of [768, 2304] role column_parallel_weight parallel_dim 1 init(normal, std = 0.02) : tensor<768x768xf32>
  %bq = tx.param "transformer.h.0.attn.c_attn.bias" at [0] of [2304] role column_parallel_bias parallel_dim 0 init(zeros) : tensor<768xf32>
  %bk = tx.param "transformer.h.0.attn.c_attn.bias" at [768] of [2304] role column_parallel_bias parallel_dim 0 init(zeros) : tensor<768xf32>
  %bv = tx.param "transformer.h.0.attn.c_attn.bias" at [1536] of [2304] role column_parallel_bias parallel_dim 0 init(zeros) : tensor<768xf32>
  %wo = tx.param "transformer.h.0.attn.c_proj.weight" role row_parallel_weight parallel_dim 0 init(normal, std = 0.0040824829) : tensor<768x768xf32>
  %bo = tx.param "transformer.h.0.attn.c_proj.bias" role row_parallel_bias init(zeros) : tensor<768xf32>
  %ln2_w = tx.param "transformer.h.0.ln_2.weight" role norm init(ones) : tensor<768xf32>
  %ln2_b = tx.param "transformer.h.0.ln_2.bias" role norm init(zeros) : tensor<768xf32>
  %fc1_w = tx.param "transformer.h.0.mlp.c_fc.weight" role column_parallel_weight parallel_dim 1 init(normal, std = 0.02) : tensor<768x3072xf32>
  %fc1_b = tx.param "transformer.h.0.mlp.c_fc.bias" role column_parallel_bias parallel_dim 0 init(zeros) : tensor<3072xf32>
  %fc2_w = tx.param "transformer.h.0.mlp.c_proj.weight" role row_parallel_weight parallel_dim 0 init(normal, std = 0.0040824829) : tensor<3072x768xf32>
  %fc2_b = tx.param "transformer.h.0.mlp.c_proj.bias" role row_parallel_bias init(zeros) : tensor<768xf32>

  // attention block: x + c_proj(attention(ln_1(x)))
  %h1 = tx.layer_norm %x, %ln1_w, %ln1_b eps 1.0e-5 : tensor<8x1024x768xf32>, tensor<768xf32>, tensor<768xf32>
  %q0 = tx.matmul %h1, %wq : tensor<8x1024x768xf32>, tensor<768x768xf32> -> tensor<8x1024x768xf32>
  %q1 = tx.add %q0, %bq : tensor<8x1024x768xf32>, tensor<768xf32>
  %q = tx.reshape %q1 : tensor<8x1024x768xf32> -> tensor<8x1024x12x64xf32>
  %k0 = tx.matmul %h1, %wk : tensor<8x1024x768xf32>, tensor<768x768xf32> -> tensor<8x1024x768xf32>
  %k1 = tx.add %k0, %bk : tensor<8x1024x768xf32>, tensor<768xf32>
  %k = tx.reshape %k1 : tensor<8x1024x768xf32> -> tensor<8x1024x12x64xf32>
  %v0 = tx.matmul %h1, %wv : tensor<8x1024x768xf32>, tensor<768x768xf32> -> tensor<8x1024x768xf32>
  %v1 = tx.add %v0, %bv : tensor<8x1024x768xf32>, tensor<768xf32>
  %v = tx.reshape %v1 : tensor<8x1024x768xf32> -> tensor<8x1024x12x64xf32>
  %a = tx.attention %q, %k, %v causal scale 0.125 : tensor<8x1024x12x64xf32>, tensor<8x1024x12x64xf32>, tensor<8x1024x12x64xf32> -> tensor<8x1024x12x64xf32>
  %a1 = tx.reshape %a : tensor<8x1024x12x64xf32> -> tensor<8x1024x768xf32>
  %o0 = tx.matmul %a1, %wo : tensor<8x1024x768xf32>, tensor<768x768xf32> -> tensor<8x1024x768xf32>
  %o = tx.add %o0, %bo : tensor<8x1024x768xf32>, tensor<768xf32>
  %r1 = tx.add %x, %o : tensor<8x1024x768xf32>, tensor<8x1024x768xf32>

  // MLP block: r1 + c_proj(gelu(c_fc(ln_2(r1))))
  %h2 = tx.layer_norm %r1, %ln2_w, %ln2_b eps 1.0e-5 : tensor<8x1024x768xf32>, tensor<768xf32>, tensor<768xf32>
  %u0 = tx.matmul %h2, %fc1_w : tensor<8x1024x768xf32>, tensor<768x3072xf32> -> tensor<8x1024x3072xf32>
  %u = tx.add %u0, %fc1_b : tensor<8x1024x3072xf32>, tensor<3072xf32>
  %g = tx.gelu %u (tanh) : tensor<8x1024x3072xf32>
  %m0 = tx.matmul %g, %fc2_w : tensor<8x1024x3072xf32>, tensor<3072x768xf32> -> tensor<8x1024x768xf32>
  %m = tx.add %m0, %fc2_b : tensor<8x1024x768xf32>, tensor<768xf32>
  %r2 = tx.add %r1, %m : tensor<8x1024x768xf32>, tensor<8x1024x768xf32>
  return %r2 : tensor<8x1024x768xf32>
}
