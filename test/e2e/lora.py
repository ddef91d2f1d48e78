"""LoRA fine-tuning (megac compile --lora-rank) against independent implementations:

1. The single-rank program's 10 steps equal the PyTorch reference's (test/reference/lora.py:
   PEFT's adapter math on the reference model, the base frozen) step by step, loss and gradient
   norm within 1e-4 relative.
2. The checkpoint folder is a PEFT adapter (adapter_model.safetensors + adapter_config.json):
   PEFT (pinned, build/pyenv) loads it onto transformers' base model with no missing or
   unexpected adapter tensors and gives megac's loss on the same tokens within 1e-5.
   OUT/train merge-lora writes the merged weights as a Hugging Face folder: transformers alone
   loads it and gives the same loss.
3. The checkpoint holds the adapters alone, and a resumed run continues bit for bit (the base
   model loaded again from the files train_state.json names); --merge-lora at its end merges
   into the same weights."""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from e2e_util import TRAIN, dropout_free_spec, make_license_corpus, metrics, relative, run, train_flags  # noqa: E402
from safetensors_io import load_file  # noqa: E402

REFERENCE_TOLERANCE = 1e-4
PEFT_TOLERANCE = 1e-5
FIRST_BATCH = ["--train-iters", "1", "--global-batch-size", "8", "--lr", "1e-3", "--no-shuffle"]

