// The Chrome trace of a simulated schedule is valid JSON: one "X" event per forward and
// backward, named like "F2.1", on thread = pipeline rank, with "pp rank N" thread names.
// RUN: rm -rf %t && split-file %s %t
// RUN: megac-opt %t/pp2-vpp2-m4-interleaved.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule="trace=true tcomm=0.5" -o /dev/null > %t.json
// RUN: %python -c "import json, sys; t = json.load(open(sys.argv[1]))['traceEvents']; x = [e for e in t if e['ph'] == 'X']; names = sorted(e['args']['name'] for e in t if e['name'] == 'thread_name'); print(len(x), sorted({e['tid'] for e in x}), names, x[0]['name'], x[0]['dur'], all(e['name'][0] in 'FB' for e in x))" %t.json | FileCheck %s
// CHECK: 32 [0, 1] ['pp rank 0', 'pp rank 1'] F0.0 1000 True

// Message latency is on the critical path: P = 2, m = 1, tcomm = 0.5: F0.0 runs 0-1, its
// activation arrives at 1.5, F1.0 runs 1.5-2.5, B1.0 2.5-4.5, the gradient arrives at 5, B0.0
// runs 5-7: makespan 7 for 3 of compute, bubble 4 / 3.
// RUN: megac-opt %t/pp2-vpp1-m1-1f1b.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule="tcomm=0.5" -o /dev/null | FileCheck %s --check-prefix=LATENCY
// LATENCY: bubble: 1.33333 (makespan 7, compute 3 per rank; tf 1, tb 2, tcomm 0.5)

//--- pp2-vpp2-m4-interleaved.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 4, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "interleaved">}

//--- pp2-vpp1-m1-1f1b.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 1, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}
