// `cgad simulate` and `cgad merge` as a user meets them, on tiny sweeps: shards merged back equal the unsharded
// run, merge refuses what does not belong together, --jobs changes nothing, a diverging configuration is a
// result (exit 0), bad input is one line and exit 2, and --plot writes PNG files.
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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
  ok("simulate --optimizer cgad,nesterov --tau 0,3 --size 8 --state fp32 --rounds 31 --seeds 2 --shard 1/2 --out "
     "other.json");
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
  const Outcome o =
      ok("simulate --optimizer nesterov,cgad --lr 1000 --tau 0 --size 8 --state fp32 --rounds 30 --seeds 2 --json");
  const auto j = nlohmann::json::parse(o.out);
  for (const auto& run : j["runs"]) {
    if (run["method"] != "nesterov") continue;
    EXPECT_EQ(run["status"], "diverged") << run.dump();
    EXPECT_FALSE(run["divergence"].get<std::string>().empty());
  }
  EXPECT_EQ(j["cells"][0]["diverged"], 2);
  EXPECT_TRUE(j["cells"][0]["final_loss_mean"].is_null());
  EXPECT_EQ(j["cells"][0]["note"], "all 2 diverged");
  const Outcome table =
      ok("simulate --optimizer nesterov --lr 1000 --tau 0 --size 8 --state fp32 --rounds 30 --seeds 2");
  EXPECT_NE(table.out.find("all 2 diverged"), std::string::npos) << table.out;
}

