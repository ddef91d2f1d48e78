"""The data-parallel bytes per rank that `megac compile --no-build` predicts
(OUT/rank-communication.json) against the formulas, counted as ring algorithms move data (an
all-reduce of b bytes over d ranks sends 2 (d-1)/d b, a reduce-scatter or all-gather (d-1)/d b),
for one microbatch and for several: DDP all-reduces the gradients once per iteration; ZeRO-1
(optim) reduce-scatters them and all-gathers the parameters once, the same bytes as DDP on its
flat buffer of N elements; ZeRO-2 (optim_grads) reduce-scatters every microbatch; ZeRO-3
(optim_grads_params) all-gathers the parameters for forward and again for backward and
reduce-scatters, every microbatch: 1.5x DDP per microbatch; without resharding after forward the
parameters stay gathered from one step to the next (a chunk's forward and backward run apart),
which moves ZeRO-2's bytes. Besides, OUT/train sums the loss over dp and, with sharded state, the gradient norm's
sum of squares (a double each)."""
import argparse
import json
import os
import sys

from check_state_memory import compile_plan, table_numels

GRAD_ALIGN = 16  # no_shard gradients start at multiples of 16 floats


def ring(d, factor, elements, element_bytes=4):
    return factor * (d - 1) / d * elements * element_bytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args()
    failures, checked = [], 0
    strategies = {  # (flags, AG+RS traffic per microbatch, per iteration, in units of (d-1)/d x 4N)
        "optim": ([], 0, 2),
        "optim_grads": ([], 1, 1),
        "optim_grads_params": ([], 3, 0),
        "optim_grads_params, no reshard": (["--fsdp-reshard-after-forward", "never"], 1, 1),
    }
    for spec in args.specs:
        name = os.path.basename(spec)
        for d in (2, 4, 8):
            out = os.path.join(args.workdir, "ddp")
            compile_plan(args, spec, ["--dp", str(d)], out)
            ddp = json.load(open(os.path.join(out, "rank-communication.json")))["stages"][0]
            numels = table_numels(os.path.join(out, "main.cpp"))
            aligned = sum((n + GRAD_ALIGN - 1) // GRAD_ALIGN * GRAD_ALIGN for n in numels[:-1]) + numels[-1]
            want = ring(d, 2, aligned) + ring(d, 2, 1, 8)
            got = ddp["bytes_per_iteration_besides"]["dp"] + ddp["bytes_per_microbatch"]["dp"]
            if abs(got - want) > 1e-9 * want:
                failures.append(f"{name} dp {d} no_shard: {got} bytes, formula {want}")
            checked += 1
            for strategy, (extra, per_micro, per_iter) in strategies.items():
                plan = ["--dp", str(d), "--data-parallel-sharding-strategy", strategy.split(",")[0]] + extra
                out = os.path.join(args.workdir, "zero")
                compile_plan(args, spec, plan, out)
                stage = json.load(open(os.path.join(out, "rank-communication.json")))["stages"][0]
                with open(os.path.join(out, "rank-memory.json")) as f:
                    mem = json.load(f)["stages"][0]
                n = mem["parameters"] + mem["padding_elements"]  # the flat buffer
                scalars = 2 * ring(d, 2, 1, 8)  # the loss and the norm's sum of squares
                got_micro = stage["bytes_per_microbatch"]["dp"]
                got_iter = stage["bytes_per_iteration_besides"]["dp"]
                ok = abs(got_micro - ring(d, per_micro, n)) <= 1e-9 * max(got_micro, 1) and \
                    abs(got_iter - ring(d, per_iter, n) - scalars) <= 1e-9 * got_iter
                if not ok:
                    failures.append(f"{name} dp {d} {strategy}: per microbatch {got_micro}, per iteration {got_iter}; "
                                    f"formula {ring(d, per_micro, n)} and {ring(d, per_iter, n) + scalars}")
                # One microbatch, against DDP on the same number of elements.
                ratio = (got_micro + got_iter - scalars) / ring(d, 2, n)
                if spec == args.specs[0] and d == 4:
                    print(f"{name} dp {d} {strategy}: {ratio:.3f} x DDP's bytes per iteration with one microbatch, "
                          f"+ {per_micro} x (d-1)/d x 4N per further microbatch")
                checked += 1
    print(f"{checked} plans checked, {len(failures)} failed")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
