"""Checks megac simulate --train-tokens against the formulas (facts.md), for a GPT-2 spec:
the training time is the token budget over the simulated tokens/s, and Megatron's estimate
6TP/(nX) is that time x 6P / (FLOPs per token), with P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h))
(the learned positions counted at seq_length rows) and FLOPs per token = 72 l h^2 (1 + s/(6h) +
V/(12 l h)) (megac's count: the output layer's forward and backward, no recomputation).

    check_train_time.py SIM.json --layers L --hidden H --seq S --vocab V [--positions P]"""
import argparse
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("sim")
for key in ("layers", "hidden", "seq", "vocab", "positions"):
    ap.add_argument("--" + key, type=int, required=key != "positions")
a = ap.parse_args()
sim = json.load(open(a.sim))
l, h, s, V = a.layers, a.hidden, a.seq, a.vocab
positions = a.positions or s
params = 12 * l * h * h * (1 + 13 / (12 * h) + (V + positions) / (12 * l * h))
flops_per_token = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
time = sim["train_tokens"] / sim["tokens_per_s"]
estimate = time * 6 * params / flops_per_token
failed = 0
for name, want, got in (("train_time_s", time, sim["train_time_s"]),
                        ("train_time_estimate_s", estimate, sim["train_time_estimate_s"])):
    ok = abs(got - want) <= 1e-3 * want
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name} {got:.6g} s, the formulas give {want:.6g} s")
print(f"{failed} failed")
sys.exit(1 if failed else 0)
