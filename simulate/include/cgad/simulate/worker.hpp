#pragma once
// A DiLoCo worker: H inner steps of SGD or AdamW (float) from the parameters it was handed, with its own
// gradient stream (run seed, worker index) and its own inner-optimizer state, both kept across rounds.
#include "cgad/simulate/normal_stream.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/simulation.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace cgad::simulate {

// SGD: x = x − lr·g. AdamW (Loshchilov & Hutter, decoupled weight decay, PyTorch's form): t = t + 1,
// m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g², x = x·(1 − lr·wd), x = x − lr·(m/(1−β1^t)) / (sqrt(v/(1−β2^t)) + ε),
// the bias corrections computed in double and rounded once to float.
class InnerOptimizer {
 public:
  InnerOptimizer(const InnerConfig& config, std::size_t parameters);
  void step(std::span<float> x, std::span<const float> g);

 private:
  InnerConfig config_;
  std::int64_t t_ = 0;
  std::vector<float> m_, v_;
};

class Worker {
 public:
  Worker(const InnerConfig& config, std::size_t parameters, std::uint64_t run_seed, std::uint32_t index);
  // H inner steps on `objective`, starting from and updating x in place.
  void run(Objective& objective, std::span<float> x);

 private:
  std::int64_t steps_;
  InnerOptimizer optimizer_;
  NormalStream stream_;
  std::vector<float> grad_;
};

}  // namespace cgad::simulate
