#!/usr/bin/env python3
"""Fine-tuning on one CPU rank: full fine-tuning against LoRA, peak memory and tokens/s, one model,
the same base weights and batches.

    /usr/bin/python3 bench/lora_finetune.py                 # ~2 min on 2 cores
    /usr/bin/python3 bench/lora_finetune.py --write-docs    # also writes its section of docs/benchmarks.md

One model (GPT-2 family, L=8, h=512, 8 heads, s=256, V=4096, ffn 2048), micro batch 4, global
batch 16, one rank with 2 OpenMP threads, compiled by `megac compile SPEC --micro-batch-size 4
[LoRA flags]` three ways:

  full                every parameter trained: AdamW's moments and a gradient for each
  lora r 8 c_attn     PEFT's default for GPT-2: rank-8 adapters on the fused q, k, v projection
  lora r 16 all-linear
                      rank-16 adapters on every linear layer of every layer (not the output layer)
  qlora r 16 all-linear
                      the same with the base's linear weights in NF4 (--qlora: double quantization,
                      blocks of 64), dequantized tile by tile inside each GEMM (tx.matmul_nf4)
  ... bf16            the last two compiled with --bf16 (QLoRA's compute precision): activations
                      stored in 16 bits, computed in fp32 on the CPU

Each run loads the same weights (--load, the base model) and trains W warm-up + N measured
iterations on the same random token ids. Recorded per mode: trainable parameters, the training
state (weights, gradients, moments; the frozen base apart), the peak bytes the rank held (the
runtime's tracked total, which equals megac's OUT/rank-memory.json prediction: checked here too)
and tokens/s (median of the measured iterations; each round runs every mode once, odd rounds in
reverse order). Ratios are against full fine-tuning measured in the same invocation.
"""
import datetime
import json
import os
import statistics
import sys
import tempfile

from bench_util import (CpuMeter, benchmark_args, cpu_model, git_rev, loadavg, log, prepare_gpt2, read_metrics,
                        publish, run, write_random_tokens)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- lora-finetune:begin -->", "<!-- lora-finetune:end -->"

