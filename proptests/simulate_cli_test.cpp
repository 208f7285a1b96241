// `cgad simulate` and `cgad merge` as a user meets them, on tiny sweeps: shards merged back equal the unsharded
// run, merge refuses what does not belong together, --jobs changes nothing, a diverging configuration is a
// result (exit 0), bad input is one line and exit 2, and --plot writes PNG files.
#include "cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

// A sweep of 2 methods × 2 τ × 2 seeds on an 8-dimensional NQM, 30 rounds: 8 runs, well under a second.
const std::string kTiny = "--optimizer cgad,nesterov --tau 0,3 --size 8 --state fp32 --rounds 30 --seeds 2";

using cgad::testing::Outcome;
using cgad::testing::slurp;

class SimulateCli : public cgad::testing::CgadCommandTest {
 protected:
  Outcome ok(const std::string& args) const {
    Outcome o = cgad(args);
    EXPECT_EQ(o.status, 0) << args << ": " << o.err;
    return o;
  }
};

TEST_F(SimulateCli, ShardsMergedEqualTheUnshardedRun) {
  const Outcome whole_json = ok("simulate " + kTiny + " --json");
  const Outcome whole_table = ok("simulate " + kTiny);
  ok("simulate " + kTiny + " --shard 0/2 --out part0.json");
  ok("simulate " + kTiny + " --shard 1/2 --out part1.json");
  const auto whole = nlohmann::json::parse(whole_json.out);
  ASSERT_EQ(whole["runs"].size(), 8u);
  for (const auto& run : whole["runs"]) EXPECT_EQ(run["status"], "finished") << run.dump();
  // Every record (losses as exact hexfloat text, curves, counts), every cell and the grid are identical.
  EXPECT_EQ(ok("merge part0.json part1.json --json").out, whole_json.out);
  EXPECT_EQ(ok("merge part1.json part0.json").out, whole_table.out);
  const auto part0 = nlohmann::json::parse(slurp(dir_ / "part0.json"));
  EXPECT_EQ(part0["runs"].size(), 4u);
  for (const auto& run : part0["runs"]) EXPECT_EQ(run["index"].get<int>() % 2, 0);
}

TEST_F(SimulateCli, MergeRefusesOtherSweepsDuplicatesAndMissingRuns) {
  ok("simulate " + kTiny + " --shard 0/2 --out part0.json");
  ok("simulate " + kTiny + " --shard 1/2 --out part1.json");
  ok("simulate --optimizer cgad,nesterov --tau 0,3 --size 8 --state fp32 --rounds 31 --seeds 2 --shard 1/2 --out other.json");
  expect_refused(cgad("merge part0.json other.json"), "different sweep");
  expect_refused(cgad("merge part0.json part1.json part0.json"), "run 0 is in both part0.json and part0.json");
  expect_refused(cgad("merge part0.json"), "4 of 8 runs are missing (first: run 1 = cgad tau 0 size 8 fp32 seed 2)");
  const Outcome partial = ok("merge part0.json --allow-partial");
  EXPECT_NE(partial.out.find("4 of 8 runs are missing"), std::string::npos) << partial.out;
  EXPECT_NE(partial.out.find("incomplete: 1 of 2 runs missing"), std::string::npos) << partial.out;
  std::ofstream(dir_ / "junk.json") << "{not json";
  expect_refused(cgad("merge junk.json"), "junk.json: not JSON");
  expect_refused(cgad("merge absent.json"), "cannot read 'absent.json'");
  std::string edited = slurp(dir_ / "part1.json");
  edited.replace(edited.find("\"rounds\":30"), 11, "\"rounds\":29");
  std::ofstream(dir_ / "edited.json") << edited;
  expect_refused(cgad("merge part0.json edited.json"), "edited.json: its fingerprint does not match its grid");
}

TEST_F(SimulateCli, JobsDoNotChangeTheResult) {
  EXPECT_EQ(ok("simulate " + kTiny + " --jobs 1 --json").out, ok("simulate " + kTiny + " --jobs 2 --json").out);
}

