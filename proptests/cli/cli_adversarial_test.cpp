// The adversarial classes of docs/testing.md as a user meets them on the command line: every case ends in exit status 2
// with one line "cgad: ..." (or, for an overflowing or non-finite event, a reported skip) -- never exit status 0 with
// damage, a hang or a crash. Each test failed before its fix.
#include "support/cli_harness.hpp"

#include "cgad/io/atomic_file.hpp"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using cgad::testing::Outcome;
using cgad::testing::slurp;

class CliAdversarial : public cgad::testing::CgadCommandTest {
 protected:
  // Runs `shell` (a sh command line, `cgad` standing for the binary) inside dir_ with a time limit; stdout to
  // `out` (a file name, or a redirection such as ">&-"), stderr captured.
  Outcome sh(const std::string& shell, const std::string& out = ">.stdout", int seconds = 60,
             const std::string& in = "</dev/null") const {
    std::string command = shell;
    const std::string runner = std::string("timeout ") + std::to_string(seconds) + " " + CGAD_BINARY + " ";
    for (std::size_t at = 0; (at = command.find("cgad ", at)) != std::string::npos; at += runner.size()) {
      command.replace(at, 5, runner);
    }
    const std::string full = "cd '" + dir_.string() + "' && { " + command + " " + out + " 2>.stderr " + in + "; }";
    const int raw = std::system(full.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(dir_ / ".stdout"), slurp(dir_ / ".stderr")};
  }
  std::vector<nlohmann::json> records(const std::string& jsonl) const {
    std::vector<nlohmann::json> out;
    std::istringstream lines(jsonl);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }
  // Whether dir_ holds anything of cgad's temporary naming (or mkstemp's old one) beside `target`.
  bool temporaries_beside(const std::string& target) const {
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().filename().string().rfind("." + target + ".", 0) == 0) return true;
    }
    return false;
  }
  // A device node of our own in dir_ (never a real one); false where mknod is not permitted (not root).
  bool device(const std::string& name, unsigned major, unsigned minor) const {
    return ::mknod((dir_ / name).c_str(), S_IFCHR | 0666, ::makedev(major, minor)) == 0;
  }
};

const char* kStream =
    "{\"params\": [1, \"0.5\", -2.25]}\n"
    "{\"grad\": [0.1, -0.2, 0.3], \"tau\": 0}\n"
    "{\"grad\": [0.1, 0.2, 0.3], \"tau\": 3}\n";

const std::vector<std::string> kBackends = {"--backend reference", "--backend fastpath --params fp32",
                                            "--backend fastpath --params bf16"};

// --- data loss ----------------------------------------------------------------------------------------------------

TEST_F(CliAdversarial, OutputsThatAreNotRegularFilesAreRefusedAndLeftAsTheyAre) {
  write("s.jsonl", kStream);
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  expect_refused(cgad("replay --input s.jsonl --output fifo"), "not a regular file");
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));
  if (device("null", 1, 3)) {
    expect_refused(cgad("replay --input s.jsonl --output null"), "not a regular file");
    EXPECT_TRUE(fs::is_character_file(dir_ / "null"));
  }
  fs::create_directories(dir_ / "sub");
  expect_refused(cgad("replay --input s.jsonl --output sub"), "is a directory");  // item 18: exit 2, not 1
  expect_refused(cgad("replay --input s.jsonl --output ''"), "empty value");      // item 18
  expect_refused(cgad("replay --input s.jsonl --output missing/out.jsonl"), "no such directory");
  fs::create_symlink("nowhere", dir_ / "dangling");
  expect_refused(cgad("replay --input s.jsonl --output dangling"), "symbolic link");
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
  // A report's figures and files follow the same rule.
  expect_refused(cgad("verify-bound --steps 20 --plot fifo"), "not a regular file");
  EXPECT_FALSE(temporaries_beside("fifo"));
}

TEST_F(CliAdversarial, ReplacingAnOutputKeepsItsModeAndWritesThroughItsLink) {
  write("s.jsonl", kStream);
  write("out.jsonl", "old\n");
  fs::permissions(dir_ / "out.jsonl", fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_EQ(cgad("replay --input s.jsonl --output out.jsonl").status, 0);
  EXPECT_EQ(fs::status(dir_ / "out.jsonl").permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(records(slurp(dir_ / "out.jsonl")).size(), 2u);
  fs::create_directories(dir_ / "results");
  write("results/run.jsonl", "old\n");
  fs::create_symlink("results/run.jsonl", dir_ / "latest.jsonl");
  ASSERT_EQ(cgad("replay --input s.jsonl --output latest.jsonl").status, 0);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "latest.jsonl")));
  EXPECT_EQ(records(slurp(dir_ / "results" / "run.jsonl")).size(), 2u);
}

TEST_F(CliAdversarial, TheOutputMayNotBeTheInputByAnyPath) {
  write("s.jsonl", kStream);
  fs::create_symlink("s.jsonl", dir_ / "alias.jsonl");
  fs::create_hard_link(dir_ / "s.jsonl", dir_ / "hard.jsonl");
  for (const char* output : {"s.jsonl", "./s.jsonl", "alias.jsonl", "hard.jsonl"}) {
    expect_refused(cgad(std::string("replay --input s.jsonl --output ") + output), "is the input file");
    EXPECT_EQ(slurp(dir_ / "s.jsonl"), kStream) << output;
  }
  expect_refused(cgad("replay --input alias.jsonl --output s.jsonl"), "is the input file");
  EXPECT_EQ(slurp(dir_ / "s.jsonl"), kStream);
}

TEST_F(CliAdversarial, AWriteErrorOnStandardOutputIsAnErrorNotExitZero) {
  write("s.jsonl", kStream);
  std::vector<std::string> sinks = {">&-"};            // a closed descriptor: EBADF
  if (device("full", 1, 7)) sinks.push_back(">full");  // our own /dev/full: ENOSPC
  for (const std::string& sink : sinks) {
    for (const char* command :
         {"cgad replay --input s.jsonl --output -", "cgad gate", "cgad gate --json", "cgad codebook",
          "cgad bound --precision 128", "cgad simulate --rounds 2 --size 8 --seeds 1 --csv"}) {
      const Outcome o = sh(command, sink);
      EXPECT_EQ(o.status, 2) << command << " " << sink << ": " << o.err;
      EXPECT_NE(o.err.find("cgad: cannot write to standard output"), std::string::npos) << command << ": " << o.err;
    }
  }
}

