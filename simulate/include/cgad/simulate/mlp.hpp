#pragma once
// The tanh network of the teacher-student objective: `depth` hidden layers of `hidden` units,
// h_1 = tanh(W_1·x + b_1), h_l = tanh(W_l·h_{l−1} + b_l), y = w_out·h_depth + b_out, with its loss
// ½·mean (y − target)² over a batch and that loss's gradient by backpropagation. Templated on the scalar:
// workers run it in float, the evaluation and the finite-difference test in double.
//
// `round` is applied to the output of every operation a bf16 training run stores in bf16 (objectives.hpp): each
// layer's output after its fp32-accumulated dot products and bias (a matmul's epilogue), tanh's output, the loss's
// gradient with respect to y, each backward matmul's output, tanh's backward, and each parameter's gradient after
// its fp32 accumulation over the batch. The identity (NoRounding) changes no operation.
//
// Parameter layout: one flat vector holding the tensors in this order — for each layer l = 1..depth, W_l
// row-major (hidden × fan_in, fan_in = inputs for l = 1 and hidden after) and b_l (hidden); then the readout
// w_out (hidden) and b_out (1): PyTorch's Linear(fan_in, hidden).weight and .bias per layer, then
// Linear(hidden, 1)'s. The outer optimizer gets them as separate tensors (tensor_sizes), so that q8 state
// quantizes each separately and a small one keeps fp32 state under min_q8_size, as bitsandbytes treats a model's
// parameter tensors. Depth 1 is the two-layer network W1, b1, w2, b2, with the same operations in the same order
// for every value (each sum is accumulated in the same element order), so its bits do not depend on `depth`
// existing.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cgad::simulate {

struct MlpShape {
  std::size_t inputs = 16;
  std::size_t hidden = 32;
  std::size_t depth = 1;  // hidden layers

  std::size_t fan_in(std::size_t layer) const { return layer == 0 ? inputs : hidden; }
  // First element of layer `layer`'s weight matrix and bias (layer counts from 0), of the readout and its bias.
  std::size_t weight(std::size_t layer) const {
    return layer == 0 ? 0 : hidden * (inputs + 1) + (layer - 1) * hidden * (hidden + 1);
  }
  std::size_t bias(std::size_t layer) const { return weight(layer) + hidden * fan_in(layer); }
  std::size_t readout() const { return weight(depth); }
  std::size_t readout_bias() const { return readout() + hidden; }
  std::size_t parameters() const { return readout_bias() + 1; }
  // The tensors' sizes, in the layout's order: W_1, b_1, ..., W_depth, b_depth, w_out, b_out.
  std::vector<std::size_t> tensor_sizes() const {
    std::vector<std::size_t> sizes;
    for (std::size_t l = 0; l < depth; ++l) {
      sizes.push_back(hidden * fan_in(l));
      sizes.push_back(hidden);
    }
    sizes.push_back(hidden);
    sizes.push_back(1);
    return sizes;
  }
  // Their names, for per-tensor reports: W1, b1, ..., W<depth>, b<depth>, then the readout as layer depth + 1
  // (depth 1: W1, b1, w2, b2).
  std::vector<std::string> tensor_names() const {
    // Each name built by append: GCC 12 warns (-Wrestrict, a false positive) on "W" + std::to_string(l).
    const auto name = [](char letter, std::size_t layer) {
      return std::string(1, letter).append(std::to_string(layer));
    };
    std::vector<std::string> names;
    for (std::size_t l = 1; l <= depth; ++l) {
      names.push_back(name('W', l));
      names.push_back(name('b', l));
    }
    names.push_back(name('w', depth + 1));
    names.push_back(name('b', depth + 1));
    return names;
  }
};

struct NoRounding {
  template <class T>
  T operator()(T x) const {
    return x;
  }
};

