"""A Hugging Face model folder as the spec, run with /usr/bin/python3:

For each family, transformers (build/pyenv) makes a randomly initialised model and saves it with
save_pretrained; `megac compile FOLDER --seq-length S` compiles it with no YAML anywhere, and
`OUT/train --load FOLDER --skip-train` evaluates its weights on the license corpus's validation
samples. That loss equals transformers' on the same samples (1e-5), and so does the program of
tp2 + sp's; two iterations trained from the folder are saved, and transformers' from_pretrained
of that checkpoint gives megac's loss (1e-5). The families: GPT-2, Llama (grouped kv heads; with
linear and with dynamic rope scaling), Qwen2 (with and without its sliding window), Mistral (a
sliding window of 7 positions in the 32-token samples; the same weights without the window give
transformers a loss far from megac's, so the window is what is compared), Gemma (GeGLU, (1 + w)
norms, scaled embeddings, head_dim 32 over hidden 64, tied). A folder of another
architecture is refused by name before anything is compiled (the bad-input cases hold more)."""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import MPI_ENV, library_check_args, python_json, relative  # noqa: E402
from evaluation import EVAL, EVAL_ITERS, BATCH, HF_LOGITS, HF_LOSS, SPLIT, validation_loss  # noqa: E402
import subprocess  # noqa: E402

TOLERANCE = 1e-5
SEQ = 32

# Runs in build/pyenv: a randomly initialised model of each family, saved as transformers saves it.
# Sizes small enough for a CPU; the vocabulary covers the byte-level corpus (257 ids).
MAKE_MODELS = r"""
import json, sys
import torch, transformers
out = sys.argv[1]
torch.manual_seed(1234)
families = {
    "gpt2": transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=300)),
    "llama": transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
        max_position_embeddings=128, vocab_size=300, rope_theta=50000.0)),
    # Qwen2: Llama's layout with biases on q, k and v, rope theta 1e6 style, tied embeddings here.
    "qwen2": transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
        max_position_embeddings=128, vocab_size=300, rope_theta=1000000.0, tie_word_embeddings=True)),
    # Llama with dynamic NTK rope scaling, made for 16 positions and trained on 32: a larger base.
    # Weights of 0.3 (not 0.02), so that the base moves the loss far past the tolerance (3e-2).
    "llama-dynamic-rope": transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
        max_position_embeddings=16, vocab_size=300, rope_scaling={"type": "dynamic", "factor": 2.0},
        initializer_range=0.3)),
    # Llama with linear rope scaling: every position divided by 4 (0.3-scale weights, as above).
    "llama-linear-rope": transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
        max_position_embeddings=128, vocab_size=300, rope_scaling={"type": "linear", "factor": 4.0},
        initializer_range=0.3)),
    # Mistral: a token attends to itself and the 7 positions before it (0.3-scale weights, so that
    # the window moves the loss far past the tolerance).
    "mistral": transformers.MistralForCausalLM(transformers.MistralConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
        max_position_embeddings=128, vocab_size=300, sliding_window=7, initializer_range=0.3)),
    # Qwen2 with its sliding window on in every layer (max_window_layers = the layers).
    "qwen2-window": transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
        max_position_embeddings=128, vocab_size=300, use_sliding_window=True, sliding_window=5,
        max_window_layers=2, initializer_range=0.3)),
    # Gemma: GeGLU (hidden_activation null: the tanh GELU), (1 + w) norms (their weights drawn around 0
    # below), embeddings times sqrt(64), tied, heads of 32 over hidden 64 (head_dim apart from
    # hidden / heads).
    "gemma": transformers.GemmaForCausalLM(transformers.GemmaConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        intermediate_size=160, max_position_embeddings=128, vocab_size=300)),
    # Refused: a window in some layers only (megac builds one layer body).
    "qwen2-some-windows": transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
        max_position_embeddings=128, vocab_size=300, use_sliding_window=True, sliding_window=5,
        max_window_layers=1)),
    # Refused: another architecture.
    "gpt2-classifier": transformers.GPT2ForSequenceClassification(transformers.GPT2Config(
        n_layer=1, n_embd=64, n_head=4, n_positions=64, vocab_size=300)),
}
for name, model in families.items():
    # transformers initialises biases to 0 and norm weights to 1: perturbed, so that a bias or norm
    # weight read wrongly (or not at all) changes the loss.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(f"{out}/{name}", safe_serialization=True)
# The control: Mistral's weights with no window.
families["mistral"].config.sliding_window = None
families["mistral"].save_pretrained(f"{out}/mistral-no-window", safe_serialization=True)
print(json.dumps({"made": sorted(families), "transformers": transformers.__version__}))
"""

