// The fast path's state bytes (fastpath/state_file.hpp), as CpuOptimizer::load_bytes and load() read them, for
// three optimizers of different shapes (CGAD with q8 state over three tensors, PA-CGAD with bf16 state and two
// fragments, Nesterov with fp32 state). The first input byte picks the optimizer and whether the input gets its
// CRC-32 recomputed: random bytes almost never carry a valid checksum, and with it fixed the fuzzer reaches the
// content checks behind it (finite moments, v >= 0, absmax, counters) — where a corrupt state once loaded and
// turned the next step's parameters into NaN. A state that loads must step without producing a non-finite value.
#include "fuzz_support.hpp"

#include "cgad/fastpath/fastpath.hpp"

#include <boost/crc.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

namespace {

using namespace cgad;

fastpath::StepConfig config_of(int kind) {
  fastpath::StepConfig c;
  c.params = fastpath::ParamFormat::fp32;
  if (kind == 0) {
    c.state = fastpath::StateFormat::q8;
  } else if (kind == 1) {
    c.optimizer = core::OptimizerKind::pa_cgad;
    c.state = fastpath::StateFormat::bf16;
    c.fragments = 2;
  } else {
    c.optimizer = core::OptimizerKind::nesterov;
  }
  return c;
}

const std::vector<std::size_t> kTensors{300, 7, 256};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 3;
  const bool fix_crc = (data[0] / 3) % 2 == 1;
  std::vector<unsigned char> bytes(data + 1, data + size);
  if (fix_crc && bytes.size() >= 4) {
    boost::crc_32_type crc;
    crc.process_bytes(bytes.data(), bytes.size() - 4);
    const std::uint32_t sum = crc.checksum();
    for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<unsigned char>(sum >> (8 * i));
  }
  fastpath::CpuOptimizer optimizer(config_of(kind), kTensors, 1);
  fuzz::refusal_is_fine([&] {
    optimizer.load_bytes(bytes);
    std::vector<float> params(optimizer.parameters(), 0.5f), grad(optimizer.parameters(), 0x1p-6f);
    const std::size_t fragment_size = optimizer.fragment_size(0);
    const fastpath::StepReport report =
        optimizer.step(std::span<float>(params), std::span<const float>(grad.data(), fragment_size), 1, 0);
    for (float p : params) {
      if (report.applied && !std::isfinite(p)) std::abort();
    }
  });
  return 0;
}
