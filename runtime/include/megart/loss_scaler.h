// Loss scaling for fp16 training, with Megatron-LM's semantics (ConstantGradScaler,
// DynamicGradScaler). The backward pass starts from loss x scale so that small gradients do not
// flush to zero in fp16; the optimizer multiplies the gradients by 1/scale before the norm and
// skips the step when any is inf or NaN. bf16 has fp32's exponent range and needs none.
#pragma once

#include "megart/train_flags.h"

#include <cstdint>
#include <memory>

namespace megart {

// What a checkpoint keeps of a scaler, so a resumed run scales exactly as an uninterrupted one.
struct LossScalerState {
  double scale = 1;
  int64_t growth_tracker = 0;     // dynamic only: finite iterations since the last change
  int64_t hysteresis_tracker = 0; // dynamic only: non-finite iterations left before a back-off
};

class LossScaler {
public:
  virtual ~LossScaler() = default;
  // The scale the next iteration's backward pass uses.
  double scale() const { return scale_; }
  // After each iteration: whether all of its gradients were finite (the step was taken).
  virtual void update(bool finite) = 0;
  virtual LossScalerState state() const { return {scale_, 0, 0}; }
  // Continues from a saved state. Throws megart::Error when the state cannot come from this
  // scaler's config (a scale that is not finite and positive, or below the minimum).
  virtual void restore(const LossScalerState &state);

protected:
  explicit LossScaler(double scale) : scale_(scale) {}
  double scale_;
};

// --loss-scale S: the scale never changes; a non-finite iteration is only skipped.
class StaticLossScaler final : public LossScaler {
public:
  explicit StaticLossScaler(double scale);
  void update(bool) override {}
};

struct DynamicLossScaleConfig {
  double initial_scale = 4294967296.0; // 2^32
  double min_scale = 1;
  int64_t window = 1000;   // consecutive finite iterations before the scale grows
  int64_t hysteresis = 2;  // non-finite iterations (since the last growth) before it backs off
  double growth_factor = 2;
  double backoff_factor = 0.5;
};

// Megatron's DynamicGradScaler:
//  - a non-finite iteration resets the growth count and takes one from the hysteresis budget;
//    once the budget is spent (<= 0) the scale backs off to max(scale x backoff, min_scale), and
//    keeps backing off at every further non-finite iteration: only a growth refills the budget;
//  - `window` consecutive finite iterations grow the scale by growth_factor and refill the
//    hysteresis budget.
class DynamicLossScaler final : public LossScaler {
public:
  // Throws megart::Error for a config Megatron would assert on (min_scale <= 0 or above the
  // initial scale, window or hysteresis < 1, growth <= 1, backoff outside (0, 1)).
  explicit DynamicLossScaler(const DynamicLossScaleConfig &config);
  void update(bool finite) override;
  LossScalerState state() const override { return {scale_, growth_tracker_, hysteresis_tracker_}; }
  void restore(const LossScalerState &state) override;

  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t hysteresis_tracker() const { return hysteresis_tracker_; }

private:
  DynamicLossScaleConfig config_;
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_tracker_;
};

// The scaler the flags ask for: none (null) without --fp16, static with --fp16 --loss-scale S,
// dynamic with --fp16 alone. The flags must have passed resolve_train_flags.
std::unique_ptr<LossScaler> make_loss_scaler(const TrainFlags &flags);

} // namespace megart
