"""PEFT both ways, offline, with the pinned transformers and PEFT (build/pyenv), on a tiny GPT-2
made by transformers and a BPE tokenizer.json trained here (its tokenizer_config.json names a
bos_token only: megac's checkpoint must add the eos_token):

a. megac trains LoRA adapters on the Hugging Face base and saves: PEFT's
   AutoPeftModelForCausalLM.from_pretrained(iteration folder) finds the base by the folder's
   base_model_name_or_path and gives megac's loss on the same batch; AutoTokenizer's eos_token
   and bos_token are set; GenerationConfig.from_pretrained reads the folder, and its
   generation_config.json is what transformers writes for the folder's config.json.
b. PEFT makes adapters (get_peft_model, lora_B random and non-zero) and saves them: OUT/train
   --load of the folder gives PEFT's loss in its first iteration (the base from the adapters'
   base_model_name_or_path, or given with --pretrained-checkpoint), and OUT/train merge-lora of
   the folder gives a model with PEFT's loss.
c. PEFT adapters of other settings (rank, alpha, targets, DoRA) are refused by name, with both
   values and the fix, leaving nothing.

    build/pyenv/bin/python peft_both_ways.py --megac build/bin/megac --workdir DIR
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

import hf_offline  # noqa: E402,F401  (before transformers and PEFT: offline, bitsandbytes hidden)

import numpy as np  # noqa: E402
import peft  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from indexed_dataset import GPTSamples, IndexedDataset  # noqa: E402

TOLERANCE = 1e-5
SEQ = 32
LORA = dict(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"])  # c_proj: attention's and the MLP's
LORA_FLAGS = ["--lora-rank", "4", "--lora-alpha", "8", "--lora-target-modules", "c_attn,c_proj"]
FIRST_BATCH = ["--train-iters", "1", "--global-batch-size", "8", "--lr", "1e-3", "--no-shuffle"]


def run(cmd, expect_failure=False):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if (p.returncode != 0) != expect_failure:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout[-3000:]}")
    return p.stdout


def first_loss(metrics_file):
    with open(metrics_file) as f:
        return json.loads(f.readline())["lm_loss"]


def relative(a, b):
    return abs(a - b) / abs(b)


def make_tokenizer(folder, texts):
    """A byte-level BPE tokenizer.json with <s> and </s>, and a tokenizer_config.json naming the
    bos_token alone (megac data finds </s> as the end of document)."""
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.train(texts, tokenizers.trainers.BpeTrainer(vocab_size=512, special_tokens=["<s>", "</s>"],
                                                    initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
                                                    show_progress=False))
    os.makedirs(folder, exist_ok=True)
    bpe.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>"}, f)
    return bpe


def peft_loss(model, prefix):
    """The loss of `model` (eval mode) on the first 8 samples of the dataset, as megac's first
    iteration reads them with --no-shuffle."""
    samples = GPTSamples(IndexedDataset(prefix).token_stream(), SEQ)
    ids = torch.tensor(np.stack([samples[i][0] for i in range(8)]).astype(np.int64))
    labels = torch.tensor(np.stack([samples[i][1] for i in range(8)]).astype(np.int64))
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), labels.reshape(-1)))


def peft_adapters(base, folder, seed, **settings):
    """get_peft_model on the base, lora_B drawn non-zero (PEFT starts it at zero, which would hide
    a wrong B), saved as PEFT saves; returns the PEFT model."""
    model = peft.get_peft_model(transformers.AutoModelForCausalLM.from_pretrained(base),
                                peft.LoraConfig(task_type="CAUSAL_LM", **{**LORA, **settings}))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megac", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.abspath(os.path.join(args.workdir, *p))
    os.environ["MEGAC_PYTHON"] = sys.executable  # megac data's tokenizer runs in this python
    failures = []

    def check(ok, line):
        print(("ok   " if ok else "FAIL ") + line)
        if not ok:
            failures.append(line)

    # The tokenizer, the dataset and the Hugging Face base model (GPT-2, 2 layers of 64).
    licenses = sorted(p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p))
    bpe = make_tokenizer(w("tokenizer"), licenses)
    vocab = bpe.get_vocab_size()
    run([args.megac, "data", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", w("tokenizer"),
         *sum((["--input", t] for t in licenses), []), "--split-paragraphs", "--output-prefix", w("corpus")])
    torch.manual_seed(5)
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=SEQ, n_embd=64, n_layer=2, n_head=4, n_inner=256,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    shutil.rmtree(w("base"), ignore_errors=True)
    transformers.GPT2LMHeadModel(config).save_pretrained(w("base"))
    with open(w("spec.yaml"), "w") as f:
        f.write(f"family: gpt2\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: {SEQ}\n"
                f"vocab_size: {vocab}\nhidden_dropout: 0.0\nattention_dropout: 0.0\n")
    run([args.megac, "compile", w("spec.yaml"), "--micro-batch-size", "2", "-o", w("lora")] + LORA_FLAGS)
    train = w("lora", "train")

    # a. megac -> PEFT.
    shutil.rmtree(w("ckpt"), ignore_errors=True)
    run([train, "--data-path", w("corpus"), "--load", w("base"), "--train-iters", "3", "--global-batch-size", "8",
         "--lr", "1e-2", "--save", w("ckpt")])
    folder = w("ckpt", "iter_0000003")
    run([train, "--data-path", w("corpus"), "--load", w("ckpt"), "--finetune", "--metrics-file", w("a.jsonl")]
        + FIRST_BATCH)
    ours = first_loss(w("a.jsonl"))
    adapter_config = json.load(open(os.path.join(folder, "adapter_config.json")))
    check(adapter_config["base_model_name_or_path"] == w("base"),
          f"a. adapter_config.json's base_model_name_or_path {adapter_config['base_model_name_or_path']}")
    try:
        model = peft.AutoPeftModelForCausalLM.from_pretrained(folder)
        theirs = peft_loss(model, w("corpus"))
        err = relative(ours, theirs)
        check(err <= TOLERANCE, f"a. AutoPeftModelForCausalLM.from_pretrained(iter_0000003) -> "
                                f"{type(model).__name__}: loss {theirs:.9f}, megac's {ours:.9f}: relative difference "
                                f"{err:.2e} (bound {TOLERANCE:g})")
    except (OSError, ValueError) as e:
        check(False, f"a. AutoPeftModelForCausalLM.from_pretrained(iter_0000003) failed: {str(e).splitlines()[0]}")
    record = json.load(open(w("corpus.tokenizer.json")))["special_tokens"]
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    check(tok.eos_token == "</s>" and tok.eos_token_id == record["eos_token"]["id"] == bpe.token_to_id("</s>") and
          tok.bos_token == "<s>" and tok.bos_token_id == bpe.token_to_id("<s>") and len(tok) == vocab,
          f"a. AutoTokenizer: eos_token {tok.eos_token!r} ({tok.eos_token_id}), bos_token {tok.bos_token!r} "
          f"({tok.bos_token_id}), {len(tok)} tokens")
    generation = transformers.GenerationConfig.from_pretrained(folder)
    model_config = transformers.AutoConfig.from_pretrained(folder)
    expected = json.loads(transformers.GenerationConfig.from_model_config(model_config).to_json_string())
    written = json.load(open(os.path.join(folder, "generation_config.json")))
    check(written == expected and generation.eos_token_id == tok.eos_token_id and
          generation.bos_token_id == tok.bos_token_id and model_config.eos_token_id == tok.eos_token_id and
          model_config.bos_token_id == tok.bos_token_id,
          f"a. GenerationConfig.from_pretrained: bos {generation.bos_token_id} eos {generation.eos_token_id}; "
          f"generation_config.json {'=' if written == expected else '!='} transformers' for config.json {written}")

    # b. PEFT -> megac: the base from the folder's base_model_name_or_path, then given explicitly.
    made = peft_adapters(w("base"), w("peft"), seed=7)
    theirs = peft_loss(made, w("corpus"))
    run([train, "--data-path", w("corpus"), "--load", w("peft"), "--metrics-file", w("b.jsonl")] + FIRST_BATCH)
    ours = first_loss(w("b.jsonl"))
    err = relative(ours, theirs)
    check(err <= TOLERANCE, f"b. --load of PEFT's save_pretrained folder: first-iteration loss {ours:.9f}, PEFT's "
                            f"{theirs:.9f}: relative difference {err:.2e} (bound {TOLERANCE:g})")
    shutil.rmtree(w("peft-unnamed"), ignore_errors=True)
    shutil.copytree(w("peft"), w("peft-unnamed"))
    config_path = w("peft-unnamed", "adapter_config.json")
    unnamed = {**json.load(open(config_path)), "base_model_name_or_path": None}
    json.dump(unnamed, open(config_path, "w"))
    run([train, "--data-path", w("corpus"), "--load", w("peft-unnamed"), "--pretrained-checkpoint", w("base"),
         "--metrics-file", w("b2.jsonl")] + FIRST_BATCH)
    err = relative(first_loss(w("b2.jsonl")), theirs)
    check(err <= TOLERANCE, f"b. the same with base_model_name_or_path null and --pretrained-checkpoint: relative "
                            f"difference {err:.2e}")
    shutil.rmtree(w("merged"), ignore_errors=True)
    run([train, "merge-lora", "--load", w("peft"), "--save", w("merged")])
    merged = peft_loss(transformers.AutoModelForCausalLM.from_pretrained(w("merged")), w("corpus"))
    err = relative(merged, theirs)
    check(err <= TOLERANCE, f"b. merge-lora of PEFT's folder, loaded by transformers alone: loss {merged:.9f}, "
                            f"relative difference {err:.2e}")

    # c. PEFT adapters of other settings are refused by name.
    for name, settings, expect in [
            ("rank 8", dict(r=8), "r 8 in "), ("alpha 16", dict(lora_alpha=16), "lora_alpha 16 in "),
            ("targets c_attn", dict(target_modules=["c_attn"]), "--lora-target-modules attn.c_attn\n"),
            ("DoRA", dict(use_dora=True), "megac does not implement use_dora true")]:
        peft_adapters(w("base"), w("peft-bad"), seed=8, **settings)
        shutil.rmtree(w("out"), ignore_errors=True)
        out = run([train, "--data-path", w("corpus"), "--load", w("peft-bad"), "--save", w("out")] + FIRST_BATCH,
                  expect_failure=True)
        line = next((l.strip() for l in out.splitlines() if expect.strip() in l), "")
        check(expect in out + "\n" and "this program's LoRA settings" in out and not os.path.exists(w("out")),
              f"c. PEFT adapters with {name} refused: {line or out.strip()[-300:]}")

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("peft both ways: ok")


if __name__ == "__main__":
    main()
