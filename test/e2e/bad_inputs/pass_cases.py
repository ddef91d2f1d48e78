"""megac-opt: the plan a pass reads from the IR (#megac.plan on shard.grid @grid), and pass
options."""
from bad_inputs.case import Case

AREA = "pass options"
DEFAULT_PLAN = ("ddp_bucket_size = 40000000 : i64, make_vocab_size_divisible_by = 128 : i64, "
                "overlap_grad_reduce = false, sequence_parallel = false")
PIPELINE = 'num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b"'


def module(shape, plan=DEFAULT_PLAN):
    # The plan's sizes are the grid's (1 where the grid's is dynamic: the verifier names both).
    pp, dp, tp = (size if size != "?" else "1" for size in shape.split("x"))
    entries = f"pp = {pp}, dp = {dp}, tp = {tp}" + (", " + plan if plan else "")
    return f"""module {{
  shard.grid @grid(shape = {shape}) {{megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<{entries}>}}
  func.func @f(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {{ return %arg0 : tensor<4x4xf32> }}
}}
"""


def opt_case(name, passes, ir, expect):
    # As bytes: written as they are (a str would have its braces taken for {placeholders}).
    return Case(AREA, name, ["{megac_opt}"] + passes + ["{scratch}/in.mlir"], expect, files={"in.mlir": ir.encode()})