HF_LOSS = os.path.join(HERE, "hf_first_loss.py")  # runs in build/pyenv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--python", required=True, help="build/pyenv/bin/python (scripts/python_env.sh)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--lora-flags", default="--lora-rank 4 --lora-alpha 8 --lora-target-modules all-linear")
    args = ap.parse_args()
    if not os.path.exists(args.python):
        sys.exit(f"{args.python} is missing: run scripts/python_env.sh (scripts/test.sh does)")
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    name = os.path.basename(args.spec)
    make_license_corpus(args.megac, w("corpus"))
    # Both sides compute a training step's forward; without dropout it is the eval-mode model.
    spec = w("spec.yaml")
    seq = dropout_free_spec(args.spec, spec)
    for d in ("base-ckpt", "lora-ckpt", "resumed-ckpt"):
        shutil.rmtree(w(d), ignore_errors=True)

    # The base model: a few steps of full training from the reference's initial weights, saved
    # as a Hugging Face folder (config.json + model.safetensors).
    run([sys.executable, os.path.join(ROOT, "test", "reference", "train.py"), "--spec", spec,
         "--init-out", w("init.safetensors"), "--seed", "11"])
    run([args.megac, "compile", spec, "--micro-batch-size", "2", "-o", w("base")])
    run([w("base", "train")] + train_flags(3) + ["--data-path", w("corpus"), "--load", w("init.safetensors"),
                                                  "--save", w("base-ckpt")])
    base = w("base-ckpt", "iter_0000003")

    lora_flags = args.lora_flags.split()
    run([args.megac, "compile", spec, "--micro-batch-size", "2", "-o", w("lora")] + lora_flags)
    train = w("lora", "train")
    run([train] + TRAIN + ["--data-path", w("corpus"), "--load", base, "--save", w("lora-ckpt"),
                           "--save-interval", "5", "--metrics-file", w("lora.jsonl")])
    ours = metrics(w("lora.jsonl"))
    failures = []

    # 3. What the checkpoint holds.
    folder = w("lora-ckpt", "iter_0000010")
    config = json.load(open(os.path.join(folder, "adapter_config.json")))
    adapters = load_file(os.path.join(folder, "adapter_model.safetensors"))
    state = json.load(open(os.path.join(folder, "train_state.json")))
    ok = (not os.path.exists(os.path.join(folder, "model.safetensors")) and len(adapters) > 0 and
          all(k.startswith("base_model.model.") and (".lora_A." in k or ".lora_B." in k) for k in adapters) and
          state.get("base_weights") == [os.path.join(os.path.abspath(base), "model.safetensors")])
    print(f"{name}: checkpoint holds {len(adapters)} adapter tensors (PEFT's names), adapter_config.json "
          f"r {config['r']} alpha {config['lora_alpha']} targets {config['target_modules']}, base model named in "
          f"train_state.json: {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("checkpoint contents")

    # 1. The independent reference: the same base, the same initial adapters, 10 steps.
    rank = config["r"]
    run([sys.executable, os.path.join(ROOT, "test", "reference", "train.py"), "--spec", spec,
         "--data-path", w("corpus"), "--micro-batch-size", "2", "--load", os.path.join(base, "model.safetensors"),
         "--lora-rank", str(rank), "--lora-alpha", str(config["lora_alpha"]),
         "--lora-target-modules", ",".join(config["target_modules"]), "--metrics-file", w("reference.jsonl"),
         "--adapters-out", w("reference-adapters.safetensors")] + (["--use-rslora"] if config["use_rslora"] else []) +
        [f for f in TRAIN if f != "--no-shuffle"])  # the reference reads in dataset order
    ref = metrics(w("reference.jsonl"))
    worst = max(max(relative(a["lm_loss"], b["lm_loss"]), relative(a["grad_norm"], b["grad_norm"]))
                for a, b in zip(ours, ref))
    trained_b = sum(1 for k, v in adapters.items() if ".lora_B." in k and float(abs(v).max()) > 0)
    ok = len(ours) == len(ref) == 10 and worst <= REFERENCE_TOLERANCE and trained_b == len(adapters) // 2
    print(f"{name}: LoRA r {rank} on {len(config['target_modules'])} modules, 10 steps vs the PyTorch reference: "
          f"loss {ours[0]['lm_loss']:.6f} -> {ours[-1]['lm_loss']:.6f} (reference {ref[-1]['lm_loss']:.6f}), max "
          f"relative difference {worst:.2e} (bound {REFERENCE_TOLERANCE:g}); {trained_b} of {len(adapters) // 2} B "
          f"matrices moved from zero {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("reference")

    # 2. PEFT loads the folder onto transformers' base model.
    run([train] + FIRST_BATCH + ["--data-path", w("corpus"), "--load", w("lora-ckpt"), "--finetune",
                                 "--metrics-file", w("first.jsonl")])
    mine = metrics(w("first.jsonl"))[0]["lm_loss"]
    peft = json.loads(run([args.python, HF_LOSS, base, w("corpus"), str(seq), "--adapter", folder])
                      .strip().splitlines()[-1])
    err = relative(peft["loss"], mine)
    ok = (err <= PEFT_TOLERANCE and peft["adapters"] == len(adapters) and not peft["warnings"] and
          peft["target_modules"] == sorted(config["target_modules"]))
    print(f"{name}: PEFT {peft['peft']} PeftModel.from_pretrained(base, {os.path.basename(folder)}) -> "
          f"{peft['class']} with {peft['adapters']} adapter tensors, warnings {peft['warnings']}; first-batch loss "
          f"PEFT {peft['loss']:.9f} megac {mine:.9f}: relative difference {err:.2e} (bound {PEFT_TOLERANCE:g}) "
          f"{'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("PEFT")

    # 2b. --merge-lora: the merged weights load in transformers alone and give the same loss.
    for d in ("merged", "merged-at-end"):
        shutil.rmtree(w(d), ignore_errors=True)
    merge = run([train, "merge-lora", "--load", w("lora-ckpt"), "--save", w("merged")]).strip()
    merged = json.loads(run([args.python, HF_LOSS, w("merged"), w("corpus"), str(seq)]).strip().splitlines()[-1])
    err = relative(merged["loss"], mine)
    ok = err <= PEFT_TOLERANCE and not merged["missing"] and not merged["unexpected"]
    print(f"{name}: {merge}; transformers alone on it: first-batch loss {merged['loss']:.9f} vs megac's LoRA "
          f"{mine:.9f}: relative difference {err:.2e} (bound {PEFT_TOLERANCE:g}), missing {merged['missing']}, "
          f"unexpected {merged['unexpected']} {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("merged")

    # 3. Resume from iteration 5 (adapters + optimizer; the base reloaded): iterations 6-10 again,
    # merged at the end (--merge-lora) into the same weights as the merge of the first run's.
    run([train] + TRAIN + ["--data-path", w("corpus"), "--load", w("lora-ckpt"), "--ckpt-step", "5",
                           "--save", w("resumed-ckpt"), "--metrics-file", w("resumed.jsonl"),
                           "--merge-lora", w("merged-at-end")])
    resumed = metrics(w("resumed.jsonl"))
    ok = [r["lm_loss"] for r in resumed] == [r["lm_loss"] for r in ours[5:]]
    at_end, first = load_file(w("merged-at-end", "model.safetensors")), load_file(w("merged", "model.safetensors"))
    same = at_end.keys() == first.keys() and all(bool((at_end[k] == first[k]).all()) for k in first)
    ok = ok and same
    print(f"{name}: resumed at iteration 5: iterations 6-10 {'bit for bit' if ok else 'DIFFER'}, merged at the end "
          f"into {'the same' if same else 'DIFFERENT'} weights {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("resume")

    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
