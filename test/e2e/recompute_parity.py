"""Activation recomputation must not change a bit: for each plan, full recomputation (uniform and
block) and selective recomputation give per-step losses and gradient norms (and a mixture of
experts' tokens_per_expert) identical to the same
plan without recomputation (fp32, CPU, mpirun, 10 steps; metrics print %.17g), the runtime's
memory per category equals OUT/rank-memory.json and its bytes sent per axis (a rerun layer's
collectives included) OUT/rank-communication.json, and each mode stashes less than no
recomputation (measured); with tp and without sp also with --distribute-saved-activations, which
must hold less than full recomputation alone. Run with /usr/bin/python3."""
import argparse
import os
import shutil
import sys

from e2e_util import MPI_ENV, TRAIN, make_corpus_for, metrics, run
from plan_parity import communication_matches, memory_matches, plan_flags

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Each mode's megac compile flags. Uniform groups of 2 layers stash one input per group; block
# recomputes the first layer of each chunk only; selective recomputes the MLP and the norms.
MODES = {
    "full-uniform": ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "2"],
    "full-block": ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1"],
    "selective": ["--recompute-granularity", "selective", "--recompute-modules", "mlp,layernorm"],
}
# With tp and without sp: each group's saved input split over tp, gathered before the rerun.
DISTRIBUTED = {"full-distributed": MODES["full-uniform"] + ["--distribute-saved-activations"]}


def stashed_bytes(record):
    """What a rank holds of the microbatches' activations between forward and backward: the
    pipeline's stash with pp, else the step's workspace (which holds them)."""
    memory = record.get("memory_per_pp_stage") or [record["memory"]]
    return sum(m["activations"] if m["activations"] else m["workspace"] for m in memory)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--plans", required=True, help="comma-separated plan_parity.py plans; 'single' is one rank")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    make_corpus_for(args.megac, args.spec, w("corpus"))
    run([sys.executable, os.path.join(ROOT, "test", "reference", "train.py"), "--spec", args.spec,
         "--init-out", w("init.safetensors"), "--seed", "11"])
    common = TRAIN + ["--data-path", w("corpus"), "--load", w("init.safetensors")]

    failures = 0
    for plan in args.plans.split(","):
        flags, world = ([], 1) if plan == "single" else plan_flags(plan)
        runs = {}
        modes = dict(MODES, **(DISTRIBUTED if "--tp" in flags and "--sp" not in flags else {}))
        for mode, mode_flags in [("none", [])] + list(modes.items()):
            name = f"{plan}-{mode}"
            out = w(name)
            shutil.rmtree(out, ignore_errors=True)
            run([args.megac, "compile", args.spec, "--micro-batch-size", "2", "-o", out] + flags + mode_flags)
            launch = [os.path.join(out, "train")]
            if world > 1:
                launch = ["mpirun", "-np", str(world), "--oversubscribe"] + launch
            run(launch + common + ["--metrics-file", w(name + ".jsonl")], env=MPI_ENV)
            runs[mode] = metrics(w(name + ".jsonl"))
            failures += not memory_matches(out, runs[mode][0], name, flags)
            failures += not communication_matches(out, runs[mode][1], name, flags)
        base = runs["none"]
        for mode in modes:
            ours = runs[mode]
            # A mixture of experts' load histogram too: a rerun layer must not count its tokens again.
            keys = ("lm_loss", "grad_norm", "tokens_per_expert")
            differs = lambda a, b: any(a.get(k) != b.get(k) for k in keys)
            same = len(ours) == len(base) == 10 and not any(differs(a, b) for a, b in zip(ours, base))
            differing = sum(differs(a, b) for a, b in zip(ours, base))
            ref = "full-uniform" if mode in DISTRIBUTED else "none"
            less = stashed_bytes(ours[0]) < stashed_bytes(runs[ref][0])
            failures += not (same and less)
            print(f"{os.path.basename(args.spec)} {plan:10s} {mode:12s} ({world} ranks): losses and grad norms "
                  f"{'bit-identical' if same else f'DIFFER in {differing} steps'} to no recomputation; activations "
                  f"held {stashed_bytes(ours[0])} vs {stashed_bytes(runs[ref][0])} bytes ({ref}) "
                  f"{'ok' if same and less else 'FAIL'}")
    if failures:
        sys.exit(f"recompute_parity: {failures} check(s) failed")
    print("recompute_parity: all checks passed")


if __name__ == "__main__":
    main()