SIZES = dict(num_layers=8, hidden_size=512, num_attention_heads=8, seq_length=256, vocab_size=4096)
MICRO, GLOBAL = 4, 16
DATA_SEED = INIT_SEED = 1234
ENV = {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
ALL_LINEAR = ["--lora-rank", "16", "--lora-alpha", "32", "--lora-target-modules", "all-linear"]
MODES = {
    "full": [],
    "lora r 8 c_attn": ["--lora-rank", "8", "--lora-alpha", "16"],
    "lora r 16 all-linear": ALL_LINEAR,
    "qlora r 16 all-linear": ALL_LINEAR + ["--qlora"],
    "lora r 16 all-linear bf16": ALL_LINEAR + ["--bf16"],
    "qlora r 16 all-linear bf16": ALL_LINEAR + ["--qlora", "--bf16"],
}
STATE = ("parameters", "gradients", "optimizer_state")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker-data":
        return write_random_tokens(sys.argv[2:], SIZES["vocab_size"], DATA_SEED)
    args = benchmark_args(__doc__, iters=5)
    work = args.workdir or tempfile.mkdtemp(prefix="megac-lora-")
    os.makedirs(work, exist_ok=True)
    w = lambda *p: os.path.join(work, *p)
    folder = lambda name: w(name.replace(" ", "-"))

    iters = args.warmup + args.iters
    tokens = (iters * GLOBAL + 8) * (SIZES["seq_length"] + 1)
    spec = prepare_gpt2(__file__, args.python, work, SIZES, tokens, INIT_SEED)
    for name, flags in MODES.items():
        run([args.megac, "compile", spec, "--micro-batch-size", str(MICRO), "-o", folder(name)] + flags)

    meter, load_before = CpuMeter(), loadavg()
    rates = {name: [] for name in MODES}
    results = {}
    for r in range(args.rounds):
        for name in (list(MODES) if r % 2 == 0 else list(reversed(MODES))):
            out = folder(name)
            metrics = f"{out}-{r}.jsonl"
            run([os.path.join(out, "train"), "--data-path", w("data"), "--load", w("init.safetensors"),
                 "--train-iters", str(iters), "--global-batch-size", str(GLOBAL), "--lr", "1e-4", "--no-shuffle",
                 "--metrics-file", metrics], env=ENV)
            rows = read_metrics(metrics)
            rates[name] += [row["tokens_per_s"] for row in rows[args.warmup:]]
            with open(os.path.join(out, "rank-memory.json")) as f:
                stage = json.load(f)["stages"][0]
            data = stage["data_bytes_per_microbatch"] * (GLOBAL // MICRO)
            memory = rows[0]["memory"]
            results[name] = dict(trainable=stage["parameters"], frozen=stage.get("frozen_parameters", 0),
                                 state=sum(memory[c] for c in STATE), frozen_bytes=memory.get("frozen_parameters", 0),
                                 peak=memory["peak_total"], predicted=stage["total_bytes"] - stage["bytes"]["data"] + data,
                                 loss=rows[-1]["lm_loss"])
            log(f"round {r + 1}: {name}: {statistics.median(rates[name][-args.iters:]):.0f} tokens/s")
    busy = meter.stop()["other_cpu_pct"]
    base, base_rate = results["full"], statistics.median(rates["full"])
    lines, ok = [], True
    for name, res in results.items():
        exact = res["peak"] == res["predicted"]
        ok = ok and exact
        rate = statistics.median(rates[name])
        lines.append(f"| {name} | {res['trainable']:,} | {res['frozen']:,} | {res['state'] / 2**20:.2f} MiB "
                     f"({res['state'] / base['state']:.3f}x) | {res['frozen_bytes'] / 2**20:.2f} MiB | "
                     f"{res['peak'] / 2**20:.2f} MiB ({res['peak'] / base['peak']:.2f}x) | "
                     f"{rate:.0f} ({rate / base_rate:.2f}x) | {'yes' if exact else 'NO'} |")
    header = ("| mode | trainable parameters | frozen parameters | trained state (weights, gradients, moments) | "
              "frozen base | peak (tracked) | tokens/s | = prediction |\n|---|---|---|---|---|---|---|---|")
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = f"""## Fine-tuning: full vs LoRA, memory and speed (CPU, 1 rank)

Generated by `/usr/bin/python3 bench/lora_finetune.py --write-docs` on {when}, commit {git_rev()},
{cpu_model()} ({os.cpu_count()} cores; load {load_before} before, other processes {busy:.0f}% of the
machine meanwhile). GPT-2 L={SIZES['num_layers']} h={SIZES['hidden_size']} s={SIZES['seq_length']}
V={SIZES['vocab_size']}, one rank with 2 threads, micro batch {MICRO}, global batch {GLOBAL}, the same base weights;
{args.warmup} warm-up + {args.iters} measured iterations x {args.rounds} rounds; tokens/s is the median over the
measured iterations. Ratios are against full fine-tuning in the same invocation. "= prediction": the tracked peak
equals megac's OUT/rank-memory.json.

{header}
{chr(10).join(lines)}

What it shows: LoRA keeps the base in one fp32 copy with no gradient and no AdamW moments (4 bytes per weight
instead of 16), and the adapters' state is a fraction of a percent of full fine-tuning's. Its speed is bounded by
the forward and the input gradients, which LoRA still computes through every frozen layer; it saves the weight
gradients of the frozen layers (a third of a linear layer's backward) and adds two thin GEMMs per adapted module.
The peak also holds the step's workspace (the activations), which LoRA does not change. QLoRA stores the base's
linear weights in NF4 (about 4.13 bits per weight; the embeddings and norms stay fp32) and dequantizes them inside
each GEMM (tx.matmul_nf4: 2^18 values at a time into the kernel's scratch), in the forward and again in the backward:
no dequantized copy of a weight is in the workspace, and the dequantization's time shows in tokens/s."""
    publish(section, args.write_docs, DOCS, BEGIN, END)
    if not ok:
        sys.exit("error: a tracked peak differs from megac's prediction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
