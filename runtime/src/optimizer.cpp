#include "megart/optimizer.h"

#include "megart/error.h"

#include <algorithm>
#include <cmath>

// Keep a*b + c as two roundings even when built with -march=native (FMA): the update must match
// torch's unfused float32 arithmetic whatever flags the runtime is compiled with.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace megart {

// ---------------------------------------------------------------------------------------------
// AdamW
//
// torch 1.13 _single_tensor_adamw (torch/optim/adamw.py), amsgrad=False, maximize=False:
//   param.mul_(1 - lr * weight_decay)
//   exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
//   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//   bias_correction1 = 1 - beta1 ** step;  bias_correction2 = 1 - beta2 ** step
//   step_size = lr / bias_correction1;      bias_correction2_sqrt = math.sqrt(bias_correction2)
//   denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//   param.addcdiv_(exp_avg, denom, value=-step_size)
// Every scalar above is a Python float (double); each is rounded to float32 once, when the
// tensor op receives it, and the tensor arithmetic is float32. adamw_scalars does the double
// part, adamw_update the float32 part in the same operation order (addcmul: value*g*g, then
// add; addcdiv: value*m/denom, then add). Newer torch uses exp_avg.lerp_(grad, 1 - beta1),
// which rounds differently; 1.13 is the reference here.
// One caveat: on AVX2/AVX-512 machines torch's vectorised add_(grad, alpha) uses a fused
// multiply-add for all but the tail elements, so torch itself differs from its scalar path by
// up to 1 ulp in exp_avg. We use the unfused form (torch with ATEN_CPU_CAPABILITY=default).

AdamWScalars adamw_scalars(double lr, const AdamWConfig &c, int64_t step) {
  if (step < 1)
    throw Error("AdamW step is " + std::to_string(step) + "; steps are counted from 1");
  const double bias_correction1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  const double step_size = lr / bias_correction1;
  AdamWScalars s;
  s.decay_factor = static_cast<float>(1 - lr * c.weight_decay);
  s.beta1 = static_cast<float>(c.beta1);
  s.one_minus_beta1 = static_cast<float>(1 - c.beta1);
  s.beta2 = static_cast<float>(c.beta2);
  s.one_minus_beta2 = static_cast<float>(1 - c.beta2);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.eps = static_cast<float>(c.eps);
  s.neg_step_size = static_cast<float>(-step_size);
  return s;
}

void adamw_update(const AdamWScalars &s, float *param, const float *grad, float *exp_avg,
                  float *exp_avg_sq, int64_t n) {
  // Elementwise and independent, so threading cannot change the result.
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    float p = param[i] * s.decay_factor;
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * g;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    p = p + s.neg_step_size * m / denom;
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

void adamw_step(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                int64_t step) {
  AdamWConfig c{beta1, beta2, eps, weight_decay};
  adamw_update(adamw_scalars(lr, c, step), param, grad, exp_avg, exp_avg_sq, n);
}

// ---------------------------------------------------------------------------------------------
// Gradient clipping

namespace {
constexpr int64_t kNormChunk = 1 << 16;
} // namespace

double grad_sum_of_squares(const std::vector<std::pair<const float *, int64_t>> &grads) {
  double total = 0;
  for (const auto &[data, n] : grads) {
    const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
    std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t end = std::min(n, (c + 1) * kNormChunk);
      double sum = 0;
      for (int64_t i = c * kNormChunk; i < end; ++i)
        sum += static_cast<double>(data[i]) * data[i];
      partial[c] = sum;
    }
    for (double p : partial) // fixed order: same result for any thread count
      total += p;
  }
  return total;
}

double global_grad_norm(const std::vector<std::pair<const float *, int64_t>> &grads) {
  return std::sqrt(grad_sum_of_squares(grads));
}

void scale_grads(const std::vector<std::pair<float *, int64_t>> &grads, float coeff) {
  for (const auto &[data, n] : grads) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      data[i] *= coeff;
  }
}

float clip_coefficient(double total_norm, float max_norm) {
  if (max_norm <= 0)
    return 1.0f;
  return static_cast<float>(max_norm / (total_norm + 1e-6));
}

double clip_grad_norm(const std::vector<std::pair<float *, int64_t>> &grads, float max_norm) {
  std::vector<std::pair<const float *, int64_t>> view(grads.begin(), grads.end());
  const double norm = global_grad_norm(view);
  // inf would scale everything to 0 and NaN poison it; the caller skips such a step anyway.
  if (!std::isfinite(norm))
    return norm;
  const float coeff = clip_coefficient(norm, max_norm);
  if (coeff < 1.0f)
    scale_grads(grads, coeff);
  return norm;
}

// ---------------------------------------------------------------------------------------------
// Learning-rate schedule (Megatron's OptimizerParamScheduler.get_lr)

