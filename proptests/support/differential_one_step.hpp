#pragma once
// One event on a fresh fast-path optimizer against the MPFR reference fed the same floats: every stored
// parameter and moment within the bound of differential_bounds.hpp (the fp32 chain) plus the bound of the
// store into its format (bf16 half-spacing or spacing, q8 half-gap or gap × absmax). Shared by the random
// properties and the replayed corpus.
#include "cgad/fastpath/fastpath.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cgad::proptests {

// Error of one stored quantity over many elements, in units of its format (ulps of fp32/bf16 at the
// reference value, or q8 code gaps × absmax), with the worst element.
struct ErrorStats {
  double max_units = 0, sum_sq = 0, max_bound_use = 0;
  std::size_t count = 0;
  std::string worst;  // "[i] fast … ref … (hexfloat)"
  void add(double units, double bound_use, const std::string& where);
  void merge(const ErrorStats& other);
  double rms() const;
};

struct OneStepOutcome {
  std::string failure;  // empty when every element is within its bound and the reports agree
  bool applied = false;
  std::size_t outside_fp32 = 0;  // elements whose bound reaches FLT_MAX (not compared)
  ErrorStats theta, first, second;
};

// The reference runs at `reference_bits` (set once by the caller: precision is process-global).
OneStepOutcome check_one_step(const fastpath::StepConfig& config, const std::vector<float>& theta,
                              const std::vector<float>& grad, std::int64_t tau);

// Accumulated outcomes per configuration name, printed as one table.
class OneStepSummary {
 public:
  void add(const std::string& config, const OneStepOutcome& outcome);
  void print() const;

 private:
  struct Row {
    std::size_t cases = 0, outside = 0;
    ErrorStats theta, first, second;
  };
  std::map<std::string, Row> rows_;
};

}  // namespace cgad::proptests
