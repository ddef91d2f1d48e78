"""Per-rank training-state bytes that `megac compile --no-build` predicts (OUT/rank-memory.json)
against the ZeRO formulas (facts.md; Adam, fp32, d = shard degree): no_shard 16, optim 8 + 8/d,
optim_grads 4 + 12/d, optim_grads_params 16/d bytes per parameter, applied to the parameters
plus the padding the compiler reports, for d = 1, 2, 4, 8, with and without tp 2 x pp 2. Also:
sharded buffers are whole multiples of lcm(d, 128) elements (every shard equal), and a plan's
parameter count does not depend on the strategy."""
import argparse
import json
import math
import os
import re
import subprocess
import sys

BYTES_TIMES_D = {  # bytes per element x d, as integers: (a + b/d) x d = a d + b
    "optim": lambda d: 8 * d + 8,
    "optim_grads": lambda d: 4 * d + 12,
    "optim_grads_params": lambda d: 16,
}
# Under pp, optim_grads_params keeps the gathered parameters for the iteration unless told to
# reshard after forward (torchtitan's default): then a rank holds optim_grads' state.
PP_STRATEGIES = {
    "optim": ([], BYTES_TIMES_D["optim"]),
    "optim_grads": ([], BYTES_TIMES_D["optim_grads"]),
    "optim_grads_params": (["--fsdp-reshard-after-forward", "always"], BYTES_TIMES_D["optim_grads_params"]),
    "optim_grads_params kept gathered": ([], BYTES_TIMES_D["optim_grads"]),
}


def megatron_buffer_numel(numels, d, bucket_size=40_000_000):
    """Megatron's _ParamAndGradBuffer layout with the distributed optimizer, written from its
    description (facts.md): parameters in reverse order, each starting at a multiple of 64
    elements; a bucket closes after the parameter that brings it to bucket_size; its end is
    padded to lcm(d, 128)."""
    pad = lambda n, m: (n + m - 1) // m * m
    start = bucket_start = 0
    for n in reversed(numels):
        start = pad(start, 64)
        end = start + n
        if end - bucket_start >= bucket_size:
            bucket_start = start = pad(end, math.lcm(d, 128))
        else:
            start = end
    return pad(start, math.lcm(d, 128)) if start > bucket_start else bucket_start


def table_numels(main_cpp):
    """Elements of each parameter block in the generated program's table, in table order."""
    shapes = re.findall(r"\.shape = \{([0-9, ]+)\}", open(main_cpp).read())
    return [math.prod(int(x) for x in shape.split(",")) for shape in shapes]


def compile_plan(args, spec, plan, out):
    cmd = [args.megac, "compile", spec, "--micro-batch-size", "1", "--no-build", "-o", out, *plan]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}")
    with open(os.path.join(out, "rank-memory.json")) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args()
    failures, checked = [], 0
    for spec in args.specs:
        for grid in ([], ["--tp", "2", "--pp", "2"]):
            for d in (1, 2, 4, 8):
                base = compile_plan(args, spec, grid + ["--dp", str(d)], os.path.join(args.workdir, "base"))
                for stage in base["stages"]:
                    total, n, pad = stage["training_state_bytes"], stage["parameters"], stage["padding_elements"]
                    if total != 16 * n + 4 * pad:
                        failures.append(f"{spec} {grid} dp {d} no_shard stage {stage['pp_stage']}: {total} != 16 x {n} + 4 x {pad}")
                    checked += 1
                if d == 1:
                    continue  # sharding over one rank is refused
                strategies = PP_STRATEGIES if grid else {k: ([], v) for k, v in BYTES_TIMES_D.items()}
                for case, (extra, times_d) in strategies.items():
                    strategy = case.split()[0]
                    plan = grid + ["--dp", str(d), "--data-parallel-sharding-strategy", strategy] + extra
                    got = compile_plan(args, spec, plan, os.path.join(args.workdir, strategy))
                    for stage, plain in zip(got["stages"], base["stages"]):
                        total, n, pad = stage["training_state_bytes"], stage["parameters"], stage["padding_elements"]
                        where = f"{os.path.basename(spec)} {' '.join(plan)} stage {stage['pp_stage']}"
                        if total * d != times_d(d) * (n + pad):
                            failures.append(f"{where}: {total} bytes x d {d} != {times_d(d)} x ({n} + {pad} padding)")
                        if (n + pad) % math.lcm(d, 128) != 0:
                            failures.append(f"{where}: buffer of {n + pad} elements is not a multiple of lcm({d}, 128)")
                        if n != plain["parameters"]:
                            failures.append(f"{where}: {n} parameters, {plain['parameters']} with no_shard")
                        if not grid:  # one parameter table: compare the layout with Megatron's
                            numels = table_numels(os.path.join(args.workdir, strategy, "main.cpp"))
                            if sum(numels) != n or megatron_buffer_numel(numels, d) != n + pad:
                                failures.append(f"{where}: {n} + {pad} elements; Megatron's layout of the table's "
                                                f"{sum(numels)} gives {megatron_buffer_numel(numels, d)}")
                        checked += 1
                        if strategy == "optim" and spec == args.specs[0] and not grid:
                            print(f"{os.path.basename(spec)} dp {d} optim: {total / n:.3f} bytes/parameter "
                                  f"(formula {8 + 8 / d:.3f} + padding {pad})")
    # Many buckets: each bucket end padded on its own.
    spec, d, bucket = args.specs[0], 4, 1000
    got = compile_plan(args, spec, ["--dp", str(d), "--use-distributed-optimizer", "--ddp-bucket-size", str(bucket)],
                       os.path.join(args.workdir, "buckets"))
    stage = got["stages"][0]
    numels = table_numels(os.path.join(args.workdir, "buckets", "main.cpp"))
    want = megatron_buffer_numel(numels, d, bucket)
    print(f"{os.path.basename(spec)} dp {d}, buckets of {bucket}: {stage['padding_elements']} padding elements "
          f"(Megatron's layout: {want - sum(numels)})")
    if stage["parameters"] + stage["padding_elements"] != want:
        failures.append(f"buckets of {bucket}: {stage['parameters']} + {stage['padding_elements']} != {want}")
    for f in failures:
        print("FAIL: " + f)
    print(f"{checked} stage plans checked, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
