"""Single-rank parity: OUT/train (compiled by megac) and the independent PyTorch reference in
test/reference start from the same safetensors weights, train 10 steps on the same data with
weight decay, clipping, warmup + cosine LR and gradient accumulation, and must agree on every
step's loss and gradient norm within 1e-4 relative. Run with /usr/bin/python3 (Debian's torch)."""
import argparse
import os
import sys

from e2e_util import make_corpus_for, metrics, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOLERANCE = 1e-4  # the bound; fp32 on both sides agrees to ~1e-7 in practice

TRAIN_FLAGS = ["--train-iters", "10", "--micro-batch-size", "2", "--global-batch-size", "4",
               "--lr", "1e-3", "--min-lr", "1e-4", "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
               "--weight-decay", "0.1", "--adam-beta1", "0.9", "--adam-beta2", "0.95",
               "--adam-eps", "1e-8", "--clip-grad", "1.0"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--falls-from", type=int, default=1,
                    help="the iteration the loss must fall from by iteration 10 (default: the first)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda name: os.path.join(args.workdir, name)
    ref = [sys.executable, os.path.join(ROOT, "test", "reference", "train.py"), "--spec", args.spec]

    make_corpus_for(args.megac, args.spec, w("corpus"))
    run([args.megac, "compile", args.spec, "--micro-batch-size", "2", "-o", w("out")])
    run(ref + ["--init-out", w("init.safetensors"), "--seed", "7"])
    common = TRAIN_FLAGS + ["--data-path", w("corpus"), "--load", w("init.safetensors")]
    run(ref + common + ["--metrics-file", w("reference.jsonl")])
    run([w("out/train")] + common + ["--no-shuffle", "--metrics-file", w("megac.jsonl")])

    ours, theirs = metrics(w("megac.jsonl")), metrics(w("reference.jsonl"))
    if len(ours) != 10 or len(theirs) != 10:
        sys.exit(f"parity: expected 10 iterations from each side, got {len(ours)} and {len(theirs)}")
    worst, failures = 0.0, 0
    print(f"{'iter':>4} {'megac loss':>14} {'torch loss':>14} {'rel':>9} {'megac gnorm':>12} {'torch gnorm':>12} {'rel':>9}")
    for a, b in zip(ours, theirs):
        rel_loss = abs(a["lm_loss"] - b["lm_loss"]) / abs(b["lm_loss"])
        rel_norm = abs(a["grad_norm"] - b["grad_norm"]) / abs(b["grad_norm"])
        # A reported metric of the reference's (a mixture of experts' load_balancing_loss) must be
        # megac's too, and agree.
        extra = {k: (a.get(k), b[k]) for k in b
                 if k not in ("iteration", "lm_loss", "grad_norm", "lr", "tokens_per_expert")}
        rel_extra = max([abs(x - y) / abs(y) if x is not None else float("inf") for x, y in extra.values()],
                        default=0.0)
        # A mixture of experts' load histogram: the same integers (a near-tie routed differently
        # would change the loss too; the specs' routers are drawn wide enough to have none).
        load_differs = a.get("tokens_per_expert") != b.get("tokens_per_expert")
        bad = rel_loss > TOLERANCE or rel_norm > TOLERANCE or rel_extra > TOLERANCE or load_differs
        if load_differs:
            print(f"     tokens_per_expert: megac {a.get('tokens_per_expert')}, torch {b.get('tokens_per_expert')}")
        failures += bad
        worst = max(worst, rel_loss, rel_norm, rel_extra)
        shown = "".join(f"  {k} {x if x is None else f'{x:.8f}'} / {y:.8f}" for k, (x, y) in extra.items())
        print(f"{a['iteration']:>4} {a['lm_loss']:>14.8f} {b['lm_loss']:>14.8f} {rel_loss:>9.2e} "
              f"{a['grad_norm']:>12.6f} {b['grad_norm']:>12.6f} {rel_norm:>9.2e}{shown}{'  <-- FAIL' if bad else ''}")
    if ours[-1]["lm_loss"] >= ours[args.falls_from - 1]["lm_loss"]:
        failures += 1
        print(f"the loss did not fall from iteration {args.falls_from} to 10")
    name = os.path.basename(args.spec)
    print(f"parity {name}: {10 - failures} passed, {failures} failed (max relative difference {worst:.2e}, "
          f"bound {TOLERANCE:g})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
