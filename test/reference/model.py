"""GPT-2 / Llama / Qwen2 / Mistral / Gemma in plain torch, float32, with Hugging Face parameter names and layouts.

model.state_dict() maps 1:1 to safetensors tensor names (see /work/shared/reference/facts.md).
Family picks the names ("gpt2": transformer.*, Conv1D [in,out]; "llama", "qwen2": model.*, [out,in]);
the spec's knobs pick the math.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import dropout


def _param(*shape):
    return nn.Parameter(torch.empty(*shape, dtype=torch.float32))


class Linear(nn.Module):
    """conv1d=True: GPT-2 Conv1D, weight [in,out], y = x @ W + b.  Else weight [out,in], y = x @ W.T + b."""

    def __init__(self, n_in, n_out, bias, conv1d):
        super().__init__()
        self.conv1d = conv1d
        self.weight = _param(n_in, n_out) if conv1d else _param(n_out, n_in)
        self.bias = _param(n_out) if bias else None

    def forward(self, x):
        y = x @ (self.weight if self.conv1d else self.weight.t())
        return y if self.bias is None else y + self.bias


class Embedding(nn.Module):
    def __init__(self, n, h):
        super().__init__()
        self.weight = _param(n, h)

    def forward(self, ids):
        return self.weight[ids]


class Norm(nn.Module):
    """LayerNorm (weight, bias; biased variance) or RMSNorm (weight only; scaling by 1 + w with
    offset 1, Gemma's)."""

    def __init__(self, h, kind, eps, offset=0.0):
        super().__init__()
        self.kind, self.eps, self.offset = kind, eps, offset
        self.weight = _param(h)
        self.bias = _param(h) if kind == "LayerNorm" else None

    def forward(self, x):
        if self.kind == "LayerNorm":
            mu = x.mean(-1, keepdim=True)
            var = (x - mu).pow(2).mean(-1, keepdim=True)
            return (x - mu) * torch.rsqrt(var + self.eps) * self.weight + self.bias
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (self.weight + self.offset)


def drop_with(draw, x, rate, layer, stream):
    """x with `draw`'s dropout mask of (layer, stream) applied; x itself without a draw or at rate 0."""
    if draw is None or rate == 0.0:
        return x
    return x * torch.from_numpy(draw.mask(rate, tuple(x.shape), layer, stream))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def rope_tables(seq, head_dim, base, position_divisor=1.0):
    """HF rotate_half convention, all float32: cos/sin [seq, head_dim], halves duplicated;
    positions divided by position_divisor (linear rope scaling)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    angles = (torch.arange(seq, dtype=torch.float32) / position_divisor)[:, None] * inv_freq[None, :]
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin  # x [B, heads, S, d]; cos/sin [S, d] broadcast


class Attention(nn.Module):
    def __init__(self, spec, gpt2):
        super().__init__()
        h, d = spec.hidden_size, spec.head_dim
        self.heads, self.groups, self.d, self.gpt2 = spec.num_attention_heads, spec.num_query_groups, d, gpt2
        self.attention_dropout = spec.attention_dropout
        self.window = spec.sliding_window
        q, kv, bias = self.heads * d, self.groups * d, spec.add_bias_linear  # q: hidden_size unless kv_channels
        if gpt2:  # fused Conv1D; output columns [q | k (kv) | v (kv)], heads contiguous
            self.c_attn = Linear(h, q + 2 * kv, bias, conv1d=True)
            self.c_proj = Linear(q, h, bias, conv1d=True)
        else:  # q, k and v with biases alone: Qwen2
            qkv_bias = bias or spec.add_qkv_bias
            self.q_proj = Linear(h, q, qkv_bias, conv1d=False)
            self.k_proj = Linear(h, kv, qkv_bias, conv1d=False)
            self.v_proj = Linear(h, kv, qkv_bias, conv1d=False)
            self.o_proj = Linear(q, h, bias, conv1d=False)

    def forward(self, x, rope=None, drop=None):
        B, S, h = x.shape
        if self.gpt2:
            q, k, v = self.c_attn(x).split([self.heads * self.d, self.groups * self.d, self.groups * self.d], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(B, S, self.heads, self.d).transpose(1, 2)  # [B, heads, S, d]
        k = k.view(B, S, self.groups, self.d).transpose(1, 2)  # [B, groups, S, d]
        v = v.view(B, S, self.groups, self.d).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        rep = self.heads // self.groups  # GQA: query head j reads kv head j // rep
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))
        hidden = torch.ones(S, S, dtype=torch.bool).triu(1)  # keys after the query
        if self.window:  # and keys more than `window` before it
            hidden |= torch.ones(S, S, dtype=torch.bool).tril(-self.window - 1)
        probs = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
        if drop is not None:
            probs = drop(probs, self.attention_dropout, dropout.ATTENTION)
        o = (probs @ v).transpose(1, 2).reshape(B, S, self.heads * self.d)
        return self.c_proj(o) if self.gpt2 else self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, spec, gpt2):
        super().__init__()
        h, f, bias = spec.hidden_size, spec.ffn_hidden_size, spec.add_bias_linear
        self.gpt2, self.geglu = gpt2, spec.activation == "geglu"
        if gpt2:
            self.c_fc = Linear(h, f, bias, conv1d=True)
            self.c_proj = Linear(f, h, bias, conv1d=True)
        else:
            self.gate_proj = Linear(h, f, bias, conv1d=False)
            self.up_proj = Linear(h, f, bias, conv1d=False)
            self.down_proj = Linear(f, h, bias, conv1d=False)

    def forward(self, x):
        if self.gpt2:
            return self.c_proj(gelu_tanh(self.c_fc(x)))
        if self.geglu:
            return self.down_proj(gelu_tanh(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Expert(nn.Module):
    """One of Mixtral's experts, w2(silu(w1 x) * w3 x), or Qwen2-MoE's (gate_proj, up_proj, down_proj)."""

    NAMES = {False: ("w1", "w3", "w2"), True: ("gate_proj", "up_proj", "down_proj")}

    def __init__(self, h, f, qwen):
        super().__init__()
        self.names = self.NAMES[qwen]
        gate, up, down = self.names
        setattr(self, gate, Linear(h, f, False, False))
        setattr(self, up, Linear(h, f, False, False))
        setattr(self, down, Linear(f, h, False, False))

    def forward(self, x):
        gate, up, down = (getattr(self, n) for n in self.names)
        return down(F.silu(gate(x)) * up(x))


class MixtureOfExperts(nn.Module):
    """Mixtral's block_sparse_moe, dropless: the router's softmax over the experts, each token's k
    most probable (torch.topk), their probabilities renormalised to sum to 1 (unless
    moe_router_pre_softmax), each expert's tokens through it and added back weighted."""

    def __init__(self, spec):
        super().__init__()
        h, f = spec.hidden_size, spec.moe_ffn_hidden_size or spec.ffn_hidden_size
        self.topk, self.renormalise = spec.moe_router_topk, not spec.moe_router_pre_softmax
        self.capacity_factor, self.by_position = spec.moe_expert_capacity_factor, spec.moe_token_drop_policy == "position"
        qwen = spec.family == "qwen2_moe"
        self.gate = Linear(h, spec.num_experts, False, False)
        self.experts = nn.ModuleList(Expert(h, f, qwen) for _ in range(spec.num_experts))
        if spec.moe_shared_expert_intermediate_size:  # Qwen2-MoE's, gated by a sigmoid per token
            self.shared_expert = Expert(h, spec.moe_shared_expert_intermediate_size, True)
            self.shared_expert_gate = Linear(h, 1, False, False)

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        logits = self.gate(tokens)
        probs = F.softmax(logits, dim=-1)
        weights, chosen = torch.topk(probs, self.topk, dim=-1)
        self.routing = (probs, chosen)  # for the load-balancing loss
        self.z_loss = torch.logsumexp(logits, dim=-1).square().mean()  # ST-MoE's router z-loss
        if self.renormalise:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        computed = chosen.reshape(-1)
        if self.capacity_factor:
            keep = self.kept(chosen, weights.detach())
            weights = weights * keep
            computed = chosen[keep > 0]
        self.load = torch.bincount(computed, minlength=len(self.experts)).tolist()  # choices each expert computed
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            if token.numel():
                out = out.index_add(0, token, expert(tokens[token]) * weights[token, slot, None])
        if hasattr(self, "shared_expert"):
            out = out + torch.sigmoid(self.shared_expert_gate(tokens)) * self.shared_expert(tokens)
        return out.reshape(x.shape)

    def kept(self, chosen, weights):
        """Megatron's token dropping: each expert keeps ceil(tokens x k / experts x capacity factor)
        of the choices that name it, the most probable (ties: the earlier token) or the earliest;
        a dropped choice's weight becomes 0 (1 = kept)."""
        n = chosen.shape[0]
        capacity = math.ceil(n * self.topk / len(self.experts) * self.capacity_factor)
        keep = torch.ones(chosen.shape, dtype=weights.dtype)
        for e in range(len(self.experts)):
            token, slot = torch.where(chosen == e)  # in token order
            if token.numel() <= capacity:
                continue
            order = torch.arange(token.numel()) if self.by_position else \
                torch.sort(-weights[token, slot], stable=True).indices
            drop = order[capacity:]
            keep[token[drop], slot[drop]] = 0
        return keep


class Block(nn.Module):
    """Pre-norm: x += attn(norm1(x)); x += mlp(norm2(x))."""

    def __init__(self, spec, gpt2, experts=True):
        super().__init__()
        norm = lambda: Norm(spec.hidden_size, spec.normalization, spec.norm_epsilon, norm_offset(spec))
        experts = experts and spec.num_experts > 0  # else a dense MLP (moe_layer_freq's other layers)
        if gpt2:
            self.ln_1, self.attn, self.ln_2, self.mlp = norm(), Attention(spec, True), norm(), MLP(spec, True)
        else:
            self.input_layernorm, self.self_attn = norm(), Attention(spec, False)
            self.post_attention_layernorm = norm()
            if experts and spec.family == "mixtral":  # Mixtral's name for it
                self.block_sparse_moe = MixtureOfExperts(spec)
            elif experts:
                self.mlp = MixtureOfExperts(spec)
            else:
                self.mlp = MLP(spec, False)
        self.hidden_dropout = spec.hidden_dropout
        self.parts = (("ln_1", "attn", "ln_2") if gpt2 else
                      ("input_layernorm", "self_attn", "post_attention_layernorm"))

    def forward(self, x, rope, drop=None):
        """drop(x, rate, stream): this layer's dropout (None: none)."""
        n1, attn, n2 = (getattr(self, p) for p in self.parts)
        hidden = (lambda y, stream: y) if drop is None else (lambda y, stream: drop(y, self.hidden_dropout, stream))
        x = x + hidden(attn(n1(x), rope, drop), dropout.ATTENTION_OUTPUT)
        mlp = self.block_sparse_moe if hasattr(self, "block_sparse_moe") else self.mlp
        return x + hidden(mlp(n2(x)), dropout.MLP_OUTPUT)


def norm_offset(spec):
    """Gemma's norms scale by 1 + w (weights centred at zero)."""
    return 1.0 if spec.family == "gemma" else 0.0


def check_supported(spec):
    """Combinations the reference implements; raises ValueError naming the field otherwise."""
    if spec.family == "gpt2" and spec.activation != "gelu":
        raise ValueError("family gpt2 has no Hugging Face layout for activation swiglu; use family llama")
    if spec.family != "gpt2" and spec.activation != ("geglu" if spec.family == "gemma" else "swiglu"):
        raise ValueError(f"family {spec.family} has no Hugging Face layout for activation {spec.activation}")
    if spec.family != "gpt2" and spec.position_embedding_type != "rope":
        raise ValueError(f"family {spec.family} has no Hugging Face layout for learned positions; use family gpt2")
    if spec.family == "gpt2" and spec.add_qkv_bias != spec.add_bias_linear:
        raise ValueError("family gpt2's q, k and v share c_attn's bias with the other linear layers")


class Transformer(nn.Module):
    def __init__(self, spec):
        super().__init__()
        check_supported(spec)
        self.spec = spec
        gpt2 = spec.family == "gpt2"
        h, V = spec.hidden_size, spec.vocab_size
        blocks = nn.ModuleList(Block(spec, gpt2, spec.moe_layer_freq[i]) for i in range(spec.num_layers))
        final = Norm(h, spec.normalization, spec.norm_epsilon, norm_offset(spec))
        body = nn.Module()  # "transformer" (gpt2) or "model" (llama): only there for the names
        if gpt2:
            body.wte = Embedding(V, h)
            if spec.position_embedding_type == "learned":
                body.wpe = Embedding(spec.max_position_embeddings, h)
            body.h, body.ln_f = blocks, final
            self.transformer = body
            self._names = ("transformer", "wte", "h", "ln_f")
        else:
            body.embed_tokens, body.layers, body.norm = Embedding(V, h), blocks, final
            self.model = body
            self._names = ("model", "embed_tokens", "layers", "norm")
        if not spec.tie_embeddings:
            self.lm_head = Linear(h, V, bias=False, conv1d=False)  # [V, h]
        divisor = spec.rope_scaling_factor if spec.rope_scaling_type == "linear" else 1.0
        self.rope = (rope_tables(spec.seq_length, spec.head_dim, spec.rotary_base_for(spec.seq_length), divisor)
                     if spec.position_embedding_type == "rope" else None)
        self.draw = None  # a dropout.Draw while training a microbatch; None: no dropout

    def _dropout(self, x, rate, layer, stream):
        return drop_with(self.draw, x, rate, layer, stream)

    def forward(self, ids):
        """ids [B, S] int64 -> logits [B, S, V]."""
        body = getattr(self, self._names[0])
        emb, blocks, final = (getattr(body, n) for n in self._names[1:])
        S = ids.shape[1]
        x = emb(ids)
        if self.spec.family == "gemma":  # sqrt(hidden) as a float32, transformers' normalizer
            x = x * torch.tensor(self.spec.hidden_size ** 0.5, dtype=torch.float32)
        if self.rope is None:
            x = x + body.wpe.weight[:S]
        rope = None if self.rope is None else (self.rope[0][:S], self.rope[1][:S])
        x = self._dropout(x, self.spec.hidden_dropout, -1, dropout.EMBEDDING)
        for i, block in enumerate(blocks):
            x = block(x, rope, lambda y, rate, stream, i=i: self._dropout(y, rate, i, stream))
        x = final(x)
        head = emb.weight if self.spec.tie_embeddings else self.lm_head.weight
        return x @ head.t()

    def loss(self, ids, labels):
        """Mean cross-entropy over all B*S tokens."""
        logits = self(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    def moe_layers(self):
        """The layers' mixtures of experts (a dense layer has none)."""
        mlps = [block.block_sparse_moe if self.spec.family == "mixtral" else block.mlp
                for block in getattr(self, self._names[0]).layers]
        return [m for m in mlps if isinstance(m, MixtureOfExperts)]

    def expert_load(self):
        """The last forward's choices each expert computed (dropped ones not counted), per layer (a
        dense layer's: zeros)."""
        mlps = [block.block_sparse_moe if self.spec.family == "mixtral" else block.mlp
                for block in getattr(self, self._names[0]).layers]
        return [m.load if isinstance(m, MixtureOfExperts) else [0] * self.spec.num_experts
                for m in mlps]

    def z_loss(self):
        """The last forward's router z-losses (each the mean over the tokens of logsumexp(logits)^2),
        summed over the layers, before their coefficient."""
        return sum(layer.z_loss for layer in self.moe_layers())

    def load_balancing_loss(self):
        """The routing of the last forward's load-balancing loss, before its coefficient:
        global_aux_loss as transformers' load_balancing_loss_func (every layer's tokens together:
        experts x sum over experts of the fraction of the choices it got times its mean
        probability), aux_loss as Megatron's (each layer's experts / (tokens^2 x k) x sum over
        experts of its choices times its summed probability, summed over the layers)."""
        spec = self.spec
        routing = [layer.routing for layer in self.moe_layers()]
        E, k = spec.num_experts, spec.moe_router_topk
        if spec.moe_router_load_balancing_type == "global_aux_loss":
            probs = torch.cat([p for p, _ in routing])
            chosen = torch.cat([c for _, c in routing])
            fraction = F.one_hot(chosen, E).float().mean(dim=0)  # [k, E]
            return E * (fraction * probs.mean(dim=0)).sum()
        total = 0.0
        for probs, chosen in routing:
            counts = torch.bincount(chosen.reshape(-1), minlength=E).float()
            T = probs.shape[0]
            total = total + (probs.sum(dim=0) * counts).sum() * E / (T * T * k)
        return total


OUTPUT_PROJECTIONS = ("attn.c_proj.weight", "mlp.c_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight",
                      ".w2.weight", "down_proj.weight")


def init_weights(model, seed):
    """normal(0.02) weights, zeros biases, ones norm weights, output projections 0.02/sqrt(2L)."""
    torch.manual_seed(seed)
    out_std = 0.02 / math.sqrt(2 * model.spec.num_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif p.ndim == 1:  # norm weights: 1, or 0 where they scale by 1 + w
                p.fill_(1.0 - norm_offset(model.spec))
            else:
                p.normal_(0.0, out_std if name.endswith(OUTPUT_PROJECTIONS) else 0.02)
    return model
