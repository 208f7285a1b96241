// The `cgad` command as a user meets it: exit status, one-line errors, and files that are either complete
// results or untouched.
#include "support/cli_harness.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/fastpath/fastpath.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

using cgad::testing::Outcome;
using cgad::testing::slurp;
using CliTest = cgad::testing::CgadCommandTest;

TEST_F(CliTest, GateJsonHasEveryRowAndExactEnds) {
  const Outcome o = cgad("gate --alpha 0.2 --tau-cut 8 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto table = nlohmann::json::parse(o.out);
  ASSERT_EQ(table["rows"].size(), 10u);  // τ = 0 … τ_cut + 1
  EXPECT_EQ(table["precision_bits"], 257);
  const std::string one = table["rows"][0]["sigma"];
  EXPECT_EQ(one.rfind("1.000000000000000000000000000000", 0), 0u) << one;
  EXPECT_GE(one.find('e') - 1, 30u);  // at least 30 significant digits
  for (int tau : {8, 9})
    EXPECT_EQ(table["rows"][tau]["sigma"].get<std::string>().find_first_not_of("0.e+"), std::string::npos);
  const Outcome wide = cgad("gate --tau-cut 8 --json --precision 512");
  EXPECT_GT(nlohmann::json::parse(wide.out)["rows"][1]["sigma"].get<std::string>().size(), one.size() + 70);
}

TEST_F(CliTest, GateRefusesBadInput) {
  expect_refused(cgad("gate --alpha -0.1"), "alpha");
  expect_refused(cgad("gate --alpha abc"), "alpha");
  expect_refused(cgad("gate --tau-cut 0"), "tau-cut");
  expect_refused(cgad("gate --precision 16"), "precision");
  expect_refused(cgad("gate --no-such-flag"), "no-such-flag");
  expect_refused(cgad(""), "subcommand");
}

const char* kStream =
    "{\"params\": [1, \"0.5\", -2.25]}\n"
    "{\"grad\": [0.1, -0.2, 0.3], \"tau\": 0}\n"
    "{\"grad\": [0.1, \"nan\", 0.3], \"tau\": 1}\n"
    "\n"
    "{\"grad\": [1e-3, 2, -3], \"tau\": 40, \"fragment\": 0}\n";

TEST_F(CliTest, ReplayWritesOneLinePerEventAndReportsTheSkippedOne) {
  const fs::path in = write("s.jsonl", kStream);
  const Outcome o = cgad("replay --input " + in.string() + " --output " + (dir_ / "out.jsonl").string());
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("s.jsonl:3: event 1 skipped: non-finite pseudo-gradient at element 1"), std::string::npos)
      << o.err;
  std::ifstream out(dir_ / "out.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["skipped"], true);
  EXPECT_EQ(lines[1]["skip_reason"], "nonfinite-gradient");
  EXPECT_EQ(lines[1]["params"], lines[0]["params"]);  // the skipped event changed nothing
  EXPECT_EQ(lines[1]["state"], lines[0]["state"]);
  EXPECT_EQ(lines[2]["tau"], 40);
  EXPECT_EQ(lines[2]["skipped"], false);  // past τ_cut with `apply`: the pure-decay step runs
  EXPECT_NE(lines[2]["params"], lines[1]["params"]);
  EXPECT_EQ(lines[2]["state"]["t"], nlohmann::json::array({2}));
  // with `skip` the same event is dropped
  const Outcome skip = cgad("replay --on-zero-gate skip --input " + in.string() + " --output -");
  ASSERT_EQ(skip.status, 0) << skip.err;
  std::istringstream skipped(skip.out);
  std::string line;
  for (int i = 0; i < 3; ++i) std::getline(skipped, line);
  EXPECT_EQ(nlohmann::json::parse(line)["skip_reason"], "zero-gate");
}

TEST_F(CliTest, ReplayRefusesBadStreamsWithTheLineAndKeepsTheOldOutput) {
  const fs::path out = write("out.jsonl", "previous result\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0}\n{\"grad\": [1, 2], \"tau\": 0\n", ":3: not a valid JSON"},
      {"{\"params\": [1, 2]}\n{\"grad\": [1], \"tau\": 0}\n", ":2: pseudo-gradient has 1 elements"},
      {"{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": -1}\n", ":2: \"tau\" must be a non-negative integer"},
      {"{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 1.5}\n", ":2: \"tau\" must be a non-negative integer"},
      {"{\"params\": [1, 2]}\n{\"grad\": [1, 2]}\n", ":2: missing \"tau\""},
      {"{\"params\": [1, 2]}\n{\"grad\": [1, \"x\"], \"tau\": 0}\n", ":2: grad[1]: 'x' is not a number"},
      {"{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0, \"lr\": 3}\n", ":2: unknown key \"lr\""},
      {"{\"params\": [1, 2]}\n{\"grad\": [1, true], \"tau\": 0}\n", "grad[1] must be a number"},
      {"{\"params\": []}\n", ":1: \"params\" is empty"},
      {"", "empty input"},
      {"[1, 2]\n", ":1: each line must be a JSON object"},
      {"{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0, \"fragment\": 1}\n", "fragment 1 does not exist"},
  };
  for (const auto& [text, message] : cases) {
    const fs::path in = write("bad.jsonl", text);
    expect_refused(cgad("replay --input " + in.string() + " --output " + out.string()), message);
    EXPECT_EQ(slurp(out), "previous result\n") << text;
  }
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".out.jsonl."), std::string::npos) << "temporary file left behind";
  }
  expect_refused(cgad("replay --input " + (dir_ / "missing.jsonl").string() + " --output " + out.string()),
                 "cannot open");
  const fs::path good = write("good.jsonl", kStream);
  expect_refused(cgad("replay --lr -1 --input " + good.string() + " --output " + out.string()), "lr");
  expect_refused(cgad("replay --optimizer adamw --input " + good.string() + " --output " + out.string()), "adamw");
  expect_refused(cgad("replay --on-zero-gate maybe --input " + good.string() + " --output " + out.string()),
                 "on-zero-gate");
  expect_refused(
      cgad("replay --optimizer nesterov --fragments 2 --input " + good.string() + " --output " + out.string()),
      "fragments");
  EXPECT_EQ(slurp(out), "previous result\n");
}

