"""megac generate from each kind of model folder, offline, with the pinned transformers and PEFT
(build/pyenv), on a tiny GPT-2 made by transformers (random weights) and a BPE tokenizer trained
here, saved by save_pretrained as a Hugging Face folder:

a. the Hugging Face folder: two calls at once on an empty program cache both print
   transformers' greedy `generate` token for token, and leave one compiled program and no
   staging folder; a random Llama folder (grouped-query attention, rope_theta 5000, Llama 3's
   131072 positions, compiled for 4096), a random Qwen2 folder (q, k, v biases) and a random
   Mistral folder (a sliding window of 5 positions, decoded with the KV cache past it) and a
   random Gemma folder (GeGLU, (1 + w) norms, scaled tied embeddings, head_dim 32) too;
b. LoRA adapters, merged on the fly: a folder PEFT saved (lora_B drawn non-zero) and a megac LoRA
   checkpoint trained 3 iterations on the folder equal transformers' greedy decoding of PEFT's
   merge_and_unload of them (and differ from the base's); OUT/train merge-lora's output of the
   checkpoint generates the same;
c. a later call on a model of the same spec reuses the program: it says "reused", no program
   folder appears and the program's train keeps its modification time;
d. a prompt too long for seq_length (and one that leaves too few positions for
   --max-new-tokens) is refused before anything is compiled, naming both numbers and the fix;
e. generation stops where transformers' does, at any id of generation_config.json's
   eos_token_id list.

    build/pyenv/bin/python generate_sources.py --megac build/bin/megac --workdir DIR
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import hf_offline  # noqa: E402,F401  (before transformers and PEFT: offline, bitsandbytes hidden)

import peft  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

SEQ = 64
LLAMA_POSITIONS = 131072  # Llama 3's: megac generate compiles it for 4096 (GenerateWindow.h)
NEW_TOKENS = 24
MISTRAL_WINDOW = 5
PROMPT = "This License applies to any "
LORA = dict(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"], fan_in_fan_out=True)  # GPT-2's Conv1D
LORA_FLAGS = ["--lora-rank", "4", "--lora-alpha", "8", "--lora-target-modules", "c_attn,c_proj"]
IDS_LINE = re.compile(r"megac generate: \d+ tokens \(ids ([\d,]*)\)")


def make_base(folder, texts):
    """A byte-level BPE tokenizer (<s>, </s>) and a random GPT-2 of 2 layers of 64 whose config
    names </s> its eos_token_id, saved together as transformers saves them."""
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.train(texts, tokenizers.trainers.BpeTrainer(vocab_size=512, special_tokens=["<s>", "</s>"],
                                                    initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
                                                    show_progress=False))
    shutil.rmtree(folder, ignore_errors=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>").save_pretrained(folder)
    torch.manual_seed(3)
    # n_inner left out (null: 4 x n_embd), as GPT2Config saves it; weights larger than GPT-2's
    # 0.02 so that greedy decoding of a random model varies its tokens.
    config = transformers.GPT2Config(vocab_size=bpe.get_vocab_size(), n_positions=SEQ, n_embd=64, n_layer=2, n_head=4,
                                     initializer_range=0.3, bos_token_id=bpe.token_to_id("<s>"),
                                     eos_token_id=bpe.token_to_id("</s>"))
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return bpe


def save_random_model(folder, bpe, seed, model_class, config_class, redraw=None, **fields):
    """A random model of `model_class` with the same tokenizer: 2 layers of 4 heads over hidden 64,
    0.3-scale weights (greedy decoding of a random model then varies its tokens), `fields` on top;
    parameters whose names end with `redraw` drawn again from N(0, 0.3) (biases and norms start
    at 0 or 1, which would read right whether loaded or not)."""
    shutil.rmtree(folder, ignore_errors=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>").save_pretrained(folder)
    torch.manual_seed(seed)
    config = config_class(**dict(dict(vocab_size=bpe.get_vocab_size(), hidden_size=64, intermediate_size=176,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      initializer_range=0.3, bos_token_id=bpe.token_to_id("<s>"),
                                      eos_token_id=bpe.token_to_id("</s>")), **fields))
    model = model_class(config)
    if redraw:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith(redraw):
                    p.normal_(0.0, 0.3)
    model.save_pretrained(folder)


def make_llama(folder, bpe):
    """A random Llama (grouped-query attention, untied embeddings) made for Llama 3's 131072 positions."""
    save_random_model(folder, bpe, 4, transformers.LlamaForCausalLM, transformers.LlamaConfig,
                      max_position_embeddings=LLAMA_POSITIONS, rms_norm_eps=1e-5, rope_theta=5000.0)


