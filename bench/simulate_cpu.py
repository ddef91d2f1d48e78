#!/usr/bin/env python3
"""megac simulate against OUT/train on this machine: the tokens/s megac simulate predicts from a
cluster file `megac calibrate` measured here, against the tokens/s the compiled programs measure,
for single rank, tp2, dp2, pp2 and pp2 vpp2 (issue 17: within 15%).

    /usr/bin/python3 bench/simulate_cpu.py                 # ~3 min on 2 cores
    /usr/bin/python3 bench/simulate_cpu.py --write-docs    # also writes its section of docs/benchmarks.md

One model (GPT-2 family, L=4, h=512, 8 heads, s=256, V=4096: GEMM-bound on one core), micro batch
4, global batch 16; every rank runs one OpenMP thread (OMP_NUM_THREADS=1, as `megac calibrate
--ranks 2 --threads 1` measured), the multi-rank plans on 2 MPI ranks. Each plan: compiled once,
W warm-up + N measured iterations x rounds (plans alternate order between rounds), tokens/s the
median over the measured iterations; predicted by `megac simulate --json` with the same flags.
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
BEGIN, END = "<!-- simulate-cpu:begin -->", "<!-- simulate-cpu:end -->"

SIZES = dict(num_layers=4, hidden_size=512, num_attention_heads=8, seq_length=256, vocab_size=4096)
MICRO, GLOBAL = 4, 16
DATA_SEED = INIT_SEED = 1234
BOUND = 0.15
PLANS = {
    "single": ([], 1),
    "tp2": (["--tp", "2"], 2),
    "dp2": (["--dp", "2"], 2),
    "pp2": (["--pp", "2"], 2),
    "pp2 vpp2": (["--pp", "2", "--vpp", "2"], 2),
}
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker-data":
        return write_random_tokens(sys.argv[2:], SIZES["vocab_size"], DATA_SEED)
    args = benchmark_args(__doc__, iters=4)
    work = args.workdir or tempfile.mkdtemp(prefix="megac-simulate-")
    os.makedirs(work, exist_ok=True)
    w = lambda *p: os.path.join(work, *p)
    folder = lambda name: w(name.replace(" ", "-"))
    iters = args.warmup + args.iters
    spec = prepare_gpt2(__file__, args.python, work, SIZES, (iters * GLOBAL + 8) * (SIZES["seq_length"] + 1),
                        INIT_SEED)
    cluster = w("cpu.yaml")
    run([args.megac, "calibrate", "--target", "cpu", "--ranks", "2", "--threads", "1", "-o", cluster], env=MPI_ENV)
    predicted = {}
    for name, (flags, ranks) in PLANS.items():
        pp = ["--global-batch-size", str(GLOBAL)] if "--pp" in flags else []
        run([args.megac, "compile", spec, "--micro-batch-size", str(MICRO), "-o", folder(name)] + flags + pp)
        sim = json.loads(run([args.megac, "simulate", spec, "--cluster", cluster, "--micro-batch-size", str(MICRO),
                              "--global-batch-size", str(GLOBAL), "--json"] + flags))
        predicted[name] = sim

    meter, load_before = CpuMeter(), loadavg()
    rates = {name: [] for name in PLANS}
    for r in range(args.rounds):
        for name in (list(PLANS) if r % 2 == 0 else list(reversed(PLANS))):
            flags, ranks = PLANS[name]
            metrics = f"{folder(name)}-{r}.jsonl"
            launch = ["mpirun", "--oversubscribe", "-np", str(ranks), "-x", "OMP_NUM_THREADS", "-x",
                      "OPENBLAS_NUM_THREADS"] if ranks > 1 else []
            run(launch + [os.path.join(folder(name), "train"), "--data-path", w("data"), "--load",
                          w("init.safetensors"), "--train-iters", str(iters), "--global-batch-size", str(GLOBAL),
                          "--lr", "1e-3", "--no-shuffle", "--metrics-file", metrics], env=MPI_ENV)
            rows = read_metrics(metrics)
            rates[name] += [row["tokens_per_s"] for row in rows[args.warmup:]]
            log(f"round {r + 1}: {name}: {statistics.median(rates[name][-args.iters:]):.0f} tokens/s measured, "
                f"{predicted[name]['tokens_per_s']:.0f} predicted")
    busy = meter.stop()["other_cpu_pct"]
    lines, ok = [], True
    for name in PLANS:
        measured = statistics.median(rates[name])
        sim = predicted[name]
        error = sim["tokens_per_s"] / measured - 1
        ok = ok and abs(error) <= BOUND
        split = sim["time_split_s"]
        biggest = sorted(split, key=split.get, reverse=True)[:2]
        lines.append(f"| {name} | {measured:.0f} | {sim['tokens_per_s']:.0f} | {100 * error:+.1f}% | "
                     f"{'yes' if abs(error) <= BOUND else 'NO'} | "
                     + ", ".join(f"{k} {100 * split[k] / sim['iteration_time_s']:.0f}%" for k in biggest) + " |")
    calibration = "".join(f"    {line}" for line in open(cluster) if not line.startswith("#"))
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = f"""## megac simulate against measured runs (CPU)

Generated by `/usr/bin/python3 bench/simulate_cpu.py --write-docs` on {when}, commit {git_rev()},
{cpu_model()} ({os.cpu_count()} cores; load {load_before} before, other processes {busy:.0f}% of the
machine meanwhile). GPT-2 L={SIZES['num_layers']} h={SIZES['hidden_size']} s={SIZES['seq_length']}
V={SIZES['vocab_size']}, micro batch {MICRO}, global batch {GLOBAL}, one thread per rank; {args.warmup} warm-up +
{args.iters} measured iterations x {args.rounds} rounds (median). Predicted: `megac simulate --json` on the cluster
file `megac calibrate --target cpu --ranks 2 --threads 1` wrote in the same run (below). Bound: {100 * BOUND:.0f}%.

| plan | measured tokens/s | predicted | error | within bound | largest parts of the predicted time |
|---|---|---|---|---|---|
{chr(10).join(lines)}

The calibration it used:

{calibration}"""
    publish(section, args.write_docs, DOCS, BEGIN, END)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
