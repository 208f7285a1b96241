// The β rule on the decimal as written (core/optimizer_options.hpp, parse_beta; docs/design.md §3): `cgad replay`
// takes --beta1, --beta2 and --momentum just below 1 whose float is 1 (0.99999999, 0.999999999) on every backend,
// as torch.optim.Adam and the reference take them, since cgad semantics forms 1 − β from the decimal; it refuses
// with one line quoting the text what no arithmetic of the run can represent: 1 and beyond, and bitsandbytes'
// semantics, whose 1.0f − β would be 0. Before, each of these was refused as "got 1".
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace {

class BetaNearOne : public cgad::testing::CgadCommandTest {
 protected:
  // The parameters after the last event of `cgad replay ARGS` over three events.
  std::vector<double> replay(const std::string& args) {
    write("t.jsonl",
          "{\"params\": [1, -2]}\n{\"grad\": [0.5, -1], \"tau\": 0}\n{\"grad\": [0.25, 2], \"tau\": 1}\n"
          "{\"grad\": [-0.75, 0.125], \"tau\": 0}\n");
    const auto o = cgad("replay " + args + " --input t.jsonl --output out.jsonl");
    EXPECT_EQ(o.status, 0) << args << ": " << o.err;
    std::vector<double> theta;
    std::string last, line;
    std::istringstream lines(cgad::testing::slurp(dir_ / "out.jsonl"));
    while (std::getline(lines, line)) last = line;
    if (last.empty()) return theta;
    const auto record = nlohmann::json::parse(last);
    for (const auto& x : record.at("params")) theta.push_back(std::stod(x.get<std::string>()));
    return theta;
  }
};

TEST_F(BetaNearOne, BetasWhoseFloatIsOneRunOnEveryBackend) {
  for (const std::string flags : {"--beta2 0.99999999", "--beta1 0.99999999 --beta2 0.999999999",
                                  "--optimizer nesterov --momentum 0.999999999"}) {
    const auto fast = replay("--backend fastpath --params fp32 " + flags);
    const auto reference = replay("--backend reference " + flags);
    ASSERT_EQ(fast.size(), 2u) << flags;
    ASSERT_EQ(reference.size(), 2u) << flags;
    for (std::size_t i = 0; i < 2; ++i) {
      // Three events, each moving θ (|θ| < 4) by a few float roundings of a move below 1 (η = 1e-3 for Adam, whose
      // term here is at most 1 in size; 0.7·(|d| + |b|) < 6 for Nesterov) plus θ's own rounding: under 2^-18.
      EXPECT_TRUE(std::isfinite(fast[i])) << flags;
      EXPECT_NEAR(fast[i], reference[i], 0x1p-18) << flags << " parameter " << i;
    }
  }
}

TEST_F(BetaNearOne, RefusalsQuoteTheText) {
  write("t.jsonl", "{\"params\": [1]}\n{\"grad\": [0.5], \"tau\": 0}\n");
  for (const std::string backend : {"fastpath --params fp32", "reference"}) {
    for (const std::string text : {"1", "1.0000001", "1e0"}) {
      const std::string run = "replay --backend " + backend + " --input t.jsonl --output out.jsonl ";
      expect_refused(cgad(run + "--beta2 " + text), "beta2 must lie in [0, 1), got '" + text + "'");
      expect_refused(cgad(run + "--optimizer nesterov --momentum " + text),
                     "momentum must lie in [0, 1), got '" + text + "'");
    }
  }
  // verify-bound's MPFR update (core::parse_beta there too): it showed 1.0000001000000000000e+00.
  expect_refused(cgad("verify-bound --update adam --beta2 1.0000001"), "beta2 must lie in [0, 1), got '1.0000001'");
  expect_refused(cgad("replay --backend fastpath --params fp32 --state q8 --q8-semantics bnb --beta2 0.99999999 "
                      "--input t.jsonl --output out.jsonl"),
                 "1.0f - beta), which would be 0, got '0.99999999'");
}

}  // namespace
