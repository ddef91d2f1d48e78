#!/usr/bin/env python3
"""Draws a training run (OUT/train --metrics-file) as one PNG with matplotlib (Debian's
python3-matplotlib): the lm loss (with the validation and test losses where the run evaluated),
the learning rate, the gradient norm and tokens/s, each against the iteration. A mixture of
experts' run (tokens_per_expert in its records) gets a third row: the last iteration's load of
every (layer, expert), as a multiple of the balanced load (1: each expert got choices / experts),
and each layer's most loaded expert's multiple against the iteration.

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
    loads = [(r["iteration"], r["tokens_per_expert"]) for r in records if r.get("tokens_per_expert")]
    fig, axes = plt.subplots(3 if loads else 2, 2, figsize=(10, 9.75 if loads else 6.5))
    for ax, (key, title, scale) in zip(axes[:2].flat, PANELS):
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
    if loads:
        draw_expert_load(fig, axes[2], loads)
    fig.suptitle(f"{metrics_path}: {len(records)} iterations")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    print(f"plot_run: wrote {png_path}")


def balanced_multiples(layers):
    """Each (layer, expert)'s choices over the balanced share (the layer's choices / experts)."""
    return [[n * len(row) / max(1, sum(row)) for n in row] for row in layers]


def draw_expert_load(fig, axes, loads):
    """The load histogram: the last iteration's per (layer, expert), and each layer's maximum."""
    multiples = [(i, balanced_multiples(rows)) for i, rows in loads]
    iteration, last = multiples[-1]
    image = axes[0].imshow(last, aspect="auto", cmap="coolwarm", vmin=0, vmax=2, interpolation="nearest")
    fig.colorbar(image, ax=axes[0], label="x balanced load")
    axes[0].set_title(f"expert load, iteration {iteration}")
    axes[0].set_xlabel("expert")
    axes[0].set_ylabel("layer")
    axes[0].yaxis.get_major_locator().set_params(integer=True)
    axes[0].xaxis.get_major_locator().set_params(integer=True)
    for layer in range(len(last)):
        points = [(i, max(rows[layer])) for i, rows in multiples if layer < len(rows)]
        axes[1].plot(*zip(*points), linewidth=1.2, label=f"layer {layer}")
    if len(last) <= 8:
        axes[1].legend(fontsize=8)
    axes[1].set_title("most loaded expert, x balanced load")
    axes[1].set_xlabel("iteration")
    axes[1].grid(True, alpha=0.3)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
