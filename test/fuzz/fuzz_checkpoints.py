"""Bounded fuzzing of what --load reads (a fixed seed): megac checkpoints (train_state.json,
model and optimizer tensors, config.json, the tracker), LoRA checkpoints (adapter files, the
base model's record) and Hugging Face folders (config.json, a sharded index and its shards),
each with a few random mutations: fields changed, removed or retyped, bytes flipped, files
truncated, removed or swapped with another iteration's. OUT/train --load of each must end
without a signal and within the hang guard, say "error" when it fails, and never save a
checkpoint holding a NaN or an infinity with exit 0."""
import argparse
import copy
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import make_license_corpus, run  # noqa: E402

TIME_LIMIT = 30  # a hang guard: a run takes well under a second
TRAIN = ["--lr", "1e-3", "--train-iters", "4", "--lr-decay-iters", "4"]
ODD_VALUES = [None, True, False, 0, -1, 1, 3, 2 ** 62, -2 ** 62, 0.5, -0.5, 1e308, -1e308, 1e-320, "", "x", "nan",
              [], {}, [1, 2], {"a": 1}]


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def non_finite_tensor(path):
    """The first F32 tensor of `path` holding a NaN or an infinity, or None."""
    header, data = read_safetensors(path)
    for name, info in header.items():
        if name == "__metadata__" or info.get("dtype") != "F32":
            continue
        begin, end = info["data_offsets"]
        if not np.isfinite(np.frombuffer(data[begin:end], dtype="<f4")).all():
            return name
    return None


def leaf_paths(value, prefix=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaf_paths(v, prefix + (k,))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaf_paths(v, prefix + (i,))
    yield prefix


def mutate_json(text, rng):
    """(mutated text, what was done)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text[:rng.randrange(len(text) + 1)], "truncated"
    paths = [p for p in leaf_paths(value) if p]
    if not paths or rng.random() < 0.05:
        return rng.choice(["", "{", "[]", "null", text + "x", text.replace(":", "", 1)]), "broken"
    path = rng.choice(paths)
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    where = ".".join(str(k) for k in path)
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[path[-1]]
        return json.dumps(value, indent=1), f"{where} removed"
    if isinstance(parent[path[-1]], (int, float)) and not isinstance(parent[path[-1]], bool) and rng.random() < 0.5:
        parent[path[-1]] = type(parent[path[-1]])(parent[path[-1]] * rng.choice([-1, 0, 2, 1000]) + rng.choice([0, 1]))
    else:
        parent[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
    return json.dumps(value, indent=1), f"{where} = {json.dumps(parent[path[-1]])[:40]}"


def mutate_safetensors(blob, rng, other):
    kind = rng.randrange(5)
    if kind == 0 and other is not None:
        return other  # another iteration's file
    if len(blob) < 16:
        return blob + b"x"
    (n,) = struct.unpack_from("<Q", blob, 0)
    try:
        header = json.loads(blob[8:8 + n])
    except ValueError:  # an earlier mutation of this file broke it already
        return blob[:rng.randrange(len(blob))]
    n = min(n, len(blob) - 8)
    if kind == 1:  # a value in the data
        at = 8 + n + 4 * rng.randrange(max(1, (len(blob) - 8 - n) // 4))
        if at + 4 > len(blob):
            return blob
        return blob[:at] + struct.pack("<f", rng.choice([float("nan"), float("inf"), -1.0, 1e30, -1e30, 0.0])) + \
            blob[at + 4:]
    if kind == 2:  # a byte of the header
        at = rng.randrange(8, 8 + n)
        return blob[:at] + bytes([rng.randrange(256)]) + blob[at + 1:]
    if kind == 3:
        return blob[:rng.randrange(len(blob))]
    text = mutate_json(json.dumps(header), rng)[0].encode()  # a field of the header
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob[8 + n:]


def mutate_folder(folder, rng, others):
    """1-3 mutations of files under `folder`; `others` maps a relative path to another iteration's file."""
    files = sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)
    done = []
    for _ in range(rng.randint(1, 3)):
        rel = rng.choice(files)
        path = os.path.join(folder, rel)
        if not os.path.exists(path):
            continue
        if rng.random() < 0.08:
            os.remove(path)
            done.append(f"removed {rel}")
            continue
        with open(path, "rb") as f:
            blob = f.read()
        if rel.endswith(".safetensors"):
            other = others.get(rel)
            blob = mutate_safetensors(blob, rng, open(other, "rb").read() if other else None)
        elif rel.endswith(".json"):
            text, what = mutate_json(blob.decode(errors="replace"), rng)
            blob = text.encode()
            rel += f" ({what})"
        else:  # the tracker
            blob = rng.choice([b"1", b"7", b"-1", b"", b"x", b"99999999999999999999", b"2\n2"])
        with open(path, "wb") as f:
            f.write(blob)
        done.append(f"changed {rel}")
    return done


