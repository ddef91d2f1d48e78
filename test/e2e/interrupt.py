"""Interrupted runs lose nothing, and runs do not destroy each other's work.

SIGTERM: a run with --exit-signal-handler finishes its iteration, saves, exits 0, and the
checkpoint resumes.

SIGKILL during saves: a run that saves every iteration is killed at pseudo-random moments (a
fixed seed), many times over, each restart resuming the folder. After every kill the tracker
must name a complete checkpoint (all files present, the safetensors headers and the JSON
readable, the iteration matching) and nothing --load would pick up may be half-written. Some
kills must land inside a save (a staging folder left behind, which the next start removes),
or the test proves nothing and fails.

Stop signals without --exit-signal-handler: SIGTERM or SIGINT arriving during a save ends the
run only once the save is complete, leaving no staging folder.

Two runs into one --save: the second is refused before training, naming the first's host and
pid; the first's checkpoints stay intact and resume. Links inside --save are never followed
when a run cleans up: the files they point to survive. megac generate stopped by SIGTERM
while it compiles leaves no temporary folder, no staging folder or program in its cache and no
child process."""
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


def stop_signal_during_save(train, data, w):
    """SIGTERM / SIGINT (no --exit-signal-handler) raised while iteration 2's save is half done."""
    failures = []
    for name, sig in (("TERM", signal.SIGTERM), ("INT", signal.SIGINT)):
        ckpt = w("stop-" + name)
        shutil.rmtree(ckpt, ignore_errors=True)
        proc = subprocess.run([train, "--train-iters", "3", "--data-path", data, "--save", ckpt, "--save-interval", "1"]
                              + TRAIN, env={**os.environ, "MEGART_CRASH_AT": "save:model-written",
                                            "MEGART_CRASH_SIGNAL": name},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        left = [n for n in os.listdir(ckpt) if ".tmp." in n]
        latest = check_latest(ckpt)
        ok = proc.returncode == -sig and latest == 1 and not left
        print(f"SIG{name} during the save of iteration 1 (no --exit-signal-handler): exit {proc.returncode}, the save "
              f"completed (latest {latest}), staging folders left {left} {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"SIG{name} during a save: exit {proc.returncode}, latest {latest!r}, left {left}")
    return failures


def two_runs_one_save(train, data, w):
    """A second run into a --save the first one is using is refused before it trains."""
    ckpt = w("shared")
    shutil.rmtree(ckpt, ignore_errors=True)
    metrics = w("shared.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    first = subprocess.Popen([train, "--train-iters", "60", "--data-path", data, "--save", ckpt, "--save-interval", "20",
                              "--metrics-file", metrics] + TRAIN, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    wait_for_lines(metrics, 2, first)
    second = subprocess.run([train, "--train-iters", "5", "--data-path", data, "--save", ckpt] + TRAIN,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = first.communicate(timeout=300)
    failures = []
    expected = f"--save {ckpt} is in use by another run (host {os.uname().nodename}, pid {first.pid},"
    if second.returncode not in (1, 2) or expected not in second.stdout or "iteration " in second.stdout.split("error")[0]:
        failures.append(f"two runs: the second was not refused before training naming the first: exit "
                        f"{second.returncode}\n{second.stdout[-1500:]}")
    if first.returncode != 0 or check_latest(ckpt) != 60:
        failures.append(f"two runs: the first did not finish with its checkpoints: exit {first.returncode}, latest "
                        f"{check_latest(ckpt)!r}\n{out[-1500:]}")
    for it in (20, 40, 60):
        if not os.path.isfile(os.path.join(ckpt, f"iter_{it:07d}", "model.safetensors")):
            failures.append(f"two runs: the first run's iteration {it} is missing")
    resumed = run([train, "--train-iters", "61", "--data-path", data, "--load", ckpt] + TRAIN)
    if f"at iteration 60" not in resumed:
        failures.append("two runs: the first run's last checkpoint did not resume")
    print(f"two runs into one --save: the second refused before training ({second.stdout.strip().splitlines()[-1][:120]}"
          f"...), the first's checkpoints 20, 40, 60 intact and resumed {'ok' if not failures else 'FAIL'}")
    return failures


def links_in_save(train, data, w):
    """Links in --save that look like a killed save's leftovers: the files they point to survive."""
    ckpt, outside = w("linked"), w("outside")
    for d in (ckpt, outside):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(outside)
    os.makedirs(ckpt)
    kept = [os.path.join(outside, n) for n in ("model.safetensors.tmp.9.0", "notes.txt", "iter_0000007.tmp.9")]
    for path in kept:
        open(path, "w").write("not megac's")
    os.symlink(outside, os.path.join(ckpt, "iter_0000003"))        # looks like an iteration folder
    os.symlink(outside, os.path.join(ckpt, "iter_0000004.tmp.99"))  # looks like a killed save's staging
    run([train, "--train-iters", "6", "--data-path", data, "--save", ckpt, "--save-interval", "2",
         "--keep-latest-k", "1"] + TRAIN)
    lost = [p for p in kept if not os.path.exists(p)]
    print(f"links in --save to a folder outside it: {len(kept) - len(lost)} of {len(kept)} files there survive a run "
          f"with --keep-latest-k 1 and its clean-up {'ok' if not lost else 'FAIL'}")
    return [f"links in --save: {lost} were deleted"] if lost else []


def generate_stopped(megac, ckpt, w):
    """megac generate, SIGTERM while it compiles into its program cache: its temporary folder, the
    compile's staging folder in the cache and its child go, and no program is left cached."""
    tmp, cache = w("generate-tmp"), w("generate-cache")
    for folder in (tmp, cache):
        shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(tmp)
    programs = os.path.join(cache, "programs")
    cached = lambda: os.listdir(programs) if os.path.isdir(programs) else []
    proc = subprocess.Popen([megac, "generate", ckpt, "--prompt", "This"],
                            env={**os.environ, "TMPDIR": tmp, "MEGAC_CACHE_DIR": cache},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not any(".tmp." in n for n in cached()) and proc.poll() is None:
        time.sleep(0.01)
    started = any(".tmp." in n for n in cached())
    time.sleep(0.2)  # into the compile
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    time.sleep(0.5)  # a child the signal reached ends
    left, left_cached = os.listdir(tmp), cached()
    children = subprocess.run(["pgrep", "-f", f"{tmp}|{cache}"], stdout=subprocess.PIPE, text=True).stdout.split()
    ok = started and proc.returncode == -signal.SIGTERM and not left and not left_cached and not children
    print(f"megac generate stopped by SIGTERM while compiling: exit {proc.returncode}, left in its TMPDIR {left}, "
          f"in its program cache {left_cached}, processes still running {children} {'ok' if ok else 'FAIL'}")
    return [] if ok else [f"megac generate SIGTERM: compile started {started}, exit {proc.returncode}, left {left}, "
                          f"cached {left_cached}, children {children}"]


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
    data = w("corpus")
    failures = (sigterm(train, data, w) + crash_points(train, data, w) + sigkill(train, data, w) +
                stop_signal_during_save(train, data, w) + two_runs_one_save(train, data, w) +
                links_in_save(train, data, w) + generate_stopped(args.megac, w("shared"), w))
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
