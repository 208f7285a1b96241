// `cgad replay` refuses Adam hyperparameters under which a step can move θ past 2^126 (core/hyperparams.hpp,
// adam_term_bound): with β1² ≥ β2 only ε bounds the Adam term |m̂|/(√v̂ + ε). Every backend refuses alike, with one
// line and exit status 2; a nearby combination the bound admits runs and stays finite.
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <string>

namespace {

class AdamTermRange : public cgad::testing::CgadCommandTest {
 protected:
  // One large pseudo-gradient and then zeros, three times: with β1 = 0.99 > √β2 the Adam term grows like
  // (β1/√β2)^t until √v̂ falls below ε; at ε = 1e-30 the last event put θ at -Inf (exit 0, "0 skipped").
  std::string stream() const {
    std::string text = "{\"params\": [1]}\n";
    for (int burst = 0; burst < 3; ++burst) {
      text += "{\"grad\": [1e18], \"tau\": 0}\n";
      for (int k = 0; k < 80; ++k) text += "{\"grad\": [0], \"tau\": 0}\n";
    }
    return text;
  }
};

TEST_F(AdamTermRange, BetaOneSquaredAtLeastBetaTwoWithATinyEpsIsRefusedByEveryBackend) {
  write("t.jsonl", stream());
  for (const std::string backend : {"fastpath --params fp32", "reference"}) {
    const auto o = cgad("replay --backend " + backend +
                        " --beta1 0.99 --beta2 0.1 --eps 1e-30 --lr 1 --input t.jsonl --output out.jsonl");
    expect_refused(o, "2^126");
    EXPECT_NE(o.err.find("beta1^2 < beta2"), std::string::npos) << o.err;
  }
}

TEST_F(AdamTermRange, AnEpsTheBoundAdmitsKeepsEveryParameterFinite) {
  write("t.jsonl", stream());
  // lr = 1: the rule asks eps >= 2^-63 / sqrt(1 - beta2) = 1.14e-19 here; 1e-10 is well inside.
  const auto o = cgad(
      "replay --backend fastpath --params fp32 --beta1 0.99 --beta2 0.1 --eps 1e-10 --lr 1 "
      "--input t.jsonl --output out.jsonl");
  ASSERT_EQ(o.status, 0) << o.err;
  std::istringstream lines(cgad::testing::slurp(dir_ / "out.jsonl"));
  std::string line;
  int records = 0;
  while (std::getline(lines, line)) {
    const auto record = nlohmann::json::parse(line);
    const double theta = std::stod(record["params"][0].get<std::string>());
    EXPECT_TRUE(std::isfinite(theta)) << "event " << records << ": " << line;
    ++records;
  }
  EXPECT_EQ(records, 243);
}

}  // namespace
