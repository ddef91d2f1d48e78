"""Model spec loader: YAML with Megatron key names, family defaults, unknown keys rejected.

    from spec import load_spec, make_spec
    spec = load_spec("examples/gpt2-tiny.yaml")   # -> Spec (a frozen dataclass)
"""
import dataclasses
import math

import yaml

REQUIRED = ("family", "num_layers", "hidden_size", "num_attention_heads", "seq_length", "vocab_size")

FAMILY_DEFAULTS = {
    # Dropout: Megatron's and GPT-2's 0.1; Hugging Face Llama's 0.
    "gpt2": dict(normalization="LayerNorm", activation="gelu", position_embedding_type="learned",
                 tie_embeddings=True, add_bias_linear=True, add_qkv_bias=True, hidden_dropout=0.1,
                 attention_dropout=0.1),
    "llama": dict(normalization="RMSNorm", activation="swiglu", position_embedding_type="rope",
                  tie_embeddings=False, add_bias_linear=False, add_qkv_bias=False, hidden_dropout=0.0,
                  attention_dropout=0.0),
}
# Qwen2: Llama's layout with biases on q, k and v; Mistral: Llama's layout (with a sliding window).
FAMILY_DEFAULTS["qwen2"] = dict(FAMILY_DEFAULTS["llama"], add_qkv_bias=True)
FAMILY_DEFAULTS["mistral"] = dict(FAMILY_DEFAULTS["llama"])
# Gemma: GeGLU (tanh GELU), RMSNorm scaling by 1 + w, embeddings times sqrt(hidden), tied.
FAMILY_DEFAULTS["gemma"] = dict(FAMILY_DEFAULTS["llama"], activation="geglu", tie_embeddings=True)
# BERT: GPT-2's traits (LayerNorm, GELU, learned positions, biases, tied), an encoder with token
# types; BertForMaskedLM norms after each residual add, Megatron's BERT before each block.
FAMILY_DEFAULTS["bert"] = dict(FAMILY_DEFAULTS["gpt2"], num_tokentypes=2, norm_epsilon=1e-12)
FAMILY_DEFAULTS["megatron_bert"] = dict(FAMILY_DEFAULTS["bert"])
# Mixtral: Llama's layout whose MLPs are experts (renormalised top-k weights).
FAMILY_DEFAULTS["mixtral"] = dict(FAMILY_DEFAULTS["llama"], moe_router_pre_softmax=False)
# Qwen2-MoE: Qwen2's attention, experts without renormalisation, a shared expert gated by a sigmoid.
FAMILY_DEFAULTS["qwen2_moe"] = dict(FAMILY_DEFAULTS["qwen2"], moe_router_pre_softmax=True)

CHOICES = {
    "family": ("gpt2", "llama", "qwen2", "mistral", "gemma", "bert", "megatron_bert", "mixtral", "qwen2_moe"),
    "normalization": ("LayerNorm", "RMSNorm"),
    "activation": ("gelu", "swiglu", "geglu"),
    "position_embedding_type": ("learned", "rope"),
    "rope_scaling_type": ("none", "linear", "dynamic"),
    "moe_router_load_balancing_type": ("aux_loss", "global_aux_loss", "none"),
    "moe_token_drop_policy": ("probs", "position"),
}


