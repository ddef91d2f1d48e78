#!/usr/bin/env python3
"""OUT/train's learning rate against megatron-core's own OptimizerParamScheduler (0.12.1, from
build/pyenv; its module loaded by path with its two imports stubbed, as its package __init__
needs a newer torch): for each schedule below, the lr every iteration's metrics record carries
equals get_lr(), stepped by the global batch per iteration as Megatron's training loop steps it,
to the last bit. The schedules: cosine with --lr-warmup-fraction and --lr-warmup-init, linear with
a fractional warmup (1.5 iterations), WSD with each anneal style, inverse-square-root; each runs
past its decay into --min-lr.

    lr_schedule.py --megac build/bin/megac --python build/pyenv/bin/python --spec SPEC --workdir DIR
"""
import json
import os
import sys

from e2e_util import library_check_args, metrics, python_json, run

ITERS, BATCH = 40, 4
SCHEDULES = {
    "cosine, warmup fraction 0.1 from 1e-5": ["--lr-decay-style", "cosine", "--lr-warmup-fraction", "0.1",
                                              "--lr-warmup-init", "1e-5", "--lr-decay-iters", "30"],
    "linear, warmup 1.5 iterations": ["--lr-decay-style", "linear", "--lr-warmup-fraction", "0.05",
                                      "--lr-decay-iters", "30"],
    "WSD exponential": ["--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "10", "--lr-warmup-iters", "3",
                        "--lr-decay-iters", "30"],
    "WSD linear": ["--lr-decay-style", "WSD", "--lr-wsd-decay-style", "linear", "--lr-wsd-decay-iters", "7",
                   "--lr-warmup-iters", "3", "--lr-decay-iters", "30"],
    "WSD cosine": ["--lr-decay-style", "WSD", "--lr-wsd-decay-style", "cosine", "--lr-wsd-decay-iters", "12",
                   "--lr-decay-iters", "35"],
    "inverse-square-root": ["--lr-decay-style", "inverse-square-root", "--lr-warmup-iters", "5",
                            "--lr-decay-iters", "30"],
}

# Runs under build/pyenv's python: Megatron's get_lr for one schedule, per iteration.
MEGATRON = r'''
import importlib.machinery, importlib.util, json, sys, types
cfg = json.loads(sys.argv[1])
# Found on sys.path, not imported (nor looked up in sys.modules, which holds the stubs below from
# the previous schedule: python_json runs every schedule in one process).
root = importlib.machinery.PathFinder.find_spec("megatron").submodule_search_locations[0]
for name, attrs in {"megatron": {}, "megatron.core": {},
                    "megatron.core.optimizer": {"MegatronOptimizer": object},
                    "megatron.core.utils": {"log_single_rank": lambda *a, **k: None}}.items():
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
spec = importlib.util.spec_from_file_location("scheduler", root + "/core/optimizer_param_scheduler.py")
scheduler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scheduler)
class Optimizer:
    param_groups = [{}]
g = cfg["batch"]
decay = cfg["decay_iters"] * g  # Megatron's training.py: everything in samples
warmup = cfg["warmup_fraction"] * decay if cfg["warmup_fraction"] is not None else cfg["warmup_iters"] * g
s = scheduler.OptimizerParamScheduler(
    Optimizer(), init_lr=cfg["init_lr"], max_lr=cfg["lr"], min_lr=cfg["min_lr"], lr_warmup_steps=warmup,
    lr_decay_steps=decay, lr_decay_style=cfg["style"], start_wd=0.01, end_wd=0.01, wd_incr_steps=decay,
    wd_incr_style="constant", wsd_decay_steps=cfg["wsd_iters"] * g if cfg["wsd_iters"] else None,
    lr_wsd_decay_style=cfg["wsd_style"])
lrs = []
for _ in range(cfg["iters"]):
    lrs.append(Optimizer.param_groups[0]["lr"])  # the lr this iteration trains with
    s.step(increment=g)
print(json.dumps(lrs))
'''


def flag(flags, name, default=None, kind=str):
    return kind(flags[flags.index(name) + 1]) if name in flags else default


def megatron_lrs(python, flags, lr, min_lr):
    cfg = dict(batch=BATCH, iters=ITERS, lr=lr, min_lr=min_lr, style=flag(flags, "--lr-decay-style"),
               decay_iters=flag(flags, "--lr-decay-iters", kind=int),
               warmup_iters=flag(flags, "--lr-warmup-iters", 0, int),
               warmup_fraction=flag(flags, "--lr-warmup-fraction", None, float),
               init_lr=flag(flags, "--lr-warmup-init", 0.0, float),
               wsd_iters=flag(flags, "--lr-wsd-decay-iters", 0, int),
               wsd_style=flag(flags, "--lr-wsd-decay-style", "exponential"))
    return python_json(python, MEGATRON, [json.dumps(cfg)], "megatron-core's scheduler")


def main():
    a, corpus = library_check_args(__doc__, "megatron-core")
    out = os.path.join(a.workdir, "prog")
    run([a.megac, "compile", a.spec, "--micro-batch-size", "2", "-o", out])
    lr, min_lr = 1e-3, 1e-4
    failed = 0
    for name, flags in SCHEDULES.items():
        path = os.path.join(a.workdir, name.replace(" ", "_").replace(",", "") + ".jsonl")
        run([os.path.join(out, "train"), "--data-path", corpus, "--train-iters", str(ITERS), "--global-batch-size",
             str(BATCH), "--lr", str(lr), "--min-lr", str(min_lr), "--no-shuffle", "--metrics-file", path] + flags)
        ours = [m["lr"] for m in metrics(path)]
        theirs = megatron_lrs(a.python, flags, lr, min_lr)
        differ = [i + 1 for i, (x, y) in enumerate(zip(ours, theirs)) if x != y]
        ok = len(ours) == ITERS and not differ
        failed += not ok
        shown = ", ".join(f"{x:.6g}" for x in ours[::8])
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {ITERS - len(differ)} of {ITERS} iterations equal megatron-core's "
              f"get_lr (every 8th: {shown})" + (f"; differ at {differ[:5]}: ours {[ours[i - 1] for i in differ[:3]]} "
                                                 f"megatron {[theirs[i - 1] for i in differ[:3]]}" if differ else ""))
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
