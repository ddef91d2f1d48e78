// RUN: megac-opt %s --split-input-file --megac-test-kernel-calls --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s
// RUN: megac-opt %s --split-input-file --megac-test-kernel-calls=decode --mlir-print-op-on-diagnostic=false 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DECODE
// Each op's runtime kernel call (KernelCallOpInterface, dialects/tx/TxKernelCalls.cpp), one op
// per check line: the kernel, then its arguments in order, with the shape arithmetic done (rows,
// m/n/k, strides, outer/inner). The C++ and CUDA emitters print exactly these calls.

// CHECK-LABEL: remark: embedding_forward(%0, %arg1, %arg2, tokens=32, vocab=64, dim=32){{$}}
// CHECK:       remark: gemm(%1, %arg0, %arg3, m=32, n=96, k=32, transpose_a=false, transpose_b=false){{$}}
// A batched product: per-entry strides; the scale is the GEMM's alpha.
// CHECK:       remark: gemm_batched(%2, %arg0, %arg5, batch=2, m=16, n=16, k=32, transpose_a=false, transpose_b=true, stride_a=512, stride_b=512, stride_c=256, alpha=0.5){{$}}
// A broadcast add: the bias repeats over the 32 rows.
// CHECK:       remark: add(%3, %arg0, %arg4, outer=32, inner=32){{$}}
// CHECK:       remark: slice(%4, %arg0, outer=32, in_dim=32, out_dim=16, inner=1, offset=16){{$}}
// CHECK:       remark: pad(%5, %4, outer=32, in_dim=16, out_dim=32, inner=1, offset=0){{$}}
// CHECK:       remark: layer_norm_forward(%6, %arg0, %arg4, %arg4, rows=32, dim=32, eps=1e-05){{$}}
// CHECK:       remark: rms_norm_forward(%7, %arg0, %arg4, rows=32, dim=32, eps=1e-06){{$}}
// CHECK:       remark: gelu_tanh_forward(%8, %arg0, n=1024){{$}}
// CHECK:       remark: gelu_erf_forward(%9, %arg0, n=1024){{$}}
// CHECK:       remark: swiglu_forward(%10, %arg0, %arg0, n=1024){{$}}
// Dropout: the mask is a function of the global position, of the block this rank holds.
// CHECK:       remark: apply_dropout(%11, %arg0, dropout_block(ctx, rate=0.1, stream=3, shape={2, 16, 32}, offset={0, 0, 0}, extent={0, 16, 32})){{$}}
// At rate 0, a copy.
// CHECK:       remark: copy_buffer(%12, %arg0, bytes=4096){{$}}
// CHECK:       remark: rope_forward(%14, %13, batch=2, seq=16, heads=4, head_dim=8, theta=10000, position_offset=0, inverse=false){{$}}
// CHECK:       remark: slice(%15, %13, outer=32, in_dim=4, out_dim=2, inner=8, offset=0){{$}}
// CHECK:       remark: attention_forward(%16, %14, %15, %15, batch=2, seq=16, heads=4, kv_heads=2, head_dim=8, scale=0.35, causal=true){{$}}
// CHECK:       remark: attention_backward(%query_grad, %key_grad, %value_grad, %16, %14, %15, %15, batch=2, seq=16, heads=4, kv_heads=2, head_dim=8, scale=0.35, causal=true){{$}}
// The loss: a scalar result; its gradient scales by dloss, read on the host.
// CHECK:       remark: cross_entropy_forward(%17, %arg6, %arg2, tokens=32, vocab=64, vocab_size=64){{$}}
// CHECK:       remark: cross_entropy_backward(%18, host(%arg7), %arg6, %arg2, tokens=32, vocab=64, vocab_size=64){{$}}
// CHECK:       remark: embedding_backward(%19, %arg0, %arg2, tokens=32, vocab=64, dim=32){{$}}
// CHECK:       remark: layer_norm_backward(%input_grad, %weight_grad, %bias_grad, %arg0, %arg0, %arg4, rows=32, dim=32, eps=1e-05){{$}}
// CHECK:       remark: rms_norm_backward(%input_grad_0, %weight_grad_1, %arg0, %arg0, %arg4, rows=32, dim=32, eps=1e-05){{$}}
// CHECK:       remark: gelu_tanh_backward(%20, %arg0, %arg0, n=1024){{$}}
// CHECK:       remark: swiglu_backward(%gate_grad, %up_grad, %arg0, %arg0, %arg0, n=1024){{$}}
// CHECK:       remark: reduce_sum_leading(%21, %arg0, outer=32, inner=32){{$}}
// CHECK:       remark: zero_buffer(%22, bytes=4096){{$}}
// CHECK:       remark: gemm_bias_gelu(%pre, %result, %arg0, %arg3, %arg8, m=32, n=96, k=32, transpose_b=false, tanh=false){{$}}
// A sliding window (Mistral's): the keys it sees after causal.
// CHECK:       remark: attention_forward({{.*}}, head_dim=8, scale=0.35, causal=true, window=4){{$}}
// CHECK:       remark: attention_backward({{.*}}, head_dim=8, scale=0.35, causal=true, window=4){{$}}
// Gemma's (1 + w) RMSNorm passes its weight offset; a constant factor scales.
// CHECK:       remark: rms_norm_forward({{.*}}, rows=32, dim=32, eps=1e-06, weight_offset=1){{$}}
// CHECK:       remark: rms_norm_backward({{.*}}, rows=32, dim=32, eps=1e-06, weight_offset=1){{$}}
// CHECK:       remark: scale({{.*}}, %arg0, factor=8, n=1024){{$}}
// A masked LM's loss: the ignored label, last.
// CHECK:       remark: cross_entropy_forward({{.*}}, tokens=32, vocab=64, vocab_size=64, ignore_index=-100){{$}}
// CHECK:       remark: cross_entropy_backward({{.*}}, tokens=32, vocab=64, vocab_size=64, ignore_index=-100){{$}}
// Decoding, rotary embeddings take the position being computed; this function's attention is not
// over one position, which the decode kernel refuses.
// DECODE:       remark: rope_forward({{.*}}, position_offset=decode.position, inverse=false){{$}}
// DECODE:       error: 'tx.attention' op cannot be emitted as C++: decoding needs causal attention over one position
func.func @forward(%x: tensor<2x16x32xf32>, %wte: tensor<64x32xf32>, %ids: tensor<2x16xi32>, %w: tensor<32x96xf32>,
                   %nw: tensor<32xf32>, %dy: tensor<2x16x32xf32>, %logits: tensor<2x16x64xf32>, %dloss: tensor<f32>,
                   %b96: tensor<96xf32>) {
  %e = tx.embedding %wte[%ids] : tensor<64x32xf32>, tensor<2x16xi32> -> tensor<2x16x32xf32>
  %h = tx.matmul %x, %w : tensor<2x16x32xf32>, tensor<32x96xf32> -> tensor<2x16x96xf32>
  %b = tx.matmul %x, %dy transpose_rhs scale 0.5 : tensor<2x16x32xf32>, tensor<2x16x32xf32> -> tensor<2x16x16xf32>
  %y = tx.add %x, %nw : tensor<2x16x32xf32>, tensor<32xf32>
  %half = tx.slice %x dim 2 offset 16 : tensor<2x16x32xf32> -> tensor<2x16x16xf32>
  %padded = tx.pad %half dim 2 offset 0 : tensor<2x16x16xf32> -> tensor<2x16x32xf32>
  %ln = tx.layer_norm %x, %nw, %nw eps 1.0e-5 : tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>
  %rms = tx.rms_norm %x, %nw eps 1.0e-6 : tensor<2x16x32xf32>, tensor<32xf32>
  %g = tx.gelu %x (tanh) : tensor<2x16x32xf32>
  %ge = tx.gelu %x (erf) : tensor<2x16x32xf32>
  %s = tx.swiglu %x, %x : tensor<2x16x32xf32>, tensor<2x16x32xf32>
  %d = tx.dropout %x rate 0.1 stream 3 : tensor<2x16x32xf32>
  %d0 = tx.dropout %x rate 0.0 stream 3 : tensor<2x16x32xf32>
  %q = tx.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %qr = tx.rope %q theta 10000.0 : tensor<2x16x4x8xf32>
  %k = tx.slice %q dim 2 offset 0 : tensor<2x16x4x8xf32> -> tensor<2x16x2x8xf32>
  %a = tx.attention %qr, %k, %k causal scale 0.35 : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32> -> tensor<2x16x4x8xf32>
  %ag:3 = tx.attention_grad %a, %qr, %k, %k causal scale 0.35 : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>
  %loss = tx.cross_entropy %logits, %ids : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<f32>
  %dl = tx.cross_entropy_grad %dloss, %logits, %ids : tensor<f32>, tensor<2x16x64xf32>, tensor<2x16xi32>
  %dt = tx.embedding_grad %x, %ids : tensor<2x16x32xf32>, tensor<2x16xi32> -> tensor<64x32xf32>
  %lg:3 = tx.layer_norm_grad %x, %x, %nw eps 1.0e-5 : tensor<2x16x32xf32>, tensor<32xf32>
  %rg:2 = tx.rms_norm_grad %x, %x, %nw eps 1.0e-5 : tensor<2x16x32xf32>, tensor<32xf32>
  %gg = tx.gelu_grad %x, %x (tanh) : tensor<2x16x32xf32>
  %sg:2 = tx.swiglu_grad %x, %x, %x : tensor<2x16x32xf32>
  %db = tx.reduce_sum %x : tensor<2x16x32xf32> -> tensor<32xf32>
  %z = tx.zeros : tensor<2x16x32xf32>
  %pre, %fused = tx.matmul_bias_gelu %x, %w, %b96 (erf) : tensor<2x16x32xf32>, tensor<32x96xf32>, tensor<96xf32> -> tensor<2x16x96xf32>
  %aw = tx.attention %qr, %k, %k causal window 4 scale 0.35 : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32> -> tensor<2x16x4x8xf32>
  %awg:3 = tx.attention_grad %aw, %qr, %k, %k causal window 4 scale 0.35 : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>
  %rg1 = tx.rms_norm %x, %nw eps 1.0e-6 weight_offset 1.0 : tensor<2x16x32xf32>, tensor<32xf32>
  %rgg:2 = tx.rms_norm_grad %x, %x, %nw eps 1.0e-6 weight_offset 1.0 : tensor<2x16x32xf32>, tensor<32xf32>
  %sc = tx.scale %x by 8.0 : tensor<2x16x32xf32>
  %mlm = tx.cross_entropy %logits, %ids ignore_index -100 : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<f32>
  %mlmg = tx.cross_entropy_grad %dloss, %logits, %ids ignore_index -100 : tensor<f32>, tensor<2x16x64xf32>, tensor<2x16xi32>
  return
}