// The main job on its defaults writes a complete report: every section, and every file report.md names.
TEST_F(CliTest, ReportWritesEverySectionAndTheFilesItLinks) {
  const fs::path out = dir_ / "report";
  const Outcome o = cgad("report --out " + out.string());
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find((out / "report.md").string()), std::string::npos) << o.out;
  // The printed summary: one line per section.
  for (const char* line : {"\n  gate: ", "\n  replay: ", "\n  bound: ", "\n  bias sweep", "\n  rounding noise",
                           "\n  simulate: ", "\n  bench (quick): "}) {
    EXPECT_NE(o.out.find(line), std::string::npos) << line << " in " << o.out;
  }
  const std::string md = slurp(out / "report.md");
  for (const char* heading :
       {"## 1. The staleness gate", "## 2. Reference replay", "## 3. The convergence bound",
        "## 4. The staleness-bias term", "## 5. Rounding noise", "## 6. Asynchronous DiLoCo", "## 7. Performance"}) {
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
  }
  EXPECT_EQ(md.find("refuted"), std::string::npos);
  EXPECT_EQ(md.find("undetermined"), std::string::npos);
  for (const char* file :
       {"gate.csv", "gate.png", "example_stream.jsonl", "replay.csv", "replay.png", "bound.csv", "bias_sweep.csv",
        "bias_sweep.png", "noise.csv", "noise_v_bias.png", "noise_v_rms.png", "bench.json"}) {
    EXPECT_GT(fs::file_size(out / file), 100u) << file;
  }
  // Files are written through a temporary and renamed into place; they get the mode a directly created file
  // would (0666 less the umask the command inherits from this process), not mkstemp's 0600.
  const ::mode_t umask = ::umask(0);
  ::umask(umask);
  for (const char* file : {"report.md", "gate.png", "simulate.json"}) {
    EXPECT_EQ(static_cast<unsigned>(fs::status(out / file).permissions()), 0666u & ~static_cast<unsigned>(umask))
        << file;
  }
  // Every figure and data file the markdown links or names in backticks is there.
  const std::regex linked(R"(\]\(([A-Za-z0-9_.]+)\)|`([A-Za-z0-9_]+\.(?:csv|json|jsonl|png))`)");
  for (auto it = std::sregex_iterator(md.begin(), md.end(), linked); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
    EXPECT_TRUE(fs::exists(out / name)) << name;
  }
  // The example stream it writes replays through `cgad replay` like any user's.
  EXPECT_EQ(cgad("replay --input " + (out / "example_stream.jsonl").string() + " --output -").status, 0);
}

// The fast-path backend writes the bits the library computes: replay through the CLI and through CpuOptimizer
// directly, then compare every parameter and moment after every event as parsed floats.
TEST_F(CliTest, FastpathReplayWritesTheLibrarysBits) {
  const fs::path in = write("s.jsonl", kStream);
  for (const char* state : {"fp32", "bf16", "q8"}) {
    const Outcome o = cgad(std::string("replay --backend fastpath --params fp32 --state ") + state + " --input " +
                           in.string() + " --output -");
    ASSERT_EQ(o.status, 0) << o.err;
    cgad::fastpath::StepConfig config;
    config.params = cgad::fastpath::ParamFormat::fp32;
    config.state = cgad::fastpath::parse_state_format(state);
    cgad::fastpath::CpuOptimizer optimizer(config, 3);
    std::vector<float> params{1.0f, 0.5f, -2.25f}, m(3);
    const std::vector<std::pair<std::vector<float>, std::int64_t>> events{
        {{0.1f, -0.2f, 0.3f}, 0}, {{0.1f, std::nanf(""), 0.3f}, 1}, {{1e-3f, 2.0f, -3.0f}, 40}};
    std::istringstream lines(o.out);
    for (const auto& [grad, tau] : events) {
      optimizer.step(std::span<float>(params), grad, tau);
      optimizer.advance_round();
      optimizer.read_buffer("m", m);
      std::string line;
      ASSERT_TRUE(std::getline(lines, line));
      const auto record = nlohmann::json::parse(line);
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(std::stof(record["params"][i].get<std::string>()), params[i])
            << state << " event " << record["event"];
        EXPECT_EQ(std::stof(record["state"]["m"][i].get<std::string>()), m[i]) << state << " event " << record["event"];
      }
    }
  }
}

TEST_F(CliTest, FastpathOptionsAreRefusedWhereTheyWouldBeIgnoredOrAreWrong) {
  const fs::path in = write("s.jsonl", kStream);
  const std::string io = " --input " + in.string() + " --output -";
  expect_refused(cgad("replay --state q8" + io), "--state applies to --backend fastpath only");
  expect_refused(cgad("replay --backend fastpath --state q9" + io), "q9");
  expect_refused(cgad("replay --backend fastpath --params fp16" + io), "fp16");
  expect_refused(cgad("replay --backend fastpath --device gpu" + io), "device");
  expect_refused(cgad("replay --backend fastpath --optimizer delayed-nesterov" + io), "delayed-nesterov");
  if (!cgad::fastpath::cuda_device_available()) {
    expect_refused(cgad("replay --backend fastpath --device cuda" + io), "--device cuda");
  }
}

}  // namespace
