#!/usr/bin/env python3
"""Compares two OUT/train --metrics-file outputs step by step, for scripts/gpu_check.sh; the
comparison is test/e2e/e2e_util.py's, so the ctest and the GPU session use one implementation.

    gpu_compare.py CUDA.jsonl CPU.jsonl                                   # fp32 parity: 10 steps, 1e-4
    gpu_compare.py BF16.jsonl FP32.jsonl --steps 50 --keys lm_loss --tolerance 0.02 \
        --names bf16,fp32 --what "bf16 vs fp32 loss"
Exit status 0 when every step is within tolerance, 1 otherwise. Standard library only.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test", "e2e"))
from cuda_parity import TOLERANCE  # noqa: E402
from e2e_util import compare_metrics  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("test")
    ap.add_argument("ref")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--tolerance", type=float, default=TOLERANCE, help="relative, per step and key")
    ap.add_argument("--keys", default="lm_loss,grad_norm")
    ap.add_argument("--names", default="cuda,cpu", help="how the report names the two files")
    ap.add_argument("--what", default="fp32 cuda vs cpu")
    a = ap.parse_args()
    names = tuple(a.names.split(","))
    if len(names) != 2:
        ap.error("--names takes two comma-separated names")
    ok, report = compare_metrics(a.test, a.ref, keys=tuple(a.keys.split(",")), steps=a.steps,
                                 tolerance=a.tolerance, names=names, what=a.what)
    print(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