// -----

// A tensor-parallel rank's share: where its vocabulary rows and heads start, and the global
// block its dropout masks are drawn for, read from the step context (tp.rank, tp.size).
func.func @tensor_parallel(%wte: tensor<32x32xf32>, %ids: tensor<2x16xi32>, %x: tensor<2x16x32xf32>,
                           %logits: tensor<2x16x32xf32>, %dloss: tensor<f32>) {
  // CHECK-LABEL: remark: embedding_forward_shard(%0, %arg0, %arg1, tokens=32, vocab_local=32, dim=32, tp.rank*32){{$}}
  %e = tx.embedding %wte[%ids] vocab_parallel : tensor<32x32xf32>, tensor<2x16xi32> -> tensor<2x16x32xf32>
  // Hidden dropout of a value split over tp along its last dimension: this rank's columns.
  // CHECK: remark: slice(%1, %0, outer=32, in_dim=32, out_dim=16, inner=1, offset=0){{$}}
  // CHECK: remark: apply_dropout(%2, %1, dropout_block(ctx, rate=0.1, stream=2, shape={2, 16, 16}, offset={0, 0, tp.rank*16}, extent={0, 16, tp.size*16})){{$}}
  %half = tx.slice %e dim 2 offset 0 {megac.sharding = #tx.sharding<[{}, {}, {"tp"}]>} : tensor<2x16x32xf32> -> tensor<2x16x16xf32>
  %d = tx.dropout %half rate 0.1 stream 2 {megac.sharding = #tx.sharding<[{}, {}, {"tp"}]>} : tensor<2x16x16xf32>
  // Attention dropout over this rank's heads.
  // CHECK: remark: attention_forward(%4, %3, %3, %3, batch=2, seq=16, heads=4, kv_heads=4, head_dim=8, scale=0.35, causal=true, window=0, attention_dropout(ctx, rate=0.1, stream=1, head_offset=tp.rank*4, heads=tp.size*4)){{$}}
  %q = tx.reshape %x {megac.sharding = #tx.sharding<[{}, {}, {"tp"}, {}]>} : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %a = tx.attention %q, %q, %q causal scale 0.35 dropout 0.1 : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32> -> tensor<2x16x4x8xf32>
  // Vocabulary-parallel cross-entropy: the padding columns of the last rank's share skipped.
  // CHECK: remark: logits_max(%5, %arg3, tokens=32, vocab=32, valid_columns(vocab_size=50, tp.rank*32, vocab_local=32)){{$}}
  %max = tx.logits_max %logits vocab_size 50 : tensor<2x16x32xf32> -> tensor<2x16xf32>
  // CHECK: remark: logits_sum_exp(%6, %arg3, %5, tokens=32, vocab=32, 32){{$}}
  %sum = tx.logits_sum_exp %logits, %max : tensor<2x16x32xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  // CHECK: remark: target_logit(%7, %arg3, %arg1, tokens=32, vocab=32, tp.rank*32){{$}}
  %t = tx.target_logit %logits, %ids vocab_parallel : tensor<2x16x32xf32>, tensor<2x16xi32> -> tensor<2x16xf32>
  // CHECK: remark: cross_entropy_from_stats(%8, %5, %6, %7, tokens=32){{$}}
  %loss = tx.cross_entropy_from_stats %max, %sum, %t : tensor<2x16xf32> -> tensor<f32>
  // CHECK: remark: cross_entropy_backward_from_stats(%9, host(%arg4), %arg3, %arg1, %5, %6, tokens=32, vocab=32, vocab_start=0, valid_columns(vocab_size=50, tp.rank*32, vocab_local=32)){{$}}
  %dl = tx.cross_entropy_grad_from_stats %dloss, %logits, %ids, %max, %sum vocab_size 50 : tensor<f32>, tensor<2x16x32xf32>, tensor<2x16xi32>, tensor<2x16xf32>
  return
}

// -----

// Generation's decode step: one position, against the layer's KV cache; the learned positions'
// row and the rotary angle are the position being computed.
func.func @decode(%x: tensor<2x1x4x8xf32>) {
  // DECODE-LABEL: remark: slice(%1, %0, outer=1, in_dim=64, out_dim=1, inner=32, offset=decode.position){{$}}
  %wpe = tx.param "wpe" role position_embedding init(normal) : tensor<64x32xf32>
  %pos = tx.slice %wpe dim 0 offset 0 : tensor<64x32xf32> -> tensor<1x32xf32>
  // DECODE: remark: rope_forward(%2, %arg0, batch=2, seq=1, heads=4, head_dim=8, theta=10000, position_offset=decode.position, inverse=false){{$}}
  %qr = tx.rope %x theta 10000.0 : tensor<2x1x4x8xf32>
  // DECODE: remark: attention_decode(%3, %2, %arg0, %arg0, kv_cache, layer, batch=2, heads=4, kv_heads=4, head_dim=8, scale=0.35){{$}}
  %a = tx.attention %qr, %x, %x causal scale 0.35 : tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32> -> tensor<2x1x4x8xf32>
  // A window: the cached positions inside it.
  // DECODE: remark: attention_decode({{.*}}, head_dim=8, scale=0.35, window=3){{$}}
  %aw = tx.attention %qr, %x, %x causal window 3 scale 0.35 : tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32> -> tensor<2x1x4x8xf32>
  return
}