void LrSchedule::validate() const {
  if (style != "constant" && style != "linear" && style != "cosine" && style != "inverse-square-root" &&
      style != "WSD")
    throw Error("lr decay style '" + style + "' is not supported; use one of: constant, linear, cosine, "
                "inverse-square-root, WSD");
  if (!(min_lr >= 0))
    throw Error("min_lr is " + std::to_string(min_lr) + "; it must be >= 0");
  if (!(max_lr >= min_lr))
    throw Error("min_lr (" + std::to_string(min_lr) + ") is greater than max_lr (" +
                std::to_string(max_lr) + "); lower min_lr or raise max_lr");
  if (!(init_lr >= 0 && init_lr <= max_lr))
    throw Error("the warmup's initial lr is " + std::to_string(init_lr) + "; it must be between 0 and max_lr (" +
                std::to_string(max_lr) + ")");
  if (warmup_iters < 0)
    throw Error("lr warmup iters is " + std::to_string(warmup_iters) + "; it must be >= 0");
  if (warmup_fraction >= 0 && warmup_iters > 0)
    throw Error("lr warmup is given both as a fraction and as iterations; give one");
  if (!(warmup_fraction < 1))
    throw Error("lr warmup fraction is " + std::to_string(warmup_fraction) + "; it must be below 1");
  if (samples_per_iteration < 1)
    throw Error("the schedule's samples per iteration is " + std::to_string(samples_per_iteration) +
                "; it must be >= 1");
  if (style != "constant") {
    // The decay span (decay - warmup) divides the progress; Megatron asserts the same.
    if (decay_iters <= 0)
      throw Error("lr decay iters is " + std::to_string(decay_iters) + " with style '" + style +
                  "'; it must be > 0 (it defaults to the number of training iterations)");
    if (warmup_iters > decay_iters)
      throw Error("lr warmup iters (" + std::to_string(warmup_iters) +
                  ") is greater than lr decay iters (" + std::to_string(decay_iters) +
                  "); warmup must end before decay does");
  }
  if (style == "WSD" && (wsd_decay_iters < 1 || wsd_decay_iters > decay_iters))
    throw Error("WSD's anneal is " + std::to_string(wsd_decay_iters) + " iterations; it must be 1 to the decay's " +
                std::to_string(decay_iters) + " (--lr-wsd-decay-iters)");
  if (wsd_style != "linear" && wsd_style != "cosine" && wsd_style != "exponential")
    throw Error("WSD decay style '" + wsd_style + "' is not supported; use one of: linear, cosine, exponential");
}

double LrSchedule::lr_at(int64_t iterations) const {
  validate();
  if (iterations < 0)
    throw Error("lr schedule asked for step " + std::to_string(iterations) + "; steps start at 0");
  // Megatron's units (samples) and its operation order, so the doubles agree.
  const int64_t g = samples_per_iteration;
  const int64_t num_steps = iterations * g, decay_steps = decay_iters * g;
  const double warmup_steps =
      warmup_fraction >= 0 ? warmup_fraction * static_cast<double>(decay_steps) : static_cast<double>(warmup_iters * g);
  if (warmup_steps > 0 && static_cast<double>(num_steps) <= warmup_steps)
    return init_lr + (max_lr - init_lr) * static_cast<double>(num_steps) / warmup_steps;
  if (style == "constant")
    return max_lr;
  if (num_steps > decay_steps)
    return min_lr;
  if (style == "inverse-square-root") {
    const double warmup = std::max(warmup_steps, 1.0);
    const double steps = static_cast<double>(std::max<int64_t>(num_steps, 1));
    return std::max(min_lr, max_lr * std::pow(warmup, 0.5) / std::pow(steps, 0.5)); // Python: x ** 0.5
  }
  const double ratio = (static_cast<double>(num_steps) - warmup_steps) / (static_cast<double>(decay_steps) - warmup_steps);
  double coeff = 0;
  if (style == "linear") {
    coeff = 1.0 - ratio;
  } else if (style == "cosine") {
    coeff = 0.5 * (std::cos(M_PI * ratio) + 1.0);
  } else { // WSD: stable at max_lr, then the anneal over its last wsd_decay_iters
    const int64_t wsd_steps = wsd_decay_iters * g, anneal_start = decay_steps - wsd_steps;
    if (num_steps <= anneal_start) {
      coeff = 1.0;
    } else {
      const double wsd_ratio = static_cast<double>(num_steps - anneal_start) / static_cast<double>(wsd_steps);
      coeff = wsd_style == "linear"   ? 1.0 - wsd_ratio
              : wsd_style == "cosine" ? 0.5 * (std::cos(M_PI * wsd_ratio) + 1.0)
                                      : 2.0 * std::pow(0.5, wsd_ratio) - 1.0;
    }
  }
  return min_lr + coeff * (max_lr - min_lr);
}

} // namespace megart