class SpecError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Spec:
    family: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    seq_length: int
    vocab_size: int
    num_query_groups: int
    ffn_hidden_size: int
    max_position_embeddings: int
    normalization: str
    activation: str
    position_embedding_type: str
    tie_embeddings: bool
    norm_epsilon: float
    rotary_base: float
    add_bias_linear: bool
    add_qkv_bias: bool
    hidden_dropout: float
    attention_dropout: float
    kv_channels: int  # the head dimension (Megatron's name); 0: hidden_size / num_attention_heads
    rope_scaling_type: str  # "none", "linear" (positions / factor) or "dynamic" (transformers' NTK)
    rope_scaling_factor: float
    sliding_window: int  # a token attends to itself and at most this many before it; 0: all before it
    num_tokentypes: int  # BERT's token types (Megatron's name); 0 for the decoders
    num_experts: int  # a mixture of experts in every layer's MLP (Megatron's names); 0: a dense MLP
    moe_router_topk: int
    moe_ffn_hidden_size: int  # each expert's; 0: ffn_hidden_size
    moe_router_pre_softmax: bool  # the top k's probabilities as they are; else renormalised to sum to 1
    moe_shared_expert_intermediate_size: int  # Qwen2-MoE's shared expert; 0: none
    moe_router_load_balancing_type: str  # aux_loss (Megatron's, per layer) | global_aux_loss (transformers') | none
    moe_aux_loss_coeff: float
    moe_z_loss_coeff: float  # ST-MoE's router z-loss (Megatron's), summed over the layers
    moe_expert_capacity_factor: float  # 0: dropless; else each expert keeps ceil(tokens k / experts x it)
    moe_token_drop_policy: str  # which choices an expert keeps: the most probable (probs) or the earliest
    # Megatron's moe_layer_freq (N: every Nth layer from the first; "[0, 1, ...]": one per layer),
    # read as one bool per layer: its MLP the mixture of experts (else dense, ffn_hidden_size wide).
    moe_layer_freq: tuple

    @property
    def is_encoder(self):
        return self.family in ("bert", "megatron_bert")

    def rotary_base_for(self, tokens):
        """The base a sequence of `tokens` rotates with: past max_position_embeddings, dynamic NTK
        scaling raises it (transformers' LlamaDynamicNTKScalingRotaryEmbedding)."""
        if self.rope_scaling_type != "dynamic" or tokens <= self.max_position_embeddings:
            return self.rotary_base
        d, f = self.head_dim, self.rope_scaling_factor
        return self.rotary_base * ((f * tokens / self.max_position_embeddings) - (f - 1)) ** (d / (d - 2))

    @property
    def head_dim(self):
        return self.kv_channels or self.hidden_size // self.num_attention_heads


FIELDS = {f.name: f.type for f in dataclasses.fields(Spec)}


def _default_ffn(family, h):
    if family in ("gpt2", "bert", "megatron_bert"):
        return 4 * h
    return 256 * math.ceil((8 * h / 3) / 256)  # Llama rounds 8h/3 up to a multiple of 256


def _moe_layer_pattern(freq, layers, where):
    if isinstance(freq, int) and not isinstance(freq, bool) and freq >= 1:
        return tuple(i % freq == 0 for i in range(layers))
    if isinstance(freq, str) and freq.strip().startswith("["):
        entries = [e.strip() for e in freq.strip()[1:-1].split(",")]
        if len(entries) == layers and all(e in ("0", "1") for e in entries):
            return tuple(e == "1" for e in entries)
    raise SpecError(f"{where}: moe_layer_freq {freq!r} is neither a positive integer nor a list of one 0 or 1 per layer")


