"""BERT in plain torch, float32, with Hugging Face's names: BertForMaskedLM (norms after each
residual add, and after the embeddings) or, for family megatron_bert, MegatronBertForMaskedLM
(norms before each block and at the end). Bidirectional attention, learned positions, token
type 0 for every token, the exact GELU, the masked-LM head (transform, decoder tied to the word
embeddings, its own bias), cross-entropy over the masked positions (labels -100 elsewhere)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import dropout
from model import Embedding, Linear, Norm, drop_with


def _linear(n_in, n_out):
    return Linear(n_in, n_out, True, conv1d=False)


class SelfAttention(nn.Module):
    def __init__(self, spec):
        super().__init__()
        h = spec.hidden_size
        self.heads, self.d = spec.num_attention_heads, h // spec.num_attention_heads
        self.query, self.key, self.value = _linear(h, h), _linear(h, h), _linear(h, h)

    def forward(self, x, drop, rate):
        B, S, _ = x.shape
        q, k, v = (m(x).view(B, S, self.heads, self.d).transpose(1, 2) for m in (self.query, self.key, self.value))
        probs = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d)), dim=-1)
        probs = drop(probs, rate, dropout.ATTENTION)
        return (probs @ v).transpose(1, 2).reshape(B, S, self.heads * self.d)


class Layer(nn.Module):
    def __init__(self, spec):
        super().__init__()
        h, f, eps = spec.hidden_size, spec.ffn_hidden_size, spec.norm_epsilon
        self.post = spec.family == "bert"
        self.attention = nn.Module()
        self.attention.self = SelfAttention(spec)
        self.attention.output = nn.Module()
        self.attention.output.dense = _linear(h, h)
        self.intermediate, self.output = nn.Module(), nn.Module()
        self.intermediate.dense, self.output.dense = _linear(h, f), _linear(f, h)
        if self.post:
            self.attention.output.LayerNorm = Norm(h, "LayerNorm", eps)
            self.output.LayerNorm = Norm(h, "LayerNorm", eps)
        else:
            self.attention.ln, self.ln = Norm(h, "LayerNorm", eps), Norm(h, "LayerNorm", eps)
        self.hidden_dropout, self.attention_dropout = spec.hidden_dropout, spec.attention_dropout

    def forward(self, x, drop):
        a = self.attention
        h = x if self.post else a.ln(x)
        o = drop(a.output.dense(a.self(h, drop, self.attention_dropout)), self.hidden_dropout, dropout.ATTENTION_OUTPUT)
        x = x + o
        if self.post:
            x = a.output.LayerNorm(x)
        h = x if self.post else self.ln(x)
        m = self.output.dense(F.gelu(self.intermediate.dense(h)))  # erf
        x = x + drop(m, self.hidden_dropout, dropout.MLP_OUTPUT)
        return self.output.LayerNorm(x) if self.post else x


class BertMaskedLM(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.spec = spec
        h, eps = spec.hidden_size, spec.norm_epsilon
        self.bert = nn.Module()
        e = self.bert.embeddings = nn.Module()
        e.word_embeddings = Embedding(spec.vocab_size, h)
        e.position_embeddings = Embedding(spec.max_position_embeddings, h)
        e.token_type_embeddings = Embedding(spec.num_tokentypes, h)
        if spec.family == "bert":
            e.LayerNorm = Norm(h, "LayerNorm", eps)
        self.bert.encoder = nn.Module()
        self.bert.encoder.layer = nn.ModuleList(Layer(spec) for _ in range(spec.num_layers))
        if spec.family == "megatron_bert":
            self.bert.encoder.ln = Norm(h, "LayerNorm", eps)
        self.cls = nn.Module()
        p = self.cls.predictions = nn.Module()
        p.transform = nn.Module()
        p.transform.dense, p.transform.LayerNorm = _linear(h, h), Norm(h, "LayerNorm", eps)
        p.bias = nn.Parameter(torch.empty(spec.vocab_size, dtype=torch.float32))
        self.draw = None  # a dropout.Draw while training a microbatch; None: no dropout

    def _dropout(self, x, rate, layer, stream):
        return drop_with(self.draw, x, rate, layer, stream)

    def forward(self, ids):
        """ids [B, S] int64 (masked) -> logits [B, S, V]."""
        e, S = self.bert.embeddings, ids.shape[1]
        x = e.word_embeddings(ids) + e.position_embeddings.weight[:S] + e.token_type_embeddings.weight[0]
        if self.spec.family == "bert":
            x = e.LayerNorm(x)
        x = self._dropout(x, self.spec.hidden_dropout, -1, dropout.EMBEDDING)
        for i, layer in enumerate(self.bert.encoder.layer):
            x = layer(x, lambda y, rate, stream, i=i: self._dropout(y, rate, i, stream))
        if self.spec.family == "megatron_bert":
            x = self.bert.encoder.ln(x)
        p = self.cls.predictions
        t = p.transform.LayerNorm(F.gelu(p.transform.dense(x)))
        return t @ e.word_embeddings.weight.t() + p.bias

    def loss(self, ids, labels):
        """Mean cross-entropy over the masked positions (labels -100 elsewhere)."""
        logits = self(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
