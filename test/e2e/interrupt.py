"""Interrupted runs lose nothing.

SIGTERM: a run with --exit-signal-handler finishes its iteration, saves, exits 0, and the
checkpoint resumes.

SIGKILL during saves: a run that saves every iteration is killed at pseudo-random moments (a
fixed seed), many times over, each restart resuming the folder. After every kill the tracker
must name a complete checkpoint (all files present, the safetensors headers and the JSON
readable, the iteration matching) and nothing --load would pick up may be half-written. Some
kills must land inside a save (a staging folder left behind, which the next start removes),
or the test proves nothing and fails."""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from e2e_util import make_license_corpus, run  # noqa: E402
from safetensors_io import load_file  # noqa: E402

# One schedule for every run, whatever its --train-iters: resumed runs must continue it.
TRAIN = ["--global-batch-size", "8", "--lr", "1e-3", "--lr-decay-iters", "900", "--log-interval", "1000"]
KILLS = 25


def wait_for_lines(path, count, proc, timeout=60):
    """Until `path` has `count` lines (or the process ended)."""
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= count:
            return True
        time.sleep(0.02)
    return False


def check_latest(folder):
    """The tracker names a complete checkpoint; returns its iteration or a failure text."""
    tracker = os.path.join(folder, "latest_checkpointed_iteration.txt")
    if not os.path.exists(tracker):
        return None
    iteration = int(open(tracker).read())
    it_dir = os.path.join(folder, f"iter_{iteration:07d}")
    for name in ("model.safetensors", "optimizer.safetensors", "train_state.json"):
        if not os.path.isfile(os.path.join(it_dir, name)):
            return f"the tracker names iteration {iteration}, but {it_dir} has no {name}"
    load_file(os.path.join(it_dir, "model.safetensors"))
    load_file(os.path.join(it_dir, "optimizer.safetensors"))
    state = json.load(open(os.path.join(it_dir, "train_state.json")))
    if state["iteration"] != iteration:
        return f"{it_dir}/train_state.json says iteration {state['iteration']}"
    return iteration


