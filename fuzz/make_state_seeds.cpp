// Writes the seeds of fuzz/corpus/state_bytes into the current folder: the three configurations of
// fuzz_state_bytes.cpp after two steps, each as byte k (raw) or byte k + 3 (CRC recomputed) followed by
// CpuOptimizer::save_bytes(). Run it again when the state format's version changes:
//   (cd fuzz/corpus/state_bytes && ../../../build-fuzz/fuzz/make_state_seeds)
#include "cgad/fastpath/fastpath.hpp"

#include <fstream>
#include <string>
#include <vector>

using namespace cgad;

int main() {
  for (int kind = 0; kind < 3; ++kind) {
    fastpath::StepConfig c;
    c.params = fastpath::ParamFormat::fp32;
    if (kind == 0) c.state = fastpath::StateFormat::q8;
    if (kind == 1) {
      c.optimizer = core::OptimizerKind::pa_cgad;
      c.state = fastpath::StateFormat::bf16;
      c.fragments = 2;
    }
    if (kind == 2) c.optimizer = core::OptimizerKind::nesterov;
    fastpath::CpuOptimizer opt(c, std::vector<std::size_t>{300, 7, 256}, 1);
    std::vector<float> p(opt.parameters(), 0.5f), g(opt.parameters());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.001f * float(int(i % 17) - 8);
    for (int s = 0; s < 2; ++s) {
      opt.step(std::span<float>(p), std::span<const float>(g.data(), opt.fragment_size(0)), s, 0);
      opt.advance_round();
    }
    const auto bytes = opt.save_bytes();
    for (int fix = 0; fix < 2; ++fix) {
      std::ofstream out("kind" + std::to_string(kind) + (fix ? "_crc" : "_raw"), std::ios::binary);
      const char first = static_cast<char>(kind + 3 * fix);
      out.write(&first, 1);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
  }
}
