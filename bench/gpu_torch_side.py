#!/usr/bin/env python3
"""The PyTorch side of bench/gpu_vs_pytorch.py, in its own process (so the GPU is free again
for OUT/train when it exits):

    gpu_torch_side.py init  --spec S --data-path P --load W.safetensors --samples N --device cuda --out info.json
    gpu_torch_side.py train --spec S --data-path P --load W.safetensors --warmup W --iters N \
        --micro-batch-size B --device cuda [--compile] --out records.json

init writes random token ids < V and the reference's seeded initial weights; train trains a
GPT-2 with test/reference's parameter names in bf16 autocast and times every iteration.
"""
import argparse
import json
import os
import sys
import time

REFERENCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test", "reference")
DATA_SEED = INIT_SEED = 1234
LR, CLIP = 6e-4, 1.0  # bench/gpu_vs_pytorch.py gives OUT/train the same


def build_model(spec):
    """GPT-2 with test/reference's parameter names and layouts (Conv1D weights [in, out]), with the
    spec's dropout where megac's program has it (after the embeddings, on the attention
    probabilities, before each residual add)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    if (spec.family, spec.position_embedding_type, spec.tie_embeddings, spec.add_bias_linear) != \
            ("gpt2", "learned", True, True):
        raise SystemExit("bench: only GPT-2 specs with the family defaults are supported")
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    class Conv1D(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(n_in, n_out))
            self.bias = nn.Parameter(torch.empty(n_out))

        def forward(self, x):
            return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)

    class Embedding(nn.Module):
        def __init__(self, n, h):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(n, h))

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            h = spec.hidden_size
            self.c_attn, self.c_proj = Conv1D(h, 3 * h), Conv1D(h, h)

        def forward(self, x):
            B, S, h = x.shape
            q, k, v = (t.view(B, S, spec.num_attention_heads, -1).transpose(1, 2)
                       for t in self.c_attn(x).split(h, dim=-1))
            p = spec.attention_dropout if self.training else 0.0  # megac's program drops as the spec says
            if sdpa is not None:  # flash / memory-efficient kernels, causal without a mask
                o = sdpa(q, k, v, is_causal=True, dropout_p=p)
            else:  # torch < 2.0: the reference's way
                scores = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
                mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
                o = F.dropout(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), p, self.training) @ v
            return self.c_proj(o.transpose(1, 2).reshape(B, S, h))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            h, eps = spec.hidden_size, spec.norm_epsilon
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(h, eps), Attention(), nn.LayerNorm(h, eps)
            self.mlp = nn.Module()
            self.mlp.c_fc, self.mlp.c_proj = Conv1D(h, spec.ffn_hidden_size), Conv1D(spec.ffn_hidden_size, h)

        def forward(self, x):
            drop = lambda y: F.dropout(y, spec.hidden_dropout, self.training)
            x = x + drop(self.attn(self.ln_1(x)))
            return x + drop(self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.spec = spec  # init_weights reads num_layers
            t = self.transformer = nn.Module()
            t.wte = Embedding(spec.vocab_size, spec.hidden_size)
            t.wpe = Embedding(spec.max_position_embeddings, spec.hidden_size)
            t.h = nn.ModuleList(Block() for _ in range(spec.num_layers))
            t.ln_f = nn.LayerNorm(spec.hidden_size, spec.norm_epsilon)

        def forward(self, ids):
            t = self.transformer
            x = F.dropout(F.embedding(ids, t.wte.weight) + t.wpe.weight[:ids.shape[1]], spec.hidden_dropout,
                          self.training)
            for block in t.h:
                x = block(x)
            return F.linear(t.ln_f(x), t.wte.weight)  # tied LM head

    return GPT2(), ("sdpa" if sdpa is not None else "math (masked softmax)")


def worker_init(a):
    """Dataset and initial weights, plus what the device is."""
    import numpy as np
    import torch
    sys.path.insert(0, REFERENCE)
    from indexed_dataset import write_dataset
    from model import init_weights
    from spec import load_spec

    spec = load_spec(a.spec)
    rng = np.random.default_rng(DATA_SEED)
    write_dataset(a.data_path, [rng.integers(0, spec.vocab_size, size=a.samples * spec.seq_length + 1)],
                  spec.vocab_size)
    model, _ = build_model(spec)
    model.to(a.device)  # seeded init on the device: seconds for 1.3B instead of minutes on a CPU
    init_weights(model, INIT_SEED)
    state = {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}
    try:
        from safetensors.torch import save_file
    except ImportError:
        from safetensors_io import save_file
    save_file(state, a.load)
    info = {"params": sum(v.numel() for v in state.values()), "torch": torch.__version__,
            "cuda": torch.version.cuda}
    if a.device == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, memory_gib=round(p.total_memory / 2**30, 1), sm=f"{p.major}.{p.minor}")
    with open(a.out, "w") as f:
        json.dump(info, f)


def worker_train(a):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, REFERENCE)
    from indexed_dataset import GPTSamples, IndexedDataset
    from spec import load_spec
    try:
        from safetensors.torch import load_file
    except ImportError:
        from safetensors_io import load_file

    dev = torch.device(a.device)
    spec = load_spec(a.spec)
    model, attention = build_model(spec)
    model.load_state_dict(load_file(a.load), strict=True)
    model.to(dev)
    decay = [p for p in model.parameters() if p.ndim >= 2]  # as OUT/train: no decay on biases/norms
    rest = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}]
    kw = dict(lr=LR, betas=(0.9, 0.999), eps=1e-8)
    try:
        opt, optimizer = torch.optim.AdamW(groups, fused=dev.type == "cuda", **kw), "fused"
    except (TypeError, RuntimeError):
        opt, optimizer = torch.optim.AdamW(groups, **kw), "default"
    if dev.type != "cuda":
        optimizer = "default"
    step_model = torch.compile(model) if a.compile else model
    params = list(model.parameters())
    samples = GPTSamples(IndexedDataset(a.data_path).token_stream(), spec.seq_length)
    iters, b = a.warmup + a.iters, a.micro_batch_size
    records = []
    for k in range(1, iters + 1):
        t0 = time.perf_counter()
        for g in opt.param_groups:  # OUT/train's default: linear decay to 0 over --train-iters
            g["lr"] = LR * (1 - (k - 1) / iters)
        opt.zero_grad(set_to_none=True)
        pairs = [samples[i] for i in range((k - 1) * b, k * b)]
        ids = torch.stack([torch.from_numpy(x) for x, _ in pairs]).to(dev, non_blocking=True)
        labels = torch.stack([torch.from_numpy(y) for _, y in pairs]).to(dev, non_blocking=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            logits = step_model(ids)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        loss_value, norm_value = loss.item(), float(norm)  # both wait for the GPU
        if dev.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        records.append({"iteration": k, "lm_loss": loss_value, "grad_norm": norm_value,
                        "ms_per_iter": seconds * 1e3, "tokens_per_s": b * spec.seq_length / seconds})
    out = {"records": records, "attention": attention, "optimizer": optimizer}
    if dev.type == "cuda":
        out["max_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    with open(a.out, "w") as f:
        json.dump(out, f)


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("init", "train"))
    for k in ("--spec", "--data-path", "--load", "--out", "--device"):
        p.add_argument(k, required=True)
    for k in ("--samples", "--warmup", "--iters", "--micro-batch-size"):
        p.add_argument(k, type=int, default=0)
    p.add_argument("--compile", action="store_true")
    a = p.parse_args(argv)
    worker_init(a) if a.mode == "init" else worker_train(a)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
