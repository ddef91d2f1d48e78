"""Issue 16: what megac says each layer keeps for its backward (OUT/rank-memory.json's
layer_activations) against Megatron's per-layer activation formulas (arXiv 2205.05198, bytes at
16 bits), term by term: sbh(34 + 5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht)) with tp,
sbh/t (34 + 5as/h) with tp + sp, 34 sbh/t with selective recomputation, 2 sbh with full.
Documented differences: megac keeps no dropout masks at any rate, it redraws them in the backward
(megart/dropout.h; Megatron's 2 sbh bytes: 1 byte per element, after attention and after the MLP;
2 sbh / t with sp), and the attention keeps no s x s term (its
backward recomputes the scores from q, k and v, as a flash attention does: the 5as/h term is 0).
Programs are compiled with --bf16 (16-bit activations) and compared in bytes; the same plan in
fp32 must keep exactly twice the bytes (the activations halve). Then the pipeline: with pp, each
stage but the last holds exactly (layer bytes) x (layers per chunk) x (chunk stashes in flight,
the schedule's count megac prints) of activations."""
import argparse
import json
import os
import re
import subprocess
import sys

SELECTIVE = ["--recompute-activations"]
FULL = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]


def compile_plan(megac, spec, out, flags):
    result = subprocess.run([megac, "compile", spec, "--no-build", "-o", out] + flags, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(result.stdout)
    with open(os.path.join(out, "rank-memory.json")) as f:
        return json.load(f), result.stdout


def spec_sbh(spec):
    """s x b x h of a spec compiled with the default micro batch of 1."""
    keys = dict(re.findall(r"^(seq_length|hidden_size):\s*(\d+)", open(spec).read(), re.M))
    return int(keys["seq_length"]) * int(keys["hidden_size"])


def megatron_bytes(t, sp, mode):
    """Megatron's 16-bit bytes per layer in units of sbh, without the 5as/h term, and the
    dropout masks in it (1 byte per element, two of them)."""
    if mode == "full":
        return 2 / t if sp else 2, 0
    if mode == "selective" or sp:
        return 34 / t, 2 / t
    return (10 + 24 / t, 2) if t > 1 else (34, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--gpt2", required=True, help="a GPT-2 spec (ffn = 4h)")
    ap.add_argument("--big", required=True, help="a GPT-2 spec to check the pipeline stages with")
    args = ap.parse_args()
    failures = checked = 0
    sbh = spec_sbh(args.gpt2)
    for t in (1, 2, 4):
        tp = ["--tp", str(t)] if t > 1 else []
        cases = [("no recompute", tp, False, "none")]
        if t > 1:
            cases += [("sp", tp + ["--sp"], True, "none"), ("sp selective", tp + ["--sp"] + SELECTIVE, True, "selective"),
                      ("sp full", tp + ["--sp"] + FULL, True, "full")]
        cases += [("full", tp + FULL, False, "full")]
        for name, flags, sp, mode in cases:
            memory, _ = compile_plan(args.megac, args.gpt2, os.path.join(args.workdir, "g"), flags + ["--bf16"])
            fp32, _ = compile_plan(args.megac, args.gpt2, os.path.join(args.workdir, "g32"), flags)
            layer, layer32 = memory["layer_activations"][0], fp32["layer_activations"][0]
            got = layer["bytes"] / sbh
            formula, masks = megatron_bytes(t, sp, mode)
            expected = formula - masks
            ok = abs(got - expected) < 1e-9 and layer32["bytes"] == 2 * layer["bytes"]
            failures += not ok
            checked += 1
            print(f"tp {t} {name}: {got:.3f} sbh bytes per layer in bf16 "
                  f"({', '.join(v['name'] for v in layer['values'])}) = Megatron's {formula:.3f} - dropout masks "
                  f"{masks:.3f} - 5as/h term; fp32 {layer32['bytes'] / layer['bytes']:.1f}x {'ok' if ok else 'FAIL'}")
    for name, flags in (("none", []), ("selective", SELECTIVE), ("full", FULL)):
        plan = ["--tp", "8", "--sp", "--pp", "8", "--vpp", "3", "--micro-batch-size", "1", "--global-batch-size", "64",
                "--bf16"]
        memory, stdout = compile_plan(args.megac, args.big, os.path.join(args.workdir, "big"), plan + flags)
        in_flight = [int(n) for n in re.search(r"stashed activations per rank \[([0-9, ]+)\]", stdout).group(1).split(",")]
        per_layer = memory["layer_activations"][0]["bytes"]
        layers_per_chunk = 96 // (8 * 3)
        stages = memory["stages"]
        got = [s["bytes"]["activations"] for s in stages[:-1]]
        want = [per_layer * layers_per_chunk * n for n in in_flight[:-1]]
        ok = got == want
        failures += not ok
        checked += 1
        print(f"gpt3-175b bf16 tp8 sp pp8 vpp3 {name}: stage activations {[round(b / 2**30, 3) for b in got]} GiB = "
              f"{per_layer} bytes x {layers_per_chunk} layers x chunk stashes {in_flight[:-1]} {'ok' if ok else 'FAIL'}")
    print(f"{checked} plans checked, {failures} failed")


if __name__ == "__main__":
    main()
