// Bit-exact fingerprint of the fast-path CPU step, for checking that a performance change moves no bit:
// FNV-1a over the parameter bits and every state byte after 50 steps (3001 parameters, gradients of mixed
// scales plus steps at 1e-30, 1e30 and 1e-42 for the v = 0 guard, overflow and subnormals), for every
// optimizer x params x state x rounding, with 1 and 2 threads (a mismatch between them is flagged). Run it
// before and after a change and diff the outputs. Not part of the build; from the repository root:
//   g++ -O2 -std=c++20 -ffp-contract=off -Ifastpath/include -Ireference/include -Iproptests \
//     fastpath/tools/step_fingerprint.cpp build-perf/fastpath/libcgad_fastpath.a \
//     build-perf/reference/libcgad_reference.a -L/usr/local/cuda/lib64 -lcudart -lmpfr -lgmp -lpthread \
//     -o /tmp/step_fingerprint
#include "fastpath_test_support.hpp"
#include <cstdio>
using namespace cgad::fastpath;
using namespace cgad::fastpath::testing;
namespace ref = cgad::reference;
static std::uint64_t fnv(std::uint64_t h, const std::vector<unsigned char>& b) {
  for (unsigned char c : b) { h ^= c; h *= 0x100000001b3ull; }
  return h;
}
int main() {
  std::uint64_t total = 0xcbf29ce484222325ull;
  for (auto kind : {ref::OptimizerKind::cgad, ref::OptimizerKind::pa_cgad, ref::OptimizerKind::adam_decay,
                    ref::OptimizerKind::adam, ref::OptimizerKind::nesterov, ref::OptimizerKind::sdm}) {
    for (StepConfig c : all_format_configs(kind)) {
      if (kind == ref::OptimizerKind::pa_cgad) c.fragments = 3;
      const std::size_t n = 3001;
      std::uint64_t per_thread[2];
      for (unsigned threads : {1u, 2u}) {
        CpuOptimizer opt(c, n, threads);
        Params p(c, random_vector(n, 7));
        for (int s = 0; s < 50; ++s) {
          const std::size_t fragment = c.fragments > 1 ? s % c.fragments : 0;
          const std::size_t size = opt.planner().fragment_size(fragment);
          float scale = 1.0f;
          if (s == 20) scale = 1e-30f;  // v underflow / guard
          if (s == 30) scale = 1e30f;   // overflow to inf
          if (s == 31) scale = 1e-42f;  // subnormal gradients
          const auto grad = random_vector(size, 100 + s, scale);
          p.step(opt, grad, (s * 7) % 41, fragment);
          if (s % 10 == 9) opt.advance_round();
        }
        std::uint64_t h = fnv(0xcbf29ce484222325ull, p.bytes());
        h = fnv(h, state_bytes(opt));
        per_thread[threads - 1] = h;
      }
      std::printf("%-40s %016llx%s\n", describe(c).c_str(), (unsigned long long)per_thread[0],
                  per_thread[0] == per_thread[1] ? "" : "  THREAD-MISMATCH");
      total = total * 31 + per_thread[0];
    }
  }
  std::printf("TOTAL %016llx\n", (unsigned long long)total);
}