def corpus_tokens(prefix, start, count):
    """`count` token ids of the megac dataset `prefix` from position `start` of its token stream."""
    sys.path.insert(0, os.path.join(HERE, "..", "reference"))
    from indexed_dataset import IndexedDataset
    import numpy as np
    ds = IndexedDataset(prefix)
    return np.concatenate([ds[i] for i in range(len(ds))])[start:start + count].tolist()


REFUSED = {
    "gpt2-classifier": "architectures is [GPT2ForSequenceClassification]; megac computes GPT2LMHeadModel",
    "qwen2-some-windows": "use_sliding_window is true with max_window_layers 1 of 2 layers",
}


def hf_loss(args, corpus, folder):
    """transformers' loss of `folder` on the validation samples OUT/train evaluates."""
    return python_json(args.python, HF_LOSS, [folder, corpus, str(SEQ), str(EVAL_ITERS * BATCH),
                                              os.path.join(HERE, "..", "reference"), ",".join(map(str, SPLIT))],
                       "transformers' loss")


def report(failures, ok, line, label):
    print(f"{'ok  ' if ok else 'FAIL'} {line}")
    if not ok:
        failures.append(label)


def check_folder(args, w, corpus, family, failures, logits=True, after_loss=None):
    """The folder w("hf", family) as a spec: `megac compile FOLDER`, `--load FOLDER`'s validation loss
    = transformers' (TOLERANCE); the logits of a SEQ - 1 token prompt (TOLERANCE of the largest);
    2 iterations trained from it and saved, read back by from_pretrained with megac's loss; tp2 + sp
    = the single rank. `after_loss(single)` adds a family's own check."""
    folder, out = w("hf", family), w("out", family)
    shutil.rmtree(out, ignore_errors=True)
    compiled = subprocess.run([args.megac, "compile", folder, "--seq-length", str(SEQ), "--micro-batch-size", "2",
                               "-o", out], capture_output=True, text=True)
    if compiled.returncode != 0:
        report(failures, False, f"megac compile {folder}:\n{compiled.stderr[-2000:]}", family)
        return
    evaluate = ["--data-path", corpus, *EVAL, "--train-iters", "1", "--skip-train", "--load", folder]
    single = validation_loss(subprocess.run([os.path.join(out, "train"), *evaluate], capture_output=True,
                                            text=True).stdout)
    hf = hf_loss(args, corpus, folder)
    err = abs(single - hf["loss"])
    report(failures, err <= TOLERANCE, f"{family}: megac compile FOLDER, --load FOLDER: validation loss {single:.7g}, "
           f"transformers {hf['loss']:.7g} on the same {hf['samples']} samples (difference {err:.2e})", family)
    if after_loss:
        after_loss(args, w, corpus, single, failures)
    if logits:
        prompt = ",".join(str(i) for i in corpus_tokens(corpus, 1000, SEQ - 1))
        path = w("out", family + "-logits.safetensors")
        subprocess.run([os.path.join(out, "train"), "generate", "--load", folder, "--prompt-ids", prompt,
                        "--max-new-tokens", "1", "--logits-file", path], check=True, capture_output=True)
        hf_logits = python_json(args.python, HF_LOGITS, [folder, prompt, path, "AutoModelForCausalLM"],
                                "transformers' logits")
        # Relative to the largest logit: fp32's rounding grows with the logits, which the
        # 0.3-scale weights of the rope-scaling models make about 10 (the others' are below 1).
        err = hf_logits["max_abs_difference"] / max(hf_logits["max_abs"], 1.0)
        report(failures, err <= TOLERANCE, f"{family}: logits of a {SEQ - 1}-token prompt, max |megac - transformers| "
               f"{hf_logits['max_abs_difference']:.2e}, {err:.2e} of the largest |logit| {hf_logits['max_abs']:.3g}",
               family + " logits")
    ckpt = w("ckpt", family)
    shutil.rmtree(ckpt, ignore_errors=True)
    subprocess.run([os.path.join(out, "train"), "--data-path", corpus, *EVAL, "--train-iters", "2", "--load",
                    folder, "--save", ckpt, "--eval-interval", "100"], check=True, capture_output=True)
    trained = validation_loss(subprocess.run([os.path.join(out, "train"), "--data-path", corpus, *EVAL,
                                              "--train-iters", "2", "--skip-train", "--load", ckpt],
                                             capture_output=True, text=True).stdout)
    back = hf_loss(args, corpus, os.path.join(ckpt, "iter_0000002"))
    err = abs(trained - back["loss"])
    report(failures, err <= TOLERANCE and trained != single,
           f"{family}: 2 iterations from the folder, saved: megac {trained:.7g}, transformers' from_pretrained of "
           f"the checkpoint {back['loss']:.7g} (difference {err:.2e})", family + " checkpoint")
    tp = w("out", family + "-tp2sp")
    shutil.rmtree(tp, ignore_errors=True)
    subprocess.run([args.megac, "compile", folder, "--seq-length", str(SEQ), "--micro-batch-size", "2",
                    "--tp", "2", "--sp", "-o", tp], check=True, capture_output=True)
    loss = validation_loss(subprocess.run(["mpirun", "-np", "2", os.path.join(tp, "train"), *evaluate],
                                          capture_output=True, text=True, env={**os.environ, **MPI_ENV}).stdout)
    err = relative(loss, single)
    report(failures, err <= TOLERANCE, f"{family} tp2 + sp: validation loss {loss:.7g} vs single rank "
           f"(relative {err:.2e})", family + " tp2sp")


