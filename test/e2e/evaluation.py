"""Evaluation (--eval-iters, --split), run with /usr/bin/python3:

1. megac trains a few iterations on the license corpus split 70,20,10 and saves; `--skip-train
   --load` evaluates the checkpoint on its validation data; Hugging Face transformers
   (build/pyenv) loads the same checkpoint folder and computes the loss on the same validation
   samples (the validation split's documents at Megatron's bookend, cut into samples of s + 1
   tokens in order): equal within 1e-5.
2. The same checkpoint evaluated under tp2 + sp, dp2 and pp2 vpp2 (the pipeline's forward-only
   run): the single rank's validation loss within 1e-5.
3. The same checkpoint in a program compiled with dropout 0.1: the same validation loss (dropout
   is the identity in evaluation).
4. `--skip-train --load CKPT --data-path ...` alone (no --lr, no --train-iters) evaluates the
   same; without --split, all of --data-path.
5. During training, the validation loss is in the log and the metrics file every
   --eval-interval iterations and at the end, and the test loss at the end."""
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import MPI_ENV, library_check_args, metrics, python_json, relative, run  # noqa: E402
from plan_parity import plan_flags  # noqa: E402

TOLERANCE = 1e-5
SPLIT, EVAL_ITERS, BATCH = (70, 20, 10), 2, 8
EVAL = ["--split", ",".join(map(str, SPLIT)), "--eval-iters", str(EVAL_ITERS), "--global-batch-size", str(BATCH),
        "--no-shuffle", "--lr", "1e-3"]

# Runs in build/pyenv (transformers over Debian's torch): the loss over the validation samples.
HF_LOSS = r"""
import json, sys
import numpy as np, torch, transformers
sys.path.insert(0, sys.argv[5])
from indexed_dataset import IndexedDataset
folder, prefix, seq, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
split = [float(x) for x in sys.argv[6].split(",")]
ds = IndexedDataset(prefix)
documents = len(ds.doc_idx) - 1
begin = int(round(split[0] / sum(split) * documents))  # Megatron's bookend: validation starts here
tokens = np.concatenate([ds[i] for i in range(int(ds.doc_idx[begin]), len(ds))]).astype(np.int64)
ids = torch.tensor(np.stack([tokens[i * seq:i * seq + seq] for i in range(count)]))
labels = torch.tensor(np.stack([tokens[i * seq + 1:i * seq + seq + 1] for i in range(count)]))
model = transformers.AutoModelForCausalLM.from_pretrained(folder)
model.eval()
with torch.no_grad():
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), labels.reshape(-1))
print(json.dumps({"loss": float(loss), "samples": count}))
"""


# Runs in build/pyenv: transformers' logits of one sequence of ids against the file OUT/train
# generate --logits-file wrote; argv: folder, comma-separated ids, the file, the Auto class
# (AutoModelForCausalLM, or AutoModelForMaskedLM for BERT).
HF_LOGITS = r"""
import json, sys
import torch, transformers
from safetensors.torch import load_file
folder, ids, path, auto = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], sys.argv[3], sys.argv[4]
model = getattr(transformers, auto).from_pretrained(folder)
model.eval()
with torch.no_grad():
    theirs = model(input_ids=torch.tensor([ids])).logits[0]
ours = load_file(path)["logits"]
print(json.dumps({"max_abs_difference": float((ours - theirs).abs().max()), "max_abs": float(theirs.abs().max())}))
"""


def validation_loss(output):
    m = re.search(r"validation loss at iteration \d+ \| lm loss value: (\S+) \|", output)
    if not m:
        sys.exit(f"FAIL: no validation loss in the output:\n{output[-3000:]}")
    return float(m.group(1))


