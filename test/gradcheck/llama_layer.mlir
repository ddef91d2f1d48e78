// RUN: megac-gradcheck %s | FileCheck %s
// A tiny Llama (vocab 11, hidden 16, 4 query heads sharing 2 key/value heads, head_dim 4,
// SwiGLU ffn 20, RoPE, RMSNorm, 2 layers, untied LM head) whose layer is one function called
// twice. Projections are stored [out, in] as in Hugging Face, hence transpose_rhs.

// CHECK: model.embed_tokens.weight [11x16] {{.*}} PASS
// CHECK: model.layers.0.self_attn.q_proj.weight [16x16] {{.*}} PASS
// CHECK: model.layers.0.self_attn.k_proj.weight [8x16] {{.*}} PASS
// CHECK: model.layers.0.self_attn.v_proj.weight [8x16] {{.*}} PASS
// CHECK: model.layers.1.mlp.down_proj.weight [16x20] {{.*}} PASS
// CHECK: lm_head.weight [11x16] {{.*}} PASS
// CHECK-NOT: FAIL
// CHECK: gradcheck: 21 params, all passed

func.func private @llama_layer(
    %x: tensor<2x3x16xf32>, %n1: tensor<16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>,
    %wv: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %n2: tensor<16xf32>, %wg: tensor<20x16xf32>,
    %wu: tensor<20x16xf32>, %wd: tensor<16x20xf32>) -> tensor<2x3x16xf32> {
  %h1 = tx.rms_norm %x, %n1 eps 1.0e-5 : tensor<2x3x16xf32>, tensor<16xf32>
  %q0 = tx.matmul %h1, %wq transpose_rhs : tensor<2x3x16xf32>, tensor<16x16xf32> -> tensor<2x3x16xf32>
  %q1 = tx.reshape %q0 : tensor<2x3x16xf32> -> tensor<2x3x4x4xf32>
  %q = tx.rope %q1 theta 10000.0 : tensor<2x3x4x4xf32>
  %k0 = tx.matmul %h1, %wk transpose_rhs : tensor<2x3x16xf32>, tensor<8x16xf32> -> tensor<2x3x8xf32>
  %k1 = tx.reshape %k0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %k = tx.rope %k1 theta 10000.0 : tensor<2x3x2x4xf32>
  %v0 = tx.matmul %h1, %wv transpose_rhs : tensor<2x3x16xf32>, tensor<8x16xf32> -> tensor<2x3x8xf32>
  %v = tx.reshape %v0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %a = tx.attention %q, %k, %v causal scale 0.5 : tensor<2x3x4x4xf32>, tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32> -> tensor<2x3x4x4xf32>
  %a1 = tx.reshape %a : tensor<2x3x4x4xf32> -> tensor<2x3x16xf32>
  %o = tx.matmul %a1, %wo transpose_rhs : tensor<2x3x16xf32>, tensor<16x16xf32> -> tensor<2x3x16xf32>
  %r1 = tx.add %x, %o : tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %h2 = tx.rms_norm %r1, %n2 eps 1.0e-5 : tensor<2x3x16xf32>, tensor<16xf32>
  %g = tx.matmul %h2, %wg transpose_rhs : tensor<2x3x16xf32>, tensor<20x16xf32> -> tensor<2x3x20xf32>
  %u = tx.matmul %h2, %wu transpose_rhs : tensor<2x3x16xf32>, tensor<20x16xf32> -> tensor<2x3x20xf32>
  %s = tx.swiglu %g, %u : tensor<2x3x20xf32>, tensor<2x3x20xf32>
  %m = tx.matmul %s, %wd transpose_rhs : tensor<2x3x20xf32>, tensor<16x20xf32> -> tensor<2x3x16xf32>
  %r2 = tx.add %r1, %m : tensor<2x3x16xf32>, tensor<2x3x16xf32>
  return %r2 : tensor<2x3x16xf32>
}

func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %embed = tx.param "model.embed_tokens.weight" init(normal) : tensor<11x16xf32>
  %x0 = tx.embedding %embed[%ids] : tensor<11x16xf32>, tensor<2x3xi32> -> tensor<2x3x16xf32>

  %n1_0 = tx.param "model.layers.0.input_layernorm.weight" init(ones) : tensor<16xf32>
  %wq0 = tx.param "model.layers.0.self_attn.q_proj.weight" init(normal) : tensor<16x16xf32>
  %wk0 = tx.param "model.layers.0.self_attn.k_proj.weight" init(normal) : tensor<8x16xf32>
  %wv0 = tx.param "model.layers.0.self_attn.v_proj.weight" init(normal) : tensor<8x16xf32>
  %wo0 = tx.param "model.layers.0.self_attn.o_proj.weight" init(normal) : tensor<16x16xf32>
  %n2_0 = tx.param "model.layers.0.post_attention_layernorm.weight" init(ones) : tensor<16xf32>
  %wg0 = tx.param "model.layers.0.mlp.gate_proj.weight" init(normal) : tensor<20x16xf32>
  %wu0 = tx.param "model.layers.0.mlp.up_proj.weight" init(normal) : tensor<20x16xf32>
  %wd0 = tx.param "model.layers.0.mlp.down_proj.weight" init(normal) : tensor<16x20xf32>
  %x1 = func.call @llama_layer(%x0, %n1_0, %wq0, %wk0, %wv0, %wo0, %n2_0, %wg0, %wu0, %wd0)
      : (tensor<2x3x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>,
         tensor<16x16xf32>, tensor<16xf32>, tensor<20x16xf32>, tensor<20x16xf32>, tensor<16x20xf32>)
      -> tensor<2x3x16xf32>

  %n1_1 = tx.param "model.layers.1.input_layernorm.weight" init(ones) : tensor<16xf32>
  %wq1 = tx.param "model.layers.1.self_attn.q_proj.weight" init(normal) : tensor<16x16xf32>
  %wk1 = tx.param "model.layers.1.self_attn.k_proj.weight" init(normal) : tensor<8x16xf32>
  %wv1 = tx.param "model.layers.1.self_attn.v_proj.weight" init(normal) : tensor<8x16xf32>
  %wo1 = tx.param "model.layers.1.self_attn.o_proj.weight" init(normal) : tensor<16x16xf32>
  %n2_1 = tx.param "model.layers.1.post_attention_layernorm.weight" init(ones) : tensor<16xf32>
  %wg1 = tx.param "model.layers.1.mlp.gate_proj.weight" init(normal) : tensor<20x16xf32>
  %wu1 = tx.param "model.layers.1.mlp.up_proj.weight" init(normal) : tensor<20x16xf32>
  %wd1 = tx.param "model.layers.1.mlp.down_proj.weight" init(normal) : tensor<16x20xf32>
  %x2 = func.call @llama_layer(%x1, %n1_1, %wq1, %wk1, %wv1, %wo1, %n2_1, %wg1, %wu1, %wd1)
      : (tensor<2x3x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>,
         tensor<16x16xf32>, tensor<16xf32>, tensor<20x16xf32>, tensor<20x16xf32>, tensor<16x20xf32>)
      -> tensor<2x3x16xf32>

  %norm = tx.param "model.norm.weight" init(ones) : tensor<16xf32>
  %xf = tx.rms_norm %x2, %norm eps 1.0e-5 : tensor<2x3x16xf32>, tensor<16xf32>
  %head = tx.param "lm_head.weight" init(normal) : tensor<11x16xf32>
  %logits = tx.matmul %xf, %head transpose_rhs : tensor<2x3x16xf32>, tensor<11x16xf32> -> tensor<2x3x11xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x11xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
