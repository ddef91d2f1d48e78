#!/usr/bin/env python3
"""Parallel plans on CPU: the same model at tp2 on 2 ranks vs tp1 on 1 rank (and dp2), tokens/s.

    /usr/bin/python3 bench/parallel_scaling.py                  # ~3 min on 2 cores
    /usr/bin/python3 bench/parallel_scaling.py --write-docs     # also writes its section of docs/benchmarks.md

One model (GPT-2 family, L=4, h=256, 4 heads, s=256, V=4096, ffn 1024; tp must divide the heads,
the ffn and the vocabulary), micro batch 8, trained by megac's compiled program four ways:

  tp1     1 rank,  OMP_NUM_THREADS=2   global batch 8    the baseline: both cores, one process
  tp2     2 ranks, OMP_NUM_THREADS=1   global batch 8    the same batch, every layer split in two
  dp2     2 ranks, OMP_NUM_THREADS=1   global batch 16   each rank a micro batch of 8, full model
  tp1x1   1 rank,  OMP_NUM_THREADS=1   global batch 8    reference: what one core does alone

Set-up (not timed): a dataset of random token ids < V (fixed seed, test/reference/indexed_dataset.py's
write_dataset), one set of initial weights (test/reference/train.py --init-out, fixed seed) that
every run loads with --load, and `megac compile SPEC --micro-batch-size 8 [--tp 2 | --dp 2]`.
Each run does W warm-up + N measured iterations; tokens/s is the median of the metrics file's
per-iteration tokens_per_s (rank 0's clock; global batch x seq / iteration time, so for dp2 it is
the whole job's throughput) over the measured iterations, pooled over --rounds (each round runs
every configuration once, strictly one after the other, never two at a time; odd rounds run them
in reverse order). Multi-rank runs use `mpirun --oversubscribe -np 2 --report-bindings`.

Checks and context recorded with the numbers: tp1 and tp2 read the same batches from the same
weights, so their losses must agree (relative 1e-5, as test/e2e/plan_parity.py); the collectives
the tp2 program contains (counted in its --dump-ir output); the cost of one such all-reduce on
this machine (a small MPI program built with mpicc, launched alone once before the runs and twice
after; the median of the launches, each launch listed); the load average before and after and how
much CPU other processes used meanwhile.

--write-docs replaces the block between this script's own markers in docs/benchmarks.md (the
section is generated: change its text here), or appends the block at the end of the file if it
has none; the other sections are never touched.

The driver needs only the standard library; the data and weights are written under --python
(Debian's /usr/bin/python3 with numpy and torch).
"""
import argparse
import datetime
import json
import math
import os
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import time

from bench_util import (CpuMeter, cpu_model, git_rev, loadavg, log, read_metrics, replace_docs_block,
                        write_random_tokens)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(REPO, "test", "reference")
DOCS = os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- parallel-scaling:begin -->", "<!-- parallel-scaling:end -->"

SIZES = dict(num_layers=4, hidden_size=256, num_attention_heads=4, seq_length=256, vocab_size=4096)
FFN = 4 * SIZES["hidden_size"]  # GPT-2's default ffn_hidden_size
DATA_SEED = 1234
INIT_SEED = 1234
LR = 1e-3
# Seen on the machine of docs/benchmarks.md, kept with the generated section (update it by hand).
OBSERVED = (
    "Whole invocations differ as well: in three quiet invocations on 2026-11-21 (other processes ~0%) "
    "tp1 ran near 4100 tokens/s in some rounds and near 3500 in others, often all rounds of an "
    "invocation alike, while tp2 (4100-4260), dp2 and tp1x1 stayed steady, so tp2 / tp1 read from "
    "1.03x to 1.18x. A plausible cause, not verified: tp1's two threads meet at a barrier after every "
    "kernel, hundreds of times per iteration, and lose time whenever the host delays one of the two "
    "virtual CPUs; tp2's ranks meet at 22 all-reduces per iteration. The 2 MiB all-reduce likewise "
    "reads ~0.2 ms in some launches and ~1 ms in others.")
