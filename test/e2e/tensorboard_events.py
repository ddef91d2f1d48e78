#!/usr/bin/env python3
"""OUT/train --tensorboard-dir against TensorBoard's own event reader (the tensorboard package's
EventAccumulator, build/pyenv): every scalar of every iteration reads back, equal to the metrics
file's value rounded to float32 (TensorBoard's simple_value), at the iteration as its step; fp16
adds loss-scale; --tensorboard-log-interval 3 keeps iterations 3, 6, 9 (and the first, which
carries the memory peak). A corrupted record is refused by the reader (the CRCs are checked).

    tensorboard_events.py --megac build/bin/megac --python build/pyenv/bin/python --spec SPEC --workdir DIR
"""
import glob
import math
import os
import shutil
import struct
import sys

from e2e_util import library_check_args, metrics, python_json, run

READ = r'''
import json, sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
print(json.dumps({tag: [[e.step, e.value] for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}))
'''
# Tag -> the metrics record's key (and a scale).
TAGS = {"lm loss": ("lm_loss", 1), "learning-rate": ("lr", 1), "grad-norm": ("grad_norm", 1),
        "tokens-per-second": ("tokens_per_s", 1), "iteration-time": ("ms_per_iter", 1e-3),
        "batch-size": ("global_batch_size", 1)}


# --split's validation share, evaluated every 3 iterations (the fp32 run).
EVAL = ["--split", "90,10", "--eval-interval", "3", "--eval-iters", "1"]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def read(python, folder):
    return python_json(python, READ, [folder], f"TensorBoard's reader on {folder}")


def main():
    a, corpus = library_check_args(__doc__, "tensorboard")
    progs = {}
    for precision in ([], ["--fp16"]):  # fp16 (compiled so) adds the loss scale
        progs[bool(precision)] = os.path.join(a.workdir, "prog" + "".join(precision).replace("--", "-"))
        run([a.megac, "compile", a.spec, "--micro-batch-size", "2", "-o", progs[bool(precision)]] + precision)
    failed = 0

    def check(name, ok, detail):
        nonlocal failed
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")

    for label, extra, interval in (("fp32", [], 1), ("fp16", ["--fp16", "--initial-loss-scale", "65536"], 1),
                                   ("interval 3", [], 3)):
        folder = os.path.join(a.workdir, label.replace(" ", "-"))
        shutil.rmtree(folder, ignore_errors=True)  # one run, one event file
        jsonl = folder + ".jsonl"
        run([os.path.join(progs[bool(extra)], "train"), "--data-path", corpus, "--train-iters", "9", "--global-batch-size", "4",
             "--lr", "1e-3", "--lr-decay-style", "cosine", "--lr-warmup-iters", "2", "--no-shuffle",
             "--metrics-file", jsonl, "--tensorboard-dir", folder, "--tensorboard-log-interval", str(interval)]
            + extra + (EVAL if label == "fp32" else []))
        records = {m["iteration"]: m for m in metrics(jsonl)}
        scalars = read(a.python, folder)
        steps = [1] + [i for i in range(1, 10) if i % interval == 0 and i != 1]
        tags = dict(TAGS, **({"loss-scale": ("loss_scale", 1)} if extra else {}))
        for tag, (key, scale) in tags.items():
            got = scalars.get(tag, [])
            want = [[i, f32(records[i][key] * scale)] for i in steps]
            check(f"{label} {tag}", [s for s, _ in got] == steps and
                  all(abs(g - w) <= 1e-6 * abs(w) for (_, g), (_, w) in zip(got, want)),
                  f"steps {[s for s, _ in got]}, first {got[0][1] if got else None!r} (metrics: {want[0][1]!r})")
        if label == "fp32":  # the evaluations at 3, 6 and 9
            for tag, key, fn in (("lm loss validation", "valid_lm_loss", lambda x: x),
                                 ("lm loss validation ppl", "valid_lm_loss", lambda x: math.exp(min(20, x)))):
                got = scalars.get(tag, [])
                want = [[i, f32(fn(records[i][key]))] for i in (3, 6, 9)]
                check(f"{label} {tag}", [s for s, _ in got] == [3, 6, 9] and
                      all(abs(g - w) <= 1e-6 * abs(w) for (_, g), (_, w) in zip(got, want)),
                      f"steps {[s for s, _ in got]}, first {got[0][1] if got else None!r} (metrics: {want[0][1]!r})")
        check(f"{label} memory", [s for s, _ in scalars.get("mem-max-allocated-bytes", [])] == [1],
              f"mem-max-allocated-bytes at steps {[s for s, _ in scalars.get('mem-max-allocated-bytes', [])]}")

    # The reader checks the records' CRCs: flip one byte of a record and it stops there.
    path = glob.glob(os.path.join(a.workdir, "fp32", "events.out.tfevents.*"))[0]
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    broken = os.path.join(a.workdir, "broken")
    shutil.rmtree(broken, ignore_errors=True)
    os.makedirs(broken)
    open(os.path.join(broken, os.path.basename(path)), "wb").write(bytes(data))
    lm = read(a.python, broken).get("lm loss", [])
    check("a corrupted record", len(lm) < 9, f"the reader stops at the corruption: {len(lm)} of 9 lm loss records")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
