"""megac simulate and megac calibrate: the cluster file and their own flags."""
from bad_inputs.case import Case

AREA = "simulate"
# A complete cluster file (test/Sim/Inputs/toy.yaml's keys); cases change one line.
CLUSTER = {
    "name": "toy", "device": "toy accelerator", "devices_per_node": "4", "peak_tflops_16bit": "100",
    "peak_tflops_fp32": "10", "gemm_efficiency": "0.5", "gemm_saturation_rows": "0",
    "gemm_tile_rows": "1", "gemm_tile_cols": "1", "gemm_tiles_at_once": "0", "attention_efficiency": "0.25",
    "memory_bandwidth_gbps": "1000", "memory_gib": "16", "kernel_launch_us": "0",
    "intra_node_bus_bandwidth_gbps": "100", "intra_node_latency_us": "0",
    "inter_node_bus_bandwidth_gbps": "10", "inter_node_latency_us": "0",
}


def cluster(**changes):
    keys = dict(CLUSTER)
    keys.update(changes)
    return "".join(f"{k}: {v}\n" for k, v in keys.items() if v is not None)


def simulate_case(name, text, expect, flags=None):
    files = {"cluster.yaml": text} if text is not None else {}
    argv = ["{megac}", "simulate", "{spec}", "--cluster", "{scratch}/cluster.yaml"]
    return Case(AREA, name, argv + (flags if flags is not None else ["--global-batch-size", "8"]), expect, files=files)


def cases():
    return calibrate_cases() + plan_cases() + [
        simulate_case("no cluster file", None, r"--cluster .*cluster.yaml: cannot read .*cluster.yaml"),
        simulate_case("cluster key missing", cluster(memory_gib=None), r"missing key 'memory_gib'"),
        simulate_case("cluster key unknown", cluster(tflops=1), r"unknown key 'tflops'; the keys are"),
        simulate_case("cluster efficiency above 1", cluster(gemm_efficiency=1.5),
                      r"gemm_efficiency is 1.5; it must be between 0.001 and 1"),
        simulate_case("cluster bandwidth zero", cluster(intra_node_bus_bandwidth_gbps=0),
                      r"intra_node_bus_bandwidth_gbps is 0; it must be between"),
        simulate_case("cluster bandwidth nan", cluster(memory_bandwidth_gbps=".nan"),
                      r"memory_bandwidth_gbps must be a finite number, got '.nan'"),
        simulate_case("cluster devices per node fractional", cluster(devices_per_node=2.5),
                      r"devices_per_node is 2.5; it must be a whole number"),
        simulate_case("cluster tile of 0 rows", cluster(gemm_tile_rows=0),
                      r"gemm_tile_rows is 0; it must be between 1 and"),
        simulate_case("cluster not a mapping", "- a\n- b\n", r"expected a mapping of keys to values"),
        simulate_case("cluster key twice", cluster() + "memory_gib: 8\n", r"memory_gib is given twice"),
        simulate_case("simulate without a global batch", cluster(), r"megac simulate needs --global-batch-size B",
                      flags=[]),
        Case(AREA, "simulate without a cluster", ["{megac}", "simulate", "{spec}", "--global-batch-size", "8"],
             r"megac simulate needs --cluster NAME\|FILE.yaml"),
        simulate_case("simulate global batch 2^40", cluster(), r"--global-batch-size 1099511627776 makes "
                      r"1099511627776 microbatches per iteration .* more than the 65536 an iteration may have",
                      flags=["--global-batch-size", "1099511627776"]),
        simulate_case("simulate 16-bit gradient sums with sharding", cluster(),
                      r"--grad-reduce-in-bf16 with --data-parallel-sharding-strategy optim: OUT/train sums 16-bit "
                      r"gradients only without sharding",
                      flags=["--global-batch-size", "8", "--dp", "2", "--grad-reduce-in-bf16",
                             "--data-parallel-sharding-strategy", "optim"]),
        simulate_case("simulate negative token budget", cluster(), r"--train-tokens is -5; give a number of tokens",
                      flags=["--global-batch-size", "8", "--train-tokens", "-5"]),
        simulate_case("simulate global batch not a multiple", cluster(), r"--global-batch-size 7 is not a positive "
                      r"multiple of micro batch x dp = 2", flags=["--global-batch-size", "7", "--dp", "2"]),
    ]


def plan_case(name, flags, expect):
    return Case(AREA, name, ["{megac}", "plan", "{spec}"] + flags, expect)


def plan_cases():
    base = ["--gpus", "4", "--cluster", "selene-a100", "--global-batch-size", "8"]
    return [
        plan_case("plan without gpus", base[2:], r"--gpus is 0; give the number of GPUs"),
        plan_case("plan without a cluster", base[:2] + base[4:], r"megac plan needs --cluster NAME\|FILE.yaml"),
        plan_case("plan without a batch", base[:4], r"--global-batch-size is 0; give the samples per iteration"),
        plan_case("plan unknown cluster", base[:2] + ["--cluster", "nosuch"] + base[4:],
                  r"--cluster nosuch: cannot read .*clusters/nosuch.yaml"),
        plan_case("plan top 0", base + ["--top", "0"], r"--top is 0; give 1 to 100"),
        plan_case("plan negative memory", base + ["--max-memory", "-1"], r"--max-memory is -1.*; give GiB per GPU"),
        plan_case("plan nothing fits", base + ["--max-memory", "0.0001"],
                  r"no plan fits in 0.0001.* GiB per GPU; raise --max-memory or use more GPUs"),
        plan_case("plan both precisions", base + ["--bf16", "--fp16"], r"--bf16 and --fp16 are both given"),
        Case(AREA, "plan no spec", ["{megac}", "plan"] + base, r"give the model: megac plan SPEC.yaml"),
    ]


def calibrate_cases():
    out = "{scratch}/cluster.yaml"
    return [
        Case(AREA, "calibrate a gpu", ["{megac}", "calibrate", "--target", "cuda", "-o", out],
             r"--target cuda: only cpu can be calibrated so far", absent=[out]),
        Case(AREA, "calibrate 0 ranks", ["{megac}", "calibrate", "--ranks", "0", "-o", out],
             r"--ranks is 0; give 1 to 64", absent=[out]),
        Case(AREA, "calibrate 0 threads", ["{megac}", "calibrate", "--threads", "0", "-o", out],
             r"--threads is 0; give 1 to 1024", absent=[out]),
    ]
