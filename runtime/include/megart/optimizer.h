// The optimizer pieces of a training step: AdamW (bit-for-bit torch.optim.AdamW's
// single-tensor path), global gradient-norm clipping and Megatron's learning-rate schedule.
// Which parameters get weight decay is the caller's decision (Megatron: none for biases and
// norm weights, i.e. 1-D tensors): pass weight_decay = 0 for those.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace megart {

// Hyperparameters are doubles on purpose: torch keeps them as Python floats and derives the
// per-step factors in double before rounding each to float32, so 0.9 must stay 0.9, not 0.9f.
struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01; // Megatron's default (torch's too)
};

// The float32 factors one AdamW step applies elementwise, each rounded from double exactly
// where torch rounds it. Computed once per step and shared by every tensor (and by device
// kernels, so CPU and GPU apply identical numbers).
struct AdamWScalars {
  float decay_factor;          // 1 - lr * weight_decay
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt; // sqrt(1 - beta2^step)
  float eps;
  float neg_step_size;         // -lr / (1 - beta1^step)
};

// `step` is 1-based (the value torch's state['step'] has during the update).
AdamWScalars adamw_scalars(double lr, const AdamWConfig &config, int64_t step);

// One update of n elements in place, with precomputed factors.
void adamw_update(const AdamWScalars &s, float *param, const float *grad, float *exp_avg,
                  float *exp_avg_sq, int64_t n);

// Convenience: adamw_scalars + adamw_update.
void adamw_step(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                int64_t step);

// Sum of the squares of all gradients together, accumulated in double. The sum is split into
// fixed-size chunks and added in a fixed order, so the result does not depend on the thread
// count.
double grad_sum_of_squares(const std::vector<std::pair<const float *, int64_t>> &grads);

// L2 norm of all gradients together: sqrt(grad_sum_of_squares).
double global_grad_norm(const std::vector<std::pair<const float *, int64_t>> &grads);

// Multiplies every gradient by coeff (the clipping step once the coefficient is known).
void scale_grads(const std::vector<std::pair<float *, int64_t>> &grads, float coeff);

// max_norm / (total_norm + 1e-6), as torch.nn.utils.clip_grad_norm_ and Megatron compute it.
// Scale the gradients by it only when it is < 1. max_norm <= 0 means clipping is off (returns 1).
// A non-finite norm gives 0 or NaN: check std::isfinite(total_norm) and skip the step instead.
float clip_coefficient(double total_norm, float max_norm);

// Norm, coefficient and scaling together; returns the norm before clipping (what Megatron logs).
// A non-finite norm is returned without touching the gradients.
double clip_grad_norm(const std::vector<std::pair<float *, int64_t>> &grads, float max_norm);

// Megatron's OptimizerParamScheduler for the learning rate. Megatron counts its steps in samples
// (the scheduler steps by the global batch each iteration); so does lr_at, so the doubles agree.
struct LrSchedule {
  std::string style = "constant"; // constant | linear | cosine | inverse-square-root | WSD
  double max_lr = 0;
  double min_lr = 0;
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0; // Megatron's --lr-decay-iters (defaults to --train-iters)
  // --lr-warmup-fraction: warmup = fraction x the decay (in place of warmup_iters); < 0: not given.
  double warmup_fraction = -1;
  double init_lr = 0;                    // --lr-warmup-init: where warmup starts
  std::string wsd_style = "exponential"; // --lr-wsd-decay-style: WSD's anneal
  int64_t wsd_decay_iters = 0;           // --lr-wsd-decay-iters: WSD's anneal, the last of the decay
  int64_t samples_per_iteration = 1;     // the global batch size

  // Throws naming the bad field: unknown style, negative or inverted rates or iterations.
  void validate() const;
  // The rate after `num_steps` scheduler steps (iterations). Megatron steps the scheduler after
  // each iteration, so training iteration k (1-based) uses lr_at(k - 1): see lr_for_iteration.
  double lr_at(int64_t num_steps) const;
  double lr_for_iteration(int64_t iteration) const { return lr_at(iteration - 1); }
};

} // namespace megart
