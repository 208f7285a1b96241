#pragma once
// Delay schedules for the ideal gated update (docs/design.md §6): the staleness τ_t the t-th update sees. Every
// schedule is reproducible from its seed (std::mt19937_64 with a fixed distribution algorithm written out
// here, so the sequence does not depend on the standard library's distributions) and never exceeds τ_max.
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace cgad::theory {

enum class DelayKind {
  constant,     // τ_t = τ_max
  uniform,      // τ_t uniform on {0, …, τ_max}
  geometric,    // P(τ = j) ∝ (1−p)^j, mean ≈ τ_max/4 (p = 1/(1 + τ_max/4)), capped at τ_max
  pareto,       // heavy tail: τ = floor(x_m·U^{−1/a}) − 1 with x_m = 1, a = 1.2 (infinite variance), capped
  bursty,       // straggler bursts: usually τ ∈ {0, 1}; with probability 1/20 a burst of 8 steps at τ_max
  adversarial,  // τ_t = the integer maximizer of τ·σ(τ) over {0, …, τ_max}: makes the bias term B1 each step
  heavy_tail,  // 70 % fresh (τ = 0), 30 % τ = ⌊8/U⌋, U uniform on (0, 1] (P(τ ≥ j) = 0.3·8/j, j ≥ 8), capped
  // τ_t = τ_max from the start: nothing arrives before t = τ_max (those steps are idle, no update at all, where
  // `constant` has τ_t = min(τ_max, t)), then every arrival is exactly τ_max old. No start-up transient.
  constant_from_start,
};

DelayKind parse_delay_kind(std::string_view name);  // InputError on an unknown name
const char* to_string(DelayKind kind);
inline constexpr const char* kDelayKindNames =
    "constant|uniform|geometric|pareto|bursty|adversarial|heavy-tail|constant-from-start";

class DelaySchedule {
 public:
  // `adversarial_tau` is used by the adversarial kind only (the caller knows the gate); τ_max ≥ 0.
  DelaySchedule(DelayKind kind, long tau_max, std::uint64_t seed, long adversarial_tau = 0);
  long next();

 private:
  double unit();             // uniform on [0, 1) from 53 random bits
  long uniform_int(long n);  // uniform on {0, …, n}

  DelayKind kind_;
  long tau_max_;
  long adversarial_tau_;
  std::mt19937_64 engine_;
  long burst_left_ = 0;
};

}  // namespace cgad::theory
