#!/usr/bin/env python3
"""Sharded data parallelism on 4 CPU ranks: peak memory per rank and tokens/s of each strategy
against no_shard (plain data parallelism), one model, the same batches.

    /usr/bin/python3 bench/sharding_memory.py                 # ~3 min on 2 cores
    /usr/bin/python3 bench/sharding_memory.py --write-docs    # also writes its section of docs/benchmarks.md

One model (GPT-2 family, L=4, h=256, 4 heads, s=128, V=4096, ffn 1024), micro batch 2, dp 4
(4 ranks x 1 thread, `mpirun --oversubscribe`), global batch 16 (2 microbatches per rank), compiled
by `megac compile SPEC --dp 4 --micro-batch-size 2 --ddp-bucket-size 1000000 [strategy flags]`
(buckets of about one layer, as FSDP wraps each layer) five ways:

  no_shard                      every rank holds all of the training state (the baseline)
  optim                         Megatron's distributed optimizer (ZeRO-1)
  optim_grads                   ZeRO-2
  optim_grads_params            ZeRO-3 / FSDP, resharding after forward (the default without pp)
  optim_grads_params never      ZeRO-3 keeping the gathered parameters from forward to backward

Each run does W warm-up + N measured iterations from the same initial weights (--load) on the
same random token ids. Recorded per strategy: the peak bytes a rank held (the runtime's tracked
total, which equals megac's prediction in OUT/rank-memory.json: checked here too), how much the
process's resident memory grew, the training state alone, what a rank sent over dp per iteration
(counted by the runtime; equals OUT/rank-communication.json), and tokens/s (median of the measured
iterations' tokens_per_s; each round runs every strategy once, one after the other, odd rounds
in reverse order). Ratios are against no_shard measured in the same invocation. The losses of
every strategy must agree with no_shard's (relative 1e-5).

--write-docs replaces the block between this script's markers in docs/benchmarks.md (or appends
it); the other sections are never touched. The data and weights are written under --python
(Debian's /usr/bin/python3 with numpy and torch).
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
BEGIN, END = "<!-- sharding-memory:begin -->", "<!-- sharding-memory:end -->"

SIZES = dict(num_layers=4, hidden_size=256, num_attention_heads=4, seq_length=128, vocab_size=4096)
MICRO, DP, GLOBAL = 2, 4, 16
BUCKET = 1_000_000  # --ddp-bucket-size: a layer's parameters (12 h^2 = 786 K) per bucket, as FSDP wraps layers
DATA_SEED = 1234
INIT_SEED = 1234
LOSS_TOL = 1e-5
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
STRATEGIES = {
    "no_shard": [],
    "optim": ["--use-distributed-optimizer"],
    "optim_grads": ["--data-parallel-sharding-strategy", "optim_grads"],
    "optim_grads_params": ["--data-parallel-sharding-strategy", "optim_grads_params"],
    "optim_grads_params never": ["--data-parallel-sharding-strategy", "optim_grads_params",
                                 "--fsdp-reshard-after-forward", "never"],
}
STATE = ("parameters", "gradients", "optimizer_state", "master_weights")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker-data":
        return write_random_tokens(sys.argv[2:], SIZES["vocab_size"], DATA_SEED)
    args = benchmark_args(__doc__, iters=6)
    work = args.workdir or tempfile.mkdtemp(prefix="megac-sharding-")
    os.makedirs(work, exist_ok=True)
    w = lambda *p: os.path.join(work, *p)

    iters = args.warmup + args.iters
    tokens = (iters * GLOBAL + 8) * (SIZES["seq_length"] + 1)
    spec = prepare_gpt2(__file__, args.python, work, SIZES, tokens, INIT_SEED)
    for name, flags in STRATEGIES.items():
        run([args.megac, "compile", spec, "--dp", str(DP), "--micro-batch-size", str(MICRO), "--ddp-bucket-size",
             str(BUCKET), "-o", w(name.replace(" ", "-"))] + flags)

    meter, load_before = CpuMeter(), loadavg()
    rates = {name: [] for name in STRATEGIES}
    results = {}
    for r in range(args.rounds):
        order = list(STRATEGIES) if r % 2 == 0 else list(reversed(STRATEGIES))
        for name in order:
            out = w(name.replace(" ", "-"))
            metrics = w(f"{name.replace(' ', '-')}-{r}.jsonl")
            run(["mpirun", "-np", str(DP), "--oversubscribe", os.path.join(out, "train"), "--data-path", w("data"),
                 "--load", w("init.safetensors"), "--train-iters", str(iters), "--global-batch-size", str(GLOBAL),
                 "--lr", "1e-3", "--no-shuffle", "--metrics-file", metrics], env=MPI_ENV)
            rows = read_metrics(metrics)
            rates[name] += [row["tokens_per_s"] for row in rows[args.warmup:]]
            with open(os.path.join(out, "rank-memory.json")) as f:
                predicted = json.load(f)["stages"][0]
            with open(os.path.join(out, "rank-communication.json")) as f:
                sent = json.load(f)["stages"][0]
            memory = rows[0]["memory"]
            data = predicted["data_bytes_per_microbatch"] * (GLOBAL // DP // MICRO)
            results[name] = dict(
                peak=memory["peak_total"], predicted=predicted["total_bytes"] - predicted["bytes"]["data"] + data,
                state=sum(memory[c] for c in STATE), resident=rows[0].get("resident_growth_bytes", -1),
                dp_sent=rows[1]["communication_bytes"][0]["dp"],
                dp_predicted=sent["bytes_per_microbatch"]["dp"] * (GLOBAL // DP // MICRO) +
                sent["bytes_per_iteration_besides"]["dp"],
                losses=[row["lm_loss"] for row in rows])
            log(f"round {r + 1}: {name}: {statistics.median(rates[name][-args.iters:]):.0f} tokens/s")
    busy = meter.stop()["other_cpu_pct"]
    base = results["no_shard"]
    lines = []
    ok = True
    for name, res in results.items():
        same = all(abs(a - b) <= LOSS_TOL * abs(b) for a, b in zip(res["losses"], base["losses"]))
        exact = res["peak"] == res["predicted"] and abs(res["dp_sent"] - res["dp_predicted"]) <= 1e-9 * res["dp_sent"]
        ok = ok and same and exact
        rate = statistics.median(rates[name])
        lines.append(f"| {name} | {res['peak'] / 2**20:.2f} MiB ({res['peak'] / base['peak']:.2f}x) | "
                     f"{res['state'] / 2**20:.2f} MiB ({res['state'] / base['state']:.2f}x) | "
                     f"{res['resident'] / 2**20:.2f} MiB | {res['dp_sent'] / 2**20:.2f} MiB "
                     f"({res['dp_sent'] / base['dp_sent']:.2f}x) | {rate:.0f} ({rate / statistics.median(rates['no_shard']):.2f}x) | "
                     f"{'yes' if exact else 'NO'} | {'yes' if same else 'NO'} |")
    header = ("| strategy | peak per rank (tracked) | training state | resident growth | sent over dp per "
              "iteration | tokens/s | = prediction | losses = no_shard |\n|---|---|---|---|---|---|---|---|")
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = f"""## Sharded data parallelism: memory and speed per strategy (CPU, 4 ranks)