def sigterm(train, data, w):
    ckpt = w("term")
    shutil.rmtree(ckpt, ignore_errors=True)
    metrics = w("term.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    proc = subprocess.Popen([train, "--train-iters", "900", "--data-path", data, "--save", ckpt,
                             "--exit-signal-handler", "--metrics-file", metrics] + TRAIN,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for_lines(metrics, 5, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    latest = check_latest(ckpt)
    failures = []
    if proc.returncode != 0:
        failures.append(f"SIGTERM: exit code {proc.returncode}\n{out[-2000:]}")
    if not isinstance(latest, int):
        failures.append(f"SIGTERM: no complete checkpoint: {latest}")
        return failures
    if f"exiting at iteration {latest} of 900: SIGTERM received" not in out:
        failures.append(f"SIGTERM: the log does not say it stopped at the saved iteration {latest}")
    # The checkpoint resumes: one more iteration from it.
    resumed = run([train, "--train-iters", str(latest + 1), "--data-path", data, "--load", ckpt] + TRAIN)
    if f"resumed from {ckpt}/iter_{latest:07d} at iteration {latest}" not in resumed:
        failures.append("SIGTERM: the saved checkpoint did not resume")
    print(f"SIGTERM after 5 iterations: exit {proc.returncode}, saved and stopped at iteration {latest}, "
          f"resumed from it {'ok' if not failures else 'FAIL'}")
    return failures


def sigkill(train, data, w):
    ckpt = w("kill")
    shutil.rmtree(ckpt, ignore_errors=True)
    rng = random.Random(20261125)
    failures, mid_save, iterations = [], 0, []
    for attempt in range(KILLS):
        load = ["--load", ckpt] if os.path.exists(os.path.join(ckpt, "latest_checkpointed_iteration.txt")) else []
        metrics = w("kill.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        proc = subprocess.Popen([train, "--train-iters", "900", "--data-path", data, "--save", ckpt,
                                 "--save-interval", "1", "--metrics-file", metrics] + load + TRAIN,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for_lines(metrics, 1, proc)
        time.sleep(rng.uniform(0.0, 0.15))
        proc.kill()
        out, _ = proc.communicate()
        staging = [n for n in os.listdir(ckpt) if ".tmp." in n] if os.path.isdir(ckpt) else []
        mid_save += bool(staging)
        latest = check_latest(ckpt)
        if isinstance(latest, str):
            failures.append(f"SIGKILL attempt {attempt}: {latest}")
            break
        if latest is not None:  # None: killed before its first save
            iterations.append(latest)
    if not iterations:
        return failures + ["SIGKILL: no checkpoint was ever completed"]
    # A last start cleans up and resumes from the latest complete checkpoint.
    final = run([train, "--train-iters", str(iterations[-1] + 1), "--data-path", data, "--load", ckpt,
                 "--save", ckpt] + TRAIN)
    left = [n for n in os.listdir(ckpt) if ".tmp." in n]
    left += [os.path.join(d, n) for d in os.listdir(ckpt) if os.path.isdir(os.path.join(ckpt, d))
             for n in os.listdir(os.path.join(ckpt, d)) if ".tmp." in n]
    if left:
        failures.append(f"SIGKILL: staging folders left after a clean run: {left}")
    if mid_save == 0:
        failures.append("SIGKILL: no kill landed inside a save, so nothing was tested; slow saves down or kill later")
    if iterations != sorted(iterations):
        failures.append(f"SIGKILL: the latest checkpoint went backwards: {iterations}")
    print(f"SIGKILL x {KILLS} while saving every iteration: {mid_save} kills inside a save (a staging folder "
          f"or temporary left, removed by the next start), latest checkpoint always complete "
          f"(iterations {iterations[0]}..{iterations[-1]}), final resume {'ok' if 'training done' in final else 'FAIL'}")
    return failures


# Where a save can die, in the order it reaches them (MEGART_CRASH_AT), and the iteration the
# tracker must then name: the save of iteration 2 dies; iteration 1's checkpoint exists.
CRASH_POINTS = [("save:model-written", 1), ("atomic-file:synced", 1), ("save:staged", 1),
                ("save:published", 1), ("save:tracked", 2)]


def crash_points(train, data, w):
    """A save killed at each named point: the latest checkpoint stays complete, and a restart
    cleans up and resumes from it."""
    failures = []
    for point, expected in CRASH_POINTS:
        ckpt = w("crash")
        shutil.rmtree(ckpt, ignore_errors=True)
        run([train, "--train-iters", "3", "--exit-interval", "1", "--data-path", data, "--save", ckpt] + TRAIN)
        proc = subprocess.run([train, "--train-iters", "3", "--data-path", data, "--load", ckpt, "--save", ckpt,
                               "--save-interval", "1"] + TRAIN, env={**os.environ, "MEGART_CRASH_AT": point},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        latest = check_latest(ckpt)
        ok = proc.returncode == -signal.SIGKILL and latest == expected
        resumed = run([train, "--train-iters", "3", "--data-path", data, "--load", ckpt, "--save", ckpt] + TRAIN)
        left = [n for n in os.listdir(ckpt) if ".tmp." in n]
        ok = ok and f"at iteration {expected}" in resumed and not left
        print(f"killed at {point}: exit {proc.returncode}, latest checkpoint iteration {latest} (expected "
              f"{expected}), restart resumed from it and removed the leftovers {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"crash at {point}: exit {proc.returncode}, latest {latest!r}, left {left}")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda *p: os.path.join(args.workdir, *p)
    make_license_corpus(args.megac, w("corpus"))
    run([args.megac, "compile", args.spec, "--micro-batch-size", "2", "-o", w("prog")])
    train = w("prog", "train")
    failures = sigterm(train, w("corpus"), w) + crash_points(train, w("corpus"), w) + sigkill(train, w("corpus"), w)
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
