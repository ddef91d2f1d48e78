#!/usr/bin/env python3
"""Activation recomputation and 16-bit activations on one CPU rank: peak memory and tokens/s of
selective and full recomputation against none, in fp32 and bf16, one model, the same batches.

    /usr/bin/python3 bench/recompute.py                 # ~2 min on 2 cores
    /usr/bin/python3 bench/recompute.py --write-docs    # also writes its section of docs/benchmarks.md

One model (GPT-2 family, L=8, h=256, 4 heads, s=256, V=4096, ffn 1024), micro batch 4, global batch
16 (4 microbatches), one rank with 2 OpenMP threads, compiled by `megac compile SPEC
--micro-batch-size 4 [recompute flags] [--bf16]` seven ways:

  none                        every activation the backward reads is kept (the baseline)
  selective core_attn         Megatron's default selective module: megac's attention keeps no s x s
                              term, so the program is the baseline's
  selective mlp,layernorm     the MLP's activations and the norms' outputs recomputed in each layer
  full block 4                the first 4 of 8 layers rerun in backward from their inputs
  full uniform 1              every layer reruns in backward from its input (about one extra forward)
  none bf16, full uniform 1 bf16
                              the same compiled with --bf16: activations stored in 16 bits (computed
                              in fp32 on the CPU: conversions in every kernel)

Each run does W warm-up + N measured iterations from the same initial weights (--load) on the
same random token ids. Recorded per mode: the peak bytes the rank held (the runtime's tracked
total, which equals megac's prediction in OUT/rank-memory.json: checked here too), what one layer
keeps for its backward (megac's report), and tokens/s (median of the measured iterations; each
round runs every mode once, odd rounds in reverse order). The losses of every mode must equal
none's of the same precision bit for bit. Ratios are against fp32 none measured in the same
invocation.
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
BEGIN, END = "<!-- recompute:begin -->", "<!-- recompute:end -->"

SIZES = dict(num_layers=8, hidden_size=256, num_attention_heads=4, seq_length=256, vocab_size=4096)
MICRO, GLOBAL = 4, 16
DATA_SEED = INIT_SEED = 1234
ENV = {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
MODES = {
    "none": [],
    "selective core_attn": ["--recompute-activations"],
    "selective mlp,layernorm": ["--recompute-granularity", "selective", "--recompute-modules", "mlp,layernorm"],
    "full block 4": ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "4"],
    "full uniform 1": ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"],
}
MODES["none bf16"] = ["--bf16"]
MODES["full uniform 1 bf16"] = MODES["full uniform 1"] + ["--bf16"]


def reference(name):
    """The mode whose losses `name`'s must equal bit for bit: no recomputation, same precision."""
    return "none bf16" if name.endswith(" bf16") else "none"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker-data":
        return write_random_tokens(sys.argv[2:], SIZES["vocab_size"], DATA_SEED)
    args = benchmark_args(__doc__, iters=5)
    work = args.workdir or tempfile.mkdtemp(prefix="megac-recompute-")
    os.makedirs(work, exist_ok=True)
    w = lambda *p: os.path.join(work, *p)
    folder = lambda name: w(name.replace(" ", "-").replace(",", "-"))

    iters = args.warmup + args.iters
    tokens = (iters * GLOBAL + 8) * (SIZES["seq_length"] + 1)
    spec = prepare_gpt2(__file__, args.python, work, SIZES, tokens, INIT_SEED)
    for name, flags in MODES.items():
        run([args.megac, "compile", spec, "--micro-batch-size", str(MICRO), "-o", folder(name)] + flags)

    meter, load_before = CpuMeter(), loadavg()
    rates = {name: [] for name in MODES}
    results = {}
    for r in range(args.rounds):
        order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
        for name in order:
            out = folder(name)
            metrics = f"{out}-{r}.jsonl"
            run([os.path.join(out, "train"), "--data-path", w("data"), "--load", w("init.safetensors"),
                 "--train-iters", str(iters), "--global-batch-size", str(GLOBAL), "--lr", "1e-3", "--no-shuffle",
                 "--metrics-file", metrics], env=ENV)
            rows = read_metrics(metrics)
            rates[name] += [row["tokens_per_s"] for row in rows[args.warmup:]]
            with open(os.path.join(out, "rank-memory.json")) as f:
                predicted = json.load(f)
            stage = predicted["stages"][0]
            data = stage["data_bytes_per_microbatch"] * (GLOBAL // MICRO)
            layers = predicted["layer_activations"]
            results[name] = dict(
                peak=rows[0]["memory"]["peak_total"], predicted=stage["total_bytes"] - stage["bytes"]["data"] + data,
                workspace=rows[0]["memory"]["workspace"], per_layer=min(l["bytes"] for l in layers),
                losses=[(row["lm_loss"], row["grad_norm"]) for row in rows])
            log(f"round {r + 1}: {name}: {statistics.median(rates[name][-args.iters:]):.0f} tokens/s")
    busy = meter.stop()["other_cpu_pct"]
    base = results["none"]
    lines, ok = [], True
    for name, res in results.items():
        same = res["losses"] == results[reference(name)]["losses"]
        exact = res["peak"] == res["predicted"]
        ok = ok and same and exact
        rate = statistics.median(rates[name])
        lines.append(f"| {name} | {res['peak'] / 2**20:.2f} MiB ({res['peak'] / base['peak']:.2f}x) | "
                     f"{res['workspace'] / 2**20:.2f} MiB ({res['workspace'] / base['workspace']:.2f}x) | "
                     f"{res['per_layer'] / 2**20:.2f} MiB | {rate:.0f} ({rate / statistics.median(rates['none']):.2f}x) | "
                     f"{'yes' if exact else 'NO'} | {'yes' if same else 'NO'} |")
    header = ("| mode | peak (tracked) | workspace (holds the activations) | kept per recomputed layer (else per layer) | "
              "tokens/s | = prediction | losses bit-identical to none (same precision) |\n|---|---|---|---|---|---|---|")
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = f"""## Activation recomputation and 16-bit activations: memory and speed per mode (CPU, 1 rank)

Generated by `/usr/bin/python3 bench/recompute.py --write-docs` on {when}, commit {git_rev()},
{cpu_model()} ({os.cpu_count()} cores; load {load_before} before, other processes {busy:.0f}% of the
machine meanwhile). GPT-2 L={SIZES['num_layers']} h={SIZES['hidden_size']} s={SIZES['seq_length']}
V={SIZES['vocab_size']}, one rank with 2 threads, micro batch {MICRO}, global batch {GLOBAL}; {args.warmup} warm-up +
{args.iters} measured iterations x {args.rounds} rounds; tokens/s is the median over the measured iterations. Ratios
are against fp32 none in the same invocation. "= prediction": the tracked peak equals megac's OUT/rank-memory.json.

{header}
{chr(10).join(lines)}

What it shows: full recomputation keeps one s x b x h input per layer instead of 16 and pays one extra forward of
the layers (a layer's forward is about a third of its training step; the embedding, the head, the loss and the
optimizer are not rerun, so somewhat more than 3/4 of the tokens/s remains); block recomputes half the layers and
pays half of that; selective recomputation of the MLP and the norms keeps 6 of 16 (the input, the residual, q, k, v
and the attention output) and reruns the norms, one GEMM and the GELU per layer; core_attn, Megatron's default,
changes nothing here because megac's attention already keeps no s x s term. Without pipeline parallelism the
activations live in the step's workspace, so the workspace column shows the saving; the peak also holds the training
state, which recomputation and 16-bit activations do not touch. bf16 halves what each layer keeps and, in this
configuration, the workspace (whose peak is where the activations are). On the CPU bf16 computes in fp32 and converts in every kernel (and rounds the GEMMs' fp32 weights into
scratch copies), so it saves memory, not time: its speed on a GPU, where the tensor cores take 16-bit operands, is
issue [13]'s."""
    publish(section, args.write_docs, DOCS, BEGIN, END)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
