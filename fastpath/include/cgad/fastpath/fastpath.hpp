#pragma once
// cgad fast path: the production-precision outer step (DESIGN.md §3, §5) — bf16 or fp32 parameters,
// fp32/bf16/q8 optimizer state, nearest or stochastic rounding — on the CPU (this header) and on CUDA
// (cuda_optimizer.hpp), computing the same bits.
//
// Public API, in five lines (everything else in this folder is how it works):
//
//   cgad::fastpath::StepConfig config;                 // optimizer, formats, rounding, seed, hyperparameters
//   config.optimizer = reference::OptimizerKind::cgad;  // cgad, pa-cgad, adam-decay, adam, nesterov, sdm
//   config.params = ParamFormat::bf16; config.state = StateFormat::q8; config.rounding = Rounding::nearest;
//   cgad::fastpath::CpuOptimizer opt(config, n);        // state for n parameters; threads = 0 → all cores
//   CpuOptimizer opt(config, {n0, n1, ...});            // ... or for a sequence of tensors (q8 blocks restart at
//                                                       //   each; config.min_q8_size keeps small ones in fp32)
//   StepReport r = opt.step(std::span<bf16>(params), std::span<const float>(grad), tau, fragment);
//     // r.applied / r.reason (none, nonfinite-gradient, zero-gate) / r.nonfinite_index / r.tau_effective /
//     // r.sigma — the reference's StepReport<float>; params are updated in place (std::span<float> for fp32)
//   opt.advance_round();                                // PA-CGAD ages, once per outer round (as the reference)
//   opt.buffer_names();  opt.read_buffer("m", out);     // dequantized state as float ("m","v" or "b")
//   opt.counters();                                     // "t" per fragment (Adam family), "age" (PA-CGAD)
//   opt.save(path);  opt.load(path);                    // versioned, checksummed, atomic (state_file.hpp)
//
// Semantics match the reference optimizers (reference::make_optimizer) event for event: the same argument
// checks (InputError), a NaN/Inf pseudo-gradient changes nothing (parameters, state, step counts, ages) and is
// reported with its first index, and so is one with |σ·Δ| ≥ 2^63 (the overflow rule, reference/overflow_rule.hpp;
// for every optimizer: Nesterov's σ is 1, SDM's 1/(1 + τ)); on_zero_gate
// = skip drops a σ = 0 event. `grad` is the fragment's slice of
// the pseudo-gradient; `params` is always the whole vector. Empty tensors are fine; indices are 64-bit.
// The step allocates nothing: it reads and writes the caller's spans and the state made at construction.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/host_state.hpp"
#include "cgad/fastpath/step_planner.hpp"
#include "cgad/fastpath/thread_pool.hpp"

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::fastpath {

class CpuOptimizer {
 public:
  CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads = 0);
  CpuOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, unsigned threads = 0);

  StepReport step(std::span<float> params, std::span<const float> grad, std::int64_t tau, std::size_t fragment = 0);
  StepReport step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau, std::size_t fragment = 0);
  void advance_round() { planner_.advance_round(); }

  const StepConfig& config() const { return planner_.config(); }
  std::size_t parameters() const { return planner_.parameters(); }
  unsigned threads() const { return pool_.threads(); }

  std::vector<std::string> buffer_names() const;
  // Writes the named buffer, dequantized to float, into `out` (parameters() elements); InputError otherwise.
  void read_buffer(std::string_view name, std::span<float> out) const;
  std::vector<reference::StateCounter> counters() const { return planner_.counters(); }

  void save(const std::filesystem::path& path) const;
  // Refuses (InputError) a truncated, corrupt, other-version or other-configuration file; the state in memory
  // is untouched unless the whole file was accepted.
  void load(const std::filesystem::path& path);

  // Raw access for the CUDA backend's transfers and the tests.
  const HostState& state() const { return state_; }
  const StepPlanner& planner() const { return planner_; }

 private:
  StepReport run(std::size_t params_size, float* params_fp32, bf16* params_bf16, std::span<const float> grad,
                 std::int64_t tau, std::size_t fragment);

  StepPlanner planner_;
  HostState state_;
  ThreadPool pool_;
};

}  // namespace cgad::fastpath
