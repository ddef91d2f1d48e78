// Plans no schedule exists for: megac-pipeline-schedule fails with the builder's message, which
// names the flag, the value and the fix.
// RUN: not megac-opt %s --megac-pipeline-schedule="pp=4 vpp=2 microbatches=6" 2>&1 | FileCheck %s --check-prefix=NOT-MULTIPLE
// NOT-MULTIPLE: error: pipeline schedule: --pipeline-schedule interleaved needs the number of microbatches (m) to be a multiple of the pipeline size P (--pipeline-model-parallel-size), got m = 6, P = 4; the nearest valid is m = 4 or m = 8 (or use --pipeline-schedule 1f1b)

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=4 vpp=2 microbatches=7" 2>&1 | FileCheck %s --check-prefix=NEAREST-ABOVE
// NEAREST-ABOVE: got m = 7, P = 4; the nearest valid is m = 8 (or use --pipeline-schedule 1f1b)

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=4 vpp=2 microbatches=3" 2>&1 | FileCheck %s --check-prefix=FEWER-THAN-P
// FEWER-THAN-P: got m = 3, P = 4; the nearest valid is m = 4 (or use --pipeline-schedule 1f1b)

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=4 vpp=1 microbatches=8 schedule=interleaved" 2>&1 | FileCheck %s --check-prefix=ONE-CHUNK
// ONE-CHUNK: error: pipeline schedule: --pipeline-schedule interleaved needs more than one chunk per rank, but --vpp is 1; use --pipeline-schedule 1f1b, or give --vpp 2 or more

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=1 vpp=2 microbatches=4 schedule=1f1b" 2>&1 | FileCheck %s --check-prefix=ONE-RANK
// ONE-RANK: error: pipeline schedule: --vpp 2 needs pipeline parallelism, but --pipeline-model-parallel-size is 1 (all chunks would be on one rank); use --vpp 1, or --pipeline-model-parallel-size 2 or more

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=0 microbatches=4" 2>&1 | FileCheck %s --check-prefix=NO-RANKS
// NO-RANKS: error: pipeline schedule: --pipeline-model-parallel-size (P) must be at least 1, got 0; use 1 for no pipeline parallelism

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=2 vpp=0 microbatches=4" 2>&1 | FileCheck %s --check-prefix=NO-CHUNKS
// NO-CHUNKS: error: pipeline schedule: --vpp (virtual stages per rank, V) must be at least 1, got 0; use 1 for one chunk per rank

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=2 microbatches=0" 2>&1 | FileCheck %s --check-prefix=NO-MICROBATCHES
// NO-MICROBATCHES: error: pipeline schedule: the number of microbatches (m) must be at least 1, got 0; m = global batch size / (micro batch size x data parallel size)

// RUN: not megac-opt %s --megac-pipeline-schedule="pp=2 microbatches=4 schedule=zero-bubble" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: megac-pipeline-schedule: schedule "zero-bubble" is not a schedule: use gpipe, 1f1b or interleaved

module {}
