// One Llama-style transformer layer (hidden 2048, 16 query heads, 4 key/value groups, SwiGLU
// ffn 5632, RoPE), forward, for a microbatch of 2 x 2048 tokens. Hand-written to show the
// `tx` dialect. Hugging Face stores Llama projections as [out, in], hence transpose_rhs.
func.func @llama_layer(%x: tensor<2x2048x2048xf32>) -> tensor<2x2048x2048xf32> {
  %n1 = tx.param "model.layers.0.input_layernorm.weight" role norm init(ones) : tensor<2048xf32>
  %wq = tx.param "model.layers.0.self_attn.q_proj.weight" role column_parallel_weight parallel_dim 0 init(normal, std = 0.02) : tensor<2048x2048xf32>
  %wk = tx.param "model.layers.0.self_attn.k_proj.weight" role column_parallel_weight parallel_dim 0 init(normal, std = 0.02) : tensor<512x2048xf32>
  %wv = tx.param "model.layers.0.self_attn.v_proj.weight" role column_parallel_weight parallel_dim 0 init(normal, std = 0.02) : tensor<512x2048xf32>
  %wo = tx.param "model.layers.0.self_attn.o_proj.weight" role row_parallel_weight parallel_dim 1 init(normal, std = 0.0025) : tensor<2048x2048xf32>
  %n2 = tx.param "model.layers.0.post_attention_layernorm.weight" role norm init(ones) : tensor<2048xf32>
  %wg = tx.param "model.layers.0.mlp.gate_proj.weight" role column_parallel_weight parallel_dim 0 init(normal, std = 0.02) : tensor<5632x2048xf32>
  %wu = tx.param "model.layers.0.mlp.up_proj.weight" role column_parallel_weight parallel_dim 0 init(normal, std = 0.02) : tensor<5632x2048xf32>
  %wd = tx.param "model.layers.0.mlp.down_proj.weight" role row_parallel_weight parallel_dim 1 init(normal, std = 0.0025) : tensor<2048x5632xf32>

  // attention block with grouped query heads: 16 query heads share 4 key/value heads
  %h1 = tx.rms_norm %x, %n1 eps 1.0e-5 : tensor<2x2048x2048xf32>, tensor<2048xf32>
  %q0 = tx.matmul %h1, %wq transpose_rhs : tensor<2x2048x2048xf32>, tensor<2048x2048xf32> -> tensor<2x2048x2048xf32>
  %q1 = tx.reshape %q0 : tensor<2x2048x2048xf32> -> tensor<2x2048x16x128xf32>
  %q = tx.rope %q1 theta 10000.0 : tensor<2x2048x16x128xf32>
  %k0 = tx.matmul %h1, %wk transpose_rhs : tensor<2x2048x2048xf32>, tensor<512x2048xf32> -> tensor<2x2048x512xf32>
  %k1 = tx.reshape %k0 : tensor<2x2048x512xf32> -> tensor<2x2048x4x128xf32>
  %k = tx.rope %k1 theta 10000.0 : tensor<2x2048x4x128xf32>
  %v0 = tx.matmul %h1, %wv transpose_rhs : tensor<2x2048x2048xf32>, tensor<512x2048xf32> -> tensor<2x2048x512xf32>
  %v = tx.reshape %v0 : tensor<2x2048x512xf32> -> tensor<2x2048x4x128xf32>
  %a = tx.attention %q, %k, %v causal scale 0.08838834764831845 : tensor<2x2048x16x128xf32>, tensor<2x2048x4x128xf32>, tensor<2x2048x4x128xf32> -> tensor<2x2048x16x128xf32>
  %a1 = tx.reshape %a : tensor<2x2048x16x128xf32> -> tensor<2x2048x2048xf32>
  %o = tx.matmul %a1, %wo transpose_rhs : tensor<2x2048x2048xf32>, tensor<2048x2048xf32> -> tensor<2x2048x2048xf32>
  %r1 = tx.add %x, %o : tensor<2x2048x2048xf32>, tensor<2x2048x2048xf32>

  // MLP block: r1 + down(silu(gate(h)) * up(h))
  %h2 = tx.rms_norm %r1, %n2 eps 1.0e-5 : tensor<2x2048x2048xf32>, tensor<2048xf32>
  %g = tx.matmul %h2, %wg transpose_rhs : tensor<2x2048x2048xf32>, tensor<5632x2048xf32> -> tensor<2x2048x5632xf32>
  %u = tx.matmul %h2, %wu transpose_rhs : tensor<2x2048x2048xf32>, tensor<5632x2048xf32> -> tensor<2x2048x5632xf32>
  %s = tx.swiglu %g, %u : tensor<2x2048x5632xf32>, tensor<2x2048x5632xf32>
  %m = tx.matmul %s, %wd transpose_rhs : tensor<2x2048x5632xf32>, tensor<2048x5632xf32> -> tensor<2x2048x2048xf32>
  %r2 = tx.add %r1, %m : tensor<2x2048x2048xf32>, tensor<2x2048x2048xf32>
  return %r2 : tensor<2x2048x2048xf32>
}
