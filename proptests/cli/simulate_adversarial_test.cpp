// `cgad simulate` and `cgad merge` against input that, if taken, would lose or misstate results (docs/testing.md):
// impossible hand-edited parts, flags of the other objective, a run in which nothing could train, two shards
// writing one part file, and loss curves no machine holds. Each is exit status 2 with one line (or, for the
// untrainable run, a "stalled" record), never exit 0 with damage.
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

namespace {

namespace fs = std::filesystem;
using cgad::testing::Outcome;
using cgad::testing::slurp;

const std::string kSweep = "--optimizer cgad,adam-decay --tau 0,3 --size 8 --state fp32 --rounds 30 --seeds 2";

class SimulateAdversarial : public cgad::testing::CgadCommandTest {
 protected:
  Outcome ok(const std::string& args) const {
    Outcome o = cgad(args);
    EXPECT_EQ(o.status, 0) << args << ": " << o.err;
    return o;
  }
  // part1.json edited by `edit` (on its first run) as edited.json; merge with part0.json must refuse it.
  void expect_edit_refused(const std::function<void(nlohmann::json&)>& edit, const std::string& fragment) const {
    auto part = nlohmann::json::parse(slurp(dir_ / "part1.json"));
    edit(part["runs"][0]);
    write("edited.json", part.dump());
    expect_refused(cgad("merge part0.json edited.json"), fragment);
  }
};

// Item 9. The record of run 1 (cgad, τ 0, seed 2) edited into what no cgad writes.
TEST_F(SimulateAdversarial, MergeRefusesImpossibleRecords) {
  ok("simulate " + kSweep + " --shard 0/2 --out part0.json");
  ok("simulate " + kSweep + " --shard 1/2 --out part1.json");
  ok("merge part0.json part1.json");
  using nlohmann::json;
  expect_edit_refused(
      [](json& r) {
        r["final_loss"] = "-0x1p-3";
        r["curve"].back()[1] = "-0x1p-3";
      },
      "impossible loss -0x1p-3");
  expect_edit_refused(
      [](json& r) {
        r["initial_loss"] = "nan";
        r["curve"][0][1] = "nan";
      },
      "impossible initial_loss nan");
  expect_edit_refused([](json& r) { r["curve"][1][1] = "-0x1p+0"; }, "impossible loss -0x1p+0");
  // A finished run relabelled unsupported: the engine runs this spec.
  expect_edit_refused(
      [](json& r) {
        r = json{{"index", r["index"]},     {"method", r["method"]},     {"tau", r["tau"]},
                 {"size", r["size"]},       {"state", r["state"]},       {"seed", r["seed"]},
                 {"status", "unsupported"}, {"reason", "no such kernel"}};
      },
      "run 1: unsupported, but the engine runs it");
  // Indices and counts that are not integers, or out of any range (1e30 into size_t was undefined behaviour).
  expect_edit_refused([](json& r) { r["index"] = 1e30; }, "index: expected a non-negative integer, got 1e+30");
  expect_edit_refused([](json& r) { r["index"] = 1.0; }, "index: expected a non-negative integer");
  expect_edit_refused([](json& r) { r["index"] = -1; }, "index: expected a non-negative integer, got -1");
  expect_edit_refused([](json& r) { r["applied"] = 29.5; }, "applied: expected an integer");
  // A zero-gate skip at τ = 0, where CGAD's gate is 1.
  expect_edit_refused(
      [](json& r) {
        r["applied"] = r["applied"].get<long>() - 1;
        r["skipped_zero_gate"] = 1;
      },
      "skipped_zero_gate 1 where cgad at tau 0 never skips at a zero gate");
  // A finished run whose counts say nothing trained is stalled, not finished.
  expect_edit_refused(
      [](json& r) {
        r["skipped_nonfinite"] = r["applied"];
        r["applied"] = 0;
      },
      "finished, but it made no progress");
  // The trap metrics are fractions.
  expect_edit_refused([](json& r) { r["v_zero_fraction"] = "0x1.8p+0"; }, "v_zero_fraction 0x1.8p+0 is impossible");
  expect_edit_refused([](json& r) { r["mean_tau"] = "0x1p+0"; }, "mean_tau 0x1p+0 is impossible at tau 0");
}

// Item 10. Flags of the other objective changed nothing and were taken; now they are refused.
TEST_F(SimulateAdversarial, ObjectiveFlagsOfTheOtherObjectiveAreRefused) {
  expect_refused(cgad("simulate --objective nqm --label-noise 0.5"),
                 "--label-noise applies to the teacher-student objective");
  expect_refused(cgad("simulate --label-noise 0.5"), "--label-noise applies to the teacher-student objective");
  expect_refused(cgad("simulate --objective teacher-student --nqm-noise 2"),
                 "--nqm-noise applies to the nqm objective");
  ok("simulate --objective teacher-student --label-noise 0.2 --optimizer cgad --tau 0 --size 8 --state fp32 --rounds 5 "
     "--seeds 1");
  ok("simulate --nqm-noise 2 --optimizer cgad --tau 0 --size 8 --state fp32 --rounds 5 --seeds 1");
}

// Item 10. --nqm-noise 1e308 makes every inner gradient infinite: AdamW refuses every step, every Δ is 0, and the
// loss never moves. That is not a finished run's mean: the run is "stalled", outside the statistics, and said so.
TEST_F(SimulateAdversarial, ARunInWhichNothingTrainsIsStalledNotFinished) {
  const Outcome o =
      ok("simulate --nqm-noise 1e308 --optimizer cgad --tau 0 --size 8 --state fp32 --rounds 20 --seeds 2 --json");
  const auto j = nlohmann::json::parse(o.out);
  for (const auto& run : j["runs"]) {
    EXPECT_EQ(run["status"], "stalled") << run.dump();
    EXPECT_EQ(run["stalled"], "every inner step (160) was refused for a non-finite or overflowing gradient");
  }
  const auto& cell = j["cells"][0];
  EXPECT_EQ(cell["finished"], 0);
  EXPECT_EQ(cell["stalled"], 2);
  EXPECT_TRUE(cell["final_loss_mean"].is_null());
  EXPECT_NE(cell["note"].get<std::string>().find("2 stalled"), std::string::npos) << cell.dump();
  // The stalled records survive a shard and merge (they are records the engine writes).
  ok("simulate --nqm-noise 1e308 --optimizer cgad --tau 0 --size 8 --state fp32 --rounds 20 --seeds 2 --shard 0/1 "
     "--out s.json");
  EXPECT_EQ(ok("merge s.json --json").out, o.out);
}

// Item 11. Two shards given the same --out: the second is refused at its start while the first holds the part's
// lock (here the test holds it, as a running shard would), and a finished part of another shard of the same sweep
// is not replaced. The part keeps the runs it had.
TEST_F(SimulateAdversarial, TwoShardsCannotWriteOnePartFile) {
  const std::string lock = (dir_ / ".part.json.cgad-lock").string();
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  expect_refused(cgad("simulate " + kSweep + " --shard 0/2 --out part.json"), "another cgad is writing part.json");
  EXPECT_FALSE(fs::exists(dir_ / "part.json"));
  ::close(fd);
  fs::remove(lock);

  ok("simulate " + kSweep + " --shard 0/2 --out part.json");
  const std::string first = slurp(dir_ / "part.json");
  EXPECT_FALSE(fs::exists(lock)) << "the lock outlived its holder";
  expect_refused(cgad("simulate " + kSweep + " --shard 1/2 --out part.json"),
                 "--out part.json holds shard 0/2 of this sweep; refusing to replace it with shard 1/2");
  EXPECT_EQ(slurp(dir_ / "part.json"), first);
  // The same shard again replaces it (a rerun), and so does another sweep (the file is then just an old output).
  ok("simulate " + kSweep + " --shard 0/2 --out part.json");
  ok("simulate " + kSweep + " --jobs 1 --shard 1/2 --out other.json");
  ok("simulate --optimizer cgad --tau 0 --size 8 --state fp32 --rounds 5 --seeds 1 --shard 0/1 --out part.json");
}

// Item 16 (simulate). The loss curves a sweep would hold are estimated before any run: 10^8 rounds logged every
// round is 10^8 points per run (the old code accepted it and would have needed ~57 GB for the default sweep).
TEST_F(SimulateAdversarial, LossCurvesThatCannotFitAreRefusedBeforeRunning) {
  expect_refused(cgad("simulate --rounds 100000000 --log-every 1"),
                 "its records (loss curves of 100000003 points per run");
  expect_refused(cgad("simulate --optimizer cgad --tau 0 --state fp32 --seeds 1 --rounds 100000000 --log-every 1"),
                 "over the 2 GiB limit");
  // A long run logged sparsely is fine (refused here only for its other problem, to keep the test fast).
  expect_refused(
      cgad("simulate --optimizer cgad --tau 0 --state fp32 --seeds 1 --rounds 100000000 --log-every 1000 --workers 0"),
      "workers K must lie in [1, 4096]");
}

}  // namespace
