// The benchmarks compare like with like: the raw-MPFR loop computes exactly what the reference computes, and
// the byte count a ratio is built on matches the buffers a step touches.
#include <gtest/gtest.h>

#include "cgad/bench/workloads.hpp"

namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
namespace fp = cgad::fastpath;

TEST(BenchWorkloads, RawMpfrLoopIsTheReferenceBitForBit) {
  for (unsigned bits : {64u, 256u}) {
    ref::set_working_precision_bits(bits);
    cgad::bench::ReferenceWorkload reference(300);
    cgad::bench::RawMpfrWorkload raw(300);
    for (int step = 0; step < 5; ++step) {
      reference.run();
      raw.run();
    }
    ASSERT_EQ(reference.params().size(), raw.params().size());
    for (std::size_t i = 0; i < raw.params().size(); ++i) {
      ASSERT_EQ(reference.params()[i], raw.params()[i]) << "bits " << bits << " element " << i;
      ASSERT_NE(raw.params()[i], ref::mpfr_real(1) / 2) << "the step did not move element " << i;
    }
  }
}

// Bytes per parameter of a step: bf16 params r+w (4) + fp32 grad (4) + two q8 moments r+w (4) + their absmax
// share (2·2·4/256); fp32 everything: 8 + 4 + 16.
TEST(BenchWorkloads, StepBytesCountEveryBufferOnce) {
  fp::StepConfig q8;
  q8.params = fp::ParamFormat::bf16;
  q8.state = fp::StateFormat::q8;
  EXPECT_DOUBLE_EQ(cgad::bench::step_bytes(q8, 256), 256 * (4 + 4 + 4) + 16);
  fp::StepConfig wide;
  wide.params = fp::ParamFormat::fp32;
  wide.state = fp::StateFormat::fp32;
  EXPECT_DOUBLE_EQ(cgad::bench::step_bytes(wide, 10), 10 * 28);
  wide.optimizer = core::OptimizerKind::nesterov;  // one moment
  EXPECT_DOUBLE_EQ(cgad::bench::step_bytes(wide, 10), 10 * 20);
}

}  // namespace
