// RUN: megac-gradcheck %s | FileCheck %s
// A tiny GPT-2 (vocab 11, hidden 8, 2 heads, ffn 32, 2 layers, tied LM head) whose layer is
// one function called twice. The fused c_attn checkpoint tensors are read as q/k/v blocks, so
// their gradient is assembled from three param_grads each. Dropout (rate 0) sits where GPT-2
// has it.

// CHECK: transformer.wte.weight [11x8] {{.*}} PASS
// CHECK: transformer.wpe.weight [3x8] {{.*}} PASS
// CHECK: transformer.h.0.attn.c_attn.weight [8x24] {{.*}} PASS
// CHECK: transformer.h.0.attn.c_attn.bias [24] {{.*}} PASS
// CHECK: transformer.h.1.mlp.c_proj.bias [8] {{.*}} PASS
// CHECK: transformer.ln_f.bias [8] {{.*}} PASS
// CHECK-NOT: FAIL
// CHECK: gradcheck: 28 params, all passed

func.func private @gpt2_layer(
    %x: tensor<2x3x8xf32>, %ln1_w: tensor<8xf32>, %ln1_b: tensor<8xf32>,
    %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>, %wv: tensor<8x8xf32>,
    %bq: tensor<8xf32>, %bk: tensor<8xf32>, %bv: tensor<8xf32>,
    %wo: tensor<8x8xf32>, %bo: tensor<8xf32>, %ln2_w: tensor<8xf32>, %ln2_b: tensor<8xf32>,
    %fc1_w: tensor<8x32xf32>, %fc1_b: tensor<32xf32>, %fc2_w: tensor<32x8xf32>, %fc2_b: tensor<8xf32>)
    -> tensor<2x3x8xf32> {
  %h1 = tx.layer_norm %x, %ln1_w, %ln1_b eps 1.0e-5 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>
  %q0 = tx.matmul %h1, %wq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %q1 = tx.add %q0, %bq : tensor<2x3x8xf32>, tensor<8xf32>
  %q = tx.reshape %q1 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %k0 = tx.matmul %h1, %wk : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %k1 = tx.add %k0, %bk : tensor<2x3x8xf32>, tensor<8xf32>
  %k = tx.reshape %k1 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %v0 = tx.matmul %h1, %wv : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %v1 = tx.add %v0, %bv : tensor<2x3x8xf32>, tensor<8xf32>
  %v = tx.reshape %v1 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %a = tx.attention %q, %k, %v causal scale 0.5 : tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32> -> tensor<2x3x2x4xf32>
  %a1 = tx.reshape %a : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %o0 = tx.matmul %a1, %wo : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %o1 = tx.add %o0, %bo : tensor<2x3x8xf32>, tensor<8xf32>
  %o = tx.dropout %o1 rate 0.0 stream 1 : tensor<2x3x8xf32>
  %r1 = tx.add %x, %o : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %h2 = tx.layer_norm %r1, %ln2_w, %ln2_b eps 1.0e-5 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>
  %u0 = tx.matmul %h2, %fc1_w : tensor<2x3x8xf32>, tensor<8x32xf32> -> tensor<2x3x32xf32>
  %u = tx.add %u0, %fc1_b : tensor<2x3x32xf32>, tensor<32xf32>
  %g = tx.gelu %u (tanh) : tensor<2x3x32xf32>
  %m0 = tx.matmul %g, %fc2_w : tensor<2x3x32xf32>, tensor<32x8xf32> -> tensor<2x3x8xf32>
  %m1 = tx.add %m0, %fc2_b : tensor<2x3x8xf32>, tensor<8xf32>
  %m = tx.dropout %m1 rate 0.0 stream 2 : tensor<2x3x8xf32>
  %r2 = tx.add %r1, %m : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %r2 : tensor<2x3x8xf32>
}

