#include "megart/loss_scaler.h"

#include "megart/error.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace megart {

StaticLossScaler::StaticLossScaler(double scale) : LossScaler(scale) {
  if (!(std::isfinite(scale) && scale > 0))
    throw Error("static loss scale " + std::to_string(scale) + ": it must be finite and > 0");
}

DynamicLossScaler::DynamicLossScaler(const DynamicLossScaleConfig &c)
    : LossScaler(c.initial_scale), config_(c), hysteresis_tracker_(c.hysteresis) {
  const bool ok = std::isfinite(c.initial_scale) && std::isfinite(c.min_scale) && c.min_scale > 0 &&
                  c.min_scale <= c.initial_scale && c.window >= 1 && c.hysteresis >= 1 &&
                  c.growth_factor > 1 && c.backoff_factor > 0 && c.backoff_factor < 1;
  if (!ok)
    throw Error("dynamic loss scaler: invalid config (initial " + std::to_string(c.initial_scale) +
                ", min " + std::to_string(c.min_scale) + ", window " + std::to_string(c.window) +
                ", hysteresis " + std::to_string(c.hysteresis) + ")");
}

void LossScaler::restore(const LossScalerState &state) {
  if (!(std::isfinite(state.scale) && state.scale > 0))
    throw Error("loss scaler state: scale " + std::to_string(state.scale) +
                " is not finite and positive");
  scale_ = state.scale;
}

void DynamicLossScaler::restore(const LossScalerState &state) {
  if (state.scale < config_.min_scale || state.growth_tracker < 0 ||
      state.growth_tracker >= config_.window || state.hysteresis_tracker > config_.hysteresis)
    throw Error("loss scaler state (scale " + std::to_string(state.scale) + ", growth tracker " +
                std::to_string(state.growth_tracker) + ", hysteresis tracker " +
                std::to_string(state.hysteresis_tracker) + ") does not fit the dynamic scaler's "
                "config (min scale " + std::to_string(config_.min_scale) + ", window " +
                std::to_string(config_.window) + ", hysteresis " +
                std::to_string(config_.hysteresis) + ")");
  LossScaler::restore(state);
  growth_tracker_ = state.growth_tracker;
  hysteresis_tracker_ = state.hysteresis_tracker;
}

void DynamicLossScaler::update(bool finite) {
  if (!finite) {
    growth_tracker_ = 0;
    // Not refilled here: after a back-off, the next overflow backs off again at once (an
    // overflow right after a back-off means the scale is still too high).
    hysteresis_tracker_ -= 1;
    if (hysteresis_tracker_ <= 0)
      scale_ = std::max(scale_ * config_.backoff_factor, config_.min_scale);
    return;
  }
  growth_tracker_ += 1;
  if (growth_tracker_ == config_.window) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = config_.hysteresis;
    scale_ *= config_.growth_factor;
  }
}

std::unique_ptr<LossScaler> make_loss_scaler(const TrainFlags &f) {
  if (!f.fp16)
    return nullptr;
  if (f.loss_scale > 0)
    return std::make_unique<StaticLossScaler>(f.loss_scale);
  DynamicLossScaleConfig c;
  c.initial_scale = f.initial_loss_scale;
  c.min_scale = f.min_loss_scale;
  c.window = f.loss_scale_window;
  c.hysteresis = f.hysteresis;
  return std::make_unique<DynamicLossScaler>(c);
}

} // namespace megart