// The network's output for one input x (shape.inputs values); `hidden` receives every layer's tanh outputs,
// layer l at [l·shape.hidden, (l + 1)·shape.hidden).
template <class T, class Round = NoRounding>
T mlp_output(const MlpShape& shape, std::span<const T> params, const T* x, std::vector<T>& hidden, Round round = {}) {
  hidden.resize(shape.depth * shape.hidden);
  for (std::size_t l = 0; l < shape.depth; ++l) {
    const std::size_t fan_in = shape.fan_in(l);
    const T* in = l == 0 ? x : hidden.data() + (l - 1) * shape.hidden;
    T* out = hidden.data() + l * shape.hidden;
    for (std::size_t j = 0; j < shape.hidden; ++j) {
      const T* row = params.data() + shape.weight(l) + j * fan_in;
      T a = params[shape.bias(l) + j];
      for (std::size_t i = 0; i < fan_in; ++i) a += row[i] * in[i];
      out[j] = round(std::tanh(round(a)));
    }
  }
  const T* last = hidden.data() + (shape.depth - 1) * shape.hidden;
  T y = params[shape.readout_bias()];
  for (std::size_t j = 0; j < shape.hidden; ++j) y += params[shape.readout() + j] * last[j];
  return round(y);
}

// ½·mean over the batch of (output − target)². `inputs` holds targets.size() rows of shape.inputs values.
// When `grad` is not empty it receives the gradient with respect to the parameters (overwritten). `hidden`
// is scratch (the activations of one sample, then the back-propagated errors of one layer).
template <class T, class Round = NoRounding>
T mlp_loss(const MlpShape& shape, std::span<const T> params, std::span<const T> inputs, std::span<const T> targets,
           std::span<T> grad, std::vector<T>& hidden, Round round = {}) {
  const std::size_t batch = targets.size();
  const T scale = T(1) / T(batch);
  for (T& g : grad) g = T(0);
  T loss(0);
  std::vector<T> da(grad.empty() ? 0 : 2 * shape.hidden);  // ∂loss/∂(pre-activation) of a layer and the one below
  for (std::size_t s = 0; s < batch; ++s) {
    const T* x = inputs.data() + s * shape.inputs;
    const T error = mlp_output(shape, params, x, hidden, round) - targets[s];
    loss += error * error;
    if (grad.empty()) continue;
    const T dy = round(error * scale);  // ∂loss/∂y for this sample
    grad[shape.readout_bias()] += dy;
    T* upper = da.data();
    T* lower = da.data() + shape.hidden;
    const T* last = hidden.data() + (shape.depth - 1) * shape.hidden;
    for (std::size_t j = 0; j < shape.hidden; ++j) {
      const T h = last[j];
      grad[shape.readout() + j] += dy * h;
      upper[j] = round(round(dy * params[shape.readout() + j]) * (T(1) - h * h));  // tanh' = 1 − tanh²
    }
    for (std::size_t l = shape.depth; l-- > 0;) {
      const std::size_t fan_in = shape.fan_in(l);
      const T* in = l == 0 ? x : hidden.data() + (l - 1) * shape.hidden;
      for (std::size_t j = 0; j < shape.hidden; ++j) {
        grad[shape.bias(l) + j] += upper[j];
        T* row = grad.data() + shape.weight(l) + j * fan_in;
        for (std::size_t i = 0; i < fan_in; ++i) row[i] += upper[j] * in[i];
      }
      if (l == 0) break;
      // The backward matmul W_lᵀ·upper, rounded once per output, then tanh's backward through layer l − 1.
      for (std::size_t i = 0; i < shape.hidden; ++i) {
        T back(0);
        for (std::size_t j = 0; j < shape.hidden; ++j) back += params[shape.weight(l) + j * fan_in + i] * upper[j];
        const T h = in[i];
        lower[i] = round(round(back) * (T(1) - h * h));
      }
      std::swap(upper, lower);
    }
  }
  for (T& g : grad) g = round(g);
  return loss * scale / T(2);
}

}  // namespace cgad::simulate
