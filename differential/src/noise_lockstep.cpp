#include "cgad/differential/noise_lockstep.hpp"

#include "cgad/fastpath/fastpath.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/trap_counter.hpp"
#include "cgad/reference/optimizers.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <span>
#include <stdexcept>

namespace cgad::differential {

using core::OptimizerKind;
using core::ZeroGatePolicy;
using reference::mpfr_real;

void parse_study_optimizer(const std::string& name, NoiseScenario& s) {
  s.on_zero_gate = ZeroGatePolicy::apply;
  if (name == "cgad") {
    s.optimizer = OptimizerKind::cgad;
  } else if (name == "cgad-skip") {
    s.optimizer = OptimizerKind::cgad;
    s.on_zero_gate = ZeroGatePolicy::skip;
  } else if (name == "adam-decay") {
    s.optimizer = OptimizerKind::adam_decay;
  } else if (name == "adam") {
    s.optimizer = OptimizerKind::adam;
  } else {
    throw core::InputError("noise: optimizer must be cgad, cgad-skip, adam-decay or adam, got '" + name + "'");
  }
}

std::string study_optimizer_name(const NoiseScenario& s) {
  return std::string(core::to_string(s.optimizer)) + (s.on_zero_gate == ZeroGatePolicy::skip ? "-skip" : "");
}

std::string scenario_name(const NoiseScenario& s) {
  // Built by append: GCC 12 warns (-Wrestrict, a false positive of its inlined operator+ chains) on the
  // equivalent chain of string + string.
  std::string state(fastpath::to_string(s.state));
  if (s.state == fastpath::StateFormat::q8 || s.q8_semantics == fastpath::Q8Semantics::bnb) {
    state.append(":").append(fastpath::to_string(s.q8_semantics));
  }
  if (s.v_map != fastpath::VMap::dynamic) state.append(":").append(fastpath::to_string(s.v_map));
  std::string name = study_optimizer_name(s);
  name.append("/").append(fastpath::to_string(s.params)).append("+").append(state);
  name.append("/").append(fastpath::to_string(s.rounding)).append("/");
  if (s.stream) return name.append("stream:").append(s.stream_name);
  char range[64];
  std::snprintf(range, sizeof range, "R%g/z%g", s.scale_range, s.zero_fraction);
  name.append(s.delays).append("/").append(range);
  return name.append("/n").append(std::to_string(s.size)).append("/seed").append(std::to_string(s.seed));
}

namespace {
// The fast path's configuration of a scenario (the default hyperparameters).
fastpath::StepConfig step_config_of(const NoiseScenario& scenario) {
  fastpath::StepConfig config;
  config.optimizer = scenario.optimizer;
  config.on_zero_gate = scenario.on_zero_gate;
  config.params = scenario.params;
  config.state = scenario.state;
  config.rounding = scenario.rounding;
  config.seed = scenario.seed;
  config.q8_semantics = scenario.q8_semantics;
  config.v_map = scenario.v_map;
  config.min_q8_size = scenario.min_q8_size;
  return config;
}
}  // namespace

void validate(const NoiseScenario& s) {
  fastpath::validate(step_config_of(s));  // before any run, so that a bad combination costs no run
  if (s.delays != "paper" && s.delays != "heavy")
    throw core::InputError("noise: delays must be paper or heavy, got '" + s.delays + "'");
  if (s.size < 1 || s.size > (1u << 20))
    throw core::InputError("noise: size must lie in [1, 2^20], got " + std::to_string(s.size));
  if (s.steps < 1 || s.steps > 10'000'000)
    throw core::InputError("noise: steps must lie in [1, 10^7], got " + std::to_string(s.steps));
  if (s.log_every < 1) throw core::InputError("noise: log-every must be >= 1, got " + std::to_string(s.log_every));
  if (!(s.scale_range >= 1.0) || !std::isfinite(s.scale_range) || s.scale_range > 1e30) {
    throw core::InputError("noise: scale-range must lie in [1, 1e30], got " + core::show(s.scale_range));
  }
  if (!(s.zero_fraction >= 0.0 && s.zero_fraction < 1.0)) {
    throw core::InputError("noise: zero-fraction must lie in [0, 1), got " + core::show(s.zero_fraction));
  }
}

DelayStream::DelayStream(const std::string& kind, std::uint64_t seed)
    : heavy_(kind == "heavy"), random_(seed, reference::StreamPurpose::noise_delays) {}

std::int64_t DelayStream::next() {
  static constexpr std::array<std::int64_t, 6> kPaper{0, 1, 2, 4, 8, 16};
  if (heavy_ && random_.uniform() < 0.3) {
    const double u = std::max(random_.uniform(), 1e-9);  // ⌊8/U⌋, capped at 8·10^9 by U's floor
    return static_cast<std::int64_t>(std::floor(8.0 / u));
  }
  // A uniform index: u ≤ 1 − 2^-53 gives u·6 ≤ 6 − 2^-50 after rounding, so the index is at most 5, and each index
  // takes 1/6 of the 2^53 values of u to within the few that the rounding of u·6 moves across a boundary.
  return kPaper[static_cast<std::size_t>(random_.uniform() * static_cast<double>(kPaper.size()))];
}

namespace {

// Accumulates the statistics of one quantity over the elements.
struct Accumulator {
  double sum_abs = 0, sum_sq = 0, max_abs = 0, sum = 0;
  std::size_t count = 0;
  void add(double e) {
    sum_abs += std::fabs(e);
    sum_sq += e * e;
    sum += e;
    max_abs = std::max(max_abs, std::fabs(e));
    ++count;
  }
  ErrorSummary summary() const {
    if (count == 0) return {};
    const double n = static_cast<double>(count);
    return {sum_abs / n, std::sqrt(sum_sq / n), max_abs, sum / n};
  }
};

}  // namespace

NoiseMemory estimated_memory(const NoiseScenario& s) {
  const double elements = static_cast<double>(s.stream ? s.stream->params.size() : s.size);
  const double events = static_cast<double>(s.stream ? s.stream->events.size() : static_cast<std::size_t>(s.steps));
  const double samples =
      std::floor(events / static_cast<double>(s.log_every)) + 2;  // every log_every-th, the first, the last
  // An mpfr_real: the object and its limbs at the working precision.
  const double mpfr_bytes = sizeof(reference::mpfr_real) + 8.0 * std::ceil(reference::working_precision_bits() / 64.0);
  // The layout's tensors (a recorded stream's "tensors"; the synthetic stream is one): each costs in every sample
  // as well as in the run, whatever its size -- 300 000 empty tensors in a 900 KB stream took 1.6 GB.
  const double tensors = static_cast<double>(s.stream && !s.stream->tensors.empty() ? s.stream->tensors.size() : 1);
  NoiseMemory m;
  // Per sample its TensorSample per tensor; FinalState's six vectors of doubles; the run's copy of the layout.
  m.kept = samples * (sizeof(NoiseSample) + tensors * sizeof(TensorSample)) + elements * 6 * sizeof(double) +
           tensors * sizeof(std::size_t);
  // The reference's θ, m, v and Δ in MPFR; the fast path's θ, m, v (at most fp32 each), Δ, scales and θ0 in float.
  m.working = elements * (4 * mpfr_bytes + 6 * sizeof(float));
  // Per tensor while it runs (run_lockstep): the trap counter's share; its first element and the reference's
  // largest step; the three accumulators, the per-tensor trap counts and the TensorSample of the sample being
  // formed; the layout as the stream, the event source and the fast path's planner hold it, and the planner's
  // chunk (a tensor starts one).
  m.working += tensors * (fastpath::TrapCounter::bytes_per_tensor() + sizeof(std::size_t) + sizeof(double) +
                          3 * sizeof(Accumulator) + sizeof(fastpath::TrapCounts) + sizeof(TensorSample) +
                          3 * sizeof(std::size_t) + sizeof(fastpath::StepChunk));
  return m;
}

void check_memory(const std::vector<NoiseScenario>& scenarios) {
  double kept = 0, working = 0;
  for (const NoiseScenario& s : scenarios) {
    const NoiseMemory m = estimated_memory(s);
    kept += m.kept;
    working = std::max(working, m.working);
  }
  if (kept + working > kMaxNoiseStudyBytes) {
    throw core::InputError("noise: the study would take about " +
                           std::to_string(static_cast<long long>(std::ceil((kept + working) / (1024.0 * 1024.0)))) +
                           " MiB (" + std::to_string(scenarios.size()) +
                           " runs, their samples held until printed), over the " +
                           "1024 MiB limit: raise --log-every, or lower --steps, --size or the number of runs");
  }
}

namespace {

// The fast path's parameters in their storage format (bf16 ones rounded to nearest once, before any step).
class FastParams {
 public:
  FastParams(fastpath::ParamFormat format, const std::vector<float>& initial)
      : bf16_(format == fastpath::ParamFormat::bf16) {
    if (bf16_) {
      for (const float x : initial) half_.push_back(fastpath::round_nearest_even_bf16(x));
    } else {
      fp32_ = initial;
    }
  }
  fastpath::StepReport step(fastpath::CpuOptimizer& opt, std::span<const float> grad, std::int64_t tau) {
    return bf16_ ? opt.step(std::span<fastpath::bf16>(half_), grad, tau) : opt.step(std::span<float>(fp32_), grad, tau);
  }
  float operator[](std::size_t i) const { return bf16_ ? fastpath::to_float(half_[i]) : fp32_[i]; }

