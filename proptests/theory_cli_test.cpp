// `cgad bound` and `cgad verify-bound` as a user meets them: refusals (exit 2, one line), JSON that parses
// and says "proved", a PNG that is a PNG, and no figure left behind when a run is refused.
#include "cli_harness.hpp"

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
  for (const auto& q : nlohmann::json::parse(zero.out)["inequalities"]) {
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
  const Outcome r = cgad("verify-bound --objective sine-ripple --delays pareto --tau-max 32 --steps 300 --seed 4 "
                     "--precision 128 --json --plot " + png.string());
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

}  // namespace
