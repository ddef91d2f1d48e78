"""megac compile of a Hugging Face folder (the spec read from its config.json) and --seq-length:
refused before anything is compiled, naming the file, the field, both values and the fix. The
folders are the good checkpoint's config.json (GPT-2, 32 learned positions) changed."""
import json
import os

from bad_inputs import files
from bad_inputs.case import Case
from bad_inputs.consistency_cases import setting

AREA = "hf folders as specs"
OUT = "{scratch}/out"
ITER = "iter_0000002"


def hf_compile(name, expect, change=None, flags=(), content=None):
    config = files.json_of(os.path.join(ITER, "config.json"), change) if change else \
        files.copy_of(os.path.join(ITER, "config.json"))
    return Case(AREA, name, ["{megac}", "compile", "{scratch}/hf", "-o", OUT, "--no-build", *flags], expect,
                absent=[OUT], files=content or {"hf/config.json": config})


def mistral_config(**fields):
    """A one-layer MistralForCausalLM config.json with `fields` set."""
    return {"hf/config.json": json.dumps({
        "model_type": "mistral", "architectures": ["MistralForCausalLM"], "num_hidden_layers": 1, "hidden_size": 64,
        "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300, **fields}).encode()}


def mixtral_config(**fields):
    """A one-layer MixtralForCausalLM config.json (4 experts) with `fields` set."""
    return {"hf/config.json": json.dumps({
        "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "num_hidden_layers": 1, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 300,
        "num_local_experts": 4,
        **fields}).encode()}


def qwen2_moe_config(**fields):
    return {"hf/config.json": json.dumps({
        "model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "num_hidden_layers": 2,
        "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 300, "num_experts": 4,
        **fields}).encode()}


def cases():
    return [
        hf_compile("Mixtral's top k above its experts", r"num_experts_per_tok is 6, more than num_local_experts \(4\): a "
                   r"token is routed to at most every expert", content=mixtral_config(num_experts_per_tok=6)),
        hf_compile("Mixtral with router jitter", r"router_jitter_noise is 0\.1; megac does not jitter the router's "
                   r"inputs .* set it to 0", content=mixtral_config(router_jitter_noise=0.1)),
        hf_compile("Qwen2-MoE whose every layer is dense", r"decoder_sparse_step 3 and mlp_only_layers leave no layer "
                   r"with the experts", content=qwen2_moe_config(decoder_sparse_step=3)),
        hf_compile("Qwen2-MoE with mlp_only_layers past the layers", r"mlp_only_layers is \[5\]; it lists layer indices "
                   r"\(0 to 1\) whose MLP is dense", content=qwen2_moe_config(mlp_only_layers=[5])),
        hf_compile("a folder without config.json", r"hf is a folder without a config\.json; give a spec YAML or a "
                   r"Hugging Face model folder", content={"hf/model.safetensors": b"x"}),
        hf_compile("another architecture", r"model_type is 't5' \(architectures T5ForConditionalGeneration\); megac computes "
                   r"the gpt2 \(GPT2LMHeadModel\), llama \(LlamaForCausalLM\), qwen2 \(Qwen2ForCausalLM\), "
                   r"mistral \(MistralForCausalLM\), gemma \(GemmaForCausalLM\), mixtral \(MixtralForCausalLM\), qwen2_moe "
                   r"\(Qwen2MoeForCausalLM\), bert \(BertForMaskedLM\) and megatron-bert \(MegatronBertForMaskedLM\) "
                   r"families only, so it cannot compile this model", content={"hf/config.json": json.dumps(
                       {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}).encode()}),
        hf_compile("another head on a known model type", r"architectures is \[GPT2ForSequenceClassification\]; "
                   r"megac computes GPT2LMHeadModel \(a causal language model head\)",
                   setting("architectures", ["GPT2ForSequenceClassification"])),
        hf_compile("a field megac does not compute", r"scale_attn_by_inverse_layer_idx true is a setting megac does "
                   r"not implement \(yet\)", setting("scale_attn_by_inverse_layer_idx", True)),
        hf_compile("embedding and residual dropout differ", r"embd_pdrop is 0\.2 and resid_pdrop 0\.1; megac drops "
                   r"the embeddings and the residual branches at one rate", setting("embd_pdrop", 0.2)),
        hf_compile("a dropout rate of 1.5", r"attn_pdrop is 1\.5; a dropout rate is a number in \[0, 1\)",
                   setting("attn_pdrop", 1.5)),
        hf_compile("a rope scaling type transformers 4.40 does not define", r"rope_scaling's type is \"yarn\"; "
                   r"transformers 4\.40's Llama and megac compute \"linear\" and \"dynamic\"",
                   content={"hf/config.json": json.dumps({
                       "model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1,
                       "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300,
                       "rope_scaling": {"type": "yarn", "factor": 2.0}}).encode()}),
        hf_compile("a Mistral sliding window of 0", r"sliding_window is 0; the positions before a token it attends to "
                   r"must be a positive integer", content=mistral_config(sliding_window=0)),
        hf_compile("rope scaling on Mistral", r"rope_scaling is \{.*\}, but transformers 4\.40's MistralForCausalLM "
                   r"reads no rope_scaling \(it would run unscaled\); it cannot compile this model as the file asks",
                   content=mistral_config(rope_scaling={"type": "linear", "factor": 2.0})),
        hf_compile("Gemma with the exact GELU", r"hidden_activation is \"gelu\", but megac's GeGLU computes the tanh "
                   r"approximation \(gelu_pytorch_tanh, what transformers uses for null\); it cannot compile this model",
                   content={"hf/config.json": json.dumps({
                       "model_type": "gemma", "architectures": ["GemmaForCausalLM"], "num_hidden_layers": 1,
                       "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16, "intermediate_size": 128,
                       "vocab_size": 300, "hidden_activation": "gelu"}).encode()}),
        hf_compile("a Qwen2 window in some layers", r"use_sliding_window is true with max_window_layers 1 of 2 layers; "
                   r"megac builds one layer body and computes a window in every layer or in none",
                   content={"hf/config.json": json.dumps({
                       "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 2,
                       "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300,
                       "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}).encode()}),
        hf_compile("--seq-length past the learned positions", r"--seq-length is 64, but .*config\.json has learned "
                   r"positions for 32 tokens \(max_position_embeddings\); give at most 32", flags=["--seq-length", "64"]),
        hf_compile("--hidden-dropout 1.5", r"--hidden-dropout is 1\.5; a dropout rate is a number in \[0, 1\)",
                   flags=["--hidden-dropout", "1.5"]),
        hf_compile("--attention-dropout nan", r"--attention-dropout is nan; a dropout rate is a number in \[0, 1\)",
                   flags=["--attention-dropout", "nan"]),
        hf_compile("--seq-length 0", r"--seq-length is 0; give the tokens of one sample, 1 to 4194304",
                   flags=["--seq-length", "0"]),
    ]