def mistral_control(args, w, corpus, single, failures):
    """Mistral's weights without the window give transformers another loss: the window is what is compared."""
    unwindowed = hf_loss(args, corpus, w("hf", "mistral-no-window"))
    report(failures, abs(unwindowed["loss"] - single) > 100 * TOLERANCE,
           f"mistral: the same weights without the window: transformers {unwindowed['loss']:.7g} (difference from "
           f"megac's {abs(unwindowed['loss'] - single):.2e})", "mistral window")


def main():
    args, corpus = library_check_args(__doc__, "transformers")
    w = lambda *p: os.path.join(args.workdir, *p)
    shutil.rmtree(w("hf"), ignore_errors=True)
    made = python_json(args.python, MAKE_MODELS, [w("hf")], "transformers' save_pretrained")
    print(f"transformers {made['transformers']} saved {', '.join(made['made'])}")
    failures = []
    for family in ("gpt2", "llama", "qwen2", "llama-dynamic-rope", "llama-linear-rope", "mistral", "qwen2-window",
                   "gemma"):
        # Dynamic rope scaling gives every length its own base: a prompt shorter than the program's
        # window is not the same model (its loss is), so its logits are not compared.
        check_folder(args, w, corpus, family, failures, logits="dynamic" not in family,
                     after_loss=mistral_control if family == "mistral" else None)
    for name, expected in REFUSED.items():
        out = w("out", name)
        shutil.rmtree(out, ignore_errors=True)
        refused = subprocess.run([args.megac, "compile", w("hf", name), "-o", out], capture_output=True, text=True)
        ok = refused.returncode == 1 and expected in refused.stderr and not os.path.exists(out)
        print(f"{'ok  ' if ok else 'FAIL'} {name} refused: {refused.stderr.strip().splitlines()[0][:160]}")
        if not ok:
            failures.append(name)
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")


if __name__ == "__main__":
    main()
