"""BERT from a Hugging Face folder, run with /usr/bin/python3: for BertForMaskedLM (post-LN) and
MegatronBertForMaskedLM (pre-LN), transformers (build/pyenv) makes a random model and saves it;
`megac compile FOLDER --seq-length 32` compiles it with no YAML, and `OUT/train --load FOLDER
--skip-train` evaluates its weights on a WordPiece corpus (the license texts) with its own masks
(megart/mlm_masking.h). transformers' model, given the same masked batches (drawn again by
test/reference/mlm_masking.py from the header's text), gives the same loss (1e-5); masks of another
seed give transformers a loss far from megac's, so the masks are what is compared; the logits of a
window (`OUT/train generate --logits-file`) are transformers' (1e-5). Two iterations
trained from the folder are saved and transformers' from_pretrained of the checkpoint gives megac's
loss; tp2 + sp evaluates as the single rank."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import MPI_ENV, library_check_args, make_wordpiece_corpus, python_json, relative  # noqa: E402
from evaluation import HF_LOGITS, validation_loss  # noqa: E402

TOLERANCE = 1e-5
SEQ, BATCH, MICRO, EVAL_ITERS, SEED = 32, 8, 2, 2, 1234
EVAL = ["--eval-iters", str(EVAL_ITERS), "--global-batch-size", str(BATCH), "--no-shuffle", "--seed", str(SEED)]

# Runs in build/pyenv: both BERTs, randomly initialised (1-D parameters perturbed so that a bias or
# norm read wrongly changes the loss), saved as transformers saves them.
MAKE_MODELS = r"""
import json, sys
import torch, transformers
out = sys.argv[1]
torch.manual_seed(4321)
sizes = dict(vocab_size=2000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
             max_position_embeddings=64, initializer_range=0.2)
models = {"bert": transformers.BertForMaskedLM(transformers.BertConfig(**sizes)),
          "megatron-bert": transformers.MegatronBertForMaskedLM(transformers.MegatronBertConfig(**sizes))}
for name, model in models.items():
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(f"{out}/{name}", safe_serialization=True)
print(json.dumps({"made": sorted(models), "transformers": transformers.__version__}))
"""

# Runs in build/pyenv: transformers' masked-LM loss on OUT/train's evaluation batches, each
# microbatch's mean over its masked positions, then the mean of the microbatches (as OUT/train).
HF_MLM_LOSS = r"""
import json, sys
import numpy as np, torch, transformers
sys.path.insert(0, sys.argv[5])
from indexed_dataset import IndexedDataset
from mlm_masking import MlmSamples
folder, prefix, seq, count, seed, micro = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[6]), int(sys.argv[7])
samples = MlmSamples(IndexedDataset(prefix).token_stream(), seq, seed, prefix)
model = transformers.AutoModelForMaskedLM.from_pretrained(folder)
model.eval()
losses = []
with torch.no_grad():
    for first in range(0, count, micro):
        pairs = [samples[i] for i in range(first, first + micro)]
        ids = torch.tensor(np.stack([p[0] for p in pairs]))
        labels = torch.tensor(np.stack([p[1] for p in pairs]))
        logits = model(input_ids=ids).logits
        losses.append(float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                                              labels.reshape(-1), ignore_index=-100)))
