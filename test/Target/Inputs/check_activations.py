"""Issue 16: what megac says each layer keeps for its backward (OUT/rank-memory.json's
layer_activations, in units of s x b x h elements) against Megatron's per-layer activation formulas
(arXiv 2205.05198, bytes at 16 bits): sbh(34 + 5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht))
with tp, sbh/t (34 + 5as/h) with tp + sp, 34 sbh/t with selective recomputation, 2 sbh with full.
Documented differences: dropout 0 keeps no masks (2 sbh bytes: 1 byte per element, after attention
and after the MLP), and the attention keeps no s x s term (its backward recomputes the scores from q,
k and v, as a flash attention does: the 5as/h term is 0). So at 16 bits megac keeps the formula
minus 2 sbh (minus 2 sbh / t with sp) bytes: 16, 4 + 12/t, 16/t elements; with full recomputation 1
(1/t with sp: the input is already sequence-split). Then the pipeline: with pp, each stage but the
last holds exactly (layer bytes) x (layers per chunk) x (chunk stashes in flight, the schedule's
count megac prints) of activations."""
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--gpt2", required=True, help="a GPT-2 spec (ffn = 4h)")
    ap.add_argument("--big", required=True, help="a GPT-2 spec to check the pipeline stages with")
    args = ap.parse_args()
    failures = checked = 0
    for t in (1, 2, 4):
        tp = ["--tp", str(t)] if t > 1 else []
        cases = [("no recompute", tp, 4 + 12 / t if t > 1 else 16)]
        if t > 1:
            cases += [("sp", tp + ["--sp"], 16 / t), ("sp selective", tp + ["--sp"] + SELECTIVE, 16 / t),
                      ("sp full", tp + ["--sp"] + FULL, 1 / t)]
        cases += [("full", tp + FULL, 1)]
        for name, flags, expected in cases:
            memory, _ = compile_plan(args.megac, args.gpt2, os.path.join(args.workdir, "g"), flags)
            layer = memory["layer_activations"][0]
            ok = abs(layer["sbh_elements"] - expected) < 1e-12
            failures += not ok
            checked += 1
            print(f"tp {t} {name}: {layer['sbh_elements']:.3f} sbh elements per layer "
                  f"({', '.join(v['name'] for v in layer['values'])}), formula {expected:.3f} {'ok' if ok else 'FAIL'}")
    for name, flags in (("none", []), ("selective", SELECTIVE), ("full", FULL)):
        plan = ["--tp", "8", "--sp", "--pp", "8", "--vpp", "3", "--micro-batch-size", "1", "--global-batch-size", "64"]
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
        print(f"gpt3-175b tp8 sp pp8 vpp3 {name}: stage activations {[round(b / 2**30, 2) for b in got]} GiB = "
              f"{per_layer} bytes x {layers_per_chunk} layers x chunk stashes {in_flight[:-1]} {'ok' if ok else 'FAIL'}")
    print(f"{checked} plans checked, {failures} failed")


if __name__ == "__main__":
    main()
