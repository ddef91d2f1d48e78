#!/usr/bin/env python3
"""Blended and split data (`--data-path 0.2 A 0.5 B 0.3 C --split 90,8,2`), against
megatron-core (0.12.1 in build/pyenv): the samples OUT/train says each dataset gives equal the
counts of megatron-core's own build_blending_indices (its compiled helper, loaded by path), so
each is within one sample of weight x samples, and the blend's order sample by sample equals
that helper's; each dataset's documents are Megatron's split
bookends; unweighted prefixes and --train-data-path train too. The same --seed gives the same
order under tp2, pp2 and dp2 as on one rank (per-step losses within 1e-5), and another seed
another order.

    data_blend.py --megac build/bin/megac --blend-order build/runtime/megart-blend-order \
        --spec examples/gpt2-tiny.yaml --workdir DIR
"""
import argparse
import glob
import importlib.machinery
import importlib.util
import os
import re
import sys

import numpy as np

from e2e_util import MPI_ENV, compare_metrics, metrics, run
from plan_parity import plan_flags

WEIGHTS = {"a": 0.17, "b": 0.5, "c": 0.33}
SPLIT = (90, 8, 2)
ITERS, BATCH = 10, 8


def megatron_blending_index(weights, size):
    """The dataset of each of the first `size` samples of megatron-core's blend."""
    root = importlib.util.find_spec("megatron").submodule_search_locations[0]
    path = glob.glob(os.path.join(root, "core", "datasets", "helpers_cpp*.so"))[0]
    loader = importlib.machinery.ExtensionFileLoader("helpers_cpp", path)
    helpers = importlib.util.module_from_spec(importlib.util.spec_from_loader("helpers_cpp", loader))
    loader.exec_module(helpers)
    dataset_index = np.zeros(size, dtype=np.int16)
    dataset_sample_index = np.zeros(size, dtype=np.int64)
    helpers.build_blending_indices(dataset_index, dataset_sample_index, np.array(weights, dtype=np.float64),
                                   len(weights), size, False)
    return dataset_index.tolist()


def megatron_blending_counts(weights, size):
    """Samples per dataset among the first `size` of megatron-core's blend."""
    return np.bincount(megatron_blending_index(weights, size), minlength=len(weights)).tolist()


def make_datasets(megac, workdir):
    """Three byte-level datasets, each from its own license texts, one document per paragraph."""
    licenses = sorted(p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p))
    prefixes = {}
    for i, name in enumerate(WEIGHTS):
        prefixes[name] = os.path.join(workdir, name)
        inputs = sum((["--input", p] for p in licenses[i::3]), [])
        run([megac, "data", "--split-paragraphs", *inputs, "--output-prefix", prefixes[name]])
    return prefixes