def make_qwen2(folder, bpe):
    """A random Qwen2 (q, k and v with biases, drawn non-zero; tied embeddings)."""
    save_random_model(folder, bpe, 5, transformers.Qwen2ForCausalLM, transformers.Qwen2Config, redraw=".bias",
                      max_position_embeddings=SEQ, rope_theta=1000000.0, tie_word_embeddings=True)


def make_mistral(folder, bpe):
    """A random Mistral with a sliding window of MISTRAL_WINDOW positions, far inside prompt and continuation."""
    save_random_model(folder, bpe, 6, transformers.MistralForCausalLM, transformers.MistralConfig,
                      max_position_embeddings=SEQ, sliding_window=MISTRAL_WINDOW)


def make_gemma(folder, bpe):
    """A random Gemma (GeGLU, (1 + w) norms drawn around 0, scaled tied embeddings, head_dim 32)."""
    save_random_model(folder, bpe, 7, transformers.GemmaForCausalLM, transformers.GemmaConfig,
                      redraw="norm.weight", num_key_value_heads=1, head_dim=32, max_position_embeddings=SEQ,
                      pad_token_id=bpe.token_to_id("</s>"))


def make_mixtral(folder, bpe):
    """A random Mixtral (4 experts, 2 per token; each decoded position routed on its own)."""
    save_random_model(folder, bpe, 8, transformers.MixtralForCausalLM, transformers.MixtralConfig,
                      max_position_embeddings=SEQ, intermediate_size=96, num_local_experts=4, num_experts_per_tok=2)


def make_qwen2_moe(folder, bpe):
    """A random Qwen2-MoE (4 experts, 2 per token, a shared expert gated by a sigmoid)."""
    save_random_model(folder, bpe, 9, transformers.Qwen2MoeForCausalLM, transformers.Qwen2MoeConfig,
                      max_position_embeddings=SEQ, intermediate_size=96, moe_intermediate_size=48,
                      shared_expert_intermediate_size=96, num_experts=4, num_experts_per_tok=2)


def greedy(model, prompt_ids, new_tokens=NEW_TOKENS):
    """transformers' greedy continuation of prompt_ids, stopping at the model's eos as it does."""
    model.eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=new_tokens,
                             pad_token_id=model.config.eos_token_id)
    return out[0, len(prompt_ids):].tolist()


def peft_merged(base, adapters):
    """PEFT's merge of `adapters` into `base`: a plain transformers model."""
    model = peft.PeftModel.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained(base), adapters)
    return model.merge_and_unload()


def make_peft_adapters(base, folder, seed):
    """get_peft_model on the base, lora_B drawn non-zero (PEFT starts it at zero, which would hide
    a merge that drops the adapters), saved as PEFT saves."""
    model = peft.get_peft_model(transformers.AutoModelForCausalLM.from_pretrained(base),
                                peft.LoraConfig(task_type="CAUSAL_LM", **LORA))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)


class Generate:
    """megac generate with one program cache: the command line, what it printed, its ids."""

    def __init__(self, megac, cache):
        self.megac, self.env = megac, {**os.environ, "MEGAC_CACHE_DIR": cache}

    def start(self, folder, *flags, prompt=PROMPT):
        cmd = [self.megac, "generate", folder, "--prompt", prompt, "--top-k", "1", *flags]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env)

    def run(self, folder, *flags, prompt=PROMPT, expect_failure=False):
        """(ids, output, seconds); exits when the outcome is not the one expected."""
        started = time.time()
        proc = self.start(folder, *flags, prompt=prompt)
        out = proc.communicate(timeout=300)[0]
        seconds = time.time() - started
        if (proc.returncode != 0) != expect_failure:
            sys.exit(f"FAIL: megac generate {folder} {' '.join(flags)} exited {proc.returncode}\n{out[-3000:]}")
        return ids_of(out), out, seconds


def ids_of(out):
    found = IDS_LINE.search(out)
    return [int(i) for i in found.group(1).split(",") if i] if found else None


