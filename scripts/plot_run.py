#!/usr/bin/env python3
"""Draws a training run (OUT/train --metrics-file) as one PNG with matplotlib (Debian's
python3-matplotlib): the lm loss (with the validation and test losses where the run evaluated),
the learning rate, the gradient norm and tokens/s, each against the iteration.

    /usr/bin/python3 scripts/plot_run.py metrics.jsonl run.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [("lm_loss", "lm loss", "log"), ("lr", "learning rate", "linear"),
          ("grad_norm", "gradient norm", "log"), ("tokens_per_s", "tokens/s", "linear")]


def main(metrics_path, png_path):
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    if len(records) < 2:
        sys.exit(f"plot_run: {metrics_path} has {len(records)} iterations; need at least 2")
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5), sharex=True)
    for ax, (key, title, scale) in zip(axes.flat, PANELS):
        points = [(r["iteration"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
        if points:
            ax.plot(*zip(*points), linewidth=1.2, label="train")
            if scale == "log" and all(y > 0 for _, y in points):
                ax.set_yscale("log")
        if key == "lm_loss":  # the evaluations (--eval-interval), where the run has them
            for eval_key, label, marker in (("valid_lm_loss", "validation", "o-"), ("test_lm_loss", "test", "s")):
                evals = [(r["iteration"], r[eval_key]) for r in records if isinstance(r.get(eval_key), (int, float))]
                if evals:
                    ax.plot(*zip(*evals), marker, markersize=3, linewidth=1.2, label=label)
                    ax.legend(fontsize=8)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("iteration")
    fig.suptitle(f"{metrics_path}: {len(records)} iterations")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    print(f"plot_run: wrote {png_path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
