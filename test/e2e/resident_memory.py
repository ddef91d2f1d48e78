"""The memory plan against the operating system: for each plan, how much the process's resident
memory grows from before the training state is allocated to the end of the first iteration
(OUT/train's first metrics record, from /proc/self/statm) is within 5% of the total megac
predicted for that rank (OUT/rank-memory.json), and every tracked category equals its prediction.
The model is sized so that the plan, not the libraries, is most of the memory. Run with
/usr/bin/python3."""
import argparse
import json
import os
import sys

from e2e_util import MPI_ENV, make_license_corpus, metrics, run

TOLERANCE = 0.05  # the bound: libraries, MPI and the allocator hold the rest
CATEGORIES = ("parameters", "gradients", "optimizer_state", "master_weights", "activations", "workspace",
              "communication", "data", "offloaded_optimizer")
# (name, megac compile flags, ranks, global batch)
PLANS = [("single", [], 1, 1),
         ("dp2", ["--dp", "2"], 2, 2),  # one 30 M-float gradient bucket all-reduced
         ("dp2 optim_grads_params", ["--dp", "2", "--data-parallel-sharding-strategy", "optim_grads_params"], 2, 2),
         # buckets of about a layer: many MPI reduce-scatters and gathers, whose temporaries the
         # allocator must give back (train_main fixes glibc's mmap threshold)
         ("dp2 optim, 4 MB buckets", ["--dp", "2", "--use-distributed-optimizer", "--ddp-bucket-size", "1000000"], 2, 2),
         ("tp2 sp", ["--tp", "2", "--sp"], 2, 1),
         ("pp2", ["--pp", "2", "--global-batch-size", "2"], 2, 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    make_license_corpus(args.megac, w("corpus"))
    failures = 0
    for name, flags, ranks, batch in PLANS:
        out = w(name.replace(" ", "-"))
        run([args.megac, "compile", args.spec, "--micro-batch-size", "1", "-o", out] + flags)
        launch = ["mpirun", "-np", str(ranks)] if ranks > 1 else []
        run(launch + [os.path.join(out, "train"), "--data-path", w("corpus"), "--train-iters", "1",
                      "--global-batch-size", str(batch), "--lr", "1e-4", "--metrics-file", w("m.jsonl")], env=MPI_ENV)
        first = metrics(w("m.jsonl"))[0]
        with open(os.path.join(out, "rank-memory.json")) as f:
            stage = json.load(f)["stages"][0]  # global rank 0's: pp stage 0
        predicted = dict(stage["bytes"])
        if "--pp" not in flags:  # the token buffers scale with OUT/train's global batch
            dp = int(flags[flags.index("--dp") + 1]) if "--dp" in flags else 1
            predicted["data"] = stage["data_bytes_per_microbatch"] * (batch // dp)
        total = sum(predicted.values())
        measured = first.get("memory_per_pp_stage", [first["memory"]])[0]
        growth = first.get("resident_growth_bytes", -1)
        exact = all(measured[c] == predicted[c] for c in CATEGORIES) and measured["peak_total"] == total
        within = growth > 0 and abs(growth - total) <= TOLERANCE * total
        failures += not (exact and within)
        print(f"{name:24s} ({ranks} rank{'s' if ranks > 1 else ''}): predicted {total} bytes, tracked "
              f"{measured['peak_total']} ({'every category equal' if exact else 'categories DIFFER'}), resident "
              f"growth {growth} = {growth / total:.4f} x predicted (bound 1 +- {TOLERANCE}) "
              f"{'ok' if exact and within else 'FAIL'}")
    print(f"resident memory: {len(PLANS) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