func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %wte = tx.param "transformer.wte.weight" init(normal, std = 0.02) : tensor<11x8xf32>
  %wpe = tx.param "transformer.wpe.weight" init(normal, std = 0.01) : tensor<3x8xf32>
  %tok = tx.embedding %wte[%ids] : tensor<11x8xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
  %emb = tx.add %tok, %wpe : tensor<2x3x8xf32>, tensor<3x8xf32>
  %x0 = tx.dropout %emb rate 0.0 stream 0 : tensor<2x3x8xf32>

  %ln1_w0 = tx.param "transformer.h.0.ln_1.weight" init(ones) : tensor<8xf32>
  %ln1_b0 = tx.param "transformer.h.0.ln_1.bias" init(zeros) : tensor<8xf32>
  %wq0 = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 0] of [8, 24] init(normal) : tensor<8x8xf32>
  %wk0 = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 8] of [8, 24] init(normal) : tensor<8x8xf32>
  %wv0 = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 16] of [8, 24] init(normal) : tensor<8x8xf32>
  %bq0 = tx.param "transformer.h.0.attn.c_attn.bias" at [0] of [24] init(zeros) : tensor<8xf32>
  %bk0 = tx.param "transformer.h.0.attn.c_attn.bias" at [8] of [24] init(zeros) : tensor<8xf32>
  %bv0 = tx.param "transformer.h.0.attn.c_attn.bias" at [16] of [24] init(zeros) : tensor<8xf32>
  %wo0 = tx.param "transformer.h.0.attn.c_proj.weight" init(normal) : tensor<8x8xf32>
  %bo0 = tx.param "transformer.h.0.attn.c_proj.bias" init(zeros) : tensor<8xf32>
  %ln2_w0 = tx.param "transformer.h.0.ln_2.weight" init(ones) : tensor<8xf32>
  %ln2_b0 = tx.param "transformer.h.0.ln_2.bias" init(zeros) : tensor<8xf32>
  %fc1_w0 = tx.param "transformer.h.0.mlp.c_fc.weight" init(normal) : tensor<8x32xf32>
  %fc1_b0 = tx.param "transformer.h.0.mlp.c_fc.bias" init(zeros) : tensor<32xf32>
  %fc2_w0 = tx.param "transformer.h.0.mlp.c_proj.weight" init(normal) : tensor<32x8xf32>
  %fc2_b0 = tx.param "transformer.h.0.mlp.c_proj.bias" init(zeros) : tensor<8xf32>
  %x1 = func.call @gpt2_layer(%x0, %ln1_w0, %ln1_b0, %wq0, %wk0, %wv0, %bq0, %bk0, %bv0, %wo0, %bo0,
                              %ln2_w0, %ln2_b0, %fc1_w0, %fc1_b0, %fc2_w0, %fc2_b0)
      : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>,
         tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
         tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>

  %ln1_w1 = tx.param "transformer.h.1.ln_1.weight" init(ones) : tensor<8xf32>
  %ln1_b1 = tx.param "transformer.h.1.ln_1.bias" init(zeros) : tensor<8xf32>
  %wq1 = tx.param "transformer.h.1.attn.c_attn.weight" at [0, 0] of [8, 24] init(normal) : tensor<8x8xf32>
  %wk1 = tx.param "transformer.h.1.attn.c_attn.weight" at [0, 8] of [8, 24] init(normal) : tensor<8x8xf32>
  %wv1 = tx.param "transformer.h.1.attn.c_attn.weight" at [0, 16] of [8, 24] init(normal) : tensor<8x8xf32>
  %bq1 = tx.param "transformer.h.1.attn.c_attn.bias" at [0] of [24] init(zeros) : tensor<8xf32>
  %bk1 = tx.param "transformer.h.1.attn.c_attn.bias" at [8] of [24] init(zeros) : tensor<8xf32>
  %bv1 = tx.param "transformer.h.1.attn.c_attn.bias" at [16] of [24] init(zeros) : tensor<8xf32>
  %wo1 = tx.param "transformer.h.1.attn.c_proj.weight" init(normal) : tensor<8x8xf32>
  %bo1 = tx.param "transformer.h.1.attn.c_proj.bias" init(zeros) : tensor<8xf32>
  %ln2_w1 = tx.param "transformer.h.1.ln_2.weight" init(ones) : tensor<8xf32>
  %ln2_b1 = tx.param "transformer.h.1.ln_2.bias" init(zeros) : tensor<8xf32>
  %fc1_w1 = tx.param "transformer.h.1.mlp.c_fc.weight" init(normal) : tensor<8x32xf32>
  %fc1_b1 = tx.param "transformer.h.1.mlp.c_fc.bias" init(zeros) : tensor<32xf32>
  %fc2_w1 = tx.param "transformer.h.1.mlp.c_proj.weight" init(normal) : tensor<32x8xf32>
  %fc2_b1 = tx.param "transformer.h.1.mlp.c_proj.bias" init(zeros) : tensor<8xf32>
  %x2 = func.call @gpt2_layer(%x1, %ln1_w1, %ln1_b1, %wq1, %wk1, %wv1, %bq1, %bk1, %bv1, %wo1, %bo1,
                              %ln2_w1, %ln2_b1, %fc1_w1, %fc1_b1, %fc2_w1, %fc2_b1)
      : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>,
         tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
         tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>

  %lnf_w = tx.param "transformer.ln_f.weight" init(ones) : tensor<8xf32>
  %lnf_b = tx.param "transformer.ln_f.bias" init(zeros) : tensor<8xf32>
  %xf = tx.layer_norm %x2, %lnf_w, %lnf_b eps 1.0e-5 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>
  %logits = tx.matmul %xf, %wte transpose_rhs : tensor<2x3x8xf32>, tensor<11x8xf32> -> tensor<2x3x11xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x11xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