TEST_F(CliAdversarial, HyperparametersOutOfRangeAreRefusedAndAnOverflowingNesterovEventIsSkipped) {
  write("s.jsonl", kStream);
  expect_refused(cgad("replay --lr 3e38 --input s.jsonl --output -"), "lr must be <= 2^38");
  expect_refused(cgad("replay --optimizer nesterov --lr 3e38 --input s.jsonl --output -"), "lr must be <= 2^38");
  expect_refused(cgad("replay --backend fastpath --optimizer sdm --lr 3e38 --input s.jsonl --output -"), "2^38");
  expect_refused(cgad("replay --weight-decay 1e30 --input s.jsonl --output -"), "weight_decay");
  expect_refused(cgad("replay --lr 1 --weight-decay 3 --input s.jsonl --output -"), "lr * weight_decay must be <= 2");
  // Δ = 2e38 gave -Inf on the first event in all six formats: now the event is skipped whole and reported.
  write("n.jsonl", "{\"params\": [1, 2]}\n{\"grad\": [1, 2e38], \"tau\": 0}\n{\"grad\": [1, 2], \"tau\": 1}\n");
  for (const char* optimizer : {"nesterov", "sdm"}) {
    std::vector<std::string> configurations = {"--backend reference"};
    for (const char* params : {"fp32", "bf16"}) {
      for (const char* state : {"fp32", "bf16", "q8"}) {
        configurations.push_back(std::string("--backend fastpath --params ") + params + " --state " + state);
      }
    }
    for (const std::string& configuration : configurations) {
      const Outcome o =
          cgad("replay --optimizer " + std::string(optimizer) + " " + configuration + " --input n.jsonl --output -");
      ASSERT_EQ(o.status, 0) << configuration << ": " << o.err;
      EXPECT_NE(o.err.find("event 0 skipped"), std::string::npos) << o.err;
      const auto lines = records(o.out);
      ASSERT_EQ(lines.size(), 2u);
      EXPECT_EQ(lines[0]["skip_reason"], "overflowing-gradient") << optimizer << " " << configuration;
      EXPECT_EQ(std::stod(lines[0]["params"][1].get<std::string>()), 2.0);
      EXPECT_EQ(lines[1]["skipped"], false);
      for (const auto& x : lines[1]["params"]) EXPECT_TRUE(std::isfinite(std::stod(x.get<std::string>()))) << x;
    }
  }
}

TEST_F(CliAdversarial, ParametersMustBeFiniteAndInRangeInEveryBackend) {
  for (const char* bad : {"\"nan\"", "\"inf\"", "\"-inf\"", "\"NaN\""}) {
    write("p.jsonl", "{\"params\": [1, " + std::string(bad) + "]}\n{\"grad\": [0, 0], \"tau\": 0}\n");
    for (const std::string& backend : kBackends) {
      expect_refused(cgad("replay " + backend + " --input p.jsonl --output -"), "parameters must be finite");
    }
  }
  write("p.jsonl", "{\"params\": [1, \"1e39\"]}\n{\"grad\": [0, 0], \"tau\": 0}\n");
  expect_refused(cgad("replay --backend fastpath --params bf16 --input p.jsonl --output -"), "out of range");
  expect_refused(cgad("replay --backend fastpath --params fp32 --input p.jsonl --output -"), "out of range");
}

TEST_F(CliAdversarial, DuplicateKeysAndNulBytesAreRefused) {
  write("out.jsonl", "previous\n");
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0, \"tau\": 40}\n", ":2: duplicate key \"tau\""},
           {"{\"params\": [1, 2], \"params\": [3, 4]}\n", ":1: duplicate key \"params\""},
           {std::string("{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0}\0{\"grad\": [9, 9], \"tau\": 0}\n", 62),
            ":2: NUL byte"}}) {
    write("bad.jsonl", text);
    for (const std::string& backend : kBackends) {
      expect_refused(cgad("replay " + backend + " --input bad.jsonl --output out.jsonl"), message);
    }
    EXPECT_EQ(slurp(dir_ / "out.jsonl"), "previous\n");
  }
}

TEST_F(CliAdversarial, TheGateIsDecidedAlikeAtTheLargestTauCutAndALargerOneIsRefused) {
  write("s.jsonl", kStream);
  for (const std::string& backend : kBackends) {
    expect_refused(cgad("replay " + backend + " --tau-cut 16777217 --input s.jsonl --output -"), "tau-cut");
  }
  write("t.jsonl", "{\"params\": [1]}\n{\"grad\": [1], \"tau\": 16777215}\n{\"grad\": [1], \"tau\": 16777216}\n");
  for (const std::string& backend : kBackends) {
    const Outcome o =
        cgad("replay " + backend + " --tau-cut 16777216 --alpha 0 --on-zero-gate skip --input t.jsonl --output -");
    ASSERT_EQ(o.status, 0) << o.err;
    const auto lines = records(o.out);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0]["skipped"], false) << backend;
    EXPECT_EQ(lines[1]["skip_reason"], "zero-gate") << backend;
  }
}

TEST_F(CliAdversarial, NegativeZeroKeepsItsSign) {
  write("z.jsonl", "{\"params\": [-0, \"-0\", 1]}\n{\"grad\": [0, 0, 0], \"tau\": 0}\n");
  for (const std::string& backend : kBackends) {
    const Outcome o = cgad("replay " + backend + " --input z.jsonl --output -");
    ASSERT_EQ(o.status, 0) << o.err;
    const auto lines = records(o.out);
    ASSERT_EQ(lines.size(), 1u);
    for (int i = 0; i < 2; ++i) {
      const std::string x = lines[0]["params"][i];
      EXPECT_EQ(x.rfind("-0", 0), 0u) << backend << ": " << x;
    }
  }
}

