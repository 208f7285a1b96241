#include "cgad/simulate/seed_statistics.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace cgad::simulate {
namespace {

// Uniform on {0, …, n − 1} by rejection from std::mt19937_64, whose output the standard fixes: the same draws
// on every platform (std::uniform_int_distribution's algorithm is the library's own).
class Draws {
 public:
  explicit Draws(std::uint64_t seed) : engine_(seed) {}
  std::size_t below(std::size_t n) {
    const std::uint64_t range = n;
    const std::uint64_t limit =
        std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
    std::uint64_t draw = engine_();
    while (draw >= limit) draw = engine_();
    return static_cast<std::size_t>(draw % range);
  }

 private:
  std::mt19937_64 engine_;
};

double mean_of(std::span<const double> x) {
  double sum = 0;
  for (const double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

// The order statistics ⌈q·B⌉ (1-based) of the sorted values, q = 0.025 and 0.975.
Interval percentile_interval(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) {
    const double rank = std::ceil(q * static_cast<double>(values.size()));
    return values[static_cast<std::size_t>(std::max(rank, 1.0)) - 1];
  };
  return {at(0.025), at(0.975)};
}

void resample(std::span<const double> x, Draws& draws, std::vector<double>& out) {
  out.resize(x.size());
  for (double& v : out) v = x[draws.below(x.size())];
}

double ratio_of(double a, double b) {
  if (b == 0) return a == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  return a / b;
}

// |ln a − ln b|, symmetric in a and b bit for bit; 0 when both are 0, +inf when one is.
double log_ratio_distance(double a, double b) {
  if (a == b) return 0;
  if (a == 0 || b == 0) return std::numeric_limits<double>::infinity();
  return std::fabs(std::log(a) - std::log(b));
}

void require_two(std::span<const double> x, const char* what) {
  if (x.size() < 2) throw core::InputError(std::string(what) + " needs at least 2 values");
}

// The number of ways to choose k of n, or more than `cap` (capped, no overflow).
std::size_t choose_capped(std::size_t n, std::size_t k, std::size_t cap) {
  double c = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
    if (c > static_cast<double>(cap)) return cap + 1;
  }
  return static_cast<std::size_t>(std::llround(c));
}

}  // namespace

double sample_sigma(std::span<const double> x) {
  require_two(x, "a sample sigma");
  const double mean = mean_of(x);
  double squares = 0;
  for (const double v : x) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / static_cast<double>(x.size() - 1));
}

SpreadIntervals bootstrap_spread(std::span<const double> x, std::size_t resamples, std::uint64_t seed) {
  require_two(x, "a bootstrap interval of sigma");
  Draws draws(seed);
  std::vector<double> means(resamples), sigmas(resamples), risks(resamples), sample;
  for (std::size_t b = 0; b < resamples; ++b) {
    resample(x, draws, sample);
    means[b] = mean_of(sample);
    sigmas[b] = sample_sigma(sample);
    risks[b] = means[b] + sigmas[b];
  }
  return {percentile_interval(std::move(means)), percentile_interval(std::move(sigmas)),
          percentile_interval(std::move(risks))};
}

SigmaComparison compare_sigma(std::span<const double> a, std::span<const double> b, std::size_t resamples,
                              std::size_t permutations, std::uint64_t seed) {
  require_two(a, "a sigma comparison");
  require_two(b, "a sigma comparison");
  SigmaComparison result;
  const double sa = sample_sigma(a), sb = sample_sigma(b);
  result.ratio = ratio_of(sa, sb);

  Draws draws(seed);
  std::vector<double> ratios(resamples), ra, rb;
  for (std::size_t r = 0; r < resamples; ++r) {
    resample(a, draws, ra);
    resample(b, draws, rb);
    ratios[r] = ratio_of(sample_sigma(ra), sample_sigma(rb));
  }
  result.ratio_ci = percentile_interval(std::move(ratios));

  // The pool of centred values, a's first.
  std::vector<double> pool;
  const double ma = mean_of(a), mb = mean_of(b);
  for (const double v : a) pool.push_back(v - ma);
  for (const double v : b) pool.push_back(v - mb);
  const double observed = log_ratio_distance(sa, sb);
  // A split "as extreme" up to the rounding of recomputing a statistic over the same values in another order.
  const double threshold = observed * (1 - 1e-12);
  std::vector<double> group_a(a.size()), group_b(b.size());
  const auto extreme = [&](const std::vector<char>& in_a) {
    std::size_t i = 0, j = 0;
    for (std::size_t k = 0; k < pool.size(); ++k) (in_a[k] ? group_a[i++] : group_b[j++]) = pool[k];
    return log_ratio_distance(sample_sigma(group_a), sample_sigma(group_b)) >= threshold;
  };
  std::vector<char> in_a(pool.size(), 0);
  std::fill(in_a.begin(), in_a.begin() + static_cast<std::ptrdiff_t>(a.size()), 1);
  std::size_t as_extreme = 0;
  const std::size_t splits = choose_capped(pool.size(), a.size(), permutations);
  if (splits <= permutations) {
    // Every split, in lexicographic order of the membership vector (std::prev_permutation from 1…10…0).
    result.exact = true;
    do {
      as_extreme += extreme(in_a);
      ++result.splits;
    } while (std::prev_permutation(in_a.begin(), in_a.end()));
    result.p_value = static_cast<double>(as_extreme) / static_cast<double>(result.splits);
  } else {
    std::vector<std::size_t> order(pool.size());
    for (std::size_t s = 0; s < permutations; ++s) {
      std::iota(order.begin(), order.end(), std::size_t{0});
      // The first |a| places of a Fisher–Yates shuffle are a uniformly random subset.
      std::fill(in_a.begin(), in_a.end(), 0);
      for (std::size_t k = 0; k < a.size(); ++k) {
        std::swap(order[k], order[k + draws.below(order.size() - k)]);
        in_a[order[k]] = 1;
      }
      as_extreme += extreme(in_a);
    }
    result.splits = permutations;
    result.p_value = static_cast<double>(1 + as_extreme) / static_cast<double>(1 + permutations);
  }
  return result;
}

}  // namespace cgad::simulate
