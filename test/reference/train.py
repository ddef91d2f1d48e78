"""Reference trainer: float32, deterministic, single process; Megatron flag names.

  /usr/bin/python3 test/reference/train.py --spec examples/gpt2-tiny.yaml --data-path PREFIX \
      --train-iters 10 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --min-lr 1e-4 \
      --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0 \
      --load init.safetensors --metrics-file ref.jsonl
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dropout import Draw  # noqa: E402
from indexed_dataset import GPTSamples, IndexedDataset  # noqa: E402
from lora import add_lora  # noqa: E402
from bert import BertMaskedLM  # noqa: E402
from mlm_masking import MlmSamples  # noqa: E402
from model import Transformer, init_weights  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402
from spec import load_spec  # noqa: E402


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", required=True)
    p.add_argument("--data-path")
    p.add_argument("--train-iters", type=int)
    p.add_argument("--micro-batch-size", type=int, default=1)
    p.add_argument("--global-batch-size", type=int)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--lr-decay-style", choices=("constant", "linear", "cosine"), default="linear")
    p.add_argument("--lr-warmup-iters", type=int, default=0)
    p.add_argument("--lr-decay-iters", type=int, help="default: --train-iters")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--adam-beta1", type=float, default=0.9)
    p.add_argument("--adam-beta2", type=float, default=0.999)
    p.add_argument("--adam-eps", type=float, default=1e-8)
    p.add_argument("--clip-grad", type=float, default=1.0, help="0 disables clipping")
    p.add_argument("--load", help="initial weights (.safetensors, Hugging Face names)")
    p.add_argument("--init-out", help="write seeded initial weights here (then train if --train-iters)")
    p.add_argument("--seed", type=int, default=1234, help="initial weights and dropout masks (as OUT/train)")
    p.add_argument("--metrics-file", help="JSONL: one {iteration, lm_loss, grad_norm, lr} per iteration")
    p.add_argument("--lora-rank", type=int, default=0, help="LoRA (PEFT's r): train only adapters (lora.py)")
    p.add_argument("--lora-alpha", type=float, help="default: the rank")
    p.add_argument("--lora-target-modules", default="", help="comma-separated paths inside a layer (attn.c_attn)")
    p.add_argument("--use-rslora", action="store_true")
    p.add_argument("--adapters-out", help="LoRA: write the trained adapters here (PEFT's names)")
    return p


def lr_at(n, a):
    """Megatron OptimizerParamScheduler.get_lr after n scheduler steps."""
    warmup, decay = a.lr_warmup_iters, a.lr_decay_iters
    if warmup > 0 and n <= warmup:
        return a.lr * n / warmup
    if a.lr_decay_style == "constant":
        return a.lr
    if n > decay:
        return a.min_lr
    ratio = (n - warmup) / (decay - warmup)
    coeff = 1.0 - ratio if a.lr_decay_style == "linear" else 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return a.min_lr + coeff * (a.lr - a.min_lr)


def make_optimizer(model, a):
    """AdamW; weight decay on tensors with ndim >= 2 only (not biases / norm weights)."""
    trained = [p for p in model.parameters() if p.requires_grad]  # LoRA: the adapters alone
    decay = [p for p in trained if p.ndim >= 2]
    no_decay = [p for p in trained if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=a.lr, betas=(a.adam_beta1, a.adam_beta2), eps=a.adam_eps, foreach=False)


def load_weights(model, path):
    tensors = load_file(path)
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(set(want) - set(tensors))
    extra = sorted(set(tensors) - set(want))
    if missing or extra:
        raise SystemExit(f"{path}: names do not match the spec; missing {missing}, unexpected {extra}")
    for k, v in tensors.items():
        if tuple(v.shape) != want[k]:
            raise SystemExit(f"{path}: {k} has shape {list(v.shape)}, the spec needs {list(want[k])}")
    model.load_state_dict(tensors, strict=True)


def check_batches(a, num_samples):
    if a.micro_batch_size < 1 or a.global_batch_size < 1:
        raise SystemExit("--micro-batch-size and --global-batch-size must be positive")
    if a.global_batch_size % a.micro_batch_size:
        raise SystemExit(f"--global-batch-size ({a.global_batch_size}) is not divisible by "
                         f"--micro-batch-size ({a.micro_batch_size})")
    need = a.train_iters * a.global_batch_size
    if need > num_samples:
        raise SystemExit(f"--train-iters ({a.train_iters}) x --global-batch-size ({a.global_batch_size}) needs "
                         f"{need} samples; the dataset has {num_samples}")


def train(model, samples, a, log=None):
    """Runs a.train_iters iterations; returns the list of metric dicts."""
    if a.lr_decay_iters is None:
        a.lr_decay_iters = a.train_iters
    check_batches(a, len(samples))
    opt = make_optimizer(model, a)
    params = [p for p in model.parameters() if p.requires_grad]
    b, B = a.micro_batch_size, a.global_batch_size
    num_micro = B // b
    metrics = []
    for k in range(1, a.train_iters + 1):
        lr = lr_at(k - 1, a)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=False)
        loss_sum, balance_sum, z_sum = 0.0, 0.0, 0.0
        load = None  # a mixture of experts' choices per (layer, expert), over the iteration
        for m in range(num_micro):
            first = (k - 1) * B + m * b
            pairs = [samples[i] for i in range(first, first + b)]
            ids = torch.stack([torch.from_numpy(x) for x, _ in pairs])
            labels = torch.stack([torch.from_numpy(y) for _, y in pairs])
            model.draw = Draw(a.seed, k, m * b)  # this microbatch's dropout masks
            loss = model.loss(ids, labels)
            objective = loss
            if model.spec.num_experts:
                mine = model.expert_load()
                load = mine if load is None else [[x + y for x, y in zip(a, b)] for a, b in zip(load, mine)]
            if model.spec.moe_aux_loss_coeff > 0:  # trained on, reported apart from the lm loss
                balance = model.load_balancing_loss()
                objective = loss + model.spec.moe_aux_loss_coeff * balance
                balance_sum += balance.item()
            if model.spec.moe_z_loss_coeff > 0:
                z = model.z_loss()
                objective = objective + model.spec.moe_z_loss_coeff * z
                z_sum += z.item()
            (objective / num_micro).backward()
            loss_sum += loss.item()
        if a.clip_grad > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, a.clip_grad)  # norm before clipping
        else:
            norm = torch.norm(torch.stack([torch.norm(p.grad, 2) for p in params]), 2)
        opt.step()
        rec = {"iteration": k, "lm_loss": loss_sum / num_micro, "grad_norm": float(norm), "lr": lr}
        if model.spec.moe_aux_loss_coeff > 0:
            rec["load_balancing_loss"] = balance_sum / num_micro
        if model.spec.moe_z_loss_coeff > 0:
            rec["z_loss"] = z_sum / num_micro
        if load is not None:
            rec["tokens_per_expert"] = load
        metrics.append(rec)
        if log:
            log(rec)
    return metrics


def main(argv=None):
    a = build_parser().parse_args(argv)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    try:
        spec = load_spec(a.spec)
        model = BertMaskedLM(spec) if spec.is_encoder else Transformer(spec)
    except ValueError as e:  # SpecError or an unsupported combination: the message names the field
        raise SystemExit(f"error: {e}")
    if a.load and a.init_out:
        raise SystemExit("--load and --init-out are exclusive: --init-out writes seeded initial weights")
    if a.load:
        load_weights(model, a.load)
    else:
        init_weights(model, a.seed)
    if a.init_out:
        save_file(model.state_dict(), a.init_out)
        if a.train_iters is None:
            return 0
    adapters = None
    if a.lora_rank:
        adapters = add_lora(model, a.lora_rank, a.lora_alpha if a.lora_alpha is not None else a.lora_rank,
                            [m for m in a.lora_target_modules.split(",") if m], a.use_rslora, a.seed)
    if a.train_iters is None or a.data_path is None or a.global_batch_size is None:
        raise SystemExit("training needs --data-path, --train-iters and --global-batch-size")
    tokens = IndexedDataset(a.data_path).token_stream()
    # A masked LM's batches are masked as OUT/train masks them (mlm_masking.py), under the same seed.
    samples = (MlmSamples(tokens, spec.seq_length, a.seed, a.data_path) if spec.is_encoder
               else GPTSamples(tokens, spec.seq_length))
    out = open(a.metrics_file, "w") if a.metrics_file else None

    def log(rec):
        print(f" iteration {rec['iteration']:8d}/{a.train_iters:8d} | lr {rec['lr']:.6E} | "
              f"lm loss {rec['lm_loss']:.6E} | grad norm {rec['grad_norm']:.6E}", flush=True)
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()

    train(model, samples, a, log)
    if out:
        out.close()
    if a.adapters_out and adapters:
        save_file({k: v.detach() for k, v in adapters.items()}, a.adapters_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
