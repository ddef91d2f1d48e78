"""Threads per rank on the CPU backend: 2 MPI ranks (dp 2) of the Llama tiny spec on this node,
started as a user would (mpirun, nothing set: OUT/train takes its share of the cores and waits
passively) against OMP_NUM_THREADS=1, in alternating rounds of the same run. Reports the
speed ratio of each round (the median is the figure): 1.0 means the defaults cost nothing."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import REPO, CpuMeter, cpu_model, git_rev, log, publish

BEGIN, END = "<!-- threads.py begin -->", "<!-- threads.py end -->"
MPI = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def timed(cmd, env):
    start = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout[-3000:]}")
    return time.monotonic() - start, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--megac", default=os.path.join(REPO, "build", "bin", "megac"))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--write-docs", action="store_true", help="rewrite the section in docs/benchmarks.md")
    a = ap.parse_args()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MEGART_WAIT"))}
    base_env.update(MPI)
    with tempfile.TemporaryDirectory() as work:
        text = os.path.join(work, "corpus.txt")
        with open(text, "w") as f:
            for name in sorted(n for n in os.listdir(os.path.join(REPO, "docs")) if n.endswith(".md")):
                f.write(open(os.path.join(REPO, "docs", name), errors="replace").read())
        subprocess.run([a.megac, "data", "--input", text, "--output-prefix", os.path.join(work, "data", "corpus")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run([a.megac, "compile", os.path.join(REPO, "examples", "llama-tiny.yaml"), "--dp", "2",
                        "--micro-batch-size", "4", "-o", os.path.join(work, "prog")], check=True,
                       stdout=subprocess.DEVNULL)
        train = ["mpirun", "--oversubscribe", "-np", "2", os.path.join(work, "prog", "train"), "--data-path",
                 os.path.join(work, "data", "corpus"), "--train-iters", str(a.iters), "--lr", "1e-3",
                 "--log-interval", "1000"]
        one = {**base_env, "OMP_NUM_THREADS": "1"}
        ratios, header = [], ""
        meter = CpuMeter()
        for r in range(a.rounds):
            t_default, out = timed(train, base_env)
            t_one, _ = timed(train, one)
            header = next((line.strip() for line in out.splitlines() if "device:" in line), header)
            ratios.append(t_one / t_default)
            log(f"round {r + 1}: defaults {t_default:.2f} s, OMP_NUM_THREADS=1 {t_one:.2f} s: "
                f"speed ratio {ratios[-1]:.2f}")
        load = meter.stop()
    section = (f"Threads (bench/threads.py, {a.iters} iterations of llama-tiny at dp 2 on 2 MPI ranks, "
               f"{a.rounds} alternating rounds): the defaults run at **{statistics.median(ratios):.2f}x** the speed "
               f"of OMP_NUM_THREADS=1 (median; rounds {', '.join(f'{x:.2f}' for x in ratios)}). The header "
               f"said: `{header}`. Measured at {git_rev()} on {cpu_model()} ({os.cpu_count()} CPUs; other "
               f"processes used {load['other_cpu_pct']:.0f}% of the machine meanwhile).")
    publish(section, a.write_docs, os.path.join(REPO, "docs", "benchmarks.md"), BEGIN, END)


if __name__ == "__main__":
    main()
