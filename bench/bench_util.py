"""What the benchmark scripts share: logging, reading OUT/train's metrics, describing the
machine and the commit a measurement was taken on, and writing results into docs."""
import json
import os
import platform
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, flush=True)


def run(cmd, env=None):
    """Runs cmd (with env added to the environment); exits with its output's end if it fails."""
    r = subprocess.run(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stdout[-4000:]}")
    return r.stdout


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class CpuMeter:
    """Machine-wide busy CPU time (/proc/stat) minus this process's children's CPU time:
    roughly how much of the machine other processes used while we measured."""

    @staticmethod
    def _busy_total():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
        total = sum(v[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
        return total - idle, total

    def __init__(self):
        self.tick = os.sysconf("SC_CLK_TCK")
        self.busy0, self.total0 = self._busy_total()
        t = os.times()
        self.children0 = t.children_user + t.children_system + t.user + t.system
        self.wall0 = time.monotonic()

    def stop(self):
        busy, total = self._busy_total()
        t = os.times()
        ours = t.children_user + t.children_system + t.user + t.system - self.children0
        all_busy = (busy - self.busy0) / self.tick
        capacity = (total - self.total0) / self.tick  # = wall seconds x cpus
        other = max(0.0, all_busy - ours)
        return {"wall_s": time.monotonic() - self.wall0,
                "ours_cpu_pct": 100.0 * ours / capacity if capacity else 0.0,
                "other_cpu_pct": 100.0 * other / capacity if capacity else 0.0}


def replace_docs_block(docs, begin, end, markdown, append_if_missing=False):
    """Puts `markdown` between the lines `begin` and `end` of the file `docs`, replacing what stood
    there. A file without that block gets it appended when append_if_missing; otherwise (and
    for a missing file) the script exits with an error naming the file and the markers."""
    if not os.path.exists(docs):
        sys.exit(f"error: {docs} does not exist (it holds the text around the results)")
    text = open(docs).read()
    block = f"{begin}\n{markdown}\n{end}"
    pat = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pat.search(text):
        text = pat.sub(lambda _: block, text, count=1)
    elif append_if_missing:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    else:
        sys.exit(f"error: {docs} has no {begin} ... {end} block to replace")
    with open(docs, "w") as f:
        f.write(text)


def publish(section, write_docs, docs, begin, end):
    """Prints a benchmark's docs section and, with --write-docs, puts it between begin and end in
    docs (appended when the markers are missing)."""
    log(section)
    if write_docs:
        replace_docs_block(docs, begin, end, section, append_if_missing=True)
        log(f"wrote the section to {docs}")


def write_random_tokens(argv, vocab_size, seed):
    """The benches' data worker (run under Debian's python, which has numpy): --data-path PREFIX
    --tokens N writes one document of N random token ids < vocab_size (fixed seed) as a Megatron
    indexed dataset (test/reference/indexed_dataset.py)."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--data-path", required=True)
    p.add_argument("--tokens", type=int, required=True)
    a = p.parse_args(argv)
    import numpy as np
    sys.path.insert(0, os.path.join(REPO, "test", "reference"))
    from indexed_dataset import write_dataset
    rng = np.random.default_rng(seed)
    write_dataset(a.data_path, [rng.integers(0, vocab_size, size=a.tokens)], vocab_size)
    return 0


def benchmark_args(doc, iters):
    """The command line the memory benchmarks share (megac, Python, warm-up / measured
    iterations, rounds, work folder, --write-docs)."""
    import argparse
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megac", default=os.path.join(REPO, "build", "bin", "megac"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=iters)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--write-docs", action="store_true")
    return ap.parse_args()


def prepare_gpt2(script, python, work, sizes, tokens, init_seed):
    """Writes a GPT-2 spec of `sizes`, `tokens` random token ids (by `script --worker-data`) and
    initial weights (test/reference/train.py) into `work`; returns the spec's path."""
    spec = os.path.join(work, "spec.yaml")
    with open(spec, "w") as f:
        f.write(f"# {os.path.relpath(script, REPO)}: GPT-2, vocab {sizes['vocab_size']} (random token ids)\n"
                "family: gpt2\n")
        # No dropout unless the bench asks: the figures compare with baselines that have none.
        f.write("".join(f"{k}: {v}\n" for k, v in {"hidden_dropout": 0.0, "attention_dropout": 0.0, **sizes}.items()))
    run([python, script, "--worker-data", "--data-path", os.path.join(work, "data"), "--tokens", str(tokens)])
    run([python, os.path.join(REPO, "test", "reference", "train.py"), "--spec", spec, "--init-out",
         os.path.join(work, "init.safetensors"), "--seed", str(init_seed)])
    return spec
