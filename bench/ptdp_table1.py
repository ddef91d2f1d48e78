#!/usr/bin/env python3
"""megac simulate against the PTD-P paper's Table 1 (Narayanan et al. 2021, arXiv 2104.04473;
facts.md): the ten GPT models on Selene (clusters/selene-a100.yaml), each at the table's tp, pp,
GPU count and batch, simulated and printed beside the paper's TFLOP/s per GPU (issue 17: within 10%).

    /usr/bin/python3 bench/ptdp_table1.py                # ~2 min: the table, then megac plan per row
    /usr/bin/python3 bench/ptdp_table1.py --write-docs   # also writes its section of docs/benchmarks.md
    /usr/bin/python3 bench/ptdp_table1.py --check [--plan-rows 1.7,1008]
                                                         # lit: the figures add up; megac plan on
                                                         # those rows >= the paper's plan and compiles
                                                         # (the times are printed, bounded only here:
                                                         # the 1T row < 10 s, megac plan < 10 s per row)

TFLOP/s per GPU are counted as the paper counts them: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per
iteration (full recomputation included) over the simulated iteration time and the GPUs.
The paper's settings (facts.md): V 51200, s 2048, fp16, activation recomputation. Where the paper
is silent, ASSUMPTIONS below says what is simulated instead.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import git_rev, publish  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- ptdp-table1:begin -->", "<!-- ptdp-table1:end -->"
BOUND = 0.10
V, S = 51200, 2048
# params (B), heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU (the paper's Table 1).
ROWS = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137), (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142), (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138), (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148), (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163), (1008, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
ASSUMPTIONS = [
    "micro batch 1 for every row (the paper gives it for the 1T row only)",
    "interleaved schedule for every row with pp > 1, v = the smallest divisor > 1 of the layers per stage "
    "(the paper: 'interleaved schedule for the larger rows', v not given per row)",
    "full recomputation of every layer (--recompute-granularity full --recompute-method uniform "
    "--recompute-num-layers 1), as the paper's 96 B s l h^2 count assumes",
    "attention costed as Megatron's unfused kernels of 2021 (--attention-backend unfused: the s x s scores "
    "written out, a softmax, batched GEMMs); no dropout (the simulator does not cost it; the paper's runs had Megatron's 0.1)",
    "data-parallel gradient sums in 16 bits (--grad-reduce-in-bf16: Megatron's fp16 default without "
    "--accumulate-allreduce-grads-in-fp32), not overlapped with backward (Megatron's local DDP of 2021)",
    "megac's own program otherwise: the pipeline sends whole boundary tensors (no scatter/gather "
    "optimization), parameters are fp32 master weights (memory is megac's plan, not Megatron's)",
]


def plan_flags(heads, hidden, layers, tp, pp, gpus):
    dp = gpus // (tp * pp)
    flags = ["--tp", str(tp), "--pp", str(pp), "--dp", str(dp), "--micro-batch-size", "1", "--fp16",
             "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
             "--attention-backend", "unfused", "--grad-reduce-in-bf16"]
    if pp > 1:
        per_stage = layers // pp
        flags += ["--vpp", str(next(v for v in range(2, per_stage + 1) if per_stage % v == 0))]
    return dp, flags


def paper_flops(batch, layers, hidden):
    return 96 * batch * S * layers * hidden * hidden * (1 + S / (6 * hidden) + V / (16 * layers * hidden))


def simulate_row(megac, workdir, row):
    params, heads, hidden, layers, tp, pp, gpus, batch, paper = row
    spec = os.path.join(workdir, f"gpt-{params}b.yaml")
    with open(spec, "w") as f:
        f.write(f"# PTD-P Table 1, {params}B\nfamily: gpt2\nnum_layers: {layers}\nhidden_size: {hidden}\n"
                f"num_attention_heads: {heads}\nseq_length: {S}\nvocab_size: {V}\n"
                "hidden_dropout: 0.0\nattention_dropout: 0.0\n")  # the simulator does not cost dropout
    dp, flags = plan_flags(heads, hidden, layers, tp, pp, gpus)
    cmd = [megac, "simulate", spec, "--cluster", "selene-a100", "--global-batch-size", str(batch), "--json"] + flags
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{r.stderr}")
    sim = json.loads(r.stdout)
    tflops = paper_flops(batch, layers, hidden) / sim["iteration_time_s"] / gpus / 1e12
    return dict(row=row, dp=dp, flags=flags, sim=sim, tflops=tflops, error=tflops / paper - 1, wall=wall)


def plan_row(megac, workdir, result):
    """megac plan for the row's GPUs and batch (the same costing), timed; its best plan compiled
    (--no-build) to show the compiler accepts it."""
    params, heads, hidden, layers, tp, pp, gpus, batch, paper = result["row"]
    spec = os.path.join(workdir, f"gpt-{params}b.yaml")
    cmd = [megac, "plan", spec, "--gpus", str(gpus), "--cluster", "selene-a100", "--global-batch-size", str(batch),
           "--fp16", "--attention-backend", "unfused", "--grad-reduce-in-bf16", "--top", "1"]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    best = next(line for line in r.stdout.splitlines() if line.startswith("1. "))
    compile_cmd = next(line for line in r.stdout.splitlines() if line.strip().startswith("megac compile")).split()
    out = os.path.join(workdir, f"plan-{params}b")
    compile_cmd = [megac] + compile_cmd[1:compile_cmd.index("-o")] + ["--no-build", "-o", out]
    compiled = subprocess.run(compile_cmd, capture_output=True, text=True).returncode == 0
    tokens = float(best.split()[1])
    plan = best.split(": ", 1)[1]
    return dict(tokens=tokens, plan=plan, wall=wall, compiled=compiled,
                paper_tokens=result["sim"]["tokens_per_s"], summary=r.stdout.splitlines()[1])


def plan_table(results, plans):
    lines = ["| params (B) | GPUs | megac plan's best plan | its tokens/s | the paper's plan | ratio | compiles | "
             "megac plan s |", "|---|---|---|---|---|---|---|---|"]
    for r, p in zip(results, plans):
        if p is None:
            continue
        lines.append(f"| {r['row'][0]} | {r['row'][6]} | {p['plan']} | {p['tokens']:.4g} | {p['paper_tokens']:.4g} | "
                     f"{p['tokens'] / p['paper_tokens']:.3f} | {'yes' if p['compiled'] else 'NO'} | {p['wall']:.1f} |")
    return lines


def check_plans(results, plans):
    failed = 0
    for r, p in zip(results, plans):
        if p is None:
            continue
        name = f"{r['row'][0]}B"
        ok = p["tokens"] >= p["paper_tokens"] and p["compiled"]
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} megac plan {name}: {p['wall']:.1f} s, best plan "
              f"{p['tokens']:.4g} tokens/s vs the paper's plan {p['paper_tokens']:.4g}, compiles: {p['compiled']}")
    return failed


def table(results):
    lines = ["| params (B) | tp | pp | dp | v | GPUs | batch | paper TFLOP/s | simulated | error | bubble | tp comm "
             "| dp comm | memory GiB (fits 80?) | simulate s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        params, _, _, _, tp, pp, gpus, batch, paper = r["row"]
        sim, t = r["sim"], r["sim"]["iteration_time_s"]
        v = r["flags"][r["flags"].index("--vpp") + 1] if "--vpp" in r["flags"] else "1"
        split = sim["time_split_s"]
        lines.append(f"| {params} | {tp} | {pp} | {r['dp']} | {v} | {gpus} | {batch} | {paper} | {r['tflops']:.1f} | "
                     f"{100 * r['error']:+.1f}% | {100 * split['pipeline_bubble'] / t:.1f}% | "
                     f"{100 * split['tp_communication'] / t:.1f}% | {100 * split['dp_communication'] / t:.1f}% | "
                     f"{max(sim['memory_gib_per_gpu']):.1f} ({'yes' if sim['fits'] else 'no'}) | {r['wall']:.2f} |")
    within = sum(abs(r["error"]) <= BOUND for r in results)
    mean = sum(abs(r["error"]) for r in results) / len(results)
    worst = max(results, key=lambda r: abs(r["error"]))
    lines.append("")
    lines.append(f"{within} of {len(results)} rows within {100 * BOUND:.0f}% of the paper; mean |error| "
                 f"{100 * mean:.1f}%, worst {100 * worst['error']:+.1f}% ({worst['row'][0]}B)")
    return lines


def time_bounds(results, plans):
    """The speed the issue asked of the simulator and the search, against its bounds (measured
    here, not in the lit test: a busy machine must not fail a test)."""
    one_t = results[-1]["wall"]
    lines = [f"The 1T row simulates in {one_t:.2f} s (bound 10 s: {'ok' if one_t < 10 else 'OVER'})."]
    timed = [p["wall"] for p in plans if p is not None]
    if timed:
        lines.append(f"megac plan's slowest row took {max(timed):.1f} s (bound 10 s, issue [20]: "
                     f"{'ok' if max(timed) < 10 else 'OVER'}).")
    return lines


def check(results):
    """What must hold whatever the constants: the split adds up to the iteration, the paper-count
    TFLOP/s is the simulator's own (megac counts no recomputation: 72 of the paper's 96 on the
    layers' GEMMs) scaled as the formulas say. Wall-clock times are printed, not bounded: a test
    must not fail on a busy machine (the bench's table records them)."""
    failed = 0
    for r in results:
        sim, name = r["sim"], f"{r['row'][0]}B"
        total = sum(sim["time_split_s"].values())
        if abs(total - sim["iteration_time_s"]) > 1e-9 * sim["iteration_time_s"]:
            print(f"FAIL {name}: the time split adds to {total}, the iteration is {sim['iteration_time_s']}")
            failed += 1
        ratio = r["tflops"] / sim["tflops_per_gpu"]
        if not 1.25 < ratio < 1.40:
            print(f"FAIL {name}: paper-count / megac-count TFLOP/s = {ratio:.3f}, not about 96/72")
            failed += 1
    print(f"the 1T row on 3072 GPUs simulated in {results[-1]['wall']:.2f} s")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megac", default=os.path.join(REPO, "build", "bin", "megac"))
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--check", action="store_true", help="check what must hold (lit) instead of publishing")
    ap.add_argument("--plan-rows", default=None,
                    help="comma-separated params (B) of the rows to run megac plan on (default: all, or none with "
                         "--check)")
    a = ap.parse_args()
    wanted = ([float(x) for x in a.plan_rows.split(",")] if a.plan_rows is not None
              else [] if a.check else [row[0] for row in ROWS])
    with tempfile.TemporaryDirectory(prefix="ptdp-table1-") as workdir:
        results = [simulate_row(a.megac, workdir, row) for row in ROWS]
        plans = [plan_row(a.megac, workdir, r) if r["row"][0] in wanted else None for r in results]
    lines = table(results)
    plan_lines = plan_table(results, plans) if any(plans) else []
    if a.check:
        print("\n".join(lines + [""] + plan_lines))
        failed = check(results) + check_plans(results, plans)
        print(f"{failed} failed")
        return 1 if failed else 0
    section = "\n".join([
        f"### megac simulate against PTD-P Table 1 (Selene, A100 80GB) — {datetime.date.today()}, {git_rev()}",
        "",
        "`/usr/bin/python3 bench/ptdp_table1.py --write-docs`: clusters/selene-a100.yaml (every constant from a "
        "specification or a published measurement, none fitted to this table). TFLOP/s per GPU counted as the "
        "paper does (96 B s l h^2 (1 + s/6h + V/16lh), recomputation included). Assumptions where the paper is "
        "silent:",
        "",
        *[f"- {x}" for x in ASSUMPTIONS],
        "",
        *lines,
        "",
        "`megac plan` for each row (the row's GPUs and batch, the same costing and assumptions; it searches tp, pp, "
        "vpp, dp, sp, micro batch, recomputation and sharding, docs/simulate.md), its best plan against the paper's "
        "plan as simulated above, tokens/s; 'compiles': `megac compile` of the printed command with --no-build:",
        "",
        *plan_lines,
        "",
        *time_bounds(results, plans),
    ])
    publish(section, a.write_docs, DOCS, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
