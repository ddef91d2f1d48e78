// Hand-written schedules the pipe.schedule verifier rejects, one per case, each with a message
// naming the rank(s), the step (index in the rank's list) and the action; notes point at the ops.
// RUN: megac-opt %s -split-input-file -verify-diagnostics

// Rank 1 runs microbatch 1 first, so its first receive meets rank 0's first send, which
// carries microbatch 0.
// expected-error @+1 {{pipeline schedule: rank 1 step 0 (RecvActivation chunk 1 microbatch 1 from rank 0) does not match rank 0's 1st SendActivation to rank 1 (chunk 0 microbatch 0 at step 1): messages between two ranks are matched in order}}
pipe.schedule @swapped_ranks kind "1f1b" stages 2 virtual_stages 1 microbatches 2 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    // expected-note @+1 {{rank 0 step 1}}
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
  pipe.rank 1 {
    // expected-note @+1 {{rank 1 step 0}}
    pipe.recv activation chunk 1 microbatch 1 from 0
    pipe.forward chunk 1 microbatch 1
    pipe.backward chunk 1 microbatch 1
    pipe.send grad chunk 1 microbatch 1 to 0
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// Two receives swapped on rank 0: the gradient of microbatch 1 is expected first, but rank 1
// sends microbatch 0's first.
// expected-error @+1 {{pipeline schedule: rank 0 step 4 (RecvGrad chunk 0 microbatch 1 from rank 1) does not match rank 1's 1st SendGrad to rank 0 (chunk 1 microbatch 0 at step 3): messages between two ranks are matched in order}}
pipe.schedule @swapped_receives kind "1f1b" stages 2 virtual_stages 1 microbatches 2 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.forward chunk 0 microbatch 1
    pipe.send activation chunk 0 microbatch 1 to 1
    // expected-note @+1 {{rank 0 step 4}}
    pipe.recv grad chunk 0 microbatch 1 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 1
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    // expected-note @+1 {{rank 1 step 3}}
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.recv activation chunk 1 microbatch 1 from 0
    pipe.forward chunk 1 microbatch 1
    pipe.backward chunk 1 microbatch 1
    pipe.send grad chunk 1 microbatch 1 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// Rank 0 waits for the gradient before sending the activation rank 1 needs to compute it.
// expected-error @+1 {{pipeline schedule deadlocks: rank 0 waits at step 1 (RecvGrad chunk 0 microbatch 0 from rank 1); rank 1 waits at step 0 (RecvActivation chunk 1 microbatch 0 from rank 0)}}
pipe.schedule @deadlock kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    // expected-note @+1 {{rank 0 step 1}}
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    // expected-note @+1 {{rank 1 step 0}}
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// expected-error @+1 {{pipeline schedule: rank 1 has no Backward for chunk 1 microbatch 1 (every chunk of a rank runs forward and backward once per microbatch)}}
pipe.schedule @missing_backward kind "1f1b" stages 2 virtual_stages 1 microbatches 2 {
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
  // expected-note @+1 {{rank 1}}
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.recv activation chunk 1 microbatch 1 from 0
    pipe.forward chunk 1 microbatch 1
    pipe.send grad chunk 1 microbatch 1 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// GPipe's order under kind "1f1b": rank 0 stashes 3 microbatches, 1F1B promises min(P - 0, m) = 2.
// expected-error @+1 {{pipeline schedule: rank 0 stashes up to 3 (chunk, microbatch) activations (forward done, backward not yet; over the bound from step 4), more than the 2 that 1f1b promises for this rank: min(P - rank, m)}}
pipe.schedule @stash_over_bound kind "1f1b" stages 2 virtual_stages 1 microbatches 3 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.forward chunk 0 microbatch 1
    pipe.send activation chunk 0 microbatch 1 to 1
    // expected-note @+1 {{rank 0 step 4}}
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

// expected-error @+1 {{pipeline schedule: rank 1 step 1 (Backward chunk 1 microbatch 0) comes before Forward chunk 1 microbatch 0 at step 2 (a backward needs its forward)}}
pipe.schedule @backward_first kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    // expected-note @+1 {{rank 1 step 1}}
    pipe.backward chunk 1 microbatch 0
    // expected-note @+1 {{rank 1 step 2}}
    pipe.forward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// expected-error @+1 {{pipeline schedule: rank 1 step 0 (Forward chunk 1 microbatch 0) comes before RecvActivation chunk 1 microbatch 0 from rank 0 at step 1 (its input)}}
pipe.schedule @forward_before_input kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    // expected-note @+1 {{rank 1 step 0}}
    pipe.forward chunk 1 microbatch 0
    // expected-note @+1 {{rank 1 step 1}}
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// Rank 1 forgot to receive microbatch 1's activation, so rank 0's second send is never taken.
// expected-error @+1 {{pipeline schedule: rank 0 step 3 (SendActivation chunk 0 microbatch 1 to rank 1) is never received: rank 0 sends 2 SendActivation to rank 1, which has only 1 RecvActivation from rank 0}}
pipe.schedule @unreceived kind "1f1b" stages 2 virtual_stages 1 microbatches 2 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.forward chunk 0 microbatch 1
    // expected-note @+1 {{rank 0 step 3}}
    pipe.send activation chunk 0 microbatch 1 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.recv grad chunk 0 microbatch 1 from 1
    pipe.backward chunk 0 microbatch 1
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.forward chunk 1 microbatch 1
    pipe.backward chunk 1 microbatch 1
    pipe.send grad chunk 1 microbatch 1 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// expected-error @+1 {{pipeline schedule: rank 0 step 1 (SendActivation chunk 0 microbatch 0 to rank 0): chunk 1 runs on rank 1, so the peer must be rank 1}}
pipe.schedule @wrong_peer kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    // expected-note @+1 {{rank 0 step 1}}
    pipe.send activation chunk 0 microbatch 0 to 0
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// expected-error @+1 {{pipeline schedule: rank 0 step 0 (Forward chunk 1 microbatch 0): chunk 1 runs on rank 1 (chunk c runs on rank c % P)}}
pipe.schedule @wrong_rank kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    // expected-note @+1 {{rank 0 step 0}}
    pipe.forward chunk 1 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// expected-error @+1 {{pipeline schedule: rank 0 step 1 (Forward chunk 0 microbatch 0) repeats step 0}}
pipe.schedule @repeated kind "gpipe" stages 1 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    // expected-note @+1 {{rank 0 step 0}}
    pipe.forward chunk 0 microbatch 0
    // expected-note @+1 {{rank 0 step 1}}
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// expected-error @+1 {{'pipe.schedule' op has 1 pipe.rank ops, but stages is 2: give one per pipeline rank}}
pipe.schedule @missing_rank kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

// expected-error @+1 {{'pipe.schedule' op kind "zero-bubble" is not a schedule kind: use gpipe, 1f1b or interleaved}}
pipe.schedule @unknown_kind kind "zero-bubble" stages 1 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

pipe.schedule @closing_then_compute kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.grad_sync
    // expected-error @+1 {{'pipe.backward' op comes after the rank's closing actions, which run once after every round of the schedule}}
    pipe.backward chunk 0 microbatch 0
    pipe.optimizer_step
  }
}

