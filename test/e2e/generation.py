"""Generation (OUT/train generate: decode_step, one position at a time with a KV cache, or
with --no-kv-cache the compiled forward up to the logits over the whole window, megart/generate.h)
against Hugging Face transformers, run with /usr/bin/python3: GPT-2 and Llama trained a little
on the license corpus (seq_length raised to 64) and saved; greedy decoding of 32 tokens from the
checkpoint equals transformers' `generate(do_sample=False)` on the same folder token for token,
with the cache and without,
and `megac generate CHECKPOINT --prompt TEXT` (the checkpoint's spec compiled for it, the text
through the tokenizer the checkpoint carries) prints that continuation. Sampling with a seed
repeats itself and differs from greedy."""
import argparse
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import make_license_corpus, python_json, run  # noqa: E402

NEW_TOKENS = 32
PROMPT = b"This License applies to any "

# Runs in build/pyenv (transformers over Debian's torch): greedy ids after the prompt.
HF_GENERATE = r"""
import json, sys
import torch, transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1])
model.eval()
model.generation_config.eos_token_id = None  # megac's byte tokenizer has its own end of document
model.generation_config.pad_token_id = 0
ids = torch.tensor([json.loads(sys.argv[2])])
with torch.no_grad():
    out = model.generate(ids, do_sample=False, max_new_tokens=int(sys.argv[3]))
print(json.dumps(out[0, ids.shape[1]:].tolist()))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--specs", nargs="+", required=True, help="GPT-2 and Llama specs")
    ap.add_argument("--python", required=True, help="build/pyenv/bin/python (scripts/python_env.sh)")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    make_license_corpus(args.megac, w("corpus"))
    prompt = list(PROMPT)
    failures = []
    for spec_path in args.specs:
        name = os.path.splitext(os.path.basename(spec_path))[0]
        with open(spec_path) as f:
            spec = re.sub(r"^seq_length:.*$", "seq_length: 64", f.read(), flags=re.M)
        with open(w(name + ".yaml"), "w") as f:
            f.write(spec)
        run([args.megac, "compile", w(name + ".yaml"), "--micro-batch-size", "4", "-o", w(name)])
        shutil.rmtree(w(name + "-ckpt"), ignore_errors=True)
        run([w(name, "train"), "--data-path", w("corpus"), "--train-iters", "220", "--global-batch-size", "16",
             "--lr", "3e-3", "--min-lr", "3e-4", "--lr-decay-style", "cosine", "--lr-warmup-iters", "20", "--save", w(name + "-ckpt")])
        generate = [w(name, "train"), "generate", "--load", w(name + "-ckpt"), "--prompt-ids",
                    ",".join(map(str, prompt)), "--max-new-tokens", str(NEW_TOKENS)]
        greedy = json.loads(run(generate + ["--top-k", "1"]))
        ours = greedy["ids"]
        # The KV cache (decode_step: one position at a time) and the window rerun (logits_step)
        # decode the same tokens.
        window = json.loads(run(generate + ["--top-k", "1", "--no-kv-cache"]))
        ok = greedy["kv_cache"] is True and window["kv_cache"] is False and window["ids"] == ours
        print(f"{'ok  ' if ok else 'FAIL'} {name}: greedy with the KV cache {'equals' if window['ids'] == ours else 'differs from'}"
              f" the window rerun (kv_cache {greedy['kv_cache']}, {window['kv_cache']})")
        if not ok:
            print(f"     cache  {ours}\n     window {window['ids']}")
            failures.append(name + " kv cache")
        folder = w(name + "-ckpt", "iter_0000220")
        theirs = python_json(args.python, HF_GENERATE, [folder, json.dumps(prompt), str(NEW_TOKENS)],
                             "transformers' generate")
        text = bytes(i for i in ours if i < 256).decode("utf-8", "replace")
        ok = ours == theirs and len(set(ours)) >= 3
        print(f"{'ok  ' if ok else 'FAIL'} {name}: greedy {len(ours)} tokens {'equal' if ours == theirs else 'differ from'}"
              f" transformers' ({len(set(ours))} distinct): {PROMPT.decode()!r} + {text!r}")
        if not ok:
            print(f"     megac        {ours}\n     transformers {theirs}")
            failures.append(name)
        # megac generate: the same, from text, with the tokenizer the checkpoint carries.
        text_out = run([args.megac, "generate", w(name + "-ckpt"), "--prompt", PROMPT.decode(), "--top-k", "1",
                        "--max-new-tokens", str(NEW_TOKENS)], env={"MEGAC_CACHE_DIR": w("megac-cache")})
        expected = PROMPT.decode() + bytes(i for i in theirs if i < 256).decode("utf-8", "replace")
        ok = expected in text_out
        print(f"{'ok  ' if ok else 'FAIL'} {name}: megac generate --prompt prints transformers' continuation")
        if not ok:
            print(f"     megac generate printed {text_out!r}\n     expected {expected!r}")
            failures.append(name + " megac generate")
        sample = generate + ["--temperature", "0.8", "--top-p", "0.9", "--seed", "7"]
        drawn = [json.loads(run(sample))["ids"] for _ in range(2)]
        # Sampling reads the whole distribution (greedy only its top): the cache must give the
        # window's draws too. A draw would need to land within float rounding of a boundary to
        # tell them apart.
        drawn_window = json.loads(run(sample + ["--no-kv-cache"]))["ids"]
        ok = drawn[0] == drawn[1] and drawn[0] != ours and drawn[0] == drawn_window
        print(f"{'ok  ' if ok else 'FAIL'} {name}: sampling with --seed 7 repeats itself, differs from greedy and "
              f"{'equals' if drawn[0] == drawn_window else 'differs from'} the window rerun's")
        if not ok:
            failures.append(name + " sampling")
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")


if __name__ == "__main__":
    main()