def _check_type(key, value, kind, where):
    if kind == "pattern":
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: {key} must be an integer, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise SpecError(f"{where}: {key} must be true or false, got {value!r}")
        return value
    if kind == "float":
        # PyYAML (YAML 1.1) reads `1e-5` (no dot) as a string, so accept numeric strings.
        if isinstance(value, bool):
            raise SpecError(f"{where}: {key} must be a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SpecError(f"{where}: {key} must be a number, got {value!r}") from None
    if not isinstance(value, str) or value not in CHOICES[key]:
        raise SpecError(f"{where}: {key} is {value!r}; expected one of {', '.join(CHOICES[key])}")
    return value


def make_spec(raw, where="spec"):
    """Validate a dict of spec keys, fill defaults, return a Spec."""
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping of keys to values, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(FIELDS)}")
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise SpecError(f"{where}: missing required key(s) {', '.join(missing)}")
    family = _check_type("family", raw["family"], "choice", where)
    h = raw["hidden_size"]
    vals = dict(dict(norm_epsilon=1e-5, num_tokentypes=0, num_experts=0, moe_router_topk=2, moe_ffn_hidden_size=0,
                     moe_router_pre_softmax=False, moe_shared_expert_intermediate_size=0,
                     moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=0.0, moe_z_loss_coeff=0.0,
                     moe_expert_capacity_factor=0.0, moe_token_drop_policy="probs", moe_layer_freq=1),
                **FAMILY_DEFAULTS[family])
    vals.update(rotary_base=10000.0, kv_channels=0,
                rope_scaling_type="none", rope_scaling_factor=1.0, sliding_window=0,
                num_query_groups=raw.get("num_attention_heads"),
                ffn_hidden_size=_default_ffn(family, h) if isinstance(h, int) else None,
                max_position_embeddings=raw.get("seq_length"))
    vals.update(raw)
    if family in ("gpt2", "bert", "megatron_bert") and "add_qkv_bias" not in raw:  # with the other linears
        vals["add_qkv_bias"] = vals["add_bias_linear"]
    vals["moe_layer_freq"] = _moe_layer_pattern(vals["moe_layer_freq"], vals["num_layers"], where)
    kinds = {int: "int", bool: "bool", float: "float", str: "choice", tuple: "pattern"}
    vals = {k: _check_type(k, vals[k], kinds[FIELDS[k]], where) for k in FIELDS}
    s = Spec(**vals)
    _validate(s, where)
    return s


def _validate(s, where):
    for k in ("num_layers", "hidden_size", "num_attention_heads", "seq_length", "vocab_size",
              "num_query_groups", "ffn_hidden_size", "max_position_embeddings"):
        if getattr(s, k) < 1:
            raise SpecError(f"{where}: {k} must be positive, got {getattr(s, k)}")
    if not s.kv_channels and s.hidden_size % s.num_attention_heads:
        raise SpecError(f"{where}: hidden_size ({s.hidden_size}) is not divisible by "
                        f"num_attention_heads ({s.num_attention_heads})")
    if s.num_attention_heads % s.num_query_groups:
        raise SpecError(f"{where}: num_attention_heads ({s.num_attention_heads}) is not divisible by "
                        f"num_query_groups ({s.num_query_groups})")
    if s.position_embedding_type == "rope" and s.head_dim % 2:
        raise SpecError(f"{where}: rope needs an even head dim; hidden_size/num_attention_heads = {s.head_dim}")
    if s.position_embedding_type == "learned" and s.max_position_embeddings < s.seq_length:
        raise SpecError(f"{where}: max_position_embeddings ({s.max_position_embeddings}) is smaller than "
                        f"seq_length ({s.seq_length})")
    if s.norm_epsilon <= 0 or s.rotary_base <= 0:
        raise SpecError(f"{where}: norm_epsilon and rotary_base must be positive")
    if (s.family in ("mixtral", "qwen2_moe")) != (s.num_experts > 0):
        raise SpecError(f"{where}: experts have a Hugging Face layout as families mixtral and qwen2_moe only "
                        f"(num_experts {s.num_experts}, family {s.family})")
    if (s.family == "qwen2_moe") != (s.moe_shared_expert_intermediate_size > 0):
        raise SpecError(f"{where}: a shared expert is Qwen2-MoE's (family {s.family}, "
                        f"moe_shared_expert_intermediate_size {s.moe_shared_expert_intermediate_size})")
    if s.num_experts and not 1 <= s.moe_router_topk <= s.num_experts:
        raise SpecError(f"{where}: moe_router_topk {s.moe_router_topk} is outside [1, {s.num_experts}]")
    for k in ("hidden_dropout", "attention_dropout"):
        if not 0.0 <= getattr(s, k) < 1.0:
            raise SpecError(f"{where}: {k} must be in [0, 1), got {getattr(s, k)}")


def load_spec(path):
    with open(path) as f:
        raw = yaml.safe_load(f)
    return make_spec(raw, where=str(path))