TEST_F(CliAdversarial, AKilledReportLeavesThePreviousReportWhole) {
  fs::create_directories(dir_ / "report");
  write("report/report.md", "the old report\n");
  write("report/gate.csv", "the old gate table\n");
  const std::string command = std::string(CGAD_BINARY) + " report --out '" + (dir_ / "report").string() +
                              "' >/dev/null 2>&1 & pid=$!; sleep 4; kill -9 $pid; wait $pid 2>/dev/null";
  std::system(("cd '" + dir_.string() + "' || exit 1; " + command).c_str());
  EXPECT_EQ(slurp(dir_ / "report" / "report.md"), "the old report\n");
  EXPECT_EQ(slurp(dir_ / "report" / "gate.csv"), "the old gate table\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "report"), fs::directory_iterator()), 2);
}

// --- crashes, hangs, exit codes -----------------------------------------------------------------------------------

TEST_F(CliAdversarial, SizeLikeInputsAreBoundedBeforeAnyWork) {
  for (const char* args : {"verify-bound --sweep-tau-max --tau-max 4611686018427387905",
                           "verify-bound --tau-max 4611686018427387905", "verify-bound --steps 9223372036854775807",
                           "verify-bound --dim 18446744073709551615", "gate --tau-cut 9223372036854775807"}) {
    const auto start = std::chrono::steady_clock::now();
    const Outcome o = sh(std::string("cgad ") + args, ">.stdout", 30);
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0) << args;
  }
}

TEST_F(CliAdversarial, ReplayMemoryDoesNotGrowWithTheStream) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "skipped under AddressSanitizer: its shadow memory reserves terabytes of address space and "
                  "inflates every process's memory, so this limit or measurement means nothing there";
#endif
  // 4000 events of 250 parameters (about 10 MB): before the fix every record stayed in memory (a 12 MB input
  // peaked at 3 GB); now records stream to the output's temporary.
  {
    std::ofstream out(dir_ / "long.jsonl");
    out << "{\"params\": [0";
    for (int i = 1; i < 250; ++i) out << ", " << (i % 7) * 0.125;
    out << "]}\n";
    for (int e = 0; e < 4000; ++e) {
      out << "{\"grad\": [";
      for (int i = 0; i < 250; ++i) out << (i ? ", " : "") << ((e * 31 + i * 17) % 201 - 100) * 0.0123;
      out << "], \"tau\": " << e % 40 << "}\n";
    }
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    const std::string command = "cd '" + dir_.string() + "' && " + CGAD_BINARY +
                                " replay --backend fastpath --input long.jsonl --output out.jsonl 2>/dev/null";
    const int status = std::system(command.c_str());
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    const long result[2] = {status, usage.ru_maxrss};
    (void)!::write(fds[1], result, sizeof result);
    ::_exit(0);
  }
  ::close(fds[1]);
  long result[2] = {-1, 0};
  ASSERT_EQ(::read(fds[0], result, sizeof result), static_cast<ssize_t>(sizeof result));
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(result[0], 0);
  EXPECT_LT(result[1], 64 * 1024) << "peak RSS in kB";
  EXPECT_EQ(records(slurp(dir_ / "out.jsonl")).size(), 4000u);
}

TEST_F(CliAdversarial, ThreadCountsAreCappedAndRefusedUpFront) {
  expect_refused(cgad("bench --quick --threads 4294967295"), "at most 256");
  expect_refused(cgad("bench --quick --threads 3000"), "at most 256");
  expect_refused(cgad("bench --quick --threads -1"), "non-negative");
}

TEST_F(CliAdversarial, AThreadThatCannotBeCreatedEndsInACleanError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "skipped under AddressSanitizer: its shadow memory reserves terabytes of address space and "
                  "inflates every process's memory, so this limit or measurement means nothing there";
#endif
  // 1 GB of address space cannot hold 250 thread stacks: before the fix the pool's constructor hung.
  const Outcome o = sh("ulimit -v 1000000; cgad bench --quick --threads 250", ">.stdout", 60);
  ASSERT_NE(o.status, 124) << "timed out: " << o.err;
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find("cgad: cannot start 250 threads"), std::string::npos) << o.err;
}

TEST_F(CliAdversarial, PipesAndFifosAreStreamsAndAFifoWithoutAWriterIsRefusedInBoundedTime) {
  write("s.jsonl", kStream);
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  expect_refused(sh("cgad replay --input fifo --output out.jsonl", ">.stdout", 30), "no process wrote to");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  // With a writer (late by a moment), a pipe on standard input, and bash's process substitution.
  for (const std::string& command : {std::string("(sleep 1; cat s.jsonl > fifo) & cgad replay --input fifo --output -"),
                                     std::string("cat s.jsonl | cgad replay --input /dev/stdin --output -"),
                                     std::string("bash -c 'cgad replay --input <(cat s.jsonl) --output -'")}) {
    const Outcome o = sh(command, ">.stdout", 60, "");  // stdin not redirected: the pipe case reads its own
    EXPECT_EQ(o.status, 0) << command << ": " << o.err;
    EXPECT_EQ(records(o.out).size(), 2u) << command;
  }
  expect_refused(cgad("replay --input . --output -"), "is a directory");
  if (device("zero", 1, 5)) expect_refused(cgad("replay --input zero --output -"), "not a regular file, pipe or FIFO");
}

TEST_F(CliAdversarial, EmptyItemsEmptyValuesAndNegativeNumbersAreRefused) {
  write("s.jsonl", kStream);
  const std::string noise = "noise --size 8 --steps 2 --log-every 1 ";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {noise + "--seeds 1,,2", "empty item"},
           {noise + "--seeds 1,", "empty item"},
           {noise + "--seeds=,1", "empty item"},
           {noise + "--state q8,,fp32", "empty item"},
           {noise + "--optimizers cgad,,adam", "empty item"},
           {"simulate --tau 0,,1 --rounds 2 --size 8", "empty item"},
           {"simulate --optimizer cgad,,adam --rounds 2 --size 8", "empty item"},
           {"simulate --seed 1,,2 --rounds 2 --size 8", "empty item"},
           {noise + "--seeds ''", "empty value"},
           {"replay --backend fastpath --seed '' --input s.jsonl --output -", "empty value"},
           {"bench --threads ''", "empty value"},
           {"verify-bound --tau-max ''", "empty value"},
           {"gate --tau-cut ''", "empty value"},
           {noise + "--seeds -1", "must be a non-negative integer, got '-1'"},
           {"replay --backend fastpath --seed -1 --input s.jsonl --output -", "non-negative"},
           {"replay --fragments -1 --input s.jsonl --output -", "non-negative"},
           {"gate --tau-cut 0x10", "not a decimal integer"},
           {"gate --tau-cut ' 8'", "not a decimal integer"},
           {noise + "--scale-range 0x10", "not a number"}}) {
    expect_refused(cgad(args), message);
  }
  // A leading zero is decimal, not octal.
  const Outcome o = cgad("gate --tau-cut 010 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(o.out)["tau_cut"], 10);
}