 private:
  bool bf16_;
  std::vector<float> fp32_;
  std::vector<fastpath::bf16> half_;
};

}  // namespace

namespace {

// The events the study runs: the synthetic stream (above) drawn one event at a time, or a recorded one.
class EventSource {
 public:
  explicit EventSource(const NoiseScenario& s)
      : scenario_(s), events_(s.seed, reference::StreamPurpose::noise_events), delays_(s.delays, s.seed) {
    if (s.stream) {
      initial_ =
          parse_numbers<float>(s.stream->params, s.stream_name + ":" + std::to_string(s.stream->line) + ": params");
      tensors_ = s.stream->tensors;
      return;
    }
    reference::PhiloxStream exponents(s.seed, reference::StreamPurpose::noise_scales);
    reference::PhiloxStream initial(s.seed, reference::StreamPurpose::noise_initial);
    scale_.resize(s.size);
    initial_.resize(s.size);
    for (std::size_t i = 0; i < s.size; ++i) {
      scale_[i] = static_cast<float>(std::pow(s.scale_range, -exponents.uniform()));
      initial_[i] = static_cast<float>(initial.normal());
    }
  }
  std::int64_t events() const {
    return scenario_.stream ? static_cast<std::int64_t>(scenario_.stream->events.size()) : scenario_.steps;
  }
  const std::vector<float>& initial() const { return initial_; }
  std::vector<std::size_t> tensors() const {
    return tensors_.empty() ? std::vector<std::size_t>{initial_.size()} : tensors_;
  }
  // Event k (0-based) into `grad`; returns its τ.
  std::int64_t next(std::int64_t k, std::vector<float>& grad) {
    if (scenario_.stream) {
      const StreamEvent& e = scenario_.stream->events[static_cast<std::size_t>(k)];
      grad = parse_numbers<float>(e.grad, scenario_.stream_name + ":" + std::to_string(e.line) + ": grad");
      if (grad.size() != initial_.size() || e.fragment != 0) {
        throw core::InputError("noise: " + scenario_.stream_name + ":" + std::to_string(e.line) +
                               ": the study takes whole-vector events (fragment 0)");
      }
      return e.tau;
    }
    grad.resize(scale_.size());
    for (std::size_t i = 0; i < scale_.size(); ++i) {
      const float value = scale_[i] * static_cast<float>(events_.normal());
      grad[i] = scenario_.zero_fraction > 0.0 && events_.uniform() < scenario_.zero_fraction ? 0.0f : value;
    }
    return delays_.next();
  }