def check_run(argv, saved):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           timeout=TIME_LIMIT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        return f"still running after {TIME_LIMIT} s"
    out = p.stdout.decode(errors="replace")
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}: {out[-800:]}"
    if p.returncode != 0:
        return None if "error" in out.lower() else f"exit {p.returncode} without an error message: {out[-600:]}"
    for d, _, fs in os.walk(saved):
        for f in fs:
            if f.endswith(".safetensors"):
                bad = non_finite_tensor(os.path.join(d, f))
                if bad:
                    return f"exit 0 with a saved checkpoint holding a NaN or an infinity: {f} {bad}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--rounds", type=int, default=60, help="mutated folders of each kind")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--show-accepted", action="store_true", help="print the mutations a run accepted")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(os.path.abspath(args.workdir), *p)
    make_license_corpus(args.megac, w("corpus"))
    data = ["--data-path", w("corpus")]
    for name, flags in (("full", []), ("lora", ["--lora-rank", "2"])):
        run([args.megac, "compile", args.spec, "--micro-batch-size", "2", *flags, "-o", w(name)])
    for d in ("ckpt", "lora-ckpt", "hf", "sharded"):
        shutil.rmtree(w(d), ignore_errors=True)
    first = [*data, *TRAIN, "--train-iters", "2", "--save-interval", "1"]  # the schedule the fuzzed runs resume
    run([w("full", "train"), *first, "--save", w("ckpt")])
    run([w("lora", "train"), *first, "--load", w("ckpt"), "--save", w("lora-ckpt")])
    # A Hugging Face folder, whole and sharded in two (the index maps each tensor to its shard).
    os.makedirs(w("hf"))
    os.makedirs(w("sharded"))
    for f in ("model.safetensors", "config.json"):
        shutil.copy(w("ckpt", "iter_0000002", f), w("hf", f))
    shutil.copy(w("ckpt", "iter_0000002", "config.json"), w("sharded", "config.json"))
    header, blob = read_safetensors(w("hf", "model.safetensors"))
    names = sorted(k for k in header if k != "__metadata__")
    weight_map = {}
    for part, chunk in enumerate((names[:len(names) // 2], names[len(names) // 2:]), start=1):
        shard, pieces, at = {}, [], 0
        for n in chunk:
            b, e = header[n]["data_offsets"]
            shard[n] = {**header[n], "data_offsets": [at, at + e - b]}
            pieces.append(blob[b:e])
            at += e - b
            weight_map[n] = f"model-0000{part}-of-00002.safetensors"
        text = json.dumps(shard).encode()
        text += b" " * (-len(text) % 8)
        with open(w("sharded", f"model-0000{part}-of-00002.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(pieces))
    with open(w("sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)

    one_back = {os.path.join("iter_0000002", f): w(root, "iter_0000001", f) for root in ("ckpt", "lora-ckpt")
                for f in ("model.safetensors", "optimizer.safetensors", "adapter_model.safetensors")
                if os.path.exists(w(root, "iter_0000001", f))}
    kinds = [("checkpoint", w("ckpt"), w("full", "train"), []),
             ("lora checkpoint", w("lora-ckpt"), w("lora", "train"), []),
             ("hf folder", w("hf"), w("full", "train"), []),
             ("sharded hf folder", w("sharded"), w("full", "train"), [])]
    rng = random.Random(args.seed)
    failures, counts = [], {}
    for kind, source, train, extra in kinds:  # unmutated, each loads and trains: the fuzz tests something
        shutil.rmtree(w("saved"), ignore_errors=True)
        run([train, *data, *TRAIN, "--load", source, "--save", w("saved"), *extra])
    for kind, source, train, extra in kinds:
        refused = 0
        for i in range(args.rounds):
            folder, saved = w("case"), w("saved")
            for d in (folder, saved):
                shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(source, folder, symlinks=True)
            others = {rel: path for rel, path in one_back.items() if path.startswith(source + os.sep)}
            done = mutate_folder(folder, rng, others)
            problem = check_run([train, *data, *TRAIN, "--load", folder, "--save", saved, *extra], saved)
            accepted = os.path.exists(os.path.join(saved, "latest_checkpointed_iteration.txt"))
            refused += not accepted
            if accepted and args.show_accepted:
                print(f"accepted: {kind}: {'; '.join(done)}")
            if problem:
                failures.append(f"{kind} round {i} ({'; '.join(done)}): {problem}")
        counts[kind] = refused
    for f in failures:
        print("FAIL: " + f)
    print(", ".join(f"{k}: {args.rounds} mutated folders, {n} refused" for k, n in counts.items()) +
          f" (seed {args.seed}); {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