def data_lines(output):
    """The header's per-dataset lines: prefix -> (documents begin, end, total, samples, gives)."""
    found = {}
    for m in re.finditer(r"\s(\S+): documents (\d+)\.\.(\d+) of (\d+), (\d+) samples; gives (\d+)", output):
        found[m.group(1)] = tuple(int(g) for g in m.groups()[1:])
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--blend-order", required=True, help="runtime/test/tools' megart-blend-order")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    prefixes = make_datasets(args.megac, args.workdir)
    blend = sum(([str(WEIGHTS[n]), prefixes[n]] for n in WEIGHTS), [])
    train = ["--data-path", *blend, "--split", ",".join(map(str, SPLIT)), "--train-iters", str(ITERS),
             "--global-batch-size", str(BATCH), "--lr", "1e-3", "--seed", "7", "--eval-iters", "2", "--eval-interval", "5"]
    failures = []

    # One rank: the counts and the split, against megatron-core.
    run([args.megac, "compile", args.spec, "--micro-batch-size", "2", "-o", w("single")])
    out = run([w("single", "train"), *train, "--metrics-file", w("single.jsonl")])
    lines = data_lines(out)
    expected = megatron_blending_counts(list(WEIGHTS.values()), ITERS * BATCH)
    total_split = sum(SPLIT)
    for (name, weight), count in zip(WEIGHTS.items(), expected):
        if prefixes[name] not in lines:
            sys.exit(f"FAIL: OUT/train's header names no dataset {prefixes[name]}:\n{out[:3000]}")
        begin, end, documents, samples, gives = lines[prefixes[name]]
        split_end = int(round(SPLIT[0] / total_split * documents))  # Megatron's bookend
        ok = gives == count and abs(gives - weight * ITERS * BATCH) <= 1 and (begin, end) == (0, split_end)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: weight {weight}, documents {begin}..{end} of {documents} "
              f"(Megatron: 0..{split_end}), gives {gives} of {ITERS * BATCH} (megatron-core: {count}, "
              f"weight x samples {weight * ITERS * BATCH:g})")
        if not ok:
            failures.append(name)

    # The order itself, sample by sample, over weights that leave remainders everywhere.
    for weights in ([0.17, 0.5, 0.33], [1, 2, 3, 4, 5], [0.999, 0.001]):
        got = [int(x) for x in run([args.blend_order, "5000", *map(str, weights)]).split()]
        want = megatron_blending_index([x / sum(weights) for x in weights], 5000)
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        ok = got == want
        print(f"{'ok  ' if ok else 'FAIL'} blend order, weights {weights}: 5000 samples "
              + ("equal megatron-core's" if ok else f"differ from megatron-core's first at sample {first}"))
        if not ok:
            failures.append(f"order {weights}")

    # The same order under every plan; another seed, another order.
    for plan in ("tp2", "pp2", "dp2"):
        flags, world = plan_flags(plan)
        if "--global-batch-size" in flags:
            flags[flags.index("--global-batch-size") + 1] = str(BATCH)
        run([args.megac, "compile", args.spec, "--micro-batch-size", "2", *flags, "-o", w(plan)])
        run(["mpirun", "-np", str(world), w(plan, "train"), *train, "--metrics-file", w(plan + ".jsonl")], env=MPI_ENV)
        ok, report = compare_metrics(w(plan + ".jsonl"), w("single.jsonl"), 1e-5, (plan, "single"), plan,
                                     keys=("lm_loss",), steps=ITERS)
        print(("ok   " if ok else "FAIL ") + report.splitlines()[-1])
        if not ok:
            failures.append(plan)
    reseeded = train[:]
    reseeded[reseeded.index("--seed") + 1] = "8"
    run([w("single", "train"), *reseeded, "--metrics-file", w("seed8.jsonl")])
    same = [a["lm_loss"] == b["lm_loss"] for a, b in zip(metrics(w("seed8.jsonl")), metrics(w("single.jsonl")))]
    print(f"{'ok  ' if not all(same) else 'FAIL'} --seed 8 draws another order: {same.count(False)} of {ITERS} "
          f"losses differ from --seed 7's")
    if all(same):
        failures.append("seed")

    # Prefixes alone (weighted by size) and --train-data-path.
    out = run([w("single", "train"), "--data-path", prefixes["a"], prefixes["b"], "--train-iters", "2",
               "--global-batch-size", str(BATCH), "--lr", "1e-3"])
    lines = data_lines(out)
    sizes = [lines[prefixes[n]][3] for n in ("a", "b")]
    by_size = megatron_blending_counts([s / sum(sizes) for s in sizes], 2 * BATCH)
    gives = [lines[prefixes[n]][4] for n in ("a", "b")]
    print(f"{'ok  ' if gives == by_size else 'FAIL'} unweighted prefixes: gives {gives} (by size {sizes}: "
          f"megatron-core {by_size})")
    if gives != by_size:
        failures.append("by size")
    out = run([w("single", "train"), "--train-data-path", "1", prefixes["c"], "3", prefixes["b"],
               "--valid-data-path", prefixes["a"], "--train-iters", "2", "--global-batch-size", str(BATCH),
               "--lr", "1e-3"])
    lines = data_lines(out)
    gives = [lines[prefixes[n]][4] for n in ("c", "b")]
    expected = megatron_blending_counts([0.25, 0.75], 2 * BATCH)
    print(f"{'ok  ' if gives == expected else 'FAIL'} --train-data-path 1 c 3 b: gives {gives} "
          f"(megatron-core {expected})")
    if gives != expected:
        failures.append("train-data-path")
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")


if __name__ == "__main__":
    main()
