#!/usr/bin/env python3
"""Epochs as Megatron's GPTDataset: a run asking 3x the data's samples trains through 3 epochs,
each a fresh shuffle of the same samples, and every plan reads the one global sequence.

A corpus of 10 samples of 32+1 tokens; 5 iterations of global batch 6 read 30 (epochs end inside
iterations 2 and 4). The single rank's header says "(3 epochs)"; tp2, dp2 and pp2 give its
per-step losses and gradient norms within plan_parity.py's 1e-5 (fp32 on CPU: another split
sums in another order, so the plan tests ask for that bound, not for equal bits); a run resumed
at iteration 2 (sample 12, inside epoch 2) gives iterations 3-5 bit for bit, as e2e-resume asks
of a resume on the same plan.

    epochs.py --megac build/bin/megac --spec test/e2e/specs/gpt2-tp.yaml --workdir DIR
"""
import argparse
import os
import re
import shutil
import sys

from e2e_util import MPI_ENV, compare_metrics, metrics, run
from plan_parity import TOLERANCE, plan_flags

SAMPLES, BATCH, ITERS = 10, 6, 5  # 30 samples: 3 epochs
TRAIN = ["--train-iters", str(ITERS), "--global-batch-size", str(BATCH), "--lr", "1e-3", "--seed", "7"]


def make_corpus(megac, workdir):
    """One document of 330 bytes (+ its end-of-document token): (331 - 1) // 32 = 10 samples."""
    text = os.path.join(workdir, "text.txt")
    with open(text, "w") as f:
        f.write(("Epoch after epoch the same samples come back, each time in another order. " * 5)[:330])
    prefix = os.path.join(workdir, "corpus")
    run([megac, "data", "--input", text, "--output-prefix", prefix])
    return prefix


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    train = TRAIN + ["--data-path", make_corpus(args.megac, args.workdir)]
    failures = []

    run([args.megac, "compile", args.spec, "--micro-batch-size", "1", "-o", w("single")])
    shutil.rmtree(w("ckpt"), ignore_errors=True)
    out = run([w("single", "train"), *train, "--metrics-file", w("single.jsonl"), "--save", w("ckpt"),
               "--save-interval", "2"], env={"OMP_NUM_THREADS": "1"})
    header = re.search(r"data: .*", out).group(0)
    want = f"{SAMPLES} samples of 32+1 tokens; using {SAMPLES * 3} in shuffled order (3 epochs)"
    ok = header.endswith(want) and len(metrics(w("single.jsonl"))) == ITERS
    print(f"{'ok  ' if ok else 'FAIL'} single rank: {header}")
    if not ok:
        failures.append(f"header (want '... {want}')")

    for plan in ("tp2", "dp2", "pp2"):
        flags, world = plan_flags(plan)
        if "--global-batch-size" in flags:  # a pipeline is compiled for the batch's microbatches
            flags[flags.index("--global-batch-size") + 1] = str(BATCH)
        run([args.megac, "compile", args.spec, "--micro-batch-size", "1", *flags, "-o", w(plan)])
        run(["mpirun", "-np", str(world), w(plan, "train"), *train, "--metrics-file", w(plan + ".jsonl")],
            env=MPI_ENV)
        ok, report = compare_metrics(w(plan + ".jsonl"), w("single.jsonl"), TOLERANCE, (plan, "single"), plan,
                                     steps=ITERS)
        exact = ok and all(a["lm_loss"] == b["lm_loss"]
                           for a, b in zip(metrics(w(plan + ".jsonl")), metrics(w("single.jsonl"))))
        print(("ok   " if ok else "FAIL ") + report.replace("\n", "\n     ") +
              (", losses bit-identical" if exact else ""))
        if not ok:
            failures.append(plan)

    # Resumed inside epoch 2: the rest of the sequence, bit for bit.
    out = run([w("single", "train"), *train, "--load", w("ckpt"), "--ckpt-step", "2",
               "--metrics-file", w("resumed.jsonl")], env={"OMP_NUM_THREADS": "1"})
    resumed, straight = metrics(w("resumed.jsonl")), metrics(w("single.jsonl"))[2:]
    same = [(a["lm_loss"], a["grad_norm"]) == (b["lm_loss"], b["grad_norm"]) for a, b in zip(resumed, straight)]
    ok = len(resumed) == ITERS - 2 and all(same) and "from sample 12 (epochs 2 to 3)" in out
    print(f"{'ok  ' if ok else 'FAIL'} resumed at iteration 2 (sample 12, epoch 2): iterations 3-{ITERS} "
          f"{sum(same)} of {ITERS - 2} bit-identical to the straight run; "
          f"{re.search(r'using .*', out).group(0)}")
    if not ok:
        failures.append("resume")
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")
    print("epochs: 3 epochs, 3 plans and a resume give the single rank's run")


if __name__ == "__main__":
    main()
