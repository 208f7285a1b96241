// `cgad bound` and `cgad verify-bound` as a user meets them: refusals (exit 2, one line), JSON that parses
// and says "proved", a PNG that is a PNG, and no figure left behind when a run is refused; the real
// gated-moment Adam update (--update) and the optimized-eta table and alpha scan of `cgad bound`.
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

using cgad::testing::Outcome;
using TheoryCli = cgad::testing::CgadCommandTest;

TEST_F(TheoryCli, BoundRefusesBadInput) {
  expect_refused(cgad("bound --alpha -0.5"), "alpha");
  expect_refused(cgad("bound --alpha nan"), "alpha");
  expect_refused(cgad("bound --alpha abc"), "alpha");
  expect_refused(cgad("bound --tau-cut 0"), "tau_cut");
  expect_refused(cgad("bound --tau-cut 1000001"), "tau-cut");
  expect_refused(cgad("bound --precision 65536"), "precision");
  expect_refused(cgad("bound --precision 8"), "precision");
}

TEST_F(TheoryCli, BoundJsonIsCertified) {
  const Outcome r = cgad("bound --alpha 0.2 --tau-cut 32 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["B1"]["integer_argmax"], 5);
  // ≥ 30 significant digits, as the issue asks: "1." plus at least 29 more digits before the exponent.
  EXPECT_GE(j["B1"]["value"].get<std::string>().find('e'), 31u);
  for (const auto& q : j["inequalities"]) EXPECT_EQ(q["verdict"], "proved") << q["statement"];
  const Outcome zero = cgad("bound --alpha 0 --tau-cut 32 --json");
  ASSERT_EQ(zero.status, 0) << zero.err;
  // The parsed document is kept: a range-for over a member of a temporary would iterate a destroyed object (the
  // temporary json dies before the loop body; ASan: heap-use-after-free).
  const auto zero_json = nlohmann::json::parse(zero.out);
  for (const auto& q : zero_json["inequalities"]) {
    EXPECT_EQ(q["rhs_enclosure"]["lo"], "inf");
    EXPECT_NE(q["verdict"].get<std::string>().find("vacuous"), std::string::npos);
  }
}

TEST_F(TheoryCli, VerifyBoundRefusesBadInputBeforeRunning) {
  expect_refused(cgad("verify-bound --objective rosenbrock"), "objective");
  expect_refused(cgad("verify-bound --delays poisson"), "delay");
  expect_refused(cgad("verify-bound --optimizer sgd"), "optimizer");
  expect_refused(cgad("verify-bound --steps 0"), "steps");
  expect_refused(cgad("verify-bound --tau-max -1"), "tau-max");
  expect_refused(cgad("verify-bound --eta 0"), "eta");
  expect_refused(cgad("verify-bound --noise 1"), "noise");
  expect_refused(cgad("verify-bound --seed -1"), "seed");
  expect_refused(cgad("verify-bound --sweep-tau-max --alpha -1"), "alpha");
  expect_refused(cgad("verify-bound --steps 10 --plot /nonexistent-dir/x.png"), "directory");
}

TEST_F(TheoryCli, VerifyBoundJsonAndPlot) {
  const fs::path png = dir_ / "trajectory.png";
  const Outcome r = cgad(
      "verify-bound --objective sine-ripple --delays pareto --tau-max 32 --steps 300 --seed 4 "
      "--precision 128 --json --plot " +
      png.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["descent_form"]["first_violation"].is_null());
  EXPECT_TRUE(j["design_form"]["first_violation"].is_null());
  EXPECT_EQ(j["steps"], 300);
  EXPECT_FALSE(j["series"].empty());
  std::ifstream in(png, std::ios::binary);
  std::string magic(8, '\0');
  in.read(magic.data(), 8);
  EXPECT_EQ(magic, std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST_F(TheoryCli, VerifyBoundRefusesBadUpdate) {
  expect_refused(cgad("verify-bound --update sgd"), "update");
  expect_refused(cgad("verify-bound --update sgd --sweep-tau-max"), "update");
  expect_refused(cgad("verify-bound --update CGAD-adam"), "update");
  expect_refused(cgad("verify-bound --update cgad-adam --optimizer ungated"), "contradicts");
  expect_refused(cgad("verify-bound --update adam --beta1 1"), "beta1");
  expect_refused(cgad("verify-bound --update adam --beta2 x"), "beta2");
  expect_refused(cgad("verify-bound --update adam --eps 0"), "eps");
  expect_refused(cgad("verify-bound --update cgad-adam --on-zero-gate drop"), "on-zero-gate");
  expect_refused(cgad("verify-bound --update cgad-adam --steps 10 --plot /nonexistent-dir/x.png"), "directory");
  // Matching gates are accepted.
  EXPECT_EQ(cgad("verify-bound --update cgad-adam --optimizer cgad --steps 5 --precision 128").status, 0);
}

TEST_F(TheoryCli, VerifyBoundRealUpdateSingleAndSweep) {
  const Outcome one = cgad(
      "verify-bound --update cgad-adam --objective sine-ripple --delays heavy-tail --tau-max 64 "
      "--steps 300 --seed 3 --precision 128 --json");
  ASSERT_EQ(one.status, 0) << one.err;
  const auto j = nlohmann::json::parse(one.out);
  EXPECT_EQ(j["run"], "cgad-adam");
  EXPECT_FALSE(j["descent_form"]["claimed"]);
  EXPECT_FALSE(j["design_form"]["claimed"]);
  EXPECT_TRUE(j["realized_form"]["claimed"]);
  EXPECT_TRUE(j["realized_form"]["first_violation"].is_null());
  EXPECT_GT(std::stod(j["realized_bias"].get<std::string>()), 0);
  EXPECT_LE(std::stod(j["realized_bias"].get<std::string>()), std::stod(j["mean_tau"].get<std::string>()));

  const fs::path png = dir_ / "sweep.png";
  const Outcome sweep = cgad(
      "verify-bound --update cgad-adam --objective sine-ripple --delays uniform --tau-max 16 "
      "--steps 200 --seed 3 --precision 128 --sweep-tau-max --json --plot " +
      png.string());
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  const auto s = nlohmann::json::parse(sweep.out);
  ASSERT_EQ(s["columns"].size(), 6u);
  EXPECT_EQ(s["columns"][3], "cgad-adam");
  ASSERT_EQ(s["rows"].size(), 5u);  // τ_max = 1, 2, 4, 8, 16
  for (const auto& row : s["rows"]) {
    for (const char* key : {"cgad", "adam-decay", "ungated", "cgad-adam", "adam-decay-adam", "adam"}) {
      ASSERT_TRUE(row.contains(key)) << key;
      EXPECT_TRUE(row[key]["realized_violation"].is_null()) << key;
    }
    // Same delays, same gate: the ideal CGAD run and CGAD-Adam share Σσ_tτ_t/T exactly.
    EXPECT_EQ(row["cgad"]["bias"], row["cgad-adam"]["bias"]);
  }
  std::ifstream in(png, std::ios::binary);
  std::string magic(8, '\0');
  in.read(magic.data(), 8);
  EXPECT_EQ(magic, std::string("\x89PNG\r\n\x1a\n", 8));
  // The text form prints both tables.
  const Outcome text = cgad("verify-bound --update adam --tau-max 4 --steps 50 --precision 128 --sweep-tau-max");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("adam-decay-adam"), std::string::npos);
  EXPECT_NE(text.out.find("R_T/(L*eta^2*G_run^2*T)"), std::string::npos);
}

TEST_F(TheoryCli, BoundPrintsTheOptimizedEtaComparisonAndTheAlphaScan) {
  const Outcome r = cgad("bound --json --alpha-scan");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& row : j["optimized_eta"]) {
    if (row["delay_law"] != "constant tau = 16") continue;
    found = true;
    EXPECT_LE(std::stod(row["bound_ratio"]["lo"].get<std::string>()), 6.8999);
    EXPECT_GE(std::stod(row["bound_ratio"]["hi"].get<std::string>()), 6.8998);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["alpha_scan"].size(), 14u);
  const Outcome text = cgad("bound");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("Optimized-eta comparison"), std::string::npos);
  EXPECT_EQ(text.out.find("e^alpha*W"), std::string::npos);  // the scan only with --alpha-scan
}

}  // namespace