print(json.dumps({"loss": sum(losses) / len(losses), "microbatches": len(losses)}))
"""


def main():
    args, _ = library_check_args(__doc__, "transformers")
    w = lambda *p: os.path.join(args.workdir, *p)
    corpus = w("wordpiece")
    make_wordpiece_corpus(args.megac, corpus)
    shutil.rmtree(w("hf"), ignore_errors=True)
    made = python_json(args.python, MAKE_MODELS, [w("hf")], "transformers' save_pretrained")
    print(f"transformers {made['transformers']} saved {', '.join(made['made'])}")
    reference = os.path.join(HERE, "..", "reference")
    hf_loss = lambda folder, seed=SEED: python_json(
        args.python, HF_MLM_LOSS, [folder, corpus, str(SEQ), str(EVAL_ITERS * BATCH), reference, str(seed), str(MICRO)],
        "transformers' masked-LM loss")["loss"]
    failures = []
    # A window of the corpus's ids from position 1000, a [MASK] (id 4) among them.
    sys.path.insert(0, reference)
    from indexed_dataset import IndexedDataset
    window = [int(t) for t in IndexedDataset(corpus).token_stream()[1000:1000 + SEQ]]
    window[5] = 4
    ids = ",".join(map(str, window))

    def check(ok, what, name):
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            failures.append(name)

    for family in ("bert", "megatron-bert"):
        folder, out = w("hf", family), w("out", family)
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([args.megac, "compile", folder, "--seq-length", str(SEQ), "--micro-batch-size", str(MICRO),
                        "-o", out], check=True, capture_output=True)
        evaluate = ["--data-path", corpus, *EVAL, "--skip-train"]
        ours = validation_loss(subprocess.run([os.path.join(out, "train"), *evaluate, "--load", folder],
                                              capture_output=True, text=True).stdout)
        theirs, other_masks = hf_loss(folder), hf_loss(folder, SEED + 1)
        check(abs(ours - theirs) <= TOLERANCE and abs(other_masks - ours) > 100 * TOLERANCE,
              f"{family}: megac compile FOLDER, --load FOLDER: masked-LM loss {ours:.7g}, transformers {theirs:.7g} "
              f"on the same masks of {EVAL_ITERS * BATCH} samples (difference {abs(ours - theirs):.2e}; masks of "
              f"seed {SEED + 1}: {other_masks:.7g})", family)
        # The logits of one window of ids (below).
        logits_file = w("out", family + "-logits.safetensors")
        subprocess.run([os.path.join(out, "train"), "generate", "--load", folder, "--prompt-ids", ids, "--logits-file",
                        logits_file], check=True, capture_output=True)
        got = python_json(args.python, HF_LOGITS, [folder, ids, logits_file, "AutoModelForMaskedLM"],
                          "transformers' logits")
        err = got["max_abs_difference"] / max(got["max_abs"], 1.0)
        check(err <= TOLERANCE, f"{family}: logits of a {SEQ}-token window, max |megac - transformers| "
              f"{got['max_abs_difference']:.2e}, {err:.2e} of the largest |logit| {got['max_abs']:.3g}", family + " logits")
        ckpt = w("ckpt", family)
        shutil.rmtree(ckpt, ignore_errors=True)
        subprocess.run([os.path.join(out, "train"), "--data-path", corpus, "--train-iters", "2", "--global-batch-size",
                        str(BATCH), "--lr", "1e-3", "--no-shuffle", "--seed", str(SEED), "--load", folder, "--save",
                        ckpt, "--eval-interval", "100"], check=True, capture_output=True)
        trained = validation_loss(subprocess.run([os.path.join(out, "train"), *evaluate, "--load", ckpt],
                                                 capture_output=True, text=True).stdout)
        back = hf_loss(os.path.join(ckpt, "iter_0000002"))
        check(abs(trained - back) <= TOLERANCE and trained != ours,
              f"{family}: 2 iterations from the folder, saved: megac {trained:.7g}, transformers' from_pretrained of "
              f"the checkpoint {back:.7g} (difference {abs(trained - back):.2e})", family + " checkpoint")
        tp = w("out", family + "-tp2sp")
        shutil.rmtree(tp, ignore_errors=True)
        subprocess.run([args.megac, "compile", folder, "--seq-length", str(SEQ), "--micro-batch-size", str(MICRO),
                        "--tp", "2", "--sp", "-o", tp], check=True, capture_output=True)
        loss = validation_loss(subprocess.run(["mpirun", "-np", "2", os.path.join(tp, "train"), *evaluate, "--load",
                                               folder], capture_output=True, text=True,
                                              env={**os.environ, **MPI_ENV}).stdout)
        check(relative(loss, ours) <= TOLERANCE,
              f"{family} tp2 + sp: masked-LM loss {loss:.7g} vs single rank (relative {relative(loss, ours):.2e})",
              family + " tp2sp")
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")


if __name__ == "__main__":
    main()
