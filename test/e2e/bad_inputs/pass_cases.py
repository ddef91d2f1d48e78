"""megac-opt: the plan a pass reads from the IR (shard.grid @grid and megac.plan), and pass
options."""
from bad_inputs.case import Case

AREA = "pass options"


def module(shape, plan="ddp_bucket_size = 40000000 : i64, make_vocab_size_divisible_by = 128 : i64, "
                       "overlap_grad_reduce = false, sequence_parallel = false"):
    return f"""module {{
  shard.grid @grid(shape = {shape}) {{megac.axes = ["pp", "dp", "tp"], megac.plan = {{{plan}}}}}
  func.func @f(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {{ return %arg0 : tensor<4x4xf32> }}
}}
"""


def opt_case(name, passes, ir, expect):
    # The runner fills {placeholders} in file contents too: the IR's own braces are doubled.
    ir = ir.replace("{", "{{").replace("}", "}}")
    return Case(AREA, name, ["{megac_opt}"] + passes + ["{scratch}/in.mlir"], expect, files={"in.mlir": ir})


def cases():
    return [
        opt_case("tensor-parallel tp=0 option", ["--megac-tensor-parallel=tp=0"], module("1x1x1"), r"tp"),
        opt_case("pipeline-split pp=0 option", ["--megac-pipeline-split=pp=0"], module("1x1x1"), r"pp"),
        opt_case("grid with tp 0", ["--megac-tensor-parallel"], module("1x1x0"), r"tp"),
        opt_case("grid with pp 0", ["--megac-pipeline-split"], module("0x1x1"), r"pp"),
        opt_case("grid with dp 0", ["--megac-data-parallel"], module("1x0x1"), r"dp"),
    ]
