// `cgad bound` and `cgad verify-bound` as a user meets them: refusals (exit 2, one line), JSON that parses
// and says "proved", a PNG that is a PNG, and no figure left behind when a run is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status = -1;
  std::string out;  // stdout; stderr goes to a file read into `err`
  std::string err;
};

CliRun cgad(const std::string& args) {
  const fs::path err_file = fs::temp_directory_path() / ("cgad_theory_cli_" + std::to_string(::getpid()) + ".err");
  const std::string command = std::string(CGAD_BINARY) + " " + args + " 2>" + err_file.string() + " </dev/null";
  CliRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) run.out.append(buffer.data(), n);
  const int raw = ::pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(err_file);
  run.err.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(err_file);
  return run;
}

void expect_refused(const std::string& args, const std::string& fragment) {
  const CliRun r = cgad(args);
  EXPECT_EQ(r.status, 2) << args << ": " << r.err;
  EXPECT_EQ(r.err.rfind("cgad: ", 0), 0u) << args << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": wanted '" << fragment << "' in " << r.err;
  EXPECT_TRUE(r.out.empty()) << args;
}

TEST(TheoryCli, BoundRefusesBadInput) {
  expect_refused("bound --alpha -0.5", "alpha");
  expect_refused("bound --alpha nan", "alpha");
  expect_refused("bound --alpha abc", "alpha");
  expect_refused("bound --tau-cut 0", "tau_cut");
  expect_refused("bound --tau-cut 1000001", "tau-cut");
  expect_refused("bound --precision 65536", "precision");
  expect_refused("bound --precision 8", "precision");
}

TEST(TheoryCli, BoundJsonIsCertified) {
  const CliRun r = cgad("bound --alpha 0.2 --tau-cut 32 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["B1"]["integer_argmax"], 5);
  // ≥ 30 significant digits, as the issue asks: "1." plus at least 29 more digits before the exponent.
  EXPECT_GE(j["B1"]["value"].get<std::string>().find('e'), 31u);
  for (const auto& q : j["inequalities"]) EXPECT_EQ(q["verdict"], "proved") << q["statement"];
  const CliRun zero = cgad("bound --alpha 0 --tau-cut 32 --json");
  ASSERT_EQ(zero.status, 0) << zero.err;
  for (const auto& q : nlohmann::json::parse(zero.out)["inequalities"]) {
    EXPECT_EQ(q["rhs_enclosure"]["lo"], "inf");
    EXPECT_NE(q["verdict"].get<std::string>().find("vacuous"), std::string::npos);
  }
}

TEST(TheoryCli, VerifyBoundRefusesBadInputBeforeRunning) {
  expect_refused("verify-bound --objective rosenbrock", "objective");
  expect_refused("verify-bound --delays poisson", "delay");
  expect_refused("verify-bound --optimizer sgd", "optimizer");
  expect_refused("verify-bound --steps 0", "steps");
  expect_refused("verify-bound --tau-max -1", "tau-max");
  expect_refused("verify-bound --eta 0", "eta");
  expect_refused("verify-bound --noise 1", "noise");
  expect_refused("verify-bound --seed -1", "seed");
  expect_refused("verify-bound --sweep-tau-max --alpha -1", "alpha");
  expect_refused("verify-bound --steps 10 --plot /nonexistent-dir/x.png", "directory");
}

TEST(TheoryCli, VerifyBoundJsonAndPlot) {
  const fs::path png = fs::temp_directory_path() / ("cgad_theory_cli_" + std::to_string(::getpid()) + ".png");
  const CliRun r = cgad("verify-bound --objective sine-ripple --delays pareto --tau-max 32 --steps 300 --seed 4 "
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
  fs::remove(png);
}

}  // namespace