TEST_F(CliAdversarial, NoDirectoryOrFileNameBecomesAGnuplotCommand) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  // A folder whose name ends a gnuplot command and starts two more (a shell escape and a redirected output).
  const std::string evil = "a'\nsystem \"touch " + (dir_ / "INJECTED").string() + "\"\nset output '" +
                           (dir_ / "ELSEWHERE.png").string() + "'\n";
  fs::create_directories(dir_ / evil);
  write(".plot_path", (dir_ / evil / "x.png").string());
  const Outcome o = sh("cgad verify-bound --steps 20 --plot \"$(cat .plot_path)\"");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_FALSE(fs::exists(dir_ / "INJECTED"));
  EXPECT_FALSE(fs::exists(dir_ / "ELSEWHERE.png"));
  std::ifstream png(dir_ / evil / "x.png", std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / evil), fs::directory_iterator()), 1) << "no temporary";
}

TEST_F(CliAdversarial, OneNumberGrammarAndTheSameAnswerForANumberAndItsString) {
  write("j.jsonl", "{\"params\": [1, 2]}\n{\"grad\": [1e400, 1], \"tau\": 0}\n");
  write("s.jsonl", "{\"params\": [1, 2]}\n{\"grad\": [\"1e400\", 1], \"tau\": 0}\n");
  for (const std::string& backend : kBackends) {
    const Outcome number = cgad("replay " + backend + " --input j.jsonl --output -");
    const Outcome text = cgad("replay " + backend + " --input s.jsonl --output -");
    EXPECT_EQ(number.status, text.status) << backend;
    EXPECT_EQ(number.out, text.out) << backend;
    EXPECT_EQ(number.err.find("malformed"), std::string::npos) << number.err;
    if (backend == kBackends[0]) {
      EXPECT_EQ(records(number.out).at(0)["skip_reason"], "overflowing-gradient");
    } else {
      EXPECT_NE(number.err.find("'1e400' is out of range for this format"), std::string::npos) << number.err;
    }
  }
  for (const char* bad : {"\"0x1p-3\"", "\"0b101\"", "\"nan(1)\"", "\" 1\""}) {
    write("g.jsonl", "{\"params\": [1, 2]}\n{\"grad\": [" + std::string(bad) + ", 1], \"tau\": 0}\n");
    for (const std::string& backend : kBackends) {
      expect_refused(cgad("replay " + backend + " --input g.jsonl --output -"), "is not a number");
    }
  }
  write("u.jsonl", "{\"params\": [1, \"1e-50\"]}\n{\"grad\": [\"1e-50\", 1e-50], \"tau\": 0}\n");
  for (const std::string& backend : kBackends) {
    const Outcome o = cgad("replay " + backend + " --input u.jsonl --output -");
    EXPECT_EQ(o.status, 0) << backend << ": " << o.err;
  }
  expect_refused(cgad("replay --alpha 0x1p-3 --input u.jsonl --output -"), "alpha");
}

TEST_F(CliAdversarial, AKilledReplayLeavesNoTemporaryAndStaleOnesAreCleaned) {
  {
    std::ofstream out(dir_ / "slow.jsonl");
    out << "{\"params\": [1, 2, 3, 4, 5, 6, 7, 8]}\n";
    for (int e = 0; e < 200000; ++e)
      out << "{\"grad\": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], \"tau\": " << e % 40 << "}\n";
  }
  const std::string command = std::string(CGAD_BINARY) +
                              " replay --input slow.jsonl --output out.jsonl >/dev/null 2>&1 & pid=$!; sleep 1.5; "
                              "kill -9 $pid; wait $pid 2>/dev/null";
  std::system(("cd '" + dir_.string() + "' || exit 1; " + command).c_str());
  EXPECT_FALSE(fs::exists(dir_ / "out.jsonl")) << "the killed run published nothing";
  EXPECT_FALSE(temporaries_beside("out.jsonl")) << "and left no temporary";
  // A named temporary of a dead cgad process (as a filesystem without O_TMPFILE would leave) goes on the next run.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  std::string stale = cgad::io::fresh_temporary_name("out.jsonl");
  const std::string ours = "." + std::to_string(::getpid()) + ".";
  stale.replace(stale.rfind(ours), ours.size(), "." + std::to_string(child) + ".");
  write(stale, "half a result");
  write("s.jsonl", kStream);
  ASSERT_EQ(cgad("replay --input s.jsonl --output out.jsonl").status, 0);
  EXPECT_FALSE(fs::exists(dir_ / stale));
  EXPECT_FALSE(temporaries_beside("out.jsonl"));
}

// --- second pass: files, inputs and messages ------------------------------------------------------------------

// Peak resident memory (kB) and exit status of `cgad ARGS` run in dir_ (stdout and stderr to /dev/null).
std::pair<int, long> peak_memory(const std::filesystem::path& dir, const std::string& args) {
  int fds[2];
  if (::pipe(fds) != 0) return {-1, 0};
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    const std::string command = "cd '" + dir.string() + "' && " + CGAD_BINARY + " " + args + " >/dev/null 2>&1";
    const int status = std::system(command.c_str());
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    const long result[2] = {WIFEXITED(status) ? WEXITSTATUS(status) : -1, usage.ru_maxrss};
    (void)!::write(fds[1], result, sizeof result);
    ::_exit(0);
  }
  ::close(fds[1]);
  long result[2] = {-1, 0};
  const bool read = ::read(fds[0], result, sizeof result) == static_cast<ssize_t>(sizeof result);
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  return {read ? static_cast<int>(result[0]) : -1, result[1]};
}