def main():
    args, _ = library_check_args(__doc__, "transformers")  # makes the license corpus in the workdir
    w = lambda *p: os.path.join(args.workdir, *p)
    shutil.rmtree(w("ckpt"), ignore_errors=True)
    failures = []

    run([args.megac, "compile", args.spec, "--micro-batch-size", "2", "-o", w("single")])
    train = [w("single", "train"), "--data-path", w("corpus"), *EVAL, "--train-iters", "5", "--eval-interval", "2",
             "--metrics-file", w("train.jsonl"), "--save", w("ckpt")]
    out = run(train)
    records = metrics(w("train.jsonl"))
    evaluated = [r["iteration"] for r in records if "valid_lm_loss" in r]
    tested = [r["iteration"] for r in records if "test_lm_loss" in r]
    ok = evaluated == [2, 4, 5] and tested == [5] and out.count("validation loss at iteration") == 3 and \
        out.count("test loss at the end of training") == 1
    print(f"{'ok  ' if ok else 'FAIL'} --eval-interval 2 over 5 iterations: validation after {evaluated}, "
          f"test after {tested}")
    if not ok:
        failures.append("eval-interval")

    single = validation_loss(run([w("single", "train"), "--data-path", w("corpus"), *EVAL, "--train-iters", "5",
                                  "--skip-train", "--load", w("ckpt")]))
    if abs(single - records[-1]["valid_lm_loss"]) > 1e-6 * abs(single):  # the log prints 7 digits
        failures.append("skip-train")
        print(f"FAIL --skip-train's validation loss {single} is not the last training evaluation's "
              f"{records[-1]['valid_lm_loss']}")
    # Evaluation alone needs no training flags (no --lr, no --train-iters): the same loss.
    bare = [f for f in EVAL if f not in ("--lr", "1e-3")]
    out = run([w("single", "train"), "--data-path", w("corpus"), *bare, "--skip-train", "--load", w("ckpt")])
    alone = validation_loss(out)
    ok = alone == single and "evaluation only (--skip-train)" in out
    print(f"{'ok  ' if ok else 'FAIL'} --skip-train without --lr and --train-iters: validation loss {alone:.7g} "
          f"(with them {single:.7g})")
    if not ok:
        failures.append("skip-train without training flags")
    # Without --split, all of --data-path is evaluated.
    whole = [f for i, f in enumerate(bare) if f != "--split" and (i == 0 or bare[i - 1] != "--split")]
    out = run([w("single", "train"), "--data-path", w("corpus"), *whole, "--skip-train", "--load", w("ckpt")])
    if "validation data" not in out or not validation_loss(out) > 0:
        failures.append("skip-train without --split")
        print(f"FAIL --skip-train without --split evaluates nothing:\n{out[-1500:]}")
    # Dropout is the identity in evaluation: the same model with dropout 0.1 evaluates the same.
    with open(args.spec) as f, open(w("dropout.yaml"), "w") as g:
        g.write(f.read() + "\nhidden_dropout: 0.1\nattention_dropout: 0.1\n")
    run([args.megac, "compile", w("dropout.yaml"), "--micro-batch-size", "2", "-o", w("dropout")])
    shutil.rmtree(w("ckpt-dropout"), ignore_errors=True)
    run([w("dropout", "train"), "--data-path", w("corpus"), *EVAL, "--train-iters", "5", "--eval-interval", "5",
         "--metrics-file", w("dropout.jsonl"), "--save", w("ckpt-dropout")])
    during = metrics(w("dropout.jsonl"))[-1]["valid_lm_loss"]
    after = [validation_loss(run([w(program, "train"), "--data-path", w("corpus"), *EVAL, "--train-iters", "5",
                                  "--skip-train", "--load", w("ckpt-dropout")])) for program in ("dropout", "single")]
    ok = all(abs(loss - during) <= 1e-6 * abs(during) for loss in after)  # the log prints 7 digits
    print(f"{'ok  ' if ok else 'FAIL'} dropout 0.1: validation loss during training {during:.7g}, of its checkpoint "
          f"with and without dropout {after[0]:.7g}, {after[1]:.7g}")
    if not ok:
        failures.append("dropout in evaluation")
    with open(args.spec) as f:
        seq = re.search(r"^seq_length:\s*(\d+)", f.read(), re.M).group(1)
    hf = python_json(args.python, HF_LOSS, [w("ckpt", "iter_0000005"), w("corpus"), seq, str(EVAL_ITERS * BATCH),
                                            os.path.join(HERE, "..", "reference"), ",".join(map(str, SPLIT))],
                     "transformers' loss")
    err = abs(single - hf["loss"])
    print(f"{'ok  ' if err <= TOLERANCE else 'FAIL'} validation loss of the checkpoint: megac {single:.7g}, "
          f"transformers {hf['loss']:.7g} on the same {hf['samples']} samples (difference {err:.2e})")
    if err > TOLERANCE:
        failures.append("transformers")

    for plan in ("tp2sp", "dp2", "pp2vpp2"):
        flags, world = plan_flags(plan)
        if "--global-batch-size" in flags:
            flags[flags.index("--global-batch-size") + 1] = str(BATCH)
        run([args.megac, "compile", args.spec, "--micro-batch-size", "2", *flags, "-o", w(plan)])
        loss = validation_loss(run(["mpirun", "-np", str(world), w(plan, "train"), "--data-path", w("corpus"), *EVAL,
                                    "--train-iters", "5", "--skip-train", "--load", w("ckpt")], env=MPI_ENV))
        err = relative(loss, single)
        print(f"{'ok  ' if err <= TOLERANCE else 'FAIL'} {plan}: validation loss {loss:.7g} vs single rank "
              f"{single:.7g} (relative {err:.2e})")
        if err > TOLERANCE:
            failures.append(plan)
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")


if __name__ == "__main__":
    main()
