"""LoRA as PEFT defines it, on the reference model: the base frozen, each targeted linear layer
y = base(x) + (x A^T B^T) * scaling, A [r, in], B [out, r], scaling = alpha / r (alpha / sqrt(r)
with rsLoRA). A starts as runtime/include/megart/param_init.h documents KaimingUniform (written
again here from that text), B at zero: the reference and megac start from the same adapters.
Adapter tensors carry PEFT's names (base_model.model.<module path>.lora_A.weight)."""
import math

import numpy as np
import torch
import torch.nn as nn

from dropout import GOLDEN, MASK64, mix

PEFT_PREFIX = "base_model.model."


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h


def kaiming_uniform(name, shape, seed):
    """param_init.h's KaimingUniform of tensor `name` [r, fan_in]: element e is
    (2 (mix(key + (2e+1) G) >> 11) 2^-53 - 1) x (1 / sqrt(fan_in)), key = mix(mix(seed) ^ fnv1a64(name))."""
    key = int(mix((int(mix(seed)) ^ fnv1a64(name)) & MASK64))
    e = np.arange(int(np.prod(shape)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        r = mix(np.uint64(key) + (np.uint64(2) * e + np.uint64(1)) * np.uint64(GOLDEN))
    u = (r >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    values = (2.0 * u - 1.0) * (1.0 / math.sqrt(shape[-1]))  # the bound first, as the runtime
    return torch.from_numpy(values.astype(np.float32).reshape(shape))


class LoraLinear(nn.Module):
    """Wraps a reference Linear (GPT-2 Conv1D or nn.Linear layout) with PEFT's adapter."""

    def __init__(self, base, rank, scaling):
        super().__init__()
        self.base, self.scaling = base, scaling
        n_in, n_out = base.weight.shape if base.conv1d else base.weight.shape[::-1]
        self.lora_A = nn.Module()
        self.lora_A.weight = nn.Parameter(torch.zeros(rank, n_in))
        self.lora_B = nn.Module()
        self.lora_B.weight = nn.Parameter(torch.zeros(n_out, rank))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.weight.t() @ self.lora_B.weight.t()) * self.scaling


def add_lora(model, rank, alpha, modules, rslora, seed):
    """Freezes `model` and wraps every layer's modules named in `modules` (paths inside a layer,
    'attn.c_attn'). Returns {PEFT name: parameter} of the adapters."""
    for p in model.parameters():
        p.requires_grad_(False)
    scaling = alpha / math.sqrt(rank) if rslora else alpha / rank
    body = getattr(model, model._names[0])
    layers = getattr(body, model._names[2])
    adapters = {}
    for i, layer in enumerate(layers):
        for path in modules:
            parent_path, _, leaf = path.rpartition(".")
            parent = layer.get_submodule(parent_path) if parent_path else layer
            wrapped = LoraLinear(getattr(parent, leaf), rank, scaling)
            setattr(parent, leaf, wrapped)
            prefix = f"{PEFT_PREFIX}{model._names[0]}.{model._names[2]}.{i}.{path}"
            with torch.no_grad():
                wrapped.lora_A.weight.copy_(kaiming_uniform(prefix + ".lora_A.weight", wrapped.lora_A.weight.shape, seed))
            adapters[prefix + ".lora_A.weight"] = wrapped.lora_A.weight
            adapters[prefix + ".lora_B.weight"] = wrapped.lora_B.weight
    return adapters
