"""Sequence parallelism in the simulator, run with /usr/bin/python3 (issue [20]): for the same
plans, `megac simulate --sp` never adds GEMM time (the IR's GEMMs are the same: each rank computes
its rows of every weight gradient), and its step is no slower than without --sp by more than the
tensor-parallel time it adds (the backward's re-gathers). GPT-3 175B on clusters/selene-a100 at
tp 8, pp 8, vpp 3, batch 64, fp16, micro batch 1 (where a flattened batch keeps sp's split) and 2,
with and without full recomputation. Prints the time splits."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = ["--cluster", os.path.join(ROOT, "clusters", "selene-a100.yaml"), "--tp", "8", "--pp", "8", "--vpp", "3",
        "--global-batch-size", "64", "--fp16", "--json"]
RECOMPUTE = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]


def simulate(megac, flags):
    out = subprocess.run([megac, "simulate", os.path.join(ROOT, "examples", "gpt3-175b.yaml"), *PLAN, *flags],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"megac simulate {' '.join(flags)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--megac", required=True)
    args = ap.parse_args()
    failures = 0
    for micro in ("1", "2"):
        for name, extra in (("", []), (", full recomputation", RECOMPUTE)):
            plain = simulate(args.megac, ["--micro-batch-size", micro, *extra])
            sp = simulate(args.megac, ["--micro-batch-size", micro, "--sp", *extra])
            a, b = plain["time_split_s"], sp["time_split_s"]
            # GEMMs: equal up to the rounding of summing the same costs in another order.
            gemms_ok = b["compute"] <= a["compute"] * (1 + 1e-9)
            slower = sp["iteration_time_s"] - plain["iteration_time_s"]
            added_tp = b["tp_communication"] - a["tp_communication"]
            step_ok = slower <= max(added_tp, 0.0) + 1e-9
            ok = gemms_ok and step_ok
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} micro batch {micro}{name}: step {plain['iteration_time_s']:.2f} s -> "
                  f"{sp['iteration_time_s']:.2f} s with --sp; GEMMs {a['compute']:.2f} -> {b['compute']:.2f} s, tp "
                  f"communication {a['tp_communication']:.2f} -> {b['tp_communication']:.2f} s, memory-bound "
                  f"{a['memory_bound']:.2f} -> {b['memory_bound']:.2f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
