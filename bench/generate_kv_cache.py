#!/usr/bin/env python3
"""Generation on one CPU rank: decoding with the KV cache (OUT/train generate's default,
decode_step: one position a token) against rerunning the whole window for each token
(--no-kv-cache, logits_step), tokens/s, the same model and prompt.

    /usr/bin/python3 bench/generate_kv_cache.py                # ~1 min on 2 cores
    /usr/bin/python3 bench/generate_kv_cache.py --write-docs   # also writes its section of docs/benchmarks.md

One model (GPT-2 family, L=4, h=256, 4 heads, s=512, V=4096, ffn 1024, no dropout) with seeded
random weights (test/reference/train.py --init-out, in a Hugging Face folder), compiled with
`megac compile SPEC --micro-batch-size 1`; a prompt of 16 token ids, then N new tokens greedily
(--top-k 1), for N in 112 and 496 (the window full). Each run is timed around the process; the
same run with one new token is timed too and subtracted (loading the weights, the prompt), so
tokens/s counts the N - 1 tokens after the first. Median over --rounds; the two ways run one
after the other, odd rounds in reverse order. Both must print the same ids.
"""
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

from bench_util import (CpuMeter, benchmark_args, cpu_model, git_rev, loadavg, log, prepare_gpt2, publish, run,
                        write_random_tokens)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- generate-kv-cache:begin -->", "<!-- generate-kv-cache:end -->"
SIZES = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "seq_length": 512, "vocab_size": 4096,
         "ffn_hidden_size": 1024, "hidden_dropout": 0.0, "attention_dropout": 0.0}
PROMPT = list(range(100, 116))
WAYS = {"kv cache": [], "window rerun": ["--no-kv-cache"]}


def timed(cmd):
    t0 = time.monotonic()
    out = run(cmd, env={"OMP_NUM_THREADS": "2"})
    return time.monotonic() - t0, json.loads(out.strip().splitlines()[-1])


def main():
    if "--worker-data" in sys.argv:
        return write_random_tokens(sys.argv[2:], SIZES["vocab_size"], seed=5)
    a = benchmark_args(__doc__, iters=0)
    work = a.workdir or tempfile.mkdtemp(prefix="megac-generate-bench-")
    os.makedirs(work, exist_ok=True)
    log(f"work folder {work}")
    spec = prepare_gpt2(os.path.abspath(__file__), a.python, work, SIZES, tokens=4096, init_seed=3)
    folder = os.path.join(work, "weights")
    os.makedirs(folder, exist_ok=True)
    os.replace(os.path.join(work, "init.safetensors"), os.path.join(folder, "model.safetensors"))
    run([a.megac, "compile", spec, "--micro-batch-size", "1", "-o", os.path.join(work, "out")])
    train = os.path.join(work, "out", "train")
    base = [train, "generate", "--load", folder, "--prompt-ids", ",".join(map(str, PROMPT)), "--top-k", "1"]
    meter, load_before = CpuMeter(), loadavg()
    rows = []
    for new in (112, SIZES["seq_length"] - len(PROMPT)):
        times = {w: [] for w in WAYS}
        ids = {}
        for r in range(a.rounds):
            for way in (list(WAYS) if r % 2 == 0 else list(reversed(WAYS))):
                setup, _ = timed(base + WAYS[way] + ["--max-new-tokens", "1"])
                total, out = timed(base + WAYS[way] + ["--max-new-tokens", str(new)])
                if out["kv_cache"] != (way == "kv cache"):
                    sys.exit(f"error: {way}: the program reports kv_cache {out['kv_cache']}")
                times[way].append((new - 1) / max(total - setup, 1e-9))
                ids.setdefault(way, out["ids"])
        if ids["kv cache"] != ids["window rerun"]:
            sys.exit(f"error: {new} tokens: the KV cache and the window rerun decode different ids")
        row = {w: statistics.median(t) for w, t in times.items()}
        rows.append((new, row))
        log(f"{new} new tokens: kv cache {row['kv cache']:.0f} tokens/s, window rerun {row['window rerun']:.0f} "
            f"tokens/s ({row['kv cache'] / row['window rerun']:.1f}x); ids equal")
    usage = meter.stop()
    lines = ["## Generation on CPU: KV cache vs window rerun", "",
             f"`/usr/bin/python3 bench/generate_kv_cache.py --write-docs` ({datetime.date.today()}, {git_rev()}, "
             f"{cpu_model()}, {os.cpu_count()} cores; load {load_before} before, {loadavg()} after; other processes "
             f"{usage['other_cpu_pct']:.0f}% of the CPU meanwhile). GPT-2 L=4, h=256, 4 heads, s=512, V=4096, one "
             f"rank, 2 OpenMP threads, micro batch 1, seeded random weights; a 16-token prompt, greedy; tokens/s "
             f"after the first new token (the median of {a.rounds} rounds). Both ways print the same ids.", "",
             "| new tokens | KV cache (tokens/s) | window rerun, --no-kv-cache (tokens/s) | ratio |", "|---|---|---|---|"]
    for new, row in rows:
        lines.append(f"| {new} | {row['kv cache']:.0f} | {row['window rerun']:.0f} | "
                     f"{row['kv cache'] / row['window rerun']:.1f}x |")
    lines += ["", "The window rerun computes all 512 positions for every token (the compiled shapes are static); "
              "decode_step computes one position against each layer's cache, so its cost grows only with the "
              "attention over the positions so far."]
    publish("\n".join(lines), a.write_docs, DOCS, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
