"""Checkpoints interchange with Hugging Face transformers (the real library, pinned in
scripts/requirements-test.txt), run with build/pyenv's python:

1. megac trains a few iterations and saves; AutoModelForCausalLM.from_pretrained(iteration
   folder) loads it with no missing or unexpected tensors, and its loss on the first global
   batch of the data equals the loss megac reports for that batch from the same folder
   (--finetune: forward before any update) within 1e-5 relative.
2. transformers saves that model as a sharded checkpoint (model.safetensors.index.json + shards)
   and megac loads the folder: the same first loss, bit for bit (the same float32 values)."""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from e2e_util import dropout_free_spec, make_license_corpus, metrics, relative, run  # noqa: E402

TOLERANCE = 1e-5
FIRST_BATCH = ["--train-iters", "1", "--global-batch-size", "8", "--lr", "1e-3", "--no-shuffle"]

HF_LOSS = os.path.join(HERE, "hf_first_loss.py")  # runs in build/pyenv: the loss of the first 8 samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--python", required=True, help="build/pyenv/bin/python (scripts/python_env.sh)")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    if not os.path.exists(args.python):
        sys.exit(f"{args.python} is missing: run scripts/python_env.sh (scripts/test.sh does) to install "
                 "the pinned transformers")
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    make_license_corpus(args.megac, w("corpus"))
    # megac's first loss is a training step's forward; transformers' is the model in eval mode.
    # Without dropout (GPT-2's default is 0.1) the two are the same function of the weights.
    spec = w("spec.yaml")
    seq = dropout_free_spec(args.spec, spec)
    run([args.megac, "compile", spec, "--micro-batch-size", "2", "-o", w("prog")])
    train = w("prog", "train")
    for d in ("ckpt", "sharded"):
        shutil.rmtree(w(d), ignore_errors=True)
    run([train, "--train-iters", "5", "--global-batch-size", "8", "--lr", "3e-3", "--data-path", w("corpus"),
         "--save", w("ckpt")])
    folder = w("ckpt", "iter_0000005")

    def megac_first_loss(load, name):
        run([train] + FIRST_BATCH + ["--data-path", w("corpus"), "--load", load, "--metrics-file", w(name)] +
            (["--finetune"] if load == folder else []))
        return metrics(w(name))[0]["lm_loss"]

    ours = megac_first_loss(folder, "megac.jsonl")
    hf = json.loads(run([args.python, HF_LOSS, folder, w("corpus"), str(seq), "--save-sharded", w("sharded")])
                    .strip().splitlines()[-1])
    err = relative(hf["loss"], ours)
    failures = []
    ok = err <= TOLERANCE and not hf["missing"] and not hf["unexpected"]
    print(f"{os.path.basename(args.spec)}: transformers {hf['transformers']} from_pretrained({os.path.basename(folder)}) "
          f"-> {hf['class']}, missing {hf['missing']}, unexpected {hf['unexpected']}; first-batch loss "
          f"transformers {hf['loss']:.9f} megac {ours:.9f}: relative difference {err:.2e} (bound {TOLERANCE:g}) "
          f"{'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("from_pretrained")
    shards = sorted(f for f in os.listdir(w("sharded")) if f.endswith(".safetensors"))
    index = os.path.exists(w("sharded", "model.safetensors.index.json"))
    sharded = megac_first_loss(w("sharded"), "sharded.jsonl")
    ok = index and len(shards) > 1 and sharded == ours
    print(f"{os.path.basename(args.spec)}: transformers' sharded save ({len(shards)} shards + index) loaded by megac: "
          f"first-batch loss {sharded:.9f}, {'bit-identical' if sharded == ours else 'DIFFERENT'} "
          f"{'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append("sharded load")
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
