"""megac generate's models (a megac checkpoint, a Hugging Face folder, LoRA adapters), its prompt
and its program cache: refused before anything is compiled, naming the file or flag, the value
and the fix. The Hugging Face folders are the good checkpoint's config.json and weights."""
import json
import os

from bad_inputs import files
from bad_inputs.case import Case
from bad_inputs.peft_cases import peft_folder, setting

AREA = "megac generate"
ITER = "iter_0000002"
NOTHING_COMPILED = "{scratch}/megac-cache/programs"


def generate(name, folder, expect, flags=(), prompt="This", content=None, env=None):
    return Case(AREA, name, ["{megac}", "generate", folder, "--prompt", prompt, *flags], expect,
                absent=[NOTHING_COMPILED], files=content or {}, env=env or {})


def hf_folder(change=None, weights="model.safetensors"):
    """hf/: the good checkpoint's config.json with change(dict), and its weights under `weights`."""
    config = files.json_of(os.path.join(ITER, "config.json"), change) if change else \
        files.copy_of(os.path.join(ITER, "config.json"))
    return {"hf/config.json": config, "hf/" + weights: files.copy_of(os.path.join(ITER, "model.safetensors"))}


def drop(key):
    return lambda config: config.pop(key)


def cases():
    return [
        generate("megac generate of another architecture", "{scratch}/hf",
                 r"config\.json: model_type is 't5' \(architectures T5ForConditionalGeneration\); megac computes the gpt2 "
                 r"\(GPT2LMHeadModel\), llama \(LlamaForCausalLM\), qwen2 \(Qwen2ForCausalLM\), mistral "
                 r"\(MistralForCausalLM\), gemma \(GemmaForCausalLM\), mixtral \(MixtralForCausalLM\), qwen2_moe "
                 r"\(Qwen2MoeForCausalLM\), bert \(BertForMaskedLM\) and megatron-bert \(MegatronBertForMaskedLM\) "
                 r"families only",
                 content={"hf/config.json": json.dumps({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}),
                          "hf/model.safetensors": files.copy_of(os.path.join(ITER, "model.safetensors"))}),
        generate("megac generate of a masked LM", "{scratch}/hf",
                 r"hf is a masked language model \(family bert\): it predicts masked tokens from both sides and does "
                 r"not continue a text",
                 content={"hf/config.json": json.dumps({
                     "model_type": "bert", "architectures": ["BertForMaskedLM"], "num_hidden_layers": 1,
                     "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300,
                     "max_position_embeddings": 64}),
                          "hf/model.safetensors": files.copy_of(os.path.join(ITER, "model.safetensors"))}),
        generate("megac generate of pickled weights", "{scratch}/hf",
                 r"has a config\.json but no model\.safetensors \(nor model\.safetensors\.index\.json\): megac reads "
                 r"safetensors weights", content=hf_folder(weights="pytorch_model.bin")),
        generate("megac generate of a config without layers", "{scratch}/hf",
                 r"config\.json: has no n_layer \(the number of layers\)", content=hf_folder(drop("n_layer"))),
        generate("megac generate of a config with a fractional size", "{scratch}/hf",
                 r"config\.json: n_head is 4\.5; the number of attention heads must be a positive integer",
                 content=hf_folder(setting("n_head", 4.5))),
        # Sizes past megac/Limits.h are refused as config.json's, before 4 x n_embd is formed.
        generate("megac generate of a config with a hidden size past megac's limit", "{scratch}/hf",
                 r"config\.json: n_embd is 4611686018427387904, more than the 1048576 megac compiles \(the hidden "
                 r"size, include/megac/Limits\.h\); it cannot generate from this model",
                 content=hf_folder(setting("n_embd", 2 ** 62))),
        generate("megac generate of a config with a vocabulary past 2^64", "{scratch}/hf",
                 r"config\.json: vocab_size is 1[.0]*e\+30, more than the 16777216 megac compiles \(the vocabulary size",
                 content=hf_folder(setting("vocab_size", 1e30))),
        generate("megac generate of a relu gpt2", "{scratch}/hf",
                 r"activation_function is \"relu\", but megac computes gelu_new",
                 content=hf_folder(setting("activation_function", "relu"))),
        generate("megac generate of a setting megac does not compute", "{scratch}/hf",
                 r"scale_attn_by_inverse_layer_idx true is a setting megac does not implement \(yet\)",
                 content=hf_folder(setting("scale_attn_by_inverse_layer_idx", True))),
        generate("megac generate of a model without a tokenizer", "{scratch}/hf",
                 r"carries no tokenizer \(megac_tokenizer\.json, tokenizer\.json, vocab\.json \+ merges\.txt, or "
                 r"tokenizer\.model\)", content=hf_folder()),
        generate("megac generate of a prompt longer than seq_length", "{ckpt}",
                 r"the prompt is 40 tokens, and the model's seq_length 32 leaves none to generate; shorten the prompt "
                 r"to at most 31 tokens", prompt="x" * 40),
        generate("megac generate of adapters naming no base", "{scratch}/peft",
                 r"base_model_name_or_path is missing or null, so the adapters name no base model; give the model "
                 r"they were made on with --pretrained-checkpoint DIR",
                 content=peft_folder(setting("base_model_name_or_path", None))),
        generate("megac generate of adapters on a hub model", "{scratch}/peft",
                 r"base_model_name_or_path openai-community/gpt2 is no local folder; megac downloads nothing",
                 content=peft_folder(setting("base_model_name_or_path", "openai-community/gpt2"))),
        # OUT/train's refusal, before the compile it would follow (peft_adapter.h).
        generate("megac generate of adapters without their safetensors", "{scratch}/peft",
                 r"peft: the folder has adapter_config\.json but no adapter_model\.safetensors; its "
                 r"adapter_model\.bin is PyTorch's pickle format, which megac does not read",
                 content=peft_folder(tensors="adapter_model.bin")),
        generate("megac generate of adapters on adapters", "{scratch}/peft",
                 r"--pretrained-checkpoint .*lora-ckpt holds LoRA adapters, not a base model",
                 flags=["--pretrained-checkpoint", "{lora_ckpt}"], content=peft_folder()),
        generate("megac generate of a whole model with a base", "{ckpt}",
                 r"--pretrained-checkpoint names the base model of LoRA adapters, but .*ckpt is a megac checkpoint; "
                 r"leave the flag out", flags=["--pretrained-checkpoint", "{ckpt}"]),
        generate("megac generate of a tracker naming no iteration", "{scratch}/ck",
                 r"its tracker names .*iter_0000007, which holds no train_state\.json",
                 content={"ck/latest_checkpointed_iteration.txt": "7"}),
        generate("megac generate of a file", "{spec}", r"gpt2-tiny\.yaml is a file; give a folder: a megac checkpoint"),
        generate("megac generate with a cache that is a file", "{ckpt}",
                 r"cannot create the program cache .*cache-file/programs: .*; set MEGAC_CACHE_DIR to a folder megac "
                 r"may write", content={"cache-file": "not a folder"}, env={"MEGAC_CACHE_DIR": "{scratch}/cache-file"}),
    ]