Generated by `/usr/bin/python3 bench/sharding_memory.py --write-docs` on {when}, commit {git_rev()},
{cpu_model()} ({os.cpu_count()} cores; load {load_before} before, other processes {busy:.0f}% of the
machine meanwhile). GPT-2 L={SIZES['num_layers']} h={SIZES['hidden_size']} s={SIZES['seq_length']}
V={SIZES['vocab_size']}, dp {DP} (4 ranks x 1 thread, oversubscribed on the cores), micro batch {MICRO},
global batch {GLOBAL}, buckets of {BUCKET} elements (about one layer); {args.warmup} warm-up +
{args.iters} measured iterations x {args.rounds} rounds; tokens/s is the median over the measured
iterations. Ratios are against no_shard in the same invocation. "= prediction": the tracked peak
equals megac's OUT/rank-memory.json and the dp bytes its OUT/rank-communication.json.

{header}
{chr(10).join(lines)}

What it shows: the training state per rank falls as the formulas say (16 -> 8 + 8/d -> 4 + 12/d -> 16/d bytes per
parameter, d = {DP}); the peak falls less, because the workspace (activations of a step, and the staged gradient and
gathered parameter buckets of ZeRO-2/3) does not shrink with d. ZeRO-1 and ZeRO-2 send what no_shard sends plus one
gradient reduce-scatter per further microbatch for ZeRO-2; ZeRO-3 also all-gathers the parameters for every
microbatch's forward and again for its backward. On 2 oversubscribed cores the collectives are memory copies, so the
speed differences mostly show the extra copies and the more, smaller messages."""
    publish(section, args.write_docs, DOCS, BEGIN, END)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