TEST_F(SimulateCli, DivergingRunsAreReportedNotFatal) {
  // Nesterov at outer lr 1000 on the NQM (the recipe is 0.7): the loss passes 1000 × its initial value within
  // the first 10 rounds.
  const Outcome o = ok("simulate --optimizer nesterov,cgad --lr 1000 --tau 0 --size 8 --state fp32 --rounds 30 --seeds 2 --json");
  const auto j = nlohmann::json::parse(o.out);
  for (const auto& run : j["runs"]) {
    if (run["method"] != "nesterov") continue;
    EXPECT_EQ(run["status"], "diverged") << run.dump();
    EXPECT_FALSE(run["divergence"].get<std::string>().empty());
  }
  EXPECT_EQ(j["cells"][0]["diverged"], 2);
  EXPECT_TRUE(j["cells"][0]["final_loss_mean"].is_null());
  EXPECT_EQ(j["cells"][0]["note"], "all 2 diverged");
  const Outcome table = ok("simulate --optimizer nesterov --lr 1000 --tau 0 --size 8 --state fp32 --rounds 30 --seeds 2");
  EXPECT_NE(table.out.find("all 2 diverged"), std::string::npos) << table.out;
}

TEST_F(SimulateCli, UnsupportedCombinationsAreRecordedWithTheReason) {
  const Outcome o = ok("simulate --optimizer cgad,delayed-nesterov --params fp32 --state fp32,q8 --tau 2 --size 8 "
                       "--rounds 20 --seeds 1 --csv");
  EXPECT_NE(o.out.find("delayed-nesterov,2,8,q8,1,1,1,0,0,,,,\"unsupported: delayed-nesterov"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("delayed-nesterov,2,8,fp32,1,1,0,0,1,"), std::string::npos) << o.out;
}

TEST_F(SimulateCli, BadInputIsOneLineAndExitTwo) {
  expect_refused(cgad("simulate --optimizer cgad,lion"), "unknown optimizer 'lion'");
  expect_refused(cgad("simulate --tau -1"), "tau must be >= 0");
  expect_refused(cgad("simulate --tau 4,4"), "repeats a value");
  expect_refused(cgad("simulate --state q9"), "q9");
  expect_refused(cgad("simulate --seeds 0"), "--seeds must be >= 1");
  expect_refused(cgad("simulate --seeds 2 --seed 1,2"), "excludes");
  expect_refused(cgad("simulate --shard 2/2 --out p.json"), "shard must be I/N");
  expect_refused(cgad("simulate --shard 0/2"), "--shard needs --out");
  expect_refused(cgad("simulate --shard 0/2 --out p.json --json"), "does not apply to one shard");
  expect_refused(cgad("simulate --json --csv"), "choose one of --json and --csv");
  expect_refused(cgad("simulate --fragments 4"), "--fragments applies to pa-cgad");
  expect_refused(cgad("simulate --workers 0"), "no run of this sweep can run");
  expect_refused(cgad("simulate --optimizer delayed-nesterov --state q8"), "no run of this sweep can run");
  expect_refused(cgad("simulate --optimizer cgad,delayed-nesterov"), "no run with method delayed-nesterov can run");
  expect_refused(cgad("simulate --plot no/such/dir"), "no such directory");
  expect_refused(cgad("simulate --out no/such/part.json"), "--out: no such directory");
  expect_refused(cgad("merge"), "parts");
  EXPECT_FALSE(fs::exists(dir_ / "p.json"));
}

TEST_F(SimulateCli, EmptyNumbersDirectoriesAndHugeSweepsAreRefused) {
  // CLI11 would read an empty number as 0.
  for (const char* flag : {"--seed", "--tau", "--size", "--problem-seed", "--rounds", "--jobs"}) {
    expect_refused(cgad("simulate " + std::string(flag) + " ''"), "empty value");
  }
  fs::create_directories(dir_ / "adir");
  expect_refused(cgad("simulate " + kTiny + " --out adir"), "--out: 'adir' is a directory");
  expect_refused(cgad("merge adir"), "'adir' is not a regular file");
  expect_refused(cgad("simulate --seeds 10000000000"), "--seeds must be <= 1000000");
  expect_refused(cgad("simulate --tau 0,1,2,3,4,5,6,7,8,9 --seeds 100000"), "more than 1000000 runs");
}

TEST_F(SimulateCli, HyperparametersOfMethodsNotSweptAreRefused) {
  // Each flag is read by some methods only; with none of them swept it would change nothing.
  expect_refused(cgad("simulate --optimizer cgad --momentum 0.5"), "--momentum applies to nesterov,delayed-nesterov,sdm");
  for (const char* flag : {"--beta1 0.8", "--beta2 0.99", "--eps 1e-6", "--weight-decay 0.1"}) {
    expect_refused(cgad("simulate --optimizer nesterov,sdm " + std::string(flag)), "applies to cgad,pa-cgad,adam-decay,adam");
  }
  expect_refused(cgad("simulate --optimizer adam,nesterov --alpha 0.3"), "--alpha applies to cgad,pa-cgad,adam-decay");
  expect_refused(cgad("simulate --optimizer adam-decay --tau-cut 8"), "--tau-cut applies to cgad,pa-cgad");
  expect_refused(cgad("simulate --optimizer adam-decay --on-zero-gate skip"), "--on-zero-gate applies to cgad,pa-cgad");
  expect_refused(cgad("simulate --optimizer cgad --buffer 2"), "--buffer applies to delayed-nesterov");
  // With one method that reads it in the sweep, the flag is taken.
  ok("simulate --optimizer cgad,nesterov --momentum 0.5 --tau-cut 8 --tau 0 --size 8 --state fp32 --rounds 5 --seeds 1");
}

TEST_F(SimulateCli, HandEditedPartsAreRefused) {
  ok("simulate " + kTiny + " --shard 0/2 --out part0.json");
  ok("simulate " + kTiny + " --shard 1/2 --out part1.json");
  auto part = nlohmann::json::parse(slurp(dir_ / "part1.json"));
  part["runs"][0]["final_loss"] = "0x1p+1000";  // a "finished" run far past the divergence bound
  write("edited.json", part.dump());
  expect_refused(cgad("merge part0.json edited.json"), "edited.json: run 1: finished with final_loss 0x1p+1000");
  part["runs"][0]["final_loss"] = "0.5";
  write("edited.json", part.dump());
  expect_refused(cgad("merge part0.json edited.json"), "not hexfloat text as cgad writes it: '0.5'");
}

TEST_F(SimulateCli, PartlyDivergedCellsSaySo) {
  // Nesterov at outer lr 30 ends within a few × its initial loss on this NQM, so a divergence bound of 3 × the
  // initial loss splits the seeds; the split is checked, then the note must state it in every format.
  const std::string sweep = "simulate --optimizer nesterov --lr 30 --diverge-factor 3 --tau 0 --size 8 --state fp32 "
                            "--rounds 30 --seeds 6";
  const auto cell = nlohmann::json::parse(ok(sweep + " --json").out)["cells"][0];
  const int diverged = cell["diverged"], finished = cell["finished"];
  ASSERT_TRUE(diverged > 0 && finished > 0) << "no mixed cell: " << cell.dump();
  const std::string note = std::to_string(diverged) + " of 6 diverged; statistics over the " +
                           std::to_string(finished) + " finished";
  EXPECT_EQ(cell["note"], note);
  EXPECT_FALSE(cell["single_shot_risk"].is_null());
  const Outcome table = ok(sweep), csv = ok(sweep + " --csv");
  EXPECT_NE(table.out.find(note), std::string::npos) << table.out;
  EXPECT_NE(csv.out.find("\"" + note + "\""), std::string::npos) << csv.out;
}

TEST_F(SimulateCli, PlotWritesPngFigures) {
  fs::create_directories(dir_ / "figs");
  ok("simulate --optimizer cgad,adam-decay --tau 0,2 --size 8,16 --state fp32 --rounds 20 --seeds 2 --plot figs");
  for (const char* name : {"final_loss_fp32_size8.png", "final_loss_fp32_size16.png", "sigma_vs_size_fp32_tau0.png",
                           "sigma_vs_size_fp32_tau2.png"}) {
    const std::string png = slurp(dir_ / "figs" / name);
    ASSERT_GE(png.size(), 8u) << name;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << name;
  }
}

}  // namespace