def programs(cache):
    """The cache's compiled programs: {entry: its train's modification time}, and its staging folders."""
    folder = os.path.join(cache, "programs")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    entries = {n: os.stat(os.path.join(folder, n, "train")).st_mtime_ns for n in names if ".tmp." not in n}
    return entries, [n for n in names if ".tmp." in n]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megac", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.abspath(os.path.join(args.workdir, *p))
    os.environ["MEGAC_PYTHON"] = sys.executable  # megac's tokenizer runs in this python
    failures = []

    def check(ok, line):
        print(("ok   " if ok else "FAIL ") + line)
        if not ok:
            failures.append(line)

    licenses = sorted(p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p))
    bpe = make_base(w("base"), licenses)
    prompt_ids = bpe.encode(PROMPT).ids
    cache = w("cache")
    shutil.rmtree(cache, ignore_errors=True)
    gen = Generate(args.megac, cache)

    # a. The Hugging Face folder, two calls at once on an empty cache.
    base_model = transformers.AutoModelForCausalLM.from_pretrained(w("base"))
    theirs = greedy(base_model, prompt_ids)
    both = [gen.start(w("base"), "--max-new-tokens", str(NEW_TOKENS)) for _ in range(2)]
    outs = [(p.communicate(timeout=300)[0], p.returncode) for p in both]
    ours = [ids_of(out) for out, _ in outs]
    compiled = [bool(re.search(r"compiled the program for this model in", out)) for out, _ in outs]
    entries, staging = programs(cache)
    check(all(code == 0 for _, code in outs) and ours[0] == ours[1] == theirs and len(set(theirs)) >= 3,
          f"a. Hugging Face folder: two concurrent calls (compiled: {compiled}) print {ours[0]}; transformers' greedy "
          f"{theirs} ({len(set(theirs))} distinct)")
    if any(code != 0 for _, code in outs):
        print("\n".join(out[-2000:] for out, _ in outs))
    check(len(entries) == 1 and not staging and any(compiled),
          f"a. the cache holds {len(entries)} program(s) and staging folders {staging} after them")

    # a. A Llama folder: its own spec, so its own program.
    make_llama(w("llama"), bpe)
    theirs_llama = greedy(transformers.AutoModelForCausalLM.from_pretrained(w("llama")), prompt_ids)
    ours_llama, out, seconds = gen.run(w("llama"), "--max-new-tokens", str(NEW_TOKENS))
    window = f"the program reads 4096 of the model's {LLAMA_POSITIONS} positions"
    check(ours_llama == theirs_llama and len(set(theirs_llama)) >= 3 and "compiled the program" in out and
          window in out, f"a. Hugging Face Llama folder made for {LLAMA_POSITIONS} positions: {window in out} "
          f"({seconds:.1f} s): {ours_llama}; transformers' greedy {theirs_llama} ({len(set(theirs_llama))} distinct)")

    # a. A folder of another family: its own program, transformers' greedy continuation.
    def family_greedy(name, make):
        make(w(name), bpe)
        theirs = greedy(transformers.AutoModelForCausalLM.from_pretrained(w(name)), prompt_ids)
        ours, out, seconds = gen.run(w(name), "--max-new-tokens", str(NEW_TOKENS))
        check(ours == theirs and len(set(theirs)) >= 3 and "compiled the program" in out,
              f"a. Hugging Face {name} folder ({seconds:.1f} s): {ours}; transformers' greedy {theirs} "
              f"({len(set(theirs))} distinct)")

    family_greedy("qwen2", make_qwen2)  # biases on q, k and v

    # a. A Mistral folder: its sliding window in the prompt's forward and in every decoded position
    # (the KV cache holds the whole sequence; attention reads the window of it). Without the window
    # transformers continues otherwise, so the window is what is compared.
    make_mistral(w("mistral"), bpe)
    theirs_mistral = greedy(transformers.AutoModelForCausalLM.from_pretrained(w("mistral")), prompt_ids)
    unwindowed = greedy(transformers.AutoModelForCausalLM.from_pretrained(w("mistral"), sliding_window=None), prompt_ids)
    ours_mistral, out, seconds = gen.run(w("mistral"), "--max-new-tokens", str(NEW_TOKENS))
    check(ours_mistral == theirs_mistral and len(set(theirs_mistral)) >= 3 and unwindowed != theirs_mistral and
          "compiled the program" in out,
          f"a. Hugging Face Mistral folder, sliding window {MISTRAL_WINDOW} ({seconds:.1f} s): {ours_mistral}; "
          f"transformers' greedy {theirs_mistral} ({len(set(theirs_mistral))} distinct; without the window "
          f"{unwindowed})")

    family_greedy("gemma", make_gemma)
    family_greedy("mixtral", make_mixtral)
    family_greedy("qwen2_moe", make_qwen2_moe)

    # c. A later call reuses the program.
    before = programs(cache)
    base_entry = set(entries)
    again, out, seconds = gen.run(w("base"), "--max-new-tokens", str(NEW_TOKENS))
    check("reused the program compiled for this model" in out and "compiled the program" not in out and
          programs(cache) == before and again == theirs,
          f"c. a second call reused the program in {seconds:.2f} s: entries and train's mtime unchanged "
          f"{programs(cache) == before}, the same ids {again == theirs}")

    # e. Generation stops where transformers' does: at any id of generation_config.json's
    # eos_token_id (a list here, as Llama 3's): the first new token not seen before, from the third.
    stop = next(i for i in range(2, len(theirs)) if theirs[i] not in theirs[:i])
    shutil.rmtree(w("base-eos"), ignore_errors=True)
    shutil.copytree(w("base"), w("base-eos"))
    with open(w("base-eos", "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bpe.token_to_id("<s>"), "eos_token_id": [bpe.token_to_id("</s>"), theirs[stop]]}, f)
    theirs_eos = greedy(transformers.AutoModelForCausalLM.from_pretrained(w("base-eos")), prompt_ids)
    ours_eos, out, _ = gen.run(w("base-eos"), "--max-new-tokens", str(NEW_TOKENS))
    check(ours_eos == theirs_eos == theirs[:stop + 1] and "reused" in out,
          f"e. eos_token_id [</s>, {theirs[stop]}] in generation_config.json: {ours_eos}, transformers' {theirs_eos}")

    # b. Adapters PEFT saved, merged on the fly; the same spec, so the same program.
    make_peft_adapters(w("base"), w("peft"), seed=11)
    theirs_peft = greedy(peft_merged(w("base"), w("peft")), prompt_ids)
    ours_peft, out, _ = gen.run(w("peft"), "--max-new-tokens", str(NEW_TOKENS))
    check(ours_peft == theirs_peft and theirs_peft != theirs and "reused" in out and programs(cache) == before,
          f"b. PEFT adapters: {ours_peft}; PEFT's merge_and_unload greedy {theirs_peft} (the base's differs: "
          f"{theirs_peft != theirs}); the program reused {'reused' in out}")

    # b. A megac LoRA checkpoint trained on the folder, compiled from the spec megac gave the
    # folder (cache-key.txt ends with it), so that it generates with the same program.
    with open(os.path.join(cache, "programs", next(iter(base_entry)), "cache-key.txt")) as f:
        spec = f.read().split("\nspec:\n", 1)[1]
    with open(w("spec.yaml"), "w") as f:
        f.write(spec)
    subprocess.run([args.megac, "data", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", w("base"),
                    "--input", licenses[0], "--split-paragraphs", "--output-prefix", w("corpus")],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([args.megac, "compile", w("spec.yaml"), "--micro-batch-size", "2", "-o", w("lora"), *LORA_FLAGS],
                   check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(w("ckpt"), ignore_errors=True)
    subprocess.run([w("lora", "train"), "--data-path", w("corpus"), "--load", w("base"), "--train-iters", "3",
                    "--global-batch-size", "4", "--lr", "3e-2", "--save", w("ckpt")], check=True,
                   stdout=subprocess.DEVNULL)
    theirs_lora = greedy(peft_merged(w("base"), w("ckpt", "iter_0000003")), prompt_ids)
    ours_lora, out, _ = gen.run(w("ckpt"), "--max-new-tokens", str(NEW_TOKENS))
    check(ours_lora == theirs_lora and theirs_lora != theirs and "reused" in out,
          f"b. megac LoRA checkpoint: {ours_lora}; PEFT's merge_and_unload greedy {theirs_lora} (the base's differs: "
          f"{theirs_lora != theirs}); the program reused {'reused' in out}")
    shutil.rmtree(w("merged"), ignore_errors=True)
    subprocess.run([w("lora", "train"), "merge-lora", "--load", w("ckpt"), "--save", w("merged")], check=True,
                   stdout=subprocess.DEVNULL)
    ours_merged, out, _ = gen.run(w("merged"), "--max-new-tokens", str(NEW_TOKENS))
    check(ours_merged == theirs_lora and "reused" in out and programs(cache) == before,
          f"b. merge-lora's output of it: {ours_merged}, the program reused {'reused' in out}")

    # d. Prompts too long, refused before a compile: an empty cache stays empty.
    fresh = w("cache-fresh")
    shutil.rmtree(fresh, ignore_errors=True)
    refuse = Generate(args.megac, fresh)
    long_prompt = " ".join(["Everyone is permitted to copy and distribute verbatim copies"] * 12)
    long_tokens = len(bpe.encode(long_prompt).ids)
    _, out, seconds = refuse.run(w("base"), prompt=long_prompt, expect_failure=True)
    check(f"the prompt is {long_tokens} tokens, and the model's seq_length {SEQ} leaves none to generate; shorten the "
          f"prompt to at most {SEQ - 1} tokens" in out and not os.path.exists(os.path.join(fresh, "programs")),
          f"d. a {long_tokens}-token prompt refused in {seconds:.2f} s, nothing compiled: {out.strip().splitlines()[-1]}")
    _, out, seconds = refuse.run(w("base"), "--max-new-tokens", "60", expect_failure=True)
    n = len(prompt_ids)
    check(f"the prompt ({n} tokens) + --max-new-tokens (60) exceed the model's seq_length {SEQ}; give "
          f"--max-new-tokens {SEQ - n} or fewer" in out and not os.path.exists(os.path.join(fresh, "programs")),
          f"d. {n} tokens + --max-new-tokens 60 refused in {seconds:.2f} s, nothing compiled: "
          f"{out.strip().splitlines()[-1]}")

    if failures:
        sys.exit(f"FAIL: {len(failures)} check(s)")


if __name__ == "__main__":
    main()