TEST_F(SimulateCli, UnsupportedCombinationsAreRecordedWithTheReason) {
  const Outcome o =
      ok("simulate --optimizer cgad,delayed-nesterov --params fp32 --state fp32,q8 --tau 2 --size 8 "
         "--rounds 20 --seeds 1 --csv");
  EXPECT_NE(
      o.out.find("delayed-nesterov,2,8,q8,1,1,1,0,0,0," + std::string(12, ',') + "\"unsupported: delayed-nesterov"),
      std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("delayed-nesterov,2,8,fp32,1,1,0,0,0,1,"), std::string::npos) << o.out;
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
  expect_refused(cgad("simulate --optimizer cgad --momentum 0.5"),
                 "--momentum applies to nesterov,delayed-nesterov,sdm");
  for (const char* flag : {"--beta1 0.8", "--beta2 0.99", "--eps 1e-6", "--weight-decay 0.1"}) {
    expect_refused(cgad("simulate --optimizer nesterov,sdm " + std::string(flag)),
                   "applies to cgad,pa-cgad,adam-decay,adam");
  }
  expect_refused(cgad("simulate --optimizer adam,nesterov --alpha 0.3"), "--alpha applies to cgad,pa-cgad,adam-decay");
  expect_refused(cgad("simulate --optimizer adam-decay --tau-cut 8"), "--tau-cut applies to cgad,pa-cgad");
  expect_refused(cgad("simulate --optimizer adam-decay --on-zero-gate skip"), "--on-zero-gate applies to cgad,pa-cgad");
  expect_refused(cgad("simulate --optimizer cgad --buffer 2"), "--buffer applies to delayed-nesterov");
  // With one method that reads it in the sweep, the flag is taken.
  ok("simulate --optimizer cgad,nesterov --momentum 0.5 --tau-cut 8 --tau 0 --size 8 --state fp32 --rounds 5 --seeds "
     "1");
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

// A part records the cgad version that wrote it; merge refuses one from another version unless told otherwise.
TEST_F(SimulateCli, PartsOfAnotherCgadVersionAreRefusedUnlessAllowed) {
  ok("simulate " + kTiny + " --shard 0/2 --out part0.json");
  ok("simulate " + kTiny + " --shard 1/2 --out part1.json");
  auto part = nlohmann::json::parse(slurp(dir_ / "part1.json"));
  ASSERT_TRUE(part.contains("cgad_version")) << part.dump();
  part["cgad_version"] = "0.0.1";
  write("old.json", part.dump());
  expect_refused(cgad("merge part0.json old.json"), "old.json was written by cgad 0.0.1, this is cgad ");
  EXPECT_EQ(ok("merge part0.json old.json --allow-other-versions --json").out,
            ok("merge part0.json part1.json --json").out);
}

TEST_F(SimulateCli, PartlyDivergedCellsSaySo) {
  // Nesterov at outer lr 30 ends within a few × its initial loss on this NQM, so a divergence bound of 3 × the
  // initial loss splits the seeds; the split is checked, then the note must state it in every format.
  const std::string sweep =
      "simulate --optimizer nesterov --lr 30 --diverge-factor 3 --tau 0 --size 8 --state fp32 "
      "--rounds 30 --seeds 6";
  const auto cell = nlohmann::json::parse(ok(sweep + " --json").out)["cells"][0];
  const int diverged = cell["diverged"], finished = cell["finished"];
  ASSERT_TRUE(diverged > 0 && finished > 0) << "no mixed cell: " << cell.dump();
  const std::string note =
      std::to_string(diverged) + " of 6 diverged; statistics over the " + std::to_string(finished) + " finished";
  EXPECT_EQ(cell["note"], note);
  EXPECT_FALSE(cell["single_shot_risk"].is_null());
  const Outcome table = ok(sweep), csv = ok(sweep + " --csv");
  EXPECT_NE(table.out.find(note), std::string::npos) << table.out;
  EXPECT_NE(csv.out.find("\"" + note + "\""), std::string::npos) << csv.out;
}

// The JSON lines of a file, blank lines skipped.
std::vector<nlohmann::json> json_lines(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// The replay --record-deltas names on stderr: "cgad replay --backend fastpath --input FILE <flags> --output FILE ...",
// without "cgad " and from " --output" on.
std::string replay_arguments(const std::string& err) {
  const std::size_t begin = err.find("cgad replay --backend fastpath");
  const std::size_t end = err.find(" --output FILE", begin);
  if (begin == std::string::npos || end == std::string::npos) return "";
  return err.substr(begin + 5, end - begin - 5);
}

// --record-deltas writes the server's arrivals as a replay stream that `cgad replay --backend fastpath` takes
// with the flags the command prints: θ_0 and the model's tensors (the MLP's W1, b1, w2, b2; the NQM's one),
// then one event per round with τ ≤ r and PA-CGAD's fragment r mod P. The replay's events then agree with the
// run's record: the same skips and applications, the same realized staleness (PA-CGAD's ages included). This
// test cannot see the run's final parameters (the CLI prints none); simulate_engine_test's
// RecordedArrivalsReplayThroughTheFastPathToTheFinalParametersBitForBit checks those, bit for bit, through the
// optimizer replay's CPU engine builds.
TEST_F(SimulateCli, RecordedDeltasAreAReplayStreamTheFastPathReplays) {
  struct Case {
    std::string args;
    std::int64_t rounds;
    std::size_t fragments;
    std::vector<std::size_t> tensors;
    bool skips;         // some events skipped at a zero gate, so the counts below compare something
    std::int64_t idle;  // rounds before the first arrival (constant delays: τ)
  };
  const std::vector<Case> cases = {
      {"--objective teacher-student --size 8 --optimizer pa-cgad --fragments 3 --state q8 --delays uniform --tau 9 "
       "--tau-cut 6 --on-zero-gate skip --rounds 40 --seed 3",
       40,
       3,
       {128, 8, 8, 1},
       true,
       0},
      {"--objective teacher-student --size 256 --optimizer adam --state q8 --q8-semantics bnb --tau 2 --rounds 12 "
       "--seeds 1",
       12,
       1,
       {4096, 256, 256, 1},
       false,
       2},
      {"--size 40 --optimizer nesterov --params fp32 --state fp32 --tau 1 --rounds 15 --seed 9 --rounding stochastic",
       15,
       1,
       {40},
       false,
       1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    fs::remove(dir_ / "d.jsonl");
    const Outcome o = ok("simulate " + c.args + " --record-deltas d.jsonl --json");
    const auto run = nlohmann::json::parse(o.out)["runs"].at(0);
    ASSERT_EQ(run["status"], "finished") << run.dump();
    const std::vector<nlohmann::json> stream = json_lines(dir_ / "d.jsonl");
    const std::int64_t arrivals = c.rounds - c.idle;
    ASSERT_EQ(stream.size(), static_cast<std::size_t>(arrivals) + 1);
    const nlohmann::json& head = stream.front();
    EXPECT_EQ(head.size(), 2u) << "keys besides params and tensors";
    EXPECT_EQ(head["tensors"].get<std::vector<std::size_t>>(), c.tensors);
    std::size_t parameters = 0;
    for (std::size_t size : c.tensors) parameters += size;
    ASSERT_EQ(head["params"].size(), parameters);
    for (const auto& x : head["params"]) ASSERT_TRUE(x.is_string()) << x;
    std::vector<std::int64_t> taus;
    for (std::size_t line = 1; line < stream.size(); ++line) {
      const nlohmann::json& e = stream[line];
      const std::size_t r = line - 1 + static_cast<std::size_t>(c.idle);  // the arrival's round
      taus.push_back(e["tau"].get<std::int64_t>());
      EXPECT_LE(taus.back(), static_cast<std::int64_t>(r));
      if (c.idle > 0) EXPECT_EQ(taus.back(), c.idle) << "constant delays: every arrival exactly tau old";
      // With K = 4 workers keeping fragment progress, round r syncs (⌊r/4⌋ + r mod 4) mod P, which for P = 3
      // (dividing K − 1) is r mod 3.
      EXPECT_EQ(e["fragment"].get<std::size_t>(), r % c.fragments);
      const std::size_t f = r % c.fragments;  // fragment f is [⌊f·n/P⌋, ⌊(f+1)·n/P⌋)
      EXPECT_EQ(e["grad"].size(), (f + 1) * parameters / c.fragments - f * parameters / c.fragments) << "round " << r;
    }

    const std::string replay = replay_arguments(o.err);
    ASSERT_FALSE(replay.empty()) << o.err;
    // The printed flags are the run's configuration as its part records it (the grid's hexfloats, the run seed
    // as the rounding seed), each value reading back to the same float.
    std::map<std::string, std::string> flag;
    {
      std::istringstream words(replay);
      for (std::string word, value; words >> word;) {
        if (word.rfind("--", 0) == 0 && words >> value) flag[word] = value;
      }
    }
    const nlohmann::json grid = nlohmann::json::parse(o.out)["grid"], outer = grid["outer"];
    const auto hex = [](const nlohmann::json& x) { return std::strtof(x.get<std::string>().c_str(), nullptr); };
    const auto dec = [&](const char* name) { return std::strtof(flag[name].c_str(), nullptr); };
    const bool adam_family = flag["--optimizer"] != "nesterov" && flag["--optimizer"] != "sdm";
    EXPECT_EQ(flag["--optimizer"], run["method"]);
    EXPECT_EQ(dec("--lr"), hex(adam_family ? outer["adam"]["lr"] : outer["nesterov"]["lr"]));
    if (adam_family) {
      for (const char* name : {"beta1", "beta2", "eps", "weight_decay"}) {
        std::string option = std::string("--") + name;
        std::replace(option.begin(), option.end(), '_', '-');
        EXPECT_EQ(dec(option.c_str()), hex(outer["adam"][name])) << name;
      }
      EXPECT_EQ(dec("--alpha"), hex(outer["alpha"]));
      EXPECT_EQ(dec("--tau-cut"), hex(outer["tau_cut"]));
      EXPECT_EQ(flag["--on-zero-gate"], outer["on_zero_gate"]);
    } else {
      EXPECT_EQ(dec("--momentum"), hex(outer["nesterov"]["momentum"]));
    }
    if (c.fragments > 1) {
      EXPECT_EQ(flag["--fragments"], std::to_string(c.fragments));
    }
    EXPECT_EQ(flag["--params"], outer["params"]);
    EXPECT_EQ(flag["--state"], run["state"]);
    EXPECT_EQ(flag["--rounding"], outer["rounding"]);
    EXPECT_EQ(flag["--seed"], std::to_string(run["seed"].get<std::uint64_t>()));
    EXPECT_EQ(flag["--q8-semantics"], outer["q8_semantics"]);
    EXPECT_EQ(flag["--min-q8-size"], std::to_string(outer["min_q8_size"].get<std::size_t>()));
    const Outcome replayed = ok(replay + " --output r.jsonl");
    const std::vector<nlohmann::json> records = json_lines(dir_ / "r.jsonl");
    ASSERT_EQ(records.size(), static_cast<std::size_t>(arrivals));
    std::int64_t applied = 0, skipped = 0;
    double tau_effective = 0;
    for (std::size_t r = 0; r < records.size(); ++r) {
      EXPECT_EQ(records[r]["tau"].get<std::int64_t>(), taus[r]);
      (records[r]["skipped"].get<bool>() ? skipped : applied) += 1;
      tau_effective += records[r]["tau_effective"].get<double>();
      EXPECT_EQ(records[r]["params"].size(), parameters);
    }
    EXPECT_EQ(skipped > 0, c.skips) << skipped;
    EXPECT_EQ(applied, run["applied"].get<std::int64_t>());
    EXPECT_EQ(skipped, run["skipped_zero_gate"].get<std::int64_t>() + run["skipped_nonfinite"].get<std::int64_t>() +
                           run["skipped_overflowing"].get<std::int64_t>());
    EXPECT_EQ(tau_effective / static_cast<double>(arrivals),
              std::strtod(run["mean_tau_effective"].get<std::string>().c_str(), nullptr));
    // Nothing of the run was left to chance: every recorded number reads back (the replay parsed them all).
    EXPECT_NE(replayed.err.find(std::to_string(arrivals) + " events"), std::string::npos) << replayed.err;
  }
}

TEST_F(SimulateCli, RecordDeltasIsForOneRunAndWritesNothingWhenRefused) {
  const std::string one = "--optimizer cgad --tau 0 --size 8 --state fp32 --rounds 5 --seeds 1";
  expect_refused(cgad("simulate --record-deltas d.jsonl"), "--record-deltas records one run; this sweep has 90");
  expect_refused(cgad("simulate --optimizer cgad --tau 0,1 --size 8 --state fp32 --rounds 5 --seeds 1 "
                      "--record-deltas d.jsonl"),
                 "this sweep has 2");
  expect_refused(cgad("simulate " + one + " --shard 0/1 --out p.json --record-deltas d.jsonl"), "not a shard");
  expect_refused(cgad("simulate " + one + " --record-deltas no/such/d.jsonl"), "--record-deltas: no such directory");
  fs::create_directories(dir_ / "adir");
  expect_refused(cgad("simulate " + one + " --record-deltas adir"), "--record-deltas: 'adir' is a directory");
  expect_refused(cgad("simulate " + one + " --out d.jsonl --record-deltas ./d.jsonl"), "name the same file");
  EXPECT_FALSE(fs::exists(dir_ / "d.jsonl"));
  EXPECT_FALSE(fs::exists(dir_ / "p.json"));
  // A refused run leaves an earlier recording as it was.
  write("d.jsonl", "earlier\n");
  expect_refused(cgad("simulate " + one + " --workers 0 --record-deltas d.jsonl"), "no run of this sweep can run");
  EXPECT_EQ(slurp(dir_ / "d.jsonl"), "earlier\n");
  // And no temporary file is left beside it.
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir_))
    files += entry.path().filename().string().rfind(".d.jsonl", 0) == 0;
  EXPECT_EQ(files, 0u);
  // Delayed Nesterov's arrivals are recorded, and the command says the fast path cannot replay them.
  const Outcome dn =
      ok("simulate --optimizer delayed-nesterov --params fp32 --tau 1 --size 8 --state fp32 --rounds 5 "
         "--seeds 1 --record-deltas d.jsonl");
  EXPECT_EQ(json_lines(dir_ / "d.jsonl").size(), 5u);  // the start and 4 arrivals (constant tau 1: none in round 0)
  EXPECT_NE(dn.err.find("the fast path cannot replay delayed-nesterov"), std::string::npos) << dn.err;
}

// --q8-semantics and --min-q8-size reach every run: bnb at the default minimum keeps every tensor of a width-8
// teacher-student (W1 has 128 elements) in fp32 state, so its q8 runs are its fp32 runs bit for bit
// (simulate_engine_test checks why); with --min-q8-size 0 they are 8-bit and differ. The table says which
// semantics ran.
TEST_F(SimulateCli, BnbQ8UnderTheMinimumSizeIsBnbFp32State) {
  const std::string sweep =
      "simulate --objective teacher-student --size 8 --optimizer cgad,adam --params fp32 "
      "--state fp32,q8 --q8-semantics bnb --delays uniform --tau 3 --rounds 30 --seeds 2";
  const auto same_runs = [](const nlohmann::json& j) {
    bool all = true;
    for (const auto& run : j["runs"]) {
      if (run["state"] != "q8") continue;
      for (const auto& other : j["runs"]) {
        if (other["state"] != "fp32" || other["method"] != run["method"] || other["seed"] != run["seed"]) continue;
        all = all && other["curve"] == run["curve"] && other["final_loss"] == run["final_loss"];
      }
    }
    return all;
  };
  const auto bnb = nlohmann::json::parse(ok(sweep + " --json").out);
  ASSERT_EQ(bnb["runs"].size(), 8u);
  EXPECT_EQ(bnb["grid"]["outer"]["q8_semantics"], "bnb");
  EXPECT_EQ(bnb["grid"]["outer"]["min_q8_size"], 4096);
  EXPECT_TRUE(same_runs(bnb)) << bnb["runs"].dump();
  EXPECT_EQ(nlohmann::json::parse(ok(sweep + " --min-q8-size 4096 --json").out), bnb);
  const auto eight_bit = nlohmann::json::parse(ok(sweep + " --min-q8-size 0 --json").out);
  EXPECT_EQ(eight_bit["grid"]["outer"]["min_q8_size"], 0);
  EXPECT_FALSE(same_runs(eight_bit));
  // cgad's semantics is another result again (its fp32 state runs cgad's order, not bnb's 32-bit kernel's;
  // fp32 parameters, as bf16 ones can round both to the same values).
  const auto cgad = nlohmann::json::parse(
      ok("simulate --objective teacher-student --size 8 --optimizer cgad,adam --params fp32 --state fp32,q8 "
         "--delays uniform --tau 3 --rounds 30 --seeds 2 --json")
          .out);
  EXPECT_EQ(cgad["grid"]["outer"]["q8_semantics"], "cgad");
  EXPECT_NE(cgad["runs"][0]["curve"], bnb["runs"][0]["curve"]);
  const Outcome table = ok(sweep);
  EXPECT_NE(table.out.find("bitsandbytes' (bnb) Adam semantics, q8 tensors under 4096 elements in fp32 state"),
            std::string::npos)
      << table.out;
}

TEST_F(SimulateCli, MergeRefusesPartsOfAnotherQ8Semantics) {
  const std::string adam = "--optimizer cgad,adam --tau 0,3 --size 8 --state fp32,q8 --rounds 20 --seeds 2";
  ok("simulate " + adam + " --shard 0/2 --out cgad0.json");
  ok("simulate " + adam + " --shard 1/2 --out cgad1.json");
  ok("simulate " + adam + " --q8-semantics bnb --shard 1/2 --out bnb1.json");
  ok("simulate " + adam + " --q8-semantics bnb --min-q8-size 8 --shard 1/2 --out bnb8.json");
  expect_refused(cgad("merge cgad0.json bnb1.json"), "first difference: outer.q8_semantics (bnb vs cgad)");
  expect_refused(cgad("merge bnb1.json bnb8.json"), "first difference: outer.min_q8_size (8 vs 4096)");
  ok("merge cgad0.json cgad1.json");
  const auto part = nlohmann::json::parse(slurp(dir_ / "bnb8.json"));
  EXPECT_EQ(part["version"], 5);
  EXPECT_EQ(part["grid"]["outer"]["q8_semantics"], "bnb");
  EXPECT_EQ(part["grid"]["outer"]["min_q8_size"], 8);
}

// Refused as fastpath::validate refuses them, one line and exit 2: bnb outside the Adam family (the default
// sweep has Nesterov), with bf16 state, with stochastic rounding, and for Delayed Nesterov; a --min-q8-size that
// no q8 state reads; a semantics that does not exist.
TEST_F(SimulateCli, Q8SemanticsIsRefusedWhereItMakesNoSense) {
  expect_refused(cgad("simulate --q8-semantics bnb"),
                 "no run with method nesterov can run: q8 semantics bnb is bitsandbytes' Adam; nesterov keeps cgad's");
  expect_refused(cgad("simulate --optimizer cgad --state fp32,bf16 --q8-semantics bnb"),
                 "no run with state bf16 can run: q8 semantics bnb has no bf16 state");
  expect_refused(cgad("simulate --optimizer cgad --rounding stochastic --q8-semantics bnb"),
                 "q8 semantics bnb rounds to nearest only");
  expect_refused(cgad("simulate --optimizer adam,delayed-nesterov --params fp32 --state fp32 --q8-semantics bnb"),
                 "no run with method delayed-nesterov can run: q8 semantics bnb is bitsandbytes' Adam");
  expect_refused(cgad("simulate --q8-semantics bitsandbytes"), "unknown q8 semantics 'bitsandbytes'");
  expect_refused(cgad("simulate --state fp32 --min-q8-size 16"), "--min-q8-size applies to q8 state");
  expect_refused(cgad("simulate --min-q8-size ''"), "empty value");
  expect_refused(cgad("simulate --min-q8-size -1"), "--min-q8-size: must be a non-negative integer");
  // Where they make sense they run.
  ok("simulate --optimizer adam-decay --state fp32,q8 --q8-semantics bnb --min-q8-size 0 --tau 1 --size 8 --rounds 5 "
     "--seeds 1");
  ok("simulate --optimizer nesterov --state q8 --min-q8-size 4 --tau 1 --size 8 --rounds 5 --seeds 1");
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

namespace {

// The share of v stored as 0 in each tensor of each run of a `simulate --json` output, by tensor name.
std::vector<std::map<std::string, double>> v_zero_by_tensor(const std::string& json) {
  std::vector<std::map<std::string, double>> runs;
  const nlohmann::json parsed = nlohmann::json::parse(json);  // alive for the loop (a temporary's member is not)
  for (const auto& run : parsed["runs"]) {
    std::map<std::string, double> tensors;
    for (const auto& t : run["tensor_traps"]) {
      tensors[t["name"].get<std::string>()] = std::strtod(t["v_zero_fraction"].get<std::string>().c_str(), nullptr);
    }
    runs.push_back(tensors);
  }
  return runs;
}

// What drives the v-zero trap in training (docs/results/simulate.md): four input features of scale 1000 widen
// the in-block range of the first layer's Δ under inner SGD, whose steps carry the gradient's scale, so 8-bit v
// stores zeros in W1; inner AdamW normalizes each coordinate and the same features fire nothing; without
// outliers (scale 1) SGD fires nothing either. Both q8 semantics, two seeds, 30 rounds (a few seconds), a depth-2
// student whose W1 (256 × 16) and W2 (256 × 256) are 8-bit.
TEST_F(SimulateCli, OutlierFeaturesFireTheVZeroTrapUnderInnerSgdAndNotUnderAdamw) {
  const std::string base =
      "simulate --objective teacher-student --size 256 --depth 2 --state q8 --optimizer cgad "
      "--tau 4 --rounds 30 --seeds 2 --outlier-features 4 --json";
  for (const std::string semantics : {"cgad", "bnb"}) {
    const std::string run = base + " --q8-semantics " + semantics;
    for (const auto& tensors : v_zero_by_tensor(ok(run + " --inner sgd --outlier-scale 1000").out)) {
      EXPECT_GT(tensors.at("W1"), 0.1) << semantics;
      EXPECT_EQ(tensors.at("W2"), 0.0) << semantics;  // its inputs are tanh outputs, inside [−1, 1]
    }
    for (const std::string control : {" --inner adamw --outlier-scale 1000", " --inner sgd --outlier-scale 1"}) {
      for (const auto& tensors : v_zero_by_tensor(ok(run + control).out)) {
        for (const auto& [name, share] : tensors) EXPECT_EQ(share, 0.0) << semantics << control << ": " << name;
      }
    }
  }
  expect_refused(cgad("simulate --objective nqm --depth 2"), "depth applies to the teacher-student objective");
  expect_refused(cgad("simulate --objective teacher-student --outlier-features 17"),
                 "outlier features must lie in [0, 16]");
  expect_refused(cgad("simulate --objective teacher-student --inner sgd --inner-eps 1e-3"),
                 "--inner-eps applies to --inner adamw");
}

}  // namespace

namespace {

// `--v-map zero-free` reaches the q8 runs of the Adam family and only them: on the driver above (inner SGD, four
// features × 1000), W1's 8-bit v stores no zero and its largest step falls from thousands of η; the fp32 runs
// of the same sweep are those of a sweep without the flag, bit for bit; without q8 state the flag is refused.
TEST_F(SimulateCli, ZeroFreeVMapReachesTheQ8RunsAndRemovesTheTrapTheOutliersDrive) {
  const std::string base =
      "simulate --objective teacher-student --size 256 --depth 2 --state fp32,q8 --optimizer cgad "
      "--tau 4 --rounds 30 --seeds 2 --outlier-features 4 --outlier-scale 1000 --inner sgd --json";
  const auto dynamic = nlohmann::json::parse(ok(base).out);
  const auto zero_free = nlohmann::json::parse(ok(base + " --v-map zero-free").out);
  ASSERT_EQ(dynamic["runs"].size(), 4u);
  ASSERT_EQ(zero_free["runs"].size(), 4u);
  EXPECT_EQ(zero_free["grid"]["outer"]["v_map"], "zero-free");
  const auto number = [](const nlohmann::json& text) { return std::strtod(text.get<std::string>().c_str(), nullptr); };
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& d = dynamic["runs"][i];
    const auto& z = zero_free["runs"][i];
    if (d["state"] == "fp32") {
      EXPECT_EQ(z["final_loss"], d["final_loss"]) << i;
      EXPECT_EQ(z["curve"], d["curve"]) << i;
      continue;
    }
    const auto& dw1 = d["tensor_traps"][0];
    const auto& zw1 = z["tensor_traps"][0];
    ASSERT_EQ(zw1["name"], "W1");
    EXPECT_GT(number(dw1["v_zero_fraction"]), 0.1) << i;
    EXPECT_EQ(number(zw1["v_zero_fraction"]), 0.0) << i;
    EXPECT_GT(number(dw1["max_step_over_lr"]), 1000.0) << i;
    EXPECT_LT(number(zw1["max_step_over_lr"]), 100.0) << i;
  }
  expect_refused(cgad("simulate --state fp32 --v-map zero-free"), "--v-map zero-free applies to q8 state");
  expect_refused(cgad("simulate --v-map zero"), "zero");
}

}  // namespace
