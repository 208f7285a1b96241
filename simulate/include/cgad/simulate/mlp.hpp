#pragma once
// The two-layer tanh network of the teacher-student objective, y = w2·tanh(W1·x + b1) + b2, with its loss
// ½·mean (y − target)² over a batch and that loss's gradient by backpropagation. Templated on the scalar:
// workers run it in float, the evaluation and the finite-difference test in double.
//
// `round` is applied to the output of every operation a bf16 training run stores in bf16 (objectives.hpp): each
// layer's output after its fp32-accumulated dot products and bias (a matmul's epilogue), tanh's output, the loss's
// gradient with respect to y, each backward matmul's output, tanh's backward, and each parameter's gradient after
// its fp32 accumulation over the batch. The identity (NoRounding) changes no operation, so fp32 and double runs
// compute exactly what they computed before the hook existed.
//
// Parameter layout: one flat vector holding four tensors in this order, W1 row-major (hidden × inputs), b1
// (hidden), w2 (hidden), b2 (1) — PyTorch's Linear(inputs, hidden).weight and .bias, then Linear(hidden, 1)'s.
// The outer optimizer gets them as four tensors (tensor_sizes), so that q8 state quantizes each separately and
// a small one keeps fp32 state under min_q8_size, as bitsandbytes treats a model's parameter tensors.
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

namespace cgad::simulate {

struct MlpShape {
  std::size_t inputs = 16;
  std::size_t hidden = 32;
  std::size_t parameters() const { return hidden * (inputs + 2) + 1; }
  std::size_t w1() const { return 0; }
  std::size_t b1() const { return hidden * inputs; }
  std::size_t w2() const { return hidden * (inputs + 1); }
  std::size_t b2() const { return hidden * (inputs + 2); }
  // The four tensors' sizes, in the layout's order: they start at w1(), b1(), w2(), b2() and sum to parameters().
  std::vector<std::size_t> tensor_sizes() const { return {hidden * inputs, hidden, hidden, 1}; }
};

struct NoRounding {
  template <class T>
  T operator()(T x) const { return x; }
};

// The network's output for one input x (shape.inputs values); `hidden` receives tanh(W1·x + b1).
template <class T, class Round = NoRounding>
T mlp_output(const MlpShape& shape, std::span<const T> params, const T* x, std::vector<T>& hidden, Round round = {}) {
  hidden.resize(shape.hidden);
  T y = params[shape.b2()];
  for (std::size_t j = 0; j < shape.hidden; ++j) {
    const T* row = params.data() + shape.w1() + j * shape.inputs;
    T a = params[shape.b1() + j];
    for (std::size_t i = 0; i < shape.inputs; ++i) a += row[i] * x[i];
    hidden[j] = round(std::tanh(round(a)));
    y += params[shape.w2() + j] * hidden[j];
  }
  return round(y);
}

// ½·mean over the batch of (output − target)². `inputs` holds targets.size() rows of shape.inputs values.
// When `grad` is not empty it receives the gradient with respect to the parameters (overwritten).
template <class T, class Round = NoRounding>
T mlp_loss(const MlpShape& shape, std::span<const T> params, std::span<const T> inputs, std::span<const T> targets,
           std::span<T> grad, std::vector<T>& hidden, Round round = {}) {
  const std::size_t batch = targets.size();
  const T scale = T(1) / T(batch);
  for (T& g : grad) g = T(0);
  T loss(0);
  for (std::size_t s = 0; s < batch; ++s) {
    const T* x = inputs.data() + s * shape.inputs;
    const T error = mlp_output(shape, params, x, hidden, round) - targets[s];
    loss += error * error;
    if (grad.empty()) continue;
    const T dy = round(error * scale);  // ∂loss/∂y for this sample
    grad[shape.b2()] += dy;
    for (std::size_t j = 0; j < shape.hidden; ++j) {
      const T h = hidden[j];
      grad[shape.w2() + j] += dy * h;
      const T da = round(round(dy * params[shape.w2() + j]) * (T(1) - h * h));  // tanh' = 1 − tanh²
      grad[shape.b1() + j] += da;
      T* row = grad.data() + shape.w1() + j * shape.inputs;
      for (std::size_t i = 0; i < shape.inputs; ++i) row[i] += da * x[i];
    }
  }
  for (T& g : grad) g = round(g);
  return loss * scale / T(2);
}

}  // namespace cgad::simulate
