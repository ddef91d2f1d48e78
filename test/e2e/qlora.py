"""QLoRA (megac compile --lora-rank R --qlora --bf16): the frozen base's linear weights kept in NF4
with double quantization (bitsandbytes' layout, checked byte for byte by nf4_bitsandbytes.py),
activations in bf16, against bf16 LoRA on the same base and data:

1. the loss falls over 50 steps on the example data (the license corpus), and each step's loss
   is within 3% of bf16 LoRA's; the first differs (the base really is quantized);
2. the memory the runtime allocates per category equals the compiler's prediction, and the NF4
   weights take about 4.127 bits per weight (4 + 8/64 + 32/(64 x 256), plus one offset each)."""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from e2e_util import dropout_free_spec, make_license_corpus, metrics, relative, run, train_flags  # noqa: E402

STEPS = 50
TOLERANCE = 0.03
LORA = ["--lora-rank", "8", "--lora-alpha", "16", "--lora-target-modules", "all-linear", "--bf16"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    name = os.path.basename(args.spec)
    make_license_corpus(args.megac, w("corpus"))
    spec = w("spec.yaml")
    dropout_free_spec(args.spec, spec)
    for d in ("base-ckpt",):
        shutil.rmtree(w(d), ignore_errors=True)
    # The base: a few steps of full training from the reference's initial weights (a base that has
    # seen the fine-tuning data many times would leave its loss nothing to fall by).
    run([sys.executable, os.path.join(ROOT, "test", "reference", "train.py"), "--spec", spec,
         "--init-out", w("init.safetensors"), "--seed", "11"])
    run([args.megac, "compile", spec, "--micro-batch-size", "2", "-o", w("base")])
    run([w("base", "train")] + train_flags(5, lr="3e-3") + ["--data-path", w("corpus"), "--load",
                                                             w("init.safetensors"), "--save", w("base-ckpt")])
    base = w("base-ckpt", "iter_0000005")
    losses, memory = {}, {}
    for mode, extra in (("lora", []), ("qlora", ["--qlora"])):
        run([args.megac, "compile", spec, "--micro-batch-size", "2", "-o", w(mode)] + LORA + extra)
        # Shuffled (the same order for both): early and late batches alike, whatever the base saw.
        flags = [f for f in train_flags(STEPS, lr="3e-3") if f != "--no-shuffle"]
        run([w(mode, "train")] + flags + ["--data-path", w("corpus"), "--load", base,
                                          "--metrics-file", w(mode + ".jsonl")])
        rows = metrics(w(mode + ".jsonl"))
        losses[mode] = [r["lm_loss"] for r in rows]
        with open(w(mode, "rank-memory.json")) as f:
            memory[mode] = (json.load(f)["stages"][0], rows[0]["memory"])
    failures = []

    q, l = losses["qlora"], losses["lora"]
    worst = max(relative(a, b) for a, b in zip(q, l))
    first, last = sum(q[:10]) / 10, sum(q[-10:]) / 10
    ok = len(q) == len(l) == STEPS and worst <= TOLERANCE and last < first and q[0] != l[0]
    print(f"{name}: QLoRA (NF4 base, bf16) over {STEPS} steps: mean loss of the first 10 {first:.4f} -> last 10 "
          f"{last:.4f}; max relative difference to bf16 LoRA {worst:.2e} (bound {TOLERANCE:g}); first step "
          f"{q[0]:.6f} vs {l[0]:.6f} {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("loss")

    for mode in ("lora", "qlora"):
        stage, measured = memory[mode]
        predicted = stage["bytes"]
        keys = ("parameters", "gradients", "optimizer_state", "frozen_parameters")
        ok = all(measured[k] == predicted[k] for k in keys)
        line = ", ".join(f"{k} {measured[k]} (predicted {predicted[k]})" for k in keys)
        bits = ""
        if mode == "qlora":
            n, b = stage["frozen_nf4_parameters"], stage["frozen_nf4_bytes"]
            per = 8 * b / n if n else 0
            ok = ok and n > 0 and 4.12 < per < 4.14
            bits = f"; {n} weights in NF4: {b} bytes, {per:.4f} bits per weight"
        print(f"{name}: {mode}: {line}{bits} {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(mode + " memory")
    saved = memory["lora"][1]["frozen_parameters"] - memory["qlora"][1]["frozen_parameters"]
    print(f"{name}: the frozen base takes {memory['qlora'][1]['frozen_parameters']} bytes with QLoRA, "
          f"{memory['lora'][1]['frozen_parameters']} with LoRA ({saved} less)")
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