// A two-line stream of n parameters and one event, every number one digit: the most numbers per input byte.
std::string short_numbers_stream(std::size_t n) {
  std::string text = "{\"params\": [";
  for (std::size_t i = 0; i < n; ++i) text += i ? ",1" : "1";
  text += "]}\n{\"grad\": [";
  for (std::size_t i = 0; i < n; ++i) text += i ? ",2" : "2";
  return text + "], \"tau\": 3}\n";
}

TEST_F(CliAdversarial, AReplaysPeakMemoryIsABoundedMultipleOfItsInput) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "skipped under AddressSanitizer: its shadow memory inflates every process's memory";
#endif
  // 2 x 500000 one-digit numbers (2 MB), the most numbers per input byte. Before the fix each record was a JSON
  // tree and each line a JSON DOM: 105 and 375 bytes per input byte (fast path, reference) on such a stream.
  // The bounds are those docs/testing.md states: 40 and 150 bytes per input byte above 16 MB.
  const std::string text = short_numbers_stream(500000);
  write("big.jsonl", text);
  const double input_kb = static_cast<double>(text.size()) / 1024;
  const auto [fast_status, fast_kb] =
      peak_memory(dir_, "replay --backend fastpath --input big.jsonl --output out.jsonl");
  EXPECT_EQ(fast_status, 0);
  EXPECT_LT(fast_kb, 16 * 1024 + 40 * input_kb) << "fast path, peak RSS in kB for " << input_kb << " kB of input";
  const auto [ref_status, ref_kb] = peak_memory(dir_, "replay --input big.jsonl --output out.jsonl");
  EXPECT_EQ(ref_status, 0);
  EXPECT_LT(ref_kb, 16 * 1024 + 150 * input_kb) << "reference, peak RSS in kB for " << input_kb << " kB of input";
}

TEST_F(CliAdversarial, OutOfMemoryEndsInOneLineAndExitStatusTwo) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "skipped under AddressSanitizer: its shadow memory reserves terabytes of address space";
#endif
  // Before the fix: "terminate called after throwing an instance of 'std::bad_alloc'", exit status 134.
  write("big.jsonl", short_numbers_stream(2000000));
  // Address-space limits (kB) that a small stream runs within and this 8 MB one does not, for each backend.
  for (const auto& [backend, limit] : std::vector<std::pair<std::string, std::string>>{
           {"--backend reference", "300000"}, {"--backend fastpath", "150000"}}) {
    write("small.jsonl", kStream);
    const std::string prefix = "ulimit -v " + limit + "; cgad replay " + backend;
    EXPECT_EQ(sh(prefix + " --input small.jsonl --output small.out").status, 0) << backend;
    const Outcome o = sh("ulimit -v " + limit + "; cgad replay " + backend + " --input big.jsonl --output out.jsonl");
    expect_refused(o, "out of memory");
    EXPECT_FALSE(fs::exists(dir_ / "out.jsonl")) << backend;
    EXPECT_FALSE(temporaries_beside("out.jsonl")) << backend;
  }
}

TEST_F(CliAdversarial, AMergePartLargerThanTheBoundIsRefusedBeforeItIsRead) {
  // A sparse file: 300 MiB that take no disk. Before the fix merge parsed whatever it was given (80 MB: 1.25 GB).
  ASSERT_EQ(sh("truncate -s 300M huge.json").status, 0);
  expect_refused(cgad("merge huge.json"), "larger than 256 MiB");
}

TEST_F(CliAdversarial, AFifoWhoseWriterNeverWritesIsRefusedInBoundedTime) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  // The writer opens the FIFO (once cgad has it open for reading) and holds it 25 s without writing: before the
  // fix cgad waited for it, without a bound.
  const auto start = std::chrono::steady_clock::now();
  const Outcome o =
      sh("( (exec 3>fifo; exec sleep 25) & writer=$!; cgad replay --input fifo --output out.jsonl; "
         "status=$?; kill $writer; exit $status )",
         ">.stdout", 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_refused(o, "no process wrote to");
  EXPECT_LT(seconds, 15.0);
}

TEST_F(CliAdversarial, StandardOutputOntoAnInputIsRefusedAndTheInputKept) {
  write("s.jsonl", kStream);
  // >> appends: before the fix the replay read its own records back as events (or failed on them), and the
  // input was corrupted either way.
  for (const std::string& command : {std::string("cgad replay --input s.jsonl --output -"),
                                     std::string("cgad replay --backend fastpath --input s.jsonl --output -"),
                                     std::string("cgad noise --stream s.jsonl --steps 2 --size 3")}) {
    const Outcome o = sh(command, ">>s.jsonl");
    EXPECT_EQ(o.status, 2) << command << ": " << o.err;
    EXPECT_NE(o.err.find("is the input file 's.jsonl'"), std::string::npos) << command << ": " << o.err;
    EXPECT_EQ(slurp(dir_ / "s.jsonl"), kStream) << command;
  }
}

TEST_F(CliAdversarial, StandardOutputIsWrittenDirectlyWithoutATemporaryInTmpdir) {
  write("s.jsonl", kStream);
  // Before the fix "-" was spooled to $TMPDIR first, and a missing TMPDIR failed a replay whose stdout was fine.
  const Outcome o = sh("TMPDIR=/nonexistent/tmp cgad replay --input s.jsonl --output -");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(records(o.out).size(), 2u);
}

