"""Model specs (YAML)."""
from bad_inputs.case import Case

AREA = "spec"
OUT = "{scratch}/out"
GOOD = ("family: gpt2\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: 32\n"
        "vocab_size: 257\n")


def spec_case(name, text, expect):
    return Case(AREA, name, ["{megac}", "compile", "{scratch}/spec.yaml", "-o", OUT, "--no-build"], expect,
                absent=[OUT], files={"spec.yaml": text})


def with_key(key, value, text=GOOD):
    lines = [l for l in text.splitlines() if not l.startswith(key + ":")]
    return "\n".join(lines + [f"{key}: {value}"]) + "\n"


def with_keys(pairs, text=GOOD):
    for key, value in pairs:
        text = with_key(key, value, text)
    return text


def cases():
    return [
        spec_case("add_qkv_bias apart from gpt2's c_attn", with_key("add_qkv_bias", "false"),
                  r"add_qkv_bias is false but add_bias_linear true; family gpt2's q, k and v have biases with the other "
                  r"linear layers or none"),
        spec_case("kv_channels x heads past the limit", with_keys([("num_attention_heads", 4096), ("hidden_size", 4096),
                                                                    ("kv_channels", 1024)]),
                  r"num_attention_heads x kv_channels is 4096 x 1024 = 4194304, more than the 1048576 megac allows"),
        spec_case("a sliding window on gpt2", with_key("sliding_window", 8),
                  r"sliding_window with family gpt2: GPT2LMHeadModel has no sliding window, so no Hugging Face "
                  r"checkpoint could say it; use family mistral \(or qwen2\), or leave sliding_window out"),
        spec_case("GeGLU outside gemma", with_keys([("family", "llama"), ("activation", "geglu")]),
                  r"activation geglu with family llama: GeGLU has a Hugging Face checkpoint layout as family gemma "
                  r"only"),
        spec_case("gemma with LayerNorm", with_keys([("family", "gemma"), ("normalization", "LayerNorm")]),
                  r"normalization LayerNorm with family gemma: GemmaForCausalLM has RMSNorm \(scaling by 1 \+ w\)"),
        spec_case("sliding_window 0", with_keys([("family", "mistral"), ("sliding_window", 0)]), r"sliding_window"),
        spec_case("sliding_window 2^40", with_keys([("family", "mistral"), ("sliding_window", 1099511627776)]),
                  r"sliding_window is 1099511627776"),
        spec_case("hidden_size 2^61", with_key("hidden_size", 2305843009213693952), r"hidden_size"),
        spec_case("num_layers 100000", with_key("num_layers", 100000), r"num_layers"),
        spec_case("norm_epsilon inf", with_key("norm_epsilon", ".inf"), r"norm_epsilon"),
        spec_case("two YAML documents", GOOD + "---\nfamily: llama\n", r"document"),
        # Each size key against its limit.
        spec_case("num_attention_heads 2^20", with_keys([("num_attention_heads", 1048576), ("hidden_size", 1048576)]),
                  r"num_attention_heads is 1048576; it must be between 1 and 16384"),
        spec_case("seq_length 2^30", with_key("seq_length", 1073741824), r"seq_length is 1073741824; .* 4194304"),
        spec_case("vocab_size 2^30", with_key("vocab_size", 1073741824), r"vocab_size is 1073741824; .* 16777216"),
        spec_case("ffn_hidden_size 2^30", with_key("ffn_hidden_size", 1073741824), r"ffn_hidden_size is 1073741824"),
        spec_case("max_position_embeddings 2^40", with_key("max_position_embeddings", 1099511627776),
                  r"max_position_embeddings is 1099511627776"),
        spec_case("num_query_groups 2^20", with_keys([("family", "llama"), ("num_query_groups", 1048576)]),
                  r"num_query_groups is 1048576"),
        spec_case("hidden_size beyond int64", with_key("hidden_size", "99999999999999999999999"),
                  r"hidden_size is 99999999999999999999999; it must be between 1 and 1048576"),
        # Non-finite numbers, in YAML's spelling and in C's.
        spec_case("norm_epsilon .nan", with_key("norm_epsilon", ".nan"), r"norm_epsilon is '\.nan', which is not a finite number"),
        spec_case("norm_epsilon 1e999", with_key("norm_epsilon", "1e999"), r"norm_epsilon is '1e999', which is not a finite number"),
        spec_case("rotary_base inf", with_keys([("family", "llama"), ("rotary_base", "inf")]),
                  r"rotary_base is 'inf', which is not a finite number"),
        spec_case("hidden_dropout -.inf", with_key("hidden_dropout", "-.inf"), r"hidden_dropout is '-\.inf'"),
        spec_case("hidden_dropout 1", with_key("hidden_dropout", "1"),
                  r"hidden_dropout is 1, but a dropout rate must be in \[0, 1\) \(Megatron's default: 0\.1\)"),
        spec_case("attention_dropout -0.1", with_key("attention_dropout", "-0.1"),
                  r"attention_dropout is -0\.1, but a dropout rate must be in \[0, 1\)"),
        spec_case("an empty second document", GOOD + "---\n", r"second YAML document"),
        # Mixtures of experts.
        spec_case("experts on gpt2", with_key("num_experts", 4),
                  r"num_experts with family gpt2: GPT2LMHeadModel has no experts, so no Hugging Face checkpoint "
                  r"could hold them; use family mixtral or qwen2_moe, or leave num_experts out"),
        spec_case("mixtral without experts", with_key("family", "mixtral"),
                  r"family mixtral needs num_experts \(the experts of each layer's MLP\)"),
        spec_case("top k above the experts", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                         ("moe_router_topk", 5)]),
                  r"moe_router_topk is 5, more than num_experts \(4\); a token is routed to at most every expert"),
        spec_case("dense layers in mixtral", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                         ("moe_layer_freq", 2)]),
                  r"moe_layer_freq with dense layers and family mixtral: MixtralForCausalLM has experts in every "
                  r"layer.*use family qwen2_moe"),
        spec_case("moe_layer_freq past the layers", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                                ("moe_layer_freq", 3)]),
                  r"moe_layer_freq is 3; an integer N puts the mixture of experts in every Nth layer from the "
                  r"first, so it must be between 1 and num_layers \(2\)"),
        spec_case("moe_layer_freq's list of another length", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                                         ("moe_layer_freq", '"[1, 0, 1]"')]),
                  r"moe_layer_freq is \[1, 0, 1\], 3 entries; it needs one per layer \(num_layers 2\)"),
        spec_case("moe_layer_freq's list without experts", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                                       ("moe_layer_freq", '"[0, 0]"')]),
                  r"no layer has the mixture of experts; leave num_experts out for a dense model"),
        spec_case("moe_layer_freq neither", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                        ("moe_layer_freq", '"every other"')]),
                  r"moe_layer_freq is 'every other'; give an integer N .* or a quoted list of one 0 or 1 per layer"),
        spec_case("a shared expert on mixtral", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                            ("moe_shared_expert_intermediate_size", 64)]),
                  r"moe_shared_expert_intermediate_size with family mixtral: MixtralForCausalLM has no shared expert"),
        spec_case("a negative aux loss coefficient", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                                 ("moe_aux_loss_coeff", "-0.1")]),
                  r"moe_aux_loss_coeff is -0\.1; a loss coefficient is a number in \[0, 1e6\]"),
        spec_case("a drop policy without a capacity", with_keys([("family", "mixtral"), ("num_experts", 4),
                                                                  ("moe_token_drop_policy", "position")]),
                  r"moe_token_drop_policy without moe_expert_capacity_factor: dropless routing drops no token"),
        spec_case("experts' stacked weight over 2^40", with_keys([("family", "mixtral"), ("num_experts", 16384),
                                                                   ("hidden_size", 65536), ("ffn_hidden_size", 4096),
                                                                   ("num_attention_heads", 64)]),
                  r"the experts' stacked weight \[num_experts x moe_ffn_hidden_size 67108864, hidden_size 65536\]"),
        # Products of the sizes.
        spec_case("attention weight over 2^40", with_keys([("hidden_size", 1048576), ("num_attention_heads", 16)]),
                  r"query/key/value weight \[hidden_size 1048576.*lower hidden_size"),
        spec_case("MLP weight over 2^40", with_keys([("hidden_size", 524288), ("ffn_hidden_size", 4194304)]),
                  r"MLP's weight \[hidden_size 524288, ffn_hidden_size 4194304\]"),
        spec_case("embedding over 2^40", with_keys([("hidden_size", 131072), ("vocab_size", 16777216)]),
                  r"embedding \[vocab_size 16777216, hidden_size 131072\]"),
        spec_case("position embedding over 2^40", with_keys([("hidden_size", 524288), ("ffn_hidden_size", 1024),
                                                             ("seq_length", 4194304)]),
                  r"position embedding \[max_position_embeddings 4194304, hidden_size 524288\]"),
        spec_case("parameters over 2^44", with_keys([("num_layers", 8192), ("hidden_size", 65536)]),
                  r"parameters \(num_layers 8192 x .*lower num_layers"),
        spec_case("attention over 2^60", with_keys([("family", "llama"), ("hidden_size", 131072),
                                                    ("num_attention_heads", 2048), ("num_query_groups", 1),
                                                    ("ffn_hidden_size", 256), ("seq_length", 4194304)]),
                  r"attention of a microbatch, --micro-batch-size 1 x seq_length\^2 \(4194304\^2\) x hidden_size 131072"),
        # The file itself.
        Case(AREA, "spec is /dev/zero", ["{megac}", "compile", "/dev/zero", "-o", OUT, "--no-build"],
             r"cannot read spec /dev/zero: it is larger than 1024 KiB", absent=[OUT]),
        spec_case("spec of 2 MiB", GOOD + "# " + "x" * (2 << 20) + "\n", r"cannot read spec .*spec\.yaml: it is larger"),
    ]
