// GELU (tanh and erf forms) and SwiGLU, with their derivatives written out by hand.
#include "megac/Eval/Kernels.h"

#include <cmath>

namespace megac::eval {

namespace {
constexpr double kPi = 3.14159265358979323846;
constexpr double kGeluCubic = 0.044715;

double geluValue(double x, bool tanhForm) {
  if (tanhForm)
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + kGeluCubic * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double geluDerivative(double x, bool tanhForm) {
  if (tanhForm) {
    double c = std::sqrt(2.0 / kPi);
    double t = std::tanh(c * (x + kGeluCubic * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * kGeluCubic * x * x);
  }
  // d/dx [x Phi(x)] = Phi(x) + x phi(x)
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
} // namespace

Tensor gelu(const Tensor &x, bool tanhApproximation) {
  Tensor y = Tensor::zeros(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data[i] = geluValue(x.data[i], tanhApproximation);
  return y;
}

Tensor geluGrad(const Tensor &dy, const Tensor &x, bool tanhApproximation) {
  Tensor dx = Tensor::zeros(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    dx.data[i] = dy.data[i] * geluDerivative(x.data[i], tanhApproximation);
  return dx;
}

Tensor swiglu(const Tensor &gate, const Tensor &up) {
  Tensor y = Tensor::zeros(gate.shape);
  for (int64_t i = 0; i < gate.numel(); ++i) {
    double g = gate.data[i];
    y.data[i] = g * sigmoid(g) * up.data[i];
  }
  return y;
}

SwigluGrads swigluGrad(const Tensor &dy, const Tensor &gate, const Tensor &up) {
  SwigluGrads d{Tensor::zeros(gate.shape), Tensor::zeros(up.shape)};
  for (int64_t i = 0; i < gate.numel(); ++i) {
    double g = gate.data[i], s = sigmoid(g);
    // silu'(g) = s + g s (1 - s)
    d.gate.data[i] = dy.data[i] * up.data[i] * (s + g * s * (1.0 - s));
    d.up.data[i] = dy.data[i] * g * s;
  }
  return d;
}

} // namespace megac::eval