TEST_F(CliAdversarial, MessagesQuoteWhatTheUserWrote) {
  write("s.jsonl", kStream);
  // A number past 64 bits: CLI11 saturated it, and the message quoted 9223372036854775807.
  expect_refused(cgad("gate --tau-cut 99999999999999999999"), "'99999999999999999999' is out of range");
  expect_refused(cgad("bench --quick --threads 99999999999999999999"), "'99999999999999999999' is out of range");
  // A decimal that rounds to 0 in float: the message said "got 0".
  const std::string fastpath = "replay --backend fastpath --input s.jsonl --output - ";
  expect_refused(cgad(fastpath + "--lr 1e-50"), "got '1e-50', which rounds to 0");
  expect_refused(cgad(fastpath + "--eps 1e-46"), "got '1e-46', which rounds to 0");
  // A full device: the message said "Inappropriate ioctl for device".
  expect_refused(sh("cgad gate", ">/dev/full"), "No space left on device");
  expect_refused(sh("cgad noise --size 8 --steps 2", ">/dev/full"), "No space left on device");
  expect_refused(sh("cgad verify-bound --steps 20", ">/dev/full"), "No space left on device");
  expect_refused(sh("cgad replay --input s.jsonl --output -", ">/dev/full"), "No space left on device");
  // An error in a value of the stream's first line names its line (here 2, after a blank one).
  write("p.jsonl", "\n{\"params\": [1, \"x\"]}\n{\"grad\": [1, 2], \"tau\": 0}\n");
  for (const std::string& backend : kBackends) {
    expect_refused(cgad("replay " + backend + " --input p.jsonl --output -"), "p.jsonl:2: params[1]");
  }
  // A link loop is not "a link to a missing file".
  fs::create_symlink("loop", dir_ / "loop");
  expect_refused(cgad("replay --input s.jsonl --output loop"), "symbolic link in a loop");
}

TEST_F(CliAdversarial, BoundTablesKeepTheirColumnsApartAndPrintTinyValuesAsTheyAre) {
  const Outcome o = cgad("bound --alpha 50");
  ASSERT_EQ(o.status, 0) << o.err;
  // Before the fix a wide value ran into the one before it (167.27153e+173) and E[sigma] = e^-50-ish values below
  // double's range printed as 0 beside a finite ratio.
  std::istringstream lines(o.out);
  bool table = false;
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("E[sigma]") != std::string::npos && line.find("eta*_g/eta*_u") != std::string::npos) {
      table = true;
      continue;
    }
    if (!table) continue;
    if (line.empty() || line.rfind("  ", 0) != 0) break;
    ++rows;
    // The five value columns are the last five whitespace-separated words (the delay law's name comes first, a
    // note in parentheses may follow).
    std::istringstream words(line.substr(0, line.find("  (")));
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    ASSERT_GE(w.size(), 5u) << line;
    const std::string e_sigma = w[w.size() - 5];
    for (std::size_t k = w.size() - 5; k < w.size(); ++k) {
      EXPECT_LE(std::count(w[k].begin(), w[k].end(), '.'), 1) << "columns run together: " << line;
    }
    if (w.back() != "-") {
      EXPECT_NE(e_sigma, "0") << "E[sigma] printed as 0 beside a finite ratio: " << line;
    }
  }
  EXPECT_GT(rows, 0) << o.out;
}

TEST_F(CliAdversarial, ListOptionsRefuseARepeatedItemInEveryCommand) {
  const std::string noise = "noise --size 8 --steps 2 --log-every 1 ";
  // Before the fix noise printed each repeated row twice, while simulate refused the same lists.
  for (const std::string& args :
       {noise + "--optimizers cgad,cgad", noise + "--seeds 1,1", noise + "--seeds 1,01", noise + "--seeds 1 --seeds 1",
        noise + "--state q8,fp32,q8", std::string("simulate --tau 4,4 --rounds 2 --size 8")}) {
    expect_refused(cgad(args), "repeats a value");
  }
}

TEST_F(CliAdversarial, MergePartsRefuseDuplicateKeysAsStreamsDo) {
  ASSERT_EQ(cgad("simulate --optimizer cgad --tau 0,3 --size 8 --state fp32 --rounds 31 --seeds 2 --shard 0/2 "
                 "--out part0.json")
                .status,
            0);
  std::string part = slurp(dir_ / "part0.json");
  ASSERT_EQ(part.front(), '{');
  // The last of two equal keys won before the fix; a replay stream refuses the same thing.
  part.insert(1, "\"cgad_version\":\"0.0.0\",");
  write("dup.json", part);
  expect_refused(cgad("merge dup.json --allow-partial"), "dup.json: duplicate key \"cgad_version\"");
}

// lr = 0 is a valid learning rate, as torch.optim takes it (a schedule that reaches 0): every backend runs the
// stream, leaves the parameters where they were and advances the step count; a negative lr is still refused.
TEST_F(CliAdversarial, ZeroLearningRateLeavesTheParametersAndAdvancesTheSteps) {
  write("s.jsonl", kStream);
  for (const std::string& backend : kBackends) {
    for (const char* optimizer : {"cgad", "nesterov"}) {
      const Outcome o = cgad("replay " + backend + " --optimizer " + optimizer + " --lr 0 --input s.jsonl --output -");
      ASSERT_EQ(o.status, 0) << backend << " " << optimizer << ": " << o.err;
      const Outcome moved =
          cgad("replay " + backend + " --optimizer " + optimizer + " --lr 0.1 --input s.jsonl --output -");
      ASSERT_EQ(moved.status, 0) << moved.err;
      const std::vector<nlohmann::json> still = records(o.out), stepped = records(moved.out);
      ASSERT_EQ(still.size(), 2u) << o.out;
      ASSERT_EQ(stepped.size(), 2u) << moved.out;
      for (std::size_t e = 0; e < still.size(); ++e) {
        const std::string where = backend + " " + optimizer + " event " + std::to_string(e);
        EXPECT_EQ(still[e]["skipped"], false) << where;
        ASSERT_EQ(still[e]["params"].size(), 3u) << where;
        const double initial[] = {1, 0.5, -2.25};  // the stream's, exact in every format
        for (std::size_t i = 0; i < 3; ++i) {
          EXPECT_EQ(std::stod(still[e]["params"][i].get<std::string>()), initial[i]) << where << " element " << i;
        }
        EXPECT_NE(stepped[e]["params"], still[e]["params"]) << where;  // at lr 0.1 the same events move them (bf16 too)
        EXPECT_EQ(still[e]["state"], stepped[e]["state"]) << where;    // the buffers and t advance as at lr > 0
      }
    }
  }
  expect_refused(cgad("replay --lr -0.5 --input s.jsonl --output -"), "lr must be finite and >= 0");
}

// --- third pass: the command --------------------------------------------------------------------------------------