// -----

pipe.schedule @no_optimizer_step kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  // expected-error @+1 {{'pipe.rank' op has no pipe.optimizer_step where its iteration ends}}
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
  }
}

// -----

pipe.schedule @gather_before_step kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  // expected-error @+1 {{'pipe.rank' op has no pipe.optimizer_step where its iteration ends}}
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.param_gather
    pipe.optimizer_step
    pipe.grad_sync
  }
}

// -----

pipe.schedule @two_grad_syncs kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  // expected-error @+1 {{'pipe.rank' op must close its iteration with one pipe.grad_sync, at most one pipe.tied_sum, then pipe.optimizer_step}}
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

pipe.schedule @no_grad_sync kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  // expected-error @+1 {{'pipe.rank' op must close its iteration with one pipe.grad_sync, at most one pipe.tied_sum, then pipe.optimizer_step}}
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.optimizer_step
  }
}

// -----

// The shards a tied sum adds exist once the sync has finished them.
pipe.schedule @shards_before_sync kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    // expected-error @+1 {{'pipe.tied_sum' op sums gradient shards before pipe.grad_sync, which is what finishes them}}
    pipe.tied_sum grad_shards
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    pipe.tied_sum grad_shards
    pipe.optimizer_step
  }
}

// -----

pipe.schedule @two_tied_sums kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  // expected-error @+1 {{'pipe.rank' op must close its iteration with one pipe.grad_sync, at most one pipe.tied_sum, then pipe.optimizer_step}}
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.tied_sum grads
    pipe.grad_sync
    pipe.tied_sum grads
    pipe.optimizer_step
  }
}

// -----

pipe.schedule @tied_one_stage kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    // expected-error @+1 {{'pipe.tied_sum' op in a one-stage schedule: no other pipeline rank holds a copy of a weight}}
    pipe.tied_sum grads
    pipe.optimizer_step
  }
}

// -----

// The two copies of a tied weight sum in one collective: at the same point, the same gradients.
pipe.schedule @tied_sums_disagree kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.tied_sum grads
    pipe.grad_sync
    pipe.optimizer_step
  }
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    // expected-error @+1 {{'pipe.tied_sum' op differs from another rank's pipe.tied_sum: the copies of a tied weight sum the same gradients at the same point of the iteration}}
    pipe.tied_sum grads
    pipe.optimizer_step
  }
}

// -----

pipe.schedule @gather_on_one_rank kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.send activation chunk 0 microbatch 0 to 1
    pipe.recv grad chunk 0 microbatch 0 from 1
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.optimizer_step
    pipe.param_gather
  }
  // expected-error @+1 {{'pipe.rank' op does not gather its parameters after the step and another rank does: the distributed optimizer covers every stage or none}}
  pipe.rank 1 {
    pipe.recv activation chunk 1 microbatch 0 from 0
    pipe.forward chunk 1 microbatch 0
    pipe.backward chunk 1 microbatch 0
    pipe.send grad chunk 1 microbatch 0 to 0
    pipe.grad_sync
    pipe.optimizer_step
  }
}

// -----

pipe.schedule @bad_tied_grads kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
  pipe.rank 0 {
    pipe.forward chunk 0 microbatch 0
    pipe.backward chunk 0 microbatch 0
    pipe.grad_sync
    pipe.tied_sum
    // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'grads' [grads, grad_shards]}}
    pipe.optimizer_step
  }
}
