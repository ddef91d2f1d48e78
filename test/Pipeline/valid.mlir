// Hand-written schedules the verifier accepts.
// RUN: megac-opt %s -split-input-file | FileCheck %s

// GPipe order (rank 0 stashes all three microbatches) is fine when the kind says gpipe; the
// same lists under kind "1f1b" are rejected in invalid.mlir.
// CHECK-LABEL: pipe.schedule @gpipe kind "gpipe"
pipe.schedule @gpipe kind "gpipe" stages 2 virtual_stages 1 microbatches 3 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.forward chunk 0 microbatch 1
    pipe.send activation chunk 0 microbatch 1 to 1
    pipe.forward chunk 0 microbatch 2
    pipe.send activation chunk 0 microbatch 2 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.recv grad chunk 0 microbatch 1 from 1
    pipe.backward chunk 0 microbatch 1
    pipe.recv grad chunk 0 microbatch 2 from 1
    pipe.backward chunk 0 microbatch 2
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.recv activation chunk 1 microbatch 1 from 0
    pipe.forward chunk 1 microbatch 1
    pipe.backward chunk 1 microbatch 1
    pipe.send grad chunk 1 microbatch 1 to 0
    pipe.recv activation chunk 1 microbatch 2 from 0
    pipe.forward chunk 1 microbatch 2
    pipe.backward chunk 1 microbatch 2
    pipe.send grad chunk 1 microbatch 2 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// Receives may come early (here rank 1 takes both activations first) as long as they are in
// the sender's order, and ranks may be listed in any order.
// CHECK-LABEL: pipe.schedule @early kind "1f1b"
pipe.schedule @early kind "1f1b" stages 2 virtual_stages 1 microbatches 2 {
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.recv activation chunk 1 microbatch 1 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.forward chunk 1 microbatch 1
    pipe.backward chunk 1 microbatch 1
    pipe.send grad chunk 1 microbatch 1 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.forward chunk 0 microbatch 1
    pipe.send activation chunk 0 microbatch 1 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.recv grad chunk 0 microbatch 1 from 1
    pipe.backward chunk 0 microbatch 1
    pipe.grad_sync
    pipe.optimizer_step
  }
}