// A tmpfs of `size` mounted at dir/name for the scope (root only: false where mount is not permitted), unmounted
// on the way out whatever the test did.
class TinyFilesystem {
 public:
  TinyFilesystem(const fs::path& at, const std::string& options) : at_(at) {
    fs::create_directories(at);
    mounted_ =
        std::system(("mount -t tmpfs -o " + options + " cgad-test '" + at.string() + "' 2>/dev/null").c_str()) == 0;
  }
  ~TinyFilesystem() {
    if (mounted_) (void)!std::system(("umount -l '" + at_.string() + "'").c_str());
  }
  TinyFilesystem(const TinyFilesystem&) = delete;
  TinyFilesystem& operator=(const TinyFilesystem&) = delete;
  bool mounted() const { return mounted_; }

 private:
  fs::path at_;
  bool mounted_ = false;
};

// (No "cgad " inside: sh() takes every "cgad " for the command.)
const std::string kOneRun = "simulate --optimizer adam --tau 0 --size 8 --state fp32 --rounds 5 --seeds 1 ";

// Before the fix gnuplot's write errors never reached cgad: on a full filesystem it exited 0 having written 0 or
// 4096 bytes, cgad committed that over the old figure and said "wrote N figure(s)", exit status 0.
TEST_F(CliAdversarial, AFullFilesystemKeepsTheOldFiguresAndEndsInExitStatusTwo) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  ASSERT_EQ(cgad(kOneRun + "--shard 0/1 --out part.json").status, 0);
  for (const auto& [name, command] : std::vector<std::pair<std::string, std::string>>{
           {"noise", "noise --optimizers cgad --size 8 --steps 20 --log-every 10 --plot-dir "},
           {"simulate", kOneRun + "--plot "},
           {"merge", "merge part.json --plot "}}) {
    // The figures the command draws, drawn once where there is room: their names, and the old files to keep.
    fs::create_directories(dir_ / ("roomy-" + name));
    const Outcome drawn = cgad(command + "roomy-" + name);
    ASSERT_EQ(drawn.status, 0) << name << ": " << drawn.err;
    std::vector<std::string> figures;
    for (const auto& entry : fs::directory_iterator(dir_ / ("roomy-" + name))) {
      figures.push_back(entry.path().filename().string());
    }
    ASSERT_FALSE(figures.empty()) << name;
    TinyFilesystem full(dir_ / ("full-" + name), "size=256k");
    if (!full.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (needs root)";
    for (const std::string& figure : figures) write("full-" + name + "/" + figure, "the old figure " + figure);
    sh("dd if=/dev/zero of=full-" + name + "/filler bs=4096", ">/dev/null");  // until the filesystem is full
    // The table comes before the figures (and gnuplot may warn about a one-point range), so the refusal is the
    // last line rather than the only one.
    const Outcome o = cgad(command + "full-" + name);
    EXPECT_EQ(o.status, 2) << name << ": " << o.err;
    const std::string last = o.err.substr(o.err.rfind('\n', o.err.size() - 2) + 1);
    EXPECT_EQ(last.rfind("cgad: gnuplot could not write", 0), 0u) << name << ": " << o.err;
    for (const std::string& figure : figures) {
      EXPECT_EQ(slurp(dir_ / ("full-" + name) / figure), "the old figure " + figure) << name;
    }
    for (const auto& entry : fs::directory_iterator(dir_ / ("full-" + name))) {
      EXPECT_NE(entry.path().filename().string().front(), '.') << "a temporary left: " << entry.path();
    }
  }
}

// Before the fix: "cgad: internal error: cannot create the lock ...", exit status 1.
TEST_F(CliAdversarial, ALockFileThatCannotBeMadeIsOneLineAndExitStatusTwo) {
  fs::create_directories(dir_ / ".folder.json.cgad-lock");
  fs::create_symlink("nowhere", dir_ / ".dangling.json.cgad-lock");
  const std::string long_name(250, 'p');  // a legal name; its lock's is 261 characters, past NAME_MAX
  for (const auto& [out, why] : std::vector<std::pair<std::string, std::string>>{
           {"folder.json", "Is a directory"}, {"dangling.json", "symbolic link"}, {long_name, "name is too long"}}) {
    expect_refused(cgad(kOneRun + "--shard 0/1 --out " + out), "cannot make the lock file");
    expect_refused(cgad(kOneRun + "--shard 0/1 --out " + out), why);
    EXPECT_FALSE(fs::exists(dir_ / out));
  }
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
  TinyFilesystem read_only(dir_ / "ro", "ro,size=64k");
  if (!read_only.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (needs root)";
  expect_refused(cgad(kOneRun + "--shard 0/1 --out ro/part.json"), "Read-only file system");
}

// Before the fix each ran, exit status 0, with the stream (or part) and the table one after the other on
// standard output; --out - --record-deltas - alone was refused.
TEST_F(CliAdversarial, AFileOutputThatIsStandardOutputIsRefusedBesideTheTable) {
  for (const std::string& args :
       {kOneRun + "--record-deltas - --json", kOneRun + "--record-deltas - --csv", kOneRun + "--record-deltas -",
        kOneRun + "--record-deltas /dev/stdout", kOneRun + "--out - --json", kOneRun + "--out -",
        kOneRun + "--shard 0/1 --out -", kOneRun + "--shard 0/1 --out /dev/stdout"}) {
    expect_refused(cgad(args), "is standard output");
  }
  // Standard output a file, and the output that file by another name: it was replaced under the table.
  for (const std::string& args : {kOneRun + "--record-deltas out.txt", kOneRun + "--record-deltas /dev/stdout --json",
                                  kOneRun + "--shard 0/1 --out out.txt"}) {
    const Outcome o = sh("cgad " + args, ">out.txt");
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_NE(o.err.find("is standard output"), std::string::npos) << args << ": " << o.err;
    EXPECT_EQ(slurp(dir_ / "out.txt"), "") << args;
  }
  EXPECT_EQ(cgad(kOneRun + "--record-deltas deltas.jsonl --json").status, 0);  // a file of its own is fine
}

// Before the fix the estimate counted elements and samples, not tensors: 300 000 empty tensors in a 900 KB stream
// took 1.6 GB (2 million in 6 MB, 10.7 GB and 60 s), with any bound unsaid.
TEST_F(CliAdversarial, ANoiseStudyOfManyTensorsIsRefusedUpFrontByItsMemoryBound) {
  {
    std::ofstream out(dir_ / "many.jsonl");
    out << "{\"params\": [1], \"tensors\": [";
    for (int t = 0; t < 300000; ++t) out << "0,";
    out << "1]}\n";
    for (int e = 0; e < 1000; ++e) out << "{\"grad\": [0.5], \"tau\": 0}\n";
  }
  const auto start = std::chrono::steady_clock::now();
  expect_refused(sh("cgad noise --optimizers adam --stream many.jsonl --log-every 10"), "over the 1024 MiB limit");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
}

TEST_F(CliAdversarial, ANoiseStudyOfManyTensorsWritesItsJsonWithoutHoldingItAll) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "skipped under AddressSanitizer: its shadow memory inflates every process's memory";
#endif
  // 20 000 tensors logged 12 times: 240 000 tensor samples of 136 bytes. Before the fix --json built one JSON
  // document of the whole study first, ~5 KB per tensor sample (1.3 GB here).
  {
    std::ofstream out(dir_ / "many.jsonl");
    out << "{\"params\": [1], \"tensors\": [";
    for (int t = 0; t < 20000; ++t) out << "0,";
    out << "1]}\n";
    for (int e = 0; e < 10; ++e) out << "{\"grad\": [0.5], \"tau\": 0}\n";
  }
  const auto [status, kb] = peak_memory(dir_, "noise --optimizers cgad --stream many.jsonl --log-every 1 --json");
  EXPECT_EQ(status, 0);
  EXPECT_LT(kb, 256 * 1024) << "peak RSS in kB";
}

