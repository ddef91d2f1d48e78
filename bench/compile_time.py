"""How `megac compile` time grows with depth: the GPT-2 tiny spec at 1,000 / 2,000 / 4,000 layers
(and at pp 4), compiled with --no-build (the compiler only, not the C++ build of OUT). Reports the
best of --rounds wall times and the ratio to the first size, measured in the same run: linear
growth doubles the time when the layers double."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

from bench_util import REPO, cpu_model, git_rev, log, replace_docs_block

BEGIN, END = "<!-- compile_time.py begin -->", "<!-- compile_time.py end -->"


def write_spec(path, layers):
    with open(path, "w") as f:
        f.write(f"family: gpt2\nnum_layers: {layers}\nhidden_size: 64\nnum_attention_heads: 4\n"
                "seq_length: 32\nvocab_size: 257\n")


def compile_seconds(megac, spec, plan, out, rounds):
    best = None
    for _ in range(rounds):
        start = time.monotonic()
        p = subprocess.run([megac, "compile", spec, *plan, "--micro-batch-size", "2", "--no-build",
                            "-o", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seconds = time.monotonic() - start
        if p.returncode != 0:
            sys.exit(f"megac compile failed ({p.returncode}):\n{p.stdout[-2000:]}")
        best = seconds if best is None else min(best, seconds)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--megac", default=os.path.join(REPO, "build", "bin", "megac"))
    ap.add_argument("--layers", default="1000,2000,4000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write-docs", action="store_true", help="rewrite the table in docs/benchmarks.md")
    a = ap.parse_args()
    sizes = [int(x) for x in a.layers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for plan in ([], ["--pp", "4"]):
            base = None
            for layers in sizes:
                spec = os.path.join(work, f"gpt2-L{layers}.yaml")
                write_spec(spec, layers)
                s = compile_seconds(a.megac, spec, plan, os.path.join(work, "out"), a.rounds)
                base = base or s
                ratio = s / base
                rows.append((" ".join(plan) or "1 rank", layers, s, ratio, layers / sizes[0]))
                log(f"{rows[-1][0]:>8} {layers:>6} layers: {s:6.2f} s  ({ratio:4.1f}x the first, "
                    f"{layers / sizes[0]:.0f}x the layers)")
    table = ["| plan | layers | compile s (best of %d) | time ratio | layer ratio |" % a.rounds,
             "|---|---|---|---|---|"]
    table += [f"| {p} | {n} | {s:.2f} | {r:.2f}x | {l:.0f}x |" for p, n, s, r, l in rows]
    table.append(f"\nMeasured at {git_rev()} on {cpu_model()} ({os.cpu_count()} CPUs), "
                 f"`/usr/bin/python3 bench/compile_time.py`.")
    if a.write_docs:
        replace_docs_block(os.path.join(REPO, "docs", "benchmarks.md"), BEGIN, END, "\n".join(table),
                           append_if_missing=True)


if __name__ == "__main__":
    main()
