// `cgad bench`: the summary of the benchmarks in bench/ (bench_summary.hpp), as text or JSON.
#include "cli_support.hpp"
#include "commands.hpp"

#include "cgad/bench/summary.hpp"
#include "cgad/fastpath/thread_pool.hpp"
#include "cgad/core/errors.hpp"

#include <iostream>
#include <memory>

namespace cgad::cli {
namespace {

struct BenchOptions {
  bool quick = false;
  bool json = false;
  unsigned threads = 0;
};

void run_bench(const BenchOptions& options) {
  // Refused before any stage starts (the pool would refuse it too, after the first stage's log line).
  if (options.threads > fastpath::ThreadPool::kMaxThreads) {
    throw core::InputError("--threads must be at most " + std::to_string(fastpath::ThreadPool::kMaxThreads) +
                           " (0: every core), got " + std::to_string(options.threads));
  }
  const nlohmann::ordered_json summary = bench::run_summary({options.quick, options.threads});
  if (options.json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    std::cout << bench::summary_text(summary);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand("bench", "Summary benchmark: fast path vs copy, reference vs raw MPFR, CUDA");
  command->add_flag("--quick", options->quick, "small sizes, short samples (under 30 s)");
  command->add_flag("--json", options->json, "print JSON");
  command->add_option("--threads", options->threads, "CPU threads, at most 256 (default: every core)")
      ->check(at_most(fastpath::ThreadPool::kMaxThreads, "threads (0: every core)"));
  command->callback([options] { run_bench(*options); });
}

}  // namespace cgad::cli