// Before the fix: "inner eps must be finite and > 0, got 0" and the like.
TEST_F(CliAdversarial, ARealThatRoundsToZeroIsQuotedAsTyped) {
  const std::string ts = "simulate --objective teacher-student --optimizer cgad --tau 0 --size 8 --seeds 1 ";
  for (const auto& [args, quoted] : std::vector<std::pair<std::string, std::string>>{
           {kOneRun + "--inner adamw --inner-eps 1e-50", "got '1e-50', which rounds to 0 in float"},
           {kOneRun + "--inner-lr 1e-50", "got '1e-50', which rounds to 0 in float"},
           {ts + "--outlier-features 2 --outlier-scale 1e-400", "got '1e-400', which rounds to 0 in double"},
           {kOneRun + "--nqm-noise 1e-400", "got '1e-400', which rounds to 0 in double"},
           {ts + "--label-noise 1e-400", "got '1e-400', which rounds to 0 in double"},
           {"noise --size 8 --steps 2 --zero-fraction 1e-400", "got '1e-400', which rounds to 0 in double"},
           {"noise --size 8 --steps 2 --scale-range 1e-400", "got '1e-400', which rounds to 0 in double"}}) {
    expect_refused(cgad(args), quoted);
  }
}

// Before the fix: "Could not convert: --jobs = 4294967296", and past 64 bits a limit of 2^64 - 1 that the option
// refused as well.
TEST_F(CliAdversarial, ACountPastItsOptionsRangeIsRefusedWithTheRealLimit) {
  for (const auto& [args, limit] : std::vector<std::pair<std::string, std::string>>{
           {kOneRun + "--jobs 4294967296", "'4294967296' is out of range: at most 4294967295"},
           {kOneRun + "--jobs 99999999999999999999", "'99999999999999999999' is out of range: at most 4294967295"},
           {"bound --precision 4294967296", "'4294967296' is out of range: at most 4096 bits"},
           {"gate --precision 99999999999999999999", "at most 65536 bits"},
           {"noise --precision 4294967296", "'4294967296' is out of range: at most 65536 bits"},
           {"bench --quick --threads 4294967296", "at most 256 threads"}}) {
    expect_refused(cgad(args), limit);
  }
  EXPECT_EQ(cgad(kOneRun + "--jobs 4294967295").status, 0) << "the stated limit is taken";
}

// Before the fix a stopped report left `.report.cgad-tmp.*` beside the report until a later report removed it.
TEST_F(CliAdversarial, AReportStoppedByASignalLeavesNoTemporaryAndTheOldReport) {
  fs::create_directories(dir_ / "report");
  write("report/report.md", "the old report\n");
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    const pid_t child = ::fork();
    if (child == 0) {
      // Default dispositions, as an interactive shell gives its foreground job (a background job of sh ignores
      // SIGINT, and cgad leaves an ignored signal ignored).
      for (const int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
      if (::chdir(dir_.c_str()) != 0) ::_exit(127);
      (void)!std::freopen("/dev/null", "w", stdout);
      (void)!std::freopen("/dev/null", "w", stderr);
      ::execl(CGAD_BINARY, CGAD_BINARY, "report", "--out", "report", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_TRUE(temporaries_beside("report")) << "the report was being built";
    ::kill(child, signal);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal) << "ended by signal " << signal;
    EXPECT_FALSE(temporaries_beside("report")) << "signal " << signal;
    EXPECT_EQ(slurp(dir_ / "report" / "report.md"), "the old report\n");
  }
}

// --outlier-scale with no outlier features changed no run but the grid's fingerprint, so parts of one sweep run with
// and without it would not merge; it is refused instead (docs/commands.md).
TEST_F(CliAdversarial, AnOutlierScaleWithoutOutlierFeaturesIsRefused) {
  const std::string ts =
      "simulate --objective teacher-student --optimizer cgad --tau 0 --size 8 --state fp32 --rounds 5 --seeds 1 ";
  expect_refused(cgad(ts + "--outlier-scale 3"), "--outlier-features is 0");
  expect_refused(cgad(ts + "--outlier-features 0 --outlier-scale 3"), "--outlier-features is 0");
  expect_refused(cgad(kOneRun + "--outlier-scale 3"), "--outlier-features is 0");
  EXPECT_EQ(cgad(ts + "--outlier-features 2 --outlier-scale 3").status, 0);
}

}  // namespace
