"""megac simulate against what can be checked without a cluster: the figures are consistent with
each other (the time split adds up to the iteration, tokens/s and TFLOP/s follow from it), and
each part against an independent source: the data-parallel time is megac compile's
rank-communication.json bytes over the cluster file's bus bandwidth, tensor-parallel time scales
with the link the group spans, the memory is megac compile's rank-memory.json, the pipeline's
bubble falls as microbatches are added, and a faster memory only shortens memory-bound time."""
import argparse
import json
import os
import subprocess
import sys


def run(cmd):
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stdout}")
    return result.stdout


def cluster_file(workdir, base, name, **changes):
    lines = []
    for line in open(base):
        key = line.split(":")[0].strip()
        lines.append(f"{key}: {changes[key]}\n" if key in changes else line)
    path = os.path.join(workdir, name + ".yaml")
    open(path, "w").writelines(lines)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    def simulate(flags, cluster=a.cluster, batch=16):
        out = run([a.megac, "simulate", a.spec, "--cluster", cluster, "--global-batch-size", str(batch),
                   "--micro-batch-size", "4", "--json"] + flags)
        return json.loads(out)

    def compiled(flags, batch=16):
        out = os.path.join(a.workdir, "prog")
        pp = ["--global-batch-size", str(batch)] if "--pp" in flags else []
        run([a.megac, "compile", a.spec, "--micro-batch-size", "4", "--no-build", "-o", out] + flags + pp)
        return (json.load(open(os.path.join(out, "rank-communication.json"))),
                json.load(open(os.path.join(out, "rank-memory.json"))))

    close = lambda x, y, rel=1e-9: abs(x - y) <= rel * max(abs(x), abs(y))
    base = {k.split(":")[0]: k.split(":")[1].strip() for k in open(a.cluster) if ":" in k and not k.startswith("#")}
    flops = set()
    for name, flags in (("single", []), ("tp2", ["--tp", "2"]), ("dp2", ["--dp", "2"]),
                        ("pp2", ["--pp", "2"]), ("tp2 dp2 bf16", ["--tp", "2", "--dp", "2", "--bf16"])):
        s = simulate(flags)
        t = s["iteration_time_s"]
        split = sum(s["time_split_s"].values())
        check(close(split, t), f"{name}: the time split adds up to the iteration ({split:.6g} s = {t:.6g} s)")
        check(close(s["tokens_per_s"], 16 * 1024 / t), f"{name}: tokens/s = batch x seq / iteration")
        world = 4 if "tp2 dp2" in name else (1 if name == "single" else 2)
        flops.add(round(s["tflops_per_gpu"] * world * t / 16, 3))
        peak = float(base["peak_tflops_16bit" if "bf16" in name else "peak_tflops_fp32"])
        check(close(s["mfu"], s["tflops_per_gpu"] / peak), f"{name}: MFU = TFLOP/s per device / peak")
        comm, memory = compiled(flags)
        gib = [st["total_bytes"] / 2**30 for st in memory["stages"]]
        check(all(close(x, y) for x, y in zip(s["memory_gib_per_gpu"], gib)),
              f"{name}: memory per device {[round(g, 3) for g in gib]} GiB = megac compile's rank-memory.json")
        if name == "dp2":
            # No overlap, no latency in the toy file: bytes each rank sends / bus bandwidth.
            sent = comm["stages"][0]["bytes"]["dp"]
            want = sent / (float(base["intra_node_bus_bandwidth_gbps"]) * 1e9)
            check(close(s["time_split_s"]["dp_communication"], want),
                  f"dp2: data-parallel time {s['time_split_s']['dp_communication']:.6g} s = {sent} bytes sent "
                  f"(rank-communication.json) / bus bandwidth")
    check(len(flops) == 1, f"model FLOPs per sample are the same under every plan ({sorted(flops)} TFLOP)")

    # Tensor parallelism across nodes (one device per node): its time scales with the bandwidths.
    apart = cluster_file(a.workdir, a.cluster, "apart", devices_per_node=1)
    near, far = simulate(["--tp", "2"]), simulate(["--tp", "2"], apart)
    ratio = far["time_split_s"]["tp_communication"] / near["time_split_s"]["tp_communication"]
    want = float(base["intra_node_bus_bandwidth_gbps"]) / float(base["inter_node_bus_bandwidth_gbps"])
    check(close(ratio, want), f"tp2 across nodes / within a node: tp time x{ratio:.4g} = bandwidth ratio {want:g}")
    # A faster memory shortens only memory-bound work (and nothing else).
    fast = cluster_file(a.workdir, a.cluster, "fast", memory_bandwidth_gbps=2 * float(base["memory_bandwidth_gbps"]))
    slow_run, fast_run = simulate([]), simulate([], fast)
    check(fast_run["time_split_s"]["memory_bound"] < slow_run["time_split_s"]["memory_bound"] and
          close(fast_run["time_split_s"]["tp_communication"], slow_run["time_split_s"]["tp_communication"]),
          "twice the memory bandwidth: less memory-bound time, the same communication")
    # The pipeline's bubble is a smaller share with more microbatches (1F1B: (p - 1) / m).
    few, many = simulate(["--pp", "2"], batch=8), simulate(["--pp", "2"], batch=64)
    share = lambda s: s["time_split_s"]["pipeline_bubble"] / s["iteration_time_s"]
    check(share(many) < share(few), f"pp2: bubble {100 * share(few):.1f}% of the iteration with 2 microbatches, "
                                    f"{100 * share(many):.1f}% with 16")
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
