#pragma once
// The work the benchmarks time, set up once and run many times: a plain copy of the same bytes (the
// memory-bandwidth baseline), the fast-path CPU step, the reference step in MPFR, and a hand-written loop of
// raw mpfr_* calls doing the same arithmetic. bench/*_bench.cpp time them with Google Benchmark; `cgad bench`
// times them with measure() for its summary. Both count bytes and parameters the same way, here.
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/reference/optimizers.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace cgad::bench {

// Bytes one fast-path step reads and writes for n parameters: parameters (read + write), the fp32
// pseudo-gradient (read), each moment (read + write) in its format, and for q8 each block's absmax
// (read + write). This is the traffic the bandwidth limit applies to; scratch inside a core is free.
double step_bytes(const fastpath::StepConfig& config, std::size_t n);

// Copies `bytes` / 2 bytes from one buffer to another per run — `bytes` of traffic — split over `threads`
// threads, as the step is.
class CopyWorkload {
 public:
  CopyWorkload(std::size_t bytes, unsigned threads);
  void run();
  double bytes() const { return 2.0 * static_cast<double>(source_.size()); }

 private:
  std::vector<unsigned char> source_, target_;
  fastpath::ThreadPool pool_;
};

// One outer step of CpuOptimizer per run over n parameters, on a fixed pseudo-gradient with τ = 1 (σ < 1, so
// the gate and the bias corrections are exercised; every run is an applied step).
class FastpathCpuWorkload {
 public:
  FastpathCpuWorkload(const fastpath::StepConfig& config, std::size_t n, unsigned threads);
  void run();
  double bytes() const { return step_bytes(optimizer_.config(), grad_.size()); }
  double parameters() const { return static_cast<double>(grad_.size()); }
  unsigned threads() const { return optimizer_.threads(); }

 private:
  fastpath::CpuOptimizer optimizer_;
  std::vector<float> params_fp32_;
  std::vector<fastpath::bf16> params_bf16_;
  std::vector<float> grad_;
};

// One reference CGAD step per run over n parameters at the current MPFR working precision.
class ReferenceWorkload {
 public:
  explicit ReferenceWorkload(std::size_t n);
  void run();
  std::span<const reference::mpfr_real> params() const { return params_; }

 private:
  std::unique_ptr<reference::OuterOptimizer<reference::mpfr_real>> optimizer_;
  std::vector<reference::mpfr_real> params_, grad_;
};

// The same CGAD step as ReferenceWorkload written directly in mpfr_* calls on reused temporaries: the floor
// the reference's overhead is measured against.
class RawMpfrWorkload {
 public:
  explicit RawMpfrWorkload(std::size_t n);
  ~RawMpfrWorkload();
  RawMpfrWorkload(const RawMpfrWorkload&) = delete;
  RawMpfrWorkload& operator=(const RawMpfrWorkload&) = delete;
  void run();
  std::span<const reference::mpfr_real> params() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Seconds per run of `work`: the median of `samples` timings, each of enough runs to last `min_seconds`.
template <class Work>
double measure(Work& work, double min_seconds, int samples = 5);

}  // namespace cgad::bench

#include "cgad/bench/measure_impl.hpp"
