"""The CUDA target end to end. Everywhere megac has the CUDA toolkit: `megac compile --target
cuda` builds OUT/train with nvcc (the generated program and libmegart-cuda compile and link).
Without a usable GPU the program refuses to train with a clear message, and the GPU checks are
reported as skipped (exit 77). With a GPU: the fp32 program (TF32 off) matches the CPU program
per step within 1e-4 relative for 10 steps, loss and gradient norm. Run with /usr/bin/python3."""
import argparse
import os
import subprocess
import sys

from e2e_util import TRAIN, compare_metrics, make_license_corpus, run

TOLERANCE = 1e-4  # the bar: GPU reductions and cuBLAS sum in other orders than the CPU
SKIP = 77         # ctest's SKIP_RETURN_CODE for this test


def gpu_present():
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    w = lambda *p: os.path.join(args.workdir, *p)
    os.makedirs(args.workdir, exist_ok=True)

    out = run([args.megac, "compile", args.spec, "--micro-batch-size", "2", "--target", "cuda", "-o", w("cuda")])
    if not os.access(w("cuda", "train"), os.X_OK):
        sys.exit(f"megac compile --target cuda did not build {w('cuda', 'train')}:\n{out}")
    print(f"built {w('cuda', 'train')} with nvcc")
    make_license_corpus(args.megac, w("corpus"))
    data = ["--data-path", w("corpus")]

    if not gpu_present():
        # The program must say what is wrong and what to do, not crash.
        r = subprocess.run([w("cuda", "train")] + TRAIN + data, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        expected = "no CUDA device is usable here"
        if r.returncode != 2 or expected not in r.stdout or "--target cpu" not in r.stdout:
            sys.exit(f"without a GPU, OUT/train should exit 2 saying '{expected}' and suggesting --target cpu; "
                     f"it exited {r.returncode}:\n{r.stdout[-2000:]}")
        print("without a GPU the CUDA program refuses to train: " + r.stdout.strip().splitlines()[-1])
        print("SKIPPED: fp32 CUDA vs CPU parity needs a GPU (none on this machine)")
        sys.exit(SKIP)

    run([args.megac, "compile", args.spec, "--micro-batch-size", "2", "--target", "cpu", "-o", w("cpu")])
    for target in ("cpu", "cuda"):
        run([w(target, "train")] + TRAIN + data + ["--metrics-file", w(target + ".jsonl")])
    ok, report = compare_metrics(w("cuda.jsonl"), w("cpu.jsonl"), tolerance=TOLERANCE, names=("cuda", "cpu"),
                                 what="fp32 cuda vs cpu")
    print(report)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