AR_REPS = 40  # all-reduces per micro-benchmark launch
AR_LAUNCHES = 3  # one before the runs, the rest after
LOSS_TOL = 1e-5  # relative, as test/e2e/plan_parity.py

# name -> (compile flags, ranks, threads per rank, global batch = factor x micro batch, label)
CONFIGS = {
    "tp1": ([], 1, 2, 1, "tp1: 1 rank x 2 threads"),
    "tp2": (["--tp", "2"], 2, 1, 1, "tp2: 2 ranks x 1 thread"),
    "dp2": (["--dp", "2"], 2, 1, 2, "dp2: 2 ranks x 1 thread"),
    "tp1x1": ([], 1, 1, 1, "tp1x1: 1 rank x 1 thread (one core)"),
}
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

ALLREDUCE_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* allreduce N REPS: prints rank 0's REPS timings (ms) of an in-place float sum of N elements. */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long n = atol(argv[1]); int reps = atoi(argv[2]);
  float *x = malloc(sizeof(float) * n);
  double *t = malloc(sizeof(double) * reps);
  for (long i = 0; i < n; ++i) x[i] = 1e-3f * (float)(i % 1000);
  for (int w = 0; w < 3; ++w) MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t[r] = (MPI_Wtime() - t0) * 1e3;
  }
  if (rank == 0) for (int r = 0; r < reps; ++r) printf("%.6f\n", t[r]);
  free(x); free(t);
  MPI_Finalize();
  return 0;
}
"""


# ---------------------------------------------------------------------------------------------
# Data (runs in its own process under --python: needs numpy)
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def run(cmd, env=None, stdout_path=None):
    """Runs cmd to completion (stdout + stderr into stdout_path if given); exits on failure."""
    with open(stdout_path or os.devnull, "w") as out:
        r = subprocess.run(cmd, env=env, stdout=out if stdout_path else subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        text = open(stdout_path).read() if stdout_path else (r.stdout or "")
        sys.exit(f"error: {shlex.join(cmd)} failed (exit {r.returncode}):\n{text[-4000:]}")
    return r


def thread_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env.update(MPI_ENV)
    return env


def write_spec(path):
    with open(path, "w") as f:
        f.write("# bench/parallel_scaling.py: GPT-2, vocab 4096 (random token ids)\n")
        f.write("family: gpt2\n")
        for k, v in SIZES.items():
            f.write(f"{k}: {v}\n")
        f.write(f"ffn_hidden_size: {FFN}\n")
        f.write("hidden_dropout: 0.0\nattention_dropout: 0.0\n")  # the figures before dropout had none


def mpi_version(mpirun):
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0].strip() if out else "unknown MPI"
    except OSError:
        return "unknown MPI"


def tensor_numel(type_text):
    dims = re.match(r"tensor<((?:\d+x)*)[a-z]", type_text)
    n = 1
    for d in (dims.group(1).split("x")[:-1] if dims else []):
        n *= int(d)
    return n


def count_collectives(mlir_path):
    """Collectives executed by one train_step of the dumped tp program: {(op, elements): count},
    following calls (a layer function runs once per layer)."""
    funcs, current = {}, None
    with open(mlir_path) as f:
        for line in f:
            m = re.search(r"func\.func (?:private )?@([\w.$-]+)\(", line)
            if m:
                current = funcs.setdefault(m.group(1), {"ops": [], "calls": []})
                continue
            if current is None:
                continue
            m = re.search(r"= (shard\.\w+) .*: (tensor<[^>]*>) ->", line)
            if m and m.group(1) != "shard.grid":
                current["ops"].append((m.group(1).split(".")[1], tensor_numel(m.group(2))))
            m = re.search(r"\bcall @([\w.$-]+)\(", line)
            if m:
                current["calls"].append(m.group(1))

    def expand(name, depth=0):
        total = {}
        if name not in funcs or depth > 8:
            return total
        for op in funcs[name]["ops"]:
            total[op] = total.get(op, 0) + 1
        for callee in funcs[name]["calls"]:
            for op, c in expand(callee, depth + 1).items():
                total[op] = total.get(op, 0) + c
        return total

    return expand("train_step")


def safetensors_numel(path):
    """Elements in a safetensors file, from its JSON header."""
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")


def build_allreduce(work):
    """The all-reduce micro-benchmark, built with mpicc; None without mpicc."""
    mpicc = shutil.which("mpicc")
    if not mpicc:
        log("bench: no mpicc: skipping the all-reduce micro-benchmark")
        return None
    src, exe = os.path.join(work, "allreduce.c"), os.path.join(work, "allreduce")
    with open(src, "w") as f:
        f.write(ALLREDUCE_C)
    run([mpicc, "-O2", "-o", exe, src])
    return exe


def allreduce_timings(a, exe, work, sizes, into, reps=AR_REPS):
    """One launch per size of the micro-benchmark (2 ranks, alone); appends the median ms of its
    `reps` all-reduces to into[size]."""
    for n in sizes:
        logfile = os.path.join(work, f"allreduce-{n}-{len(into.get(n, []))}.log")
        run([a.mpirun, "--oversubscribe", "-np", "2", exe, str(n), str(reps)], env=thread_env(1),
            stdout_path=logfile)
        with open(logfile) as f:
            values = [float(x) for x in f.read().split() if re.fullmatch(r"[0-9.]+", x)]
        if values:
            into.setdefault(n, []).append(statistics.median(values))


def measure(name, a, m, work, rnd):
    flags, ranks, threads, factor, _ = CONFIGS[name]
    metrics = os.path.join(work, f"{name}-{rnd}.jsonl")
    logfile = os.path.join(work, f"{name}-{rnd}.log")
    cmd = [os.path.join(m["out"][name], "train"), "--data-path", m["data"], "--load", m["init"],
           "--train-iters", str(a.warmup + a.iters),
           "--global-batch-size", str(factor * a.micro_batch_size),
           "--lr", str(LR), "--no-shuffle", "--metrics-file", metrics]
    if ranks > 1:
        cmd = [a.mpirun, "--oversubscribe", "--report-bindings", "-np", str(ranks)] + cmd
    run(cmd, env=thread_env(threads), stdout_path=logfile)
    with open(logfile) as f:
        text = f.read()
    bindings = sorted(re.findall(r"MCW rank (\d+) (bound to [^:]*|is not bound)", text))
    if bindings:
        m["bindings"][name] = ", ".join(
            f"rank {r} on " + ("+".join(f"core {x}" for x in re.findall(r"core (\d+)", where)) or "any core")
            for r, where in bindings)
    return read_metrics(metrics)


def para(text, width=100):
    return textwrap.fill(text, width=width, break_long_words=False, break_on_hyphens=False)


def bullet(text, width=100):
    return textwrap.fill(text, width=width, initial_indent="- ", subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)


def pct(x):
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def fmt_ms(x):
    return f"{x:.3f}" if x < 0.1 else f"{x:.2f}" if x < 10 else f"{x:.0f}"


def results_markdown(rows, info):
    s, h, b = SIZES["seq_length"], SIZES["hidden_size"], info["micro_batch"]
    L = SIZES["num_layers"]
    base = rows.get("tp1")
    lines = [
        "## Parallel plans on CPU: tp2 on 2 ranks vs tp1 on 1 rank",
        "",
        para(f"**What is measured.** Tokens per second of full training iterations (forward, backward, "
             f"gradient-norm clip, AdamW) of one model, GPT-2 family with L={L}, hidden {h}, "
             f"{SIZES['num_attention_heads']} heads, seq {s}, ffn {FFN}, vocab {SIZES['vocab_size']} "
             f"({info['params_m']} M parameters), micro batch {b}, compiled by megac for three plans and run "
             f"on the same two cores: **tp1** (`megac compile --micro-batch-size {b}`, one process, "
             f"`OMP_NUM_THREADS=2`), **tp2** (`--tp 2`, `mpirun -np 2`, `OMP_NUM_THREADS=1` per rank) and "
             f"**dp2** (`--dp 2`, 2 ranks x 1 thread, global batch {2 * b} so that each rank still runs a "
             f"micro batch of {b}), plus **tp1x1** (tp1 on one thread: what one core does alone). tp1 and "
             f"tp2 train the same batches of {b}; dp2 trains twice as many samples per iteration. Every run "
             f"loads the same initial weights (`test/reference/train.py --init-out`, seed {INIT_SEED}) and "
             f"reads the same random token ids in order. tokens/s is `OUT/train`'s own per-iteration "
             f"`tokens_per_s` (rank 0's clock: global batch x {s} / iteration time), median over the "
             f"measured iterations of every round. The runs never overlap: one configuration at a time, "
             f"the order reversed every other round."),
        "",
        "**Reproduce** (needs `build/bin/megac`, Open MPI's `mpirun` and `mpicc`, and Debian's",
        "`/usr/bin/python3` with numpy and torch):",
        "",
        "```sh",
        "/usr/bin/python3 bench/parallel_scaling.py --write-docs     # ~3 min on 2 cores; rewrites this section",
        "```",
        "",
        "`--warmup`, `--iters`, `--rounds`, `--configs tp1,tp2,dp2,tp1x1`, `--keep DIR` (keep the spec,",
        "data, programs, IR dump, logs and metrics).",
        "",
        "### Results",
        "",
        "| plan | ranks x threads | global batch | tokens/s | vs tp1 | ms/iter | median tokens/s per round |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for name, r in rows.items():
        _, ranks, threads, factor, _ = CONFIGS[name]
        ratio = f"**{r['tps'] / base['tps']:.2f}x**" if base else "-"
        lines.append(f"| {name} | {ranks} x {threads} | {factor * b} | {r['tps']:.0f} | {ratio} | "
                     f"{r['ms']:.0f} | {' / '.join(f'{x:.0f}' for x in r['rounds'])} |")
    lines += [
        "",
        bullet(f"date: {info['date']}; megac commit {info['git']}"),
        bullet(f"machine: {info['nproc']} CPUs (`nproc`), {info['cpu']}; {info['mpi']} (for ranks on one "
               f"host it picks the ob1 + vader shared-memory transport); {info['bindings']}"),
        bullet(f"iterations: {info['warmup']} warm-up + {info['iters']} measured per run, {info['rounds']} "
               f"round(s); tokens/s and ms/iter = medians over all measured iterations of all rounds"),
        bullet(f"load: 1/5/15-min load average {info['load_before']} before, {info['load_after']} after; "
               f"other processes used ~{info['other_cpu_pct']:.0f}% of the machine's CPU time during the "
               f"measurement (ours {info['ours_cpu_pct']:.0f}%, MPI's busy-waiting included)"),
        bullet(f"loss check, tp1 vs tp2 (same weights, same batches): {info['loss_check']}"),
        bullet(f"collectives in one tp2 step (counted in the `09-megac-tensor-parallel.mlir` of `megac compile --tp 2 "
               f"--dump-ir`): {info['collectives']}; the runtime adds one all-reduce of a double for the "
               f"gradient norm. dp2 all-reduces the {info['params_m']} M gradients ({info['grad_mb']:.1f} MB) "
               f"once per iteration, after the backward."),
        bullet(f"one MPI all-reduce on this machine, 2 ranks, measured alone ({AR_LAUNCHES} launches of "
               f"{AR_REPS} all-reduces each, one before the runs and the others after; median of the launch "
               f"medians, then each launch's median): "
               f"{info['allreduce']}"),
        f"- command: `{info['command']}`",
        "",
        "### What these numbers do and do not say",
        "",
        bullet("**Two CPU cores, one host.** tp1 spreads every kernel over both cores with OpenMP threads in "
               "one address space. tp2 and dp2 run two single-threaded processes, one per core, that exchange "
               "data through MPI over shared memory (each all-reduce copies through a shared buffer; there is "
               "no network). So this compares threads against processes on the same two cores, not one "
               "device against two: the second rank brings no compute, memory or bandwidth that tp1 did not "
               "already have." + "".join(" " + x for x in (info['cores_sentence'], info['verdict']) if x)),
        bullet(f"**What tp2 changes in the work.** Megatron's split: the QKV projection and fc1 are "
               f"column-parallel, the attention output projection and fc2 row-parallel, each rank runs "
               f"{SIZES['num_attention_heads'] // 2} of the {SIZES['num_attention_heads']} heads, and the "
               f"embedding and LM head are split over the vocabulary. Each rank's GEMMs are half as wide "
               f"([{b * s} x {h}] x [{h} x {3 * h // 2}] instead of [{h} x {3 * h}] for QKV, [{h} x {FFN // 2}] "
               f"instead of [{h} x {FFN}] for fc1, contractions over {h // 2} and {FFN // 2} instead of {h} and "
               f"{FFN} for the row-parallel two): smaller calls, which use a wide machine (a GPU, many cores) "
               f"less well; the layer norms, residual adds, position embedding and the optimizer step of the "
               f"replicated parameters run on both ranks; and every layer adds 4 blocking all-reduces of "
               f"[b, s, h] = [{b}, {s}, {h}] activations ({b * s * h * 4 / 2**20:.0f} MiB in fp32): after the "
               f"attention output and after fc2 in the forward (Megatron's g), before QKV and before fc1 in "
               f"the backward (f). {info['comm_sentence']}"),
        bullet("**On a GPU node with NVLink** both sides of the trade change. An all-reduce of 2 MiB between "
               f"two GPUs over NVLink takes some tens of microseconds ({info['ar_here']}), and "
               "Megatron-style runtimes can overlap part of it with compute. But a GPU also runs this model's "
               f"GEMMs a hundred times faster or more, and GEMMs with h={h} are too small to keep one busy, "
               "so at this size the all-reduces and kernel launches would weigh more, not less, and halving "
               "each GEMM would save little. Megatron uses tp for hidden sizes in the thousands, inside one "
               "NVLink node, and above all to fit a model whose weights, gradients, optimizer state and "
               "activations do not fit one GPU (tp divides the memory of every split layer by tp). None of "
               f"that, memory included, is exercised by a {info['params_m']} M-parameter model on 2 CPU "
               "cores."),
        bullet("**What this says about megac's tensor parallelism.** The compiled tp2 and dp2 programs run "
               "under `mpirun`, the tp2 program trains the same model as tp1 (the loss check above), and the "
               "table shows what its plan costs on this machine. Correctness of the plans is tested "
               "elsewhere: `test/e2e/plan_parity.py` (tp2, tp4, dp2, dp4, tp2dp2 against one rank over 10 "
               "steps to 1e-5, and checkpoint interchange). It says nothing about how megac's tp scales on "
               "GPUs (megac emits CPU code only), across nodes, with more ranks or larger models, nor about "
               "sequence parallelism (`--sequence-parallel`, not measured here) or pipeline parallelism."),
        bullet("**Noise.** Shared 2-core virtual machine: the same run can vary by 20% or more from one round "
               "to the next (the per-round column), and much more when anything else runs, two-thread and "
               "two-rank runs most (a thread or rank that loses its core holds up the other at every "
               "barrier or all-reduce); the load line above records what else ran. " + OBSERVED),
    ]
    if "dp2" in rows:
        at = next(i for i, x in enumerate(lines) if x.startswith("- **On a GPU node"))
        lines.insert(at, bullet(f"**dp2** keeps the whole model on each rank, gives each rank its own micro batch "
                                f"and communicates once per iteration. {info['dp_sentence']}"))
    return "\n".join(lines)


def write_docs(markdown):
    replace_docs_block(DOCS, BEGIN, END, markdown, append_if_missing=True)
    log(f"wrote the section into {os.path.relpath(DOCS, os.getcwd())}")


def main(argv):
    if argv[:1] == ["--worker-data"]:
        return write_random_tokens(argv[1:], SIZES["vocab_size"], DATA_SEED)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="tp1,tp2,dp2,tp1x1",
                   help="comma-separated, from tp1, tp2, dp2, tp1x1 (default: all; tp1 is the baseline)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up iterations per run (not measured)")
    p.add_argument("--iters", type=int, default=16, help="measured iterations per run")
    p.add_argument("--rounds", type=int, default=3,
                   help="repeat all configurations, reversing the order every other round; medians pool all rounds")
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--megac", default=os.path.join(REPO, "build", "bin", "megac"), help="default: build/bin/megac")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--python", default="/usr/bin/python3", help="Python with numpy and torch (data, weights)")
    p.add_argument("--no-allreduce", action="store_true", help="skip the MPI all-reduce micro-benchmark")
    p.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temp dir, removed)")
    p.add_argument("--write-docs", action="store_true", help="write this benchmark's section of docs/benchmarks.md")
    a = p.parse_args(argv)
    names = [c.strip() for c in a.configs.split(",") if c.strip()]
    for c in names:
        if c not in CONFIGS:
            p.error(f"--configs: unknown configuration {c!r} (known: {', '.join(CONFIGS)})")
    names = [c for c in CONFIGS if c in names]  # table order
    if a.warmup < 0 or a.iters < 1 or a.rounds < 1 or a.micro_batch_size < 1:
        p.error("--warmup >= 0, --iters >= 1, --rounds >= 1, --micro-batch-size >= 1")
    if not os.access(a.megac, os.X_OK):
        sys.exit(f"error: {a.megac} not found; build megac first (scripts/build.sh) or pass --megac")
    if any(CONFIGS[c][1] > 1 for c in names) and not shutil.which(a.mpirun):
        sys.exit(f"error: {a.mpirun} not found (Open MPI)")

    tmp = None
    if a.keep:
        work = os.path.abspath(a.keep)
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="megac-scaling-")
        work = tmp.name

    log(f"bench: gpt2 L={SIZES['num_layers']} h={SIZES['hidden_size']} heads={SIZES['num_attention_heads']} "
        f"s={SIZES['seq_length']} V={SIZES['vocab_size']} ffn={FFN}, micro batch {a.micro_batch_size}; "
        f"{', '.join(names)}; {a.warmup} warm-up + {a.iters} measured iterations x {a.rounds} round(s); "
        f"work dir {work}")

    # Set-up (not timed): spec, data, initial weights, one program per plan.
    m = {"spec": os.path.join(work, "gpt2.yaml"), "data": os.path.join(work, "data"),
         "init": os.path.join(work, "init.safetensors"), "out": {}, "bindings": {}}
    write_spec(m["spec"])
    max_factor = max(CONFIGS[c][3] for c in names)
    tokens = (a.warmup + a.iters) * a.micro_batch_size * max_factor * SIZES["seq_length"] + 1
    run([a.python, os.path.abspath(__file__), "--worker-data", "--data-path", m["data"], "--tokens", str(tokens)])
    run([a.python, os.path.join(REFERENCE, "train.py"), "--spec", m["spec"], "--init-out", m["init"],
         "--seed", str(INIT_SEED)])
    programs = {}
    for c in names:
        flags = CONFIGS[c][0]
        key = tuple(flags)
        if key not in programs:
            out = os.path.join(work, "out-" + ("-".join(f.lstrip("-") for f in flags) or "tp1"))
            cmd = [a.megac, "compile", m["spec"], "--micro-batch-size", str(a.micro_batch_size), "-o", out] + flags
            if flags == ["--tp", "2"]:
                cmd += ["--dump-ir", os.path.join(work, "ir-tp2")]
            run(cmd)
            programs[key] = out
        m["out"][c] = programs[key]

    # What one all-reduce costs here, alone: one launch now, the others after the runs (a launch
    # that meets a busy core reads ~5x slower; the median of the launches is reported).
    b, s, h = a.micro_batch_size, SIZES["seq_length"], SIZES["hidden_size"]
    act, params = b * s * h, safetensors_numel(m["init"])
    ar_sizes, ar_launches = sorted({act, b * s, params}), {}
    ar_exe = None if a.no_allreduce else build_allreduce(work)
    if ar_exe:
        allreduce_timings(a, ar_exe, work, ar_sizes, ar_launches)

    # Measurement: one run at a time.
    records = {c: [] for c in names}
    load_before = loadavg()
    log(f"bench: load average before: {load_before}")
    meter = CpuMeter()
    for rnd in range(a.rounds):
        order = names if rnd % 2 == 0 else names[::-1]
        for c in order:
            t0 = time.monotonic()
            recs = measure(c, a, m, work, rnd)
            records[c].append(recs)
            tps = [r["tokens_per_s"] for r in recs[a.warmup:]]
            log(f"bench: {c:6s} round {rnd + 1}: {statistics.median(tps):7.1f} tokens/s median "
                f"(min {min(tps):.1f}, max {max(tps):.1f}), run took {time.monotonic() - t0:.1f} s")
    usage = meter.stop()
    load_after = loadavg()
    log(f"bench: load average after: {load_after}; other processes used ~{usage['other_cpu_pct']:.0f}% "
        f"of the machine's CPU time during the measurement (ours {usage['ours_cpu_pct']:.0f}%)")

    rows = {}
    for c in names:
        tps = [r["tokens_per_s"] for recs in records[c] for r in recs[a.warmup:]]
        ms = [r["ms_per_iter"] for recs in records[c] for r in recs[a.warmup:]]
        rows[c] = {"tps": statistics.median(tps), "ms": statistics.median(ms),
                   "rounds": [statistics.median([r["tokens_per_s"] for r in recs[a.warmup:]])
                              for recs in records[c]]}

    # tp1 vs tp2: same weights, same batches -> the same losses.
    loss_check = "not run (needs tp1 and tp2)"
    if "tp1" in rows and "tp2" in rows:
        one, two = records["tp1"][0], records["tp2"][0]
        rel = [abs(x["lm_loss"] - y["lm_loss"]) / abs(x["lm_loss"]) for x, y in zip(one, two)]
        ok = len(one) == len(two) and max(rel) <= LOSS_TOL
        loss_check = (f"iteration 1 {one[0]['lm_loss']:.6f} vs {two[0]['lm_loss']:.6f}; max relative "
                      f"difference over all {len(rel)} iterations {max(rel):.1e} "
                      f"({'ok' if ok else 'MISMATCH'}, tolerance {LOSS_TOL:g})")
        if not ok:
            log(f"bench: WARNING: tp1 and tp2 losses differ: {loss_check}")

    # What the tp2 program communicates, and what one all-reduce costs here.
    collectives, counts = "not counted (tp2 not compiled)", {}
    ir = os.path.join(work, "ir-tp2", "09-megac-tensor-parallel.mlir")
    if os.path.exists(ir):
        counts = count_collectives(ir)
        collectives = ", ".join(f"{n} {op.replace('_', '-')}s of {e} floats" for (op, e), n in
                                sorted(counts.items(), key=lambda kv: -kv[0][1]))
    if ar_exe:
        for _ in range(AR_LAUNCHES - 1):
            allreduce_timings(a, ar_exe, work, ar_sizes, ar_launches)
    timings = {n: statistics.median(v) for n, v in ar_launches.items()}
    allreduce = "; ".join(
        f"{n} floats ({n * 4 / 2**20:.2f} MiB) {fmt_ms(timings[n])} ms"
        + (f" (launches {' / '.join(fmt_ms(x) for x in v)})" if len(v) > 1 else "")
        for n, v in sorted(ar_launches.items())) or "not measured"
    L = SIZES["num_layers"]
    comm_sentence, dp_sentence, cores_sentence = "", f"It does twice tp1's work per iteration ({2 * b} samples)", ""
    big = sum(n for (op, e), n in counts.items() if e == act)
    small = sum(n for (op, e), n in counts.items() if e == b * s)
    if big:
        comm_sentence = f"The tp2 step has {big} all-reduces of that size"
        if big == 4 * L + 2:
            comm_sentence += (f" ({L} layers x 4, plus the vocabulary-parallel embedding's output and the LM "
                              f"head's input gradient)")
        if small:
            comm_sentence += f" and {small} of [b, s] for the vocabulary-parallel cross-entropy"
        if act in timings:
            comm_ms = sum(n * timings.get(e, 0.0) for (op, e), n in counts.items())
            spread = ar_launches[act]
            comm_sentence += f"; at {fmt_ms(timings[act])} ms each (measured alone"
            if len(spread) > 1 and max(spread) > 1.5 * min(spread):
                comm_sentence += (f"; {fmt_ms(min(spread))} to {fmt_ms(max(spread))} ms from one launch to the "
                                  f"next on this VM")
            comm_sentence += f") that is ~{comm_ms:.0f} ms"
            if "tp2" in rows:
                comm_sentence += (f", {pct(comm_ms / rows['tp2']['ms'])} of its {rows['tp2']['ms']:.0f} ms "
                                  f"iteration")
            comm_sentence += ", not counting the time a rank waits for the other to arrive"
        comm_sentence += "."
    if params in timings:
        dp_sentence += (f" and all-reduces its gradients once ({params * 4 / 1e6:.1f} MB, "
                        f"~{fmt_ms(timings[params])} ms here")
        if "dp2" in rows:
            dp_sentence += f", {pct(timings[params] / rows['dp2']['ms'])} of its {rows['dp2']['ms']:.0f} ms iteration"
        dp_sentence += ")"
    dp_sentence += "."
    if "dp2" in rows and "tp1x1" in rows:
        eff = rows["dp2"]["tps"] / (2 * rows["tp1x1"]["tps"])
        dp_sentence += (f" Since it hardly communicates, it shows what two single-threaded processes get out of"
                        f" these two cores: {rows['dp2']['tps']:.0f} tokens/s, {eff:.0%} of twice what one core"
                        f" does alone ({2 * rows['tp1x1']['tps']:.0f})")
        dp_sentence += ("; the rest is lost to the two cores slowing each other down (shared caches and memory"
                        " bandwidth, the host's other tenants, whatever else ran: see the load line)."
                        if eff < 0.95 else ".")
    if "tp1x1" in rows and ("tp1" in rows or "tp2" in rows):
        parts = [f"{label} {rows[c]['tps'] / rows['tp1x1']['tps']:.2f}x" for c, label in
                 (("tp1", "OpenMP's two threads (tp1) give"), ("tp2", "tp2's two ranks")) if c in rows]
        cores_sentence = "Against one core alone (tp1x1), " + " and ".join(parts) + "."

    verdict = ""
    if "tp1" in rows and "tp2" in rows:
        r1, r2 = rows["tp1"]["rounds"], rows["tp2"]["rounds"]
        ratio = rows["tp2"]["tps"] / rows["tp1"]["tps"]
        if len(r1) > 1 and max(r1) >= min(r2) and max(r2) >= min(r1):
            verdict = (f"tp2 ran at {ratio:.2f}x tp1's tokens/s, and their per-round medians overlap: on this "
                       f"machine the two are level within the noise.")
        else:
            verdict = (f"tp2 ran at {ratio:.2f}x tp1's tokens/s"
                       + (" (one round each: no spread to compare it with)." if len(r1) < 2 else
                          ", outside the spread of the per-round medians."))
        if len(r1) > 1:
            verdict += (f" Best rounds: tp1 {max(r1):.0f}, tp2 {max(r2):.0f} tokens/s; worst: tp1 {min(r1):.0f}, "
                        f"tp2 {min(r2):.0f}.")

    distinct = sorted(set(m["bindings"].values()))
    binds = distinct[0] if len(distinct) == 1 else "; ".join(f"{c}: {v}" for c, v in m["bindings"].items())
    info = {
        "date": datetime.date.today().isoformat(), "git": git_rev(), "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu_model(), "mpi": mpi_version(a.mpirun),
        "bindings": f"mpirun placed {binds} (`--report-bindings`)" if binds else "rank bindings not reported",
        "warmup": a.warmup, "iters": a.iters, "rounds": a.rounds, "micro_batch": b,
        "load_before": load_before, "load_after": load_after,
        "other_cpu_pct": usage["other_cpu_pct"], "ours_cpu_pct": usage["ours_cpu_pct"],
        "loss_check": loss_check, "collectives": collectives, "allreduce": allreduce,
        "params_m": f"{params / 1e6:.2f}", "grad_mb": params * 4 / 1e6,
        "comm_sentence": comm_sentence, "dp_sentence": dp_sentence, "cores_sentence": cores_sentence,
        "verdict": verdict, "ar_here": f"{fmt_ms(timings[act])} ms here, measured alone" if act in timings
        else "not measured here",
        "command": shlex.join(["/usr/bin/python3", "bench/parallel_scaling.py"] + argv),
    }
    markdown = results_markdown(rows, info)
    print()
    print(markdown)
    if a.write_docs:
        write_docs(markdown)
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
