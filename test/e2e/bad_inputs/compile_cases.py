"""megac compile: plan flags and the command line."""
from bad_inputs.case import Case

AREA = "plan flags"
OUT = "{scratch}/out"
# A spec whose heads allow tensor parallelism up to 512 (for the padded-vocabulary limit).
WIDE = ("family: gpt2\nnum_layers: 2\nhidden_size: 1024\nnum_attention_heads: 512\nseq_length: 32\n"
        "vocab_size: 257\n")
# A spec at the largest sequence: the activation and attention limits depend on the micro batch.
LONG = ("family: gpt2\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: 4194304\n"
        "vocab_size: 257\n")


def compile_case(name, flags, expect, files=None):
    spec = "{scratch}/spec.yaml" if files else "{spec}"
    return Case(AREA, name, ["{megac}", "compile", spec, "-o", OUT, "--no-build"] + flags, expect,
                absent=[OUT], files=files or {})


def cases():
    return [
        # Sharded data parallelism (issue 15).
        compile_case("distributed optimizer at dp 1", ["--use-distributed-optimizer"],
                     r"--use-distributed-optimizer shards .* --data-parallel-size is 1; give --dp 2"),
        compile_case("unknown sharding strategy", ["--dp", "2", "--data-parallel-sharding-strategy", "zero3"],
                     r"--data-parallel-sharding-strategy zero3 is not a strategy; choose no_shard, optim"),
        compile_case("shard degree not dividing dp", ["--dp", "4", "--data-parallel-shard-degree", "3"],
                     r"--data-parallel-shard-degree 3 does not divide --data-parallel-size 4"),
        compile_case("shard x replicate not dp", ["--dp", "4", "--data-parallel-shard-degree", "2",
                                                  "--data-parallel-replicate-degree", "4"],
                     r"shard-degree 2 x --data-parallel-replicate-degree 4 is 8, not --data-parallel-size 4"),
        compile_case("shard degree 1", ["--dp", "4", "--data-parallel-shard-degree", "1"],
                     r"shard degree of 1 shards nothing"),
        compile_case("overlap param gather without sharding", ["--dp", "2", "--overlap-param-gather"],
                     r"--overlap-param-gather .* nothing is sharded; add --use-distributed-optimizer"),
        compile_case("overlap param gather without overlap grad reduce",
                     ["--dp", "2", "--use-distributed-optimizer", "--overlap-param-gather"],
                     r"--overlap-param-gather needs --overlap-grad-reduce"),
        compile_case("reshard after forward without ZeRO-3",
                     ["--dp", "2", "--use-distributed-optimizer", "--fsdp-reshard-after-forward", "never"],
                     r"--fsdp-reshard-after-forward .* only --data-parallel-sharding-strategy optim_grads_params"),
        compile_case("distributed optimizer instances with ZeRO-2",
                     ["--dp", "4", "--data-parallel-sharding-strategy", "optim_grads",
                      "--num-distributed-optimizer-instances", "2"],
                     r"--num-distributed-optimizer-instances 2 replicates the distributed optimizer"),
        compile_case("CPU offload without sharding", ["--dp", "2", "--optimizer-cpu-offload"],
                     r"--optimizer-cpu-offload steps the distributed optimizer's shards on the host, and nothing is "
                     r"sharded; add --use-distributed-optimizer"),
        compile_case("offload fraction without offload",
                     ["--dp", "2", "--use-distributed-optimizer", "--optimizer-offload-fraction", "0.5"],
                     r"--optimizer-offload-fraction 0.5 .* add --optimizer-cpu-offload"),
        compile_case("offload fraction above 1",
                     ["--dp", "2", "--use-distributed-optimizer", "--optimizer-cpu-offload",
                      "--optimizer-offload-fraction", "1.5"],
                     r"--optimizer-offload-fraction 1.5 is not a fraction; give a number above 0 and at most 1"),
        compile_case("offload fraction nan",
                     ["--dp", "2", "--use-distributed-optimizer", "--optimizer-cpu-offload",
                      "--optimizer-offload-fraction", "nan"],
                     r"--optimizer-offload-fraction nan is not a fraction"),
        compile_case("no_shard with the distributed optimizer",
                     ["--dp", "2", "--data-parallel-sharding-strategy", "no_shard", "--use-distributed-optimizer"],
                     r"strategy is no_shard; drop one of them"),
        compile_case("micro batch 2^60", ["--micro-batch-size", "1152921504606846976"], r"--micro-batch-size"),
        compile_case("dp 10^8", ["--dp", "100000000"], r"--data-parallel-size|--dp"),
        compile_case("global batch 10^9 with pp", ["--pp", "2", "--global-batch-size", "1000000000"],
                     r"--global-batch-size"),
        compile_case("tp 0", ["--tp", "0"], r"--tensor-model-parallel-size|--tp"),
        compile_case("conflicting tp aliases", ["--tp", "2", "--tensor-model-parallel-size", "4"],
                     r"--tp.*--tensor-model-parallel-size|--tensor-model-parallel-size.*--tp"),
        compile_case("spec key as a flag", ["--hidden-size", "128"], r"--hidden-size"),
        Case(AREA, "stray positional argument", ["{megac}", "compile", "{spec}", "extra.yaml", "-o", OUT],
             r"extra\.yaml", absent=[OUT]),
        # Each plan size against its limit (megac/Limits.h), and the world they make.
        compile_case("pp 0", ["--pp", "0"], r"--pipeline-model-parallel-size is 0"),
        compile_case("pp 2^21", ["--pp", "2097152"], r"--pipeline-model-parallel-size is 2097152; .*1048576"),
        compile_case("world over 2^20 ranks", ["--pp", "2", "--dp", "524288", "--tp", "2"],
                     r"pp 2 x dp 524288 x tp 2 .*1048576 ranks.*--data-parallel-size"),
        compile_case("vpp 2000", ["--pp", "2", "--vpp", "2000"], r"--num-virtual-stages-per-pipeline-rank \(--vpp\) is 2000"),
        compile_case("layers per virtual stage 10^6", ["--pp", "2", "--num-layers-per-virtual-pipeline-stage", "1000000"],
                     r"--num-layers-per-virtual-pipeline-stage is 1000000"),
        compile_case("pipeline layout entry 10^6", ["--pp", "2", "--pipeline-layout", "1000000,1"],
                     r"--pipeline-layout 1000000,1: a chunk of 1000000 layers"),
        compile_case("pipeline layout given twice", ["--pp", "2", "--pipeline-layout", "1,1", "--pipeline-layout", "1,1"],
                     r"--pipeline-layout is given more than once"),
        compile_case("vocab divisor 0", ["--make-vocab-size-divisible-by", "0"], r"--make-vocab-size-divisible-by is 0"),
        compile_case("vocab divisor 10^9", ["--make-vocab-size-divisible-by", "1000000000"],
                     r"--make-vocab-size-divisible-by is 1000000000"),
        compile_case("ddp bucket 2^50", ["--dp", "2", "--ddp-bucket-size", "1125899906842624"], r"--ddp-bucket-size is 1125899906842624"),
        compile_case("micro batch 0", ["--micro-batch-size", "0"], r"--micro-batch-size is 0"),
        compile_case("global batch negative", ["--pp", "2", "--global-batch-size", "-8"], r"--global-batch-size is -8"),
        compile_case("forward cost inf", ["--pipeline-forward-cost", "inf"], r"--pipeline-forward-cost is inf"),
        compile_case("backward cost 1e999", ["--pipeline-backward-cost", "1e999"], r"--pipeline-backward-cost is inf"),
        compile_case("forward cost nan", ["--pipeline-forward-cost", "nan"], r"--pipeline-forward-cost is nan"),
        compile_case("backward cost negative", ["--pipeline-backward-cost=-2"], r"--pipeline-backward-cost is -2"),
        compile_case("conflicting pp aliases", ["--pp", "2", "--pipeline-model-parallel-size", "4"],
                     r"--pipeline-model-parallel-size \(--pp\) is given 2 times with different values \(2 and 4\)"),
        compile_case("conflicting sp aliases", ["--tp", "2", "--sp", "--sequence-parallel=false"],
                     r"--sequence-parallel \(--sp\) is given 2 times with different values"),
        compile_case("conflicting targets", ["--target", "cpu", "--target", "cuda"], r"--target is given 2 times"),
        compile_case("unknown flag starting with h", ["--hello"], r"unknown flag --hello"),
        compile_case("unknown flag starting with o", ["--output", "x"], r"unknown flag --output"),
        Case(AREA, "-o is a file", ["{megac}", "compile", "{spec}", "-o", "{scratch}/file", "--no-build"],
             r"-o .*file is a file, not a folder", files={"file": "keep\n"}),
        # Products of the plan with the spec.
        compile_case("padded vocabulary over 2^24", ["--tp", "512", "--make-vocab-size-divisible-by", "65536"],
                     r"--make-vocab-size-divisible-by \(65536\) x tensor parallel size \(512\) is 33554432 rows",
                     files={"spec.yaml": WIDE}),
        compile_case("activation over 2^40 elements", ["--micro-batch-size", "1048576"],
                     r"largest activation of a microbatch, \[--micro-batch-size 1048576, seq_length 4194304",
                     files={"spec.yaml": LONG}),
        compile_case("schedule over 2^18 pairs", ["--pp", "4", "--vpp", "2", "--micro-batch-size", "1",
                                                  "--global-batch-size", "65536"],
                     r"P x V x m = 4 x 2 x 65536 .*--global-batch-size",
                     files={"spec.yaml": WIDE.replace("num_layers: 2", "num_layers: 8")}),
    ]