def cases():
    schedule = ["--megac-pipeline-schedule"]
    return [
        opt_case("tensor-parallel tp=0 option", ["--megac-tensor-parallel=tp=0"], module("1x1x1"), r"tp"),
        opt_case("pipeline-split pp=0 option", ["--megac-pipeline-split=pp=0"], module("1x1x1"), r"pp"),
        opt_case("grid with tp 0", ["--megac-tensor-parallel"], module("1x1x0"), r"tp"),
        opt_case("grid with pp 0", ["--megac-pipeline-split"], module("0x1x1"), r"pp"),
        opt_case("grid with dp 0", ["--megac-data-parallel"], module("1x0x1"), r"dp"),
        # The grid's sizes against megac/Limits.h.
        opt_case("grid with dp 2^40", ["--megac-data-parallel"], module("1x1099511627776x1"),
                 r"megac.plan's dp is 1099511627776; it must be between 1 and 1048576"),
        opt_case("grid with a dynamic tp", ["--megac-tensor-parallel"], module("1x1x?"),
                 r"@grid's shape 1x1x\? must be megac.plan's pp x dp x tp = 1x1x1"),
        opt_case("grid over 2^20 ranks", ["--megac-data-parallel"], module("1024x1024x2"),
                 r"pp 1024 x dp 1024 x tp 2 is more than the 1048576 ranks"),
        # megac.plan's values.
        # The recompute keys, checked as megac compile checks its flags.
        opt_case("plan recompute method with selective", ["--megac-recompute"],
                 module("1x1x1", DEFAULT_PLAN + ', recompute_granularity = "selective", recompute_method = "block"'),
                 r"megac.plan: --recompute-method block .* the granularity is selective"),
        opt_case("plan recompute modules not strings", ["--megac-recompute"],
                 module("1x1x1", DEFAULT_PLAN + ', recompute_granularity = "selective", recompute_modules = [1]'),
                 r"megac.plan's recompute_modules must be a non-empty array of strings"),
        opt_case("plan recompute num layers 0", ["--megac-recompute"],
                 module("1x1x1", DEFAULT_PLAN + ', recompute_granularity = "full", recompute_method = "uniform", '
                        'recompute_num_layers = 0 : i64'),
                 r"megac.plan's recompute_num_layers is 0; it must be between 1 and 8192"),
        opt_case("plan activation precision unknown", ["--megac-autocast"],
                 module("1x1x1", DEFAULT_PLAN + ', activation_precision = "fp8"'),
                 r"megac.plan's activation_precision must be a string \(fp32, bf16 or fp16\), got \"fp8\""),
        opt_case("plan sharding at dp 1", ["--megac-data-parallel"],
                 module("1x1x1", DEFAULT_PLAN + ', data_parallel_sharding_strategy = "optim"'),
                 r"megac.plan: --data-parallel-sharding-strategy optim shards .* --data-parallel-size is 1"),
        opt_case("plan sharding strategy unknown", ["--megac-data-parallel"],
                 module("1x2x1", DEFAULT_PLAN + ', data_parallel_sharding_strategy = "zero9"'),
                 r"zero9 is not a strategy"),
        opt_case("plan shard degree without strategy", ["--megac-data-parallel"],
                 module("1x2x1", DEFAULT_PLAN + ", data_parallel_shard_degree = 2 : i64"),
                 r"has sharding options but no data_parallel_sharding_strategy"),
        opt_case("plan shard degree as a string", ["--megac-data-parallel"],
                 module("1x2x1", DEFAULT_PLAN + ', data_parallel_sharding_strategy = "optim", '
                        'data_parallel_shard_degree = "2"'),
                 r"data_parallel_shard_degree must be an integer \(i64\)"),
        opt_case("plan with 10^5 microbatches", schedule, module("2x1x1", "num_microbatches = 100000, " + PIPELINE),
                 r"megac.plan's num_microbatches is 100000; it must be between 1 and 65536"),
        opt_case("plan with a schedule over 2^18 pairs", schedule,
                 module("2x1x1", "num_microbatches = 65536, num_virtual_stages_per_pipeline_rank = 64, "
                                 'pipeline_schedule = "1f1b"'),
                 r"pp 2 x vpp 64 x 65536 microbatches .* num_microbatches"),
        opt_case("plan with vpp 5000", ["--megac-pipeline-split"],
                 module("2x1x1", 'num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 5000, '
                                 'pipeline_schedule = "1f1b"'),
                 r"num_virtual_stages_per_pipeline_rank is 5000"),
        opt_case("plan with bucket size 0", ["--megac-data-parallel"], module("1x2x1", "ddp_bucket_size = 0"),
                 r"megac.plan's ddp_bucket_size is 0"),
        opt_case("plan with a negative vocab divisor", ["--megac-tensor-parallel"],
                 module("1x1x2", "make_vocab_size_divisible_by = -128"), r"make_vocab_size_divisible_by is -128"),
        opt_case("plan with an empty chunk", ["--megac-pipeline-split"],
                 module("2x1x1", "num_microbatches = 2, pipeline_layout = [0, 4], " + PIPELINE),
                 r"pipeline_layout 0,4: every chunk needs at least one layer"),
        opt_case("plan with a chunk of 10^6 layers", ["--megac-pipeline-split"],
                 module("2x1x1", "num_microbatches = 2, pipeline_layout = [1000000, 4], " + PIPELINE),
                 r"pipeline_layout 1000000,4: a chunk of 1000000 layers"),
        opt_case("plan value of the wrong type", schedule, module("2x1x1", 'num_microbatches = "four", ' + PIPELINE),
                 r"num_microbatches must be an integer \(i64\), got \"four\""),
        opt_case("plan with an unknown key", ["--megac-data-parallel"], module("1x2x1", "ddp_bucket_sizes = 100"),
                 r"unknown key ddp_bucket_sizes"),
        # megac-print-pipeline-schedule's simulation times.
        opt_case("print schedule tf=inf", ["--megac-print-pipeline-schedule=tf=inf"], module("1x1x1"),
                 r"option tf=inf must be > 0"),
        opt_case("print schedule tb=-1", ["--megac-print-pipeline-schedule=tb=-1"], module("1x1x1"),
                 r"option tb=-1 must be > 0"),
        opt_case("print schedule tcomm=nan", ["--megac-print-pipeline-schedule=tcomm=nan"], module("1x1x1"),
                 r"option tcomm=nan must be >= 0"),
        opt_case("print schedule tf=1e300", ["--megac-print-pipeline-schedule=tf=1e300"], module("1x1x1"),
                 r"option tf=1e\+300 must be > 0 and at most 1e12"),
    ]