 private:
  const NoiseScenario& scenario_;
  reference::PhiloxStream events_;
  DelayStream delays_;
  std::vector<float> scale_, initial_;
  std::vector<std::size_t> tensors_;
};

}  // namespace

NoiseRun run_lockstep(const NoiseScenario& scenario, const std::function<void(long, long)>& progress) {
  validate(scenario);
  const fastpath::StepConfig config = step_config_of(scenario);
  if (!core::is_adam_family(config.optimizer))
    throw core::InputError("noise: the study needs an Adam-family optimizer");

  EventSource source(scenario);
  const std::size_t n = source.initial().size();
  std::vector<float> grad(n);
  FastParams theta(scenario.params, source.initial());
  fastpath::CpuOptimizer fast(config, source.tensors(), 1);
  auto ideal = reference::make_optimizer(fastpath::reference_config<mpfr_real>(config), n);
  std::vector<mpfr_real> ideal_theta(n), ideal_grad(n);
  for (std::size_t i = 0; i < n; ++i) ideal_theta[i] = mpfr_real(theta[i]);  // the very values the fast path holds

  NoiseRun run{scenario, {}, {}, source.tensors()};
  std::vector<float> m(n), v(n), theta_now(n);
  std::vector<double> ideal_before(n);
  std::int64_t gated_to_zero = 0;
  double ideal_max_step = 0;
  const double lr = static_cast<double>(config.adam.lr);
  // One trap counter over the layout's tensors (the whole run's counts are their sum); per tensor besides, its
  // first element and the reference's largest step. What each holds per tensor is what estimated_memory counts.
  fastpath::TrapCounter trap_counter(std::vector<double>(n, lr), run.tensors);
  const std::size_t tensor_count = run.tensors.size();
  std::vector<std::size_t> first(tensor_count + 1, 0);
  for (std::size_t t = 0; t < tensor_count; ++t) first[t + 1] = first[t] + run.tensors[t];
  std::vector<double> tensor_ideal_max(tensor_count, 0.0);
  const auto widen = [&] {
    for (std::size_t i = 0; i < n; ++i) theta_now[i] = theta[i];
    return std::span<const float>(theta_now);
  };
  const std::int64_t steps = source.events();
  for (std::int64_t step = 1; step <= steps; ++step) {
    const std::int64_t tau = source.next(step - 1, grad);
    for (std::size_t i = 0; i < n; ++i) {
      ideal_grad[i] = mpfr_real(grad[i]);
      ideal_before[i] = ideal_theta[i].convert_to<double>();
    }
    trap_counter.before(widen());
    const auto report = theta.step(fast, grad, tau);
    const auto ideal_report = ideal->apply(ideal_theta, {ideal_grad, tau, 0});
    if (report.applied != ideal_report.applied) {
      throw std::logic_error("noise: fast path and reference disagree on applying event " + std::to_string(step));
    }
    if (report.sigma == 0.0f) ++gated_to_zero;
    trap_counter.after(widen());
    for (std::size_t t = 0; t < tensor_count; ++t) {
      for (std::size_t i = first[t]; i < first[t + 1]; ++i) {
        const double moved = std::fabs(ideal_theta[i].convert_to<double>() - ideal_before[i]) / lr;
        tensor_ideal_max[t] = std::max(tensor_ideal_max[t], moved);
        ideal_max_step = std::max(ideal_max_step, moved);
      }
    }
    progress(static_cast<long>(step), static_cast<long>(steps));
    if (step % scenario.log_every != 0 && step != steps) continue;
    fast.read_buffer("m", m);
    fast.read_buffer("v", v);
    const auto buffers = ideal->buffers();
    Accumulator ev, em, et;
    std::vector<Accumulator> tv(tensor_count), tm(tensor_count), tt(tensor_count);
    std::size_t m_zero = 0;
    const bool last = step == steps;
    for (std::size_t i = 0, t = 0; i < n; ++i) {
      while (i >= first[t + 1]) ++t;  // the tensor of element i (empty tensors are passed over)
      const double vr = buffers[1].values[i].convert_to<double>();
      const double mr = buffers[0].values[i].convert_to<double>();
      const double tr = ideal_theta[i].convert_to<double>();
      m_zero += m[i] == 0.0f;
      if (vr > 0) {
        ev.add((static_cast<double>(v[i]) - vr) / vr);
        em.add((static_cast<double>(m[i]) - mr) / std::sqrt(vr));
        tv[t].add((static_cast<double>(v[i]) - vr) / vr);
        tm[t].add((static_cast<double>(m[i]) - mr) / std::sqrt(vr));
      }
      et.add((static_cast<double>(theta[i]) - tr) / lr);
      tt[t].add((static_cast<double>(theta[i]) - tr) / lr);
      if (last) {
        run.last.theta_fast.push_back(theta[i]);
        run.last.theta_ref.push_back(tr);
        run.last.m_fast.push_back(m[i]);
        run.last.m_ref.push_back(mr);
        run.last.v_fast.push_back(v[i]);
        run.last.v_ref.push_back(vr);
      }
    }
    const fastpath::TrapCounts counts = trap_counter.summary(v);
    const TrapSummary trap{counts.v_zero_fraction, static_cast<double>(m_zero) / static_cast<double>(n),
                           counts.step_over_5lr_fraction, counts.max_step_over_lr, ideal_max_step};
    const std::vector<fastpath::TrapCounts> per_tensor = trap_counter.tensor_summaries(v, m);
    std::vector<TensorSample> tensors;
    tensors.reserve(tensor_count);
    for (std::size_t t = 0; t < tensor_count; ++t) {
      const fastpath::TrapCounts& c = per_tensor[t];
      tensors.push_back(
          {tv[t].summary(),
           tm[t].summary(),
           tt[t].summary(),
           {c.v_zero_fraction, c.m_zero_fraction, c.step_over_5lr_fraction, c.max_step_over_lr, tensor_ideal_max[t]}});
    }
    run.samples.push_back({step, ev.summary(), em.summary(), et.summary(), trap, gated_to_zero, std::move(tensors)});
  }
  return run;
}

}  // namespace cgad::differential
