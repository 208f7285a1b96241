// The adversarial classes of docs/testing.md, at the level of the libraries: one number grammar, the stream parser's
// refusals, the atomic writer's rules for targets and temporaries, the report folder's swap, the input rule for
// pipes and FIFOs, the thread pool under thread-creation failure, and the overflow rule and hyperparameter ranges
// that keep finite input finite; from a second pass, the report folder's swap across mounts, links and owners.
// Each test failed before its fix.
#include "support/fastpath_test_support.hpp"

#include "cgad/differential/noise_lockstep.hpp"
#include "cgad/differential/replay_stream.hpp"
#include "cgad/io/atomic_file.hpp"
#include "cgad/io/atomic_folder.hpp"
#include "cgad/io/input_file.hpp"
#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/fastpath/thread_pool.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/reference/optimizers.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(CGAD_FASTPATH_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

namespace fs = std::filesystem;
namespace ref = cgad::reference;
namespace core = cgad::core;
namespace fp = cgad::fastpath;
using core::InputError;
using ref::mpfr_real;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
void put(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh folder per test, removed afterwards.
class Folder : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("cgad_adversarial_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Names in dir_ other than the ones given.
  std::vector<std::string> others(const std::vector<std::string>& known) const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (std::find(known.begin(), known.end(), name) == known.end()) out.push_back(name);
    }
    return out;
  }
  fs::path dir_;
};

// A pid no process has: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// A temporary name as the writer makes it, with another pid in it.
std::string temporary_name_of(const std::string& target, pid_t pid) {
  std::string name = cgad::io::fresh_temporary_name(target);  // .<target>.cgad-tmp.<host>.<our pid>.<hex>
  const std::string ours = "." + std::to_string(::getpid()) + ".";
  const std::size_t at = name.rfind(ours);
  return name.substr(0, at) + "." + std::to_string(pid) + "." + name.substr(at + ours.size());
}

// Runs `body` in a child process (it must _exit itself or return: return means exit 0) and waits at most
// `seconds`; the child's exit status, or -1 if it had to be killed (a hang).
template <class Body>
int in_child(Body body, int seconds) {
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// --- item 28 (and 5, 8): one number grammar, in every format ---------------------------------------------------

TEST(OneNumberGrammar, EveryFormatRefusesTheSameTextsAndTakesTheSameOnes) {
  ref::set_working_precision_bits(256);
  for (const char* bad : {"0x1p-3", "0b101", "0X10", "nan(1)", " 1", "1 ", "", "+", "-", ".", "1e", "e5", "1.5.2",
                          "@inf@", "infinit", "1,5", "١"}) {
    EXPECT_THROW(core::parse_real<float>(bad, "x"), InputError) << "float '" << bad << "'";
    EXPECT_THROW(core::parse_real<double>(bad, "x"), InputError) << "double '" << bad << "'";
    EXPECT_THROW(core::parse_real<mpfr_real>(bad, "x"), InputError) << "mpfr '" << bad << "'";
    EXPECT_EQ(cgad::core::classify_number_text(bad), cgad::core::NumberText::invalid) << bad;
  }
  // Below float's smallest subnormal: correctly rounded to zero of the text's sign (the fast path refused it).
  EXPECT_EQ(core::parse_real<float>("1e-50", "x"), 0.0f);
  EXPECT_TRUE(std::signbit(core::parse_real<float>("-1e-50", "x")));
  EXPECT_EQ(core::parse_real<float>("7.0065e-46", "x"), std::nextafter(0.0f, 1.0f));  // just above half: rounds up
  EXPECT_EQ(core::parse_real<double>("1e-400", "x"), 0.0);
  EXPECT_EQ(core::parse_real<mpfr_real>("1e-50", "x"), core::parse_real<mpfr_real>("1.0e-50", "x"));
  for (const char* good : {"1", "+1", "-1", "1.", ".5", "1.5e3", "1E+3", "007", "0.1", "inf", "-Infinity", "NaN"}) {
    EXPECT_NO_THROW(core::parse_real<float>(good, "x")) << good;
    EXPECT_NO_THROW(core::parse_real<mpfr_real>(good, "x")) << good;
  }
  EXPECT_EQ(core::parse_real<float>("007", "x"), 7.0f);  // decimal, never octal
  // Past a format's range is refused, never an infinity nobody wrote (item 5).
  EXPECT_THROW(core::parse_real<float>("1e39", "x"), InputError);
  EXPECT_THROW(core::parse_real<double>("-1e400", "x"), InputError);
  EXPECT_THROW(core::parse_real<mpfr_real>("1e999999999999", "x"), InputError);
  EXPECT_NO_THROW(core::parse_real<mpfr_real>("1e400", "x"));
}

// Found by fuzz/fuzz_decimal_number.cpp: MPFR 4.2.0's mpfr_strtofr read a tiny decimal with zeros after the point
// and an exponent past a long as +Inf, so the reference refused as "out of range" what float and double read as 0.
TEST(OneNumberGrammar, ADecimalFarBelowEveryRangeIsZeroInEveryFormatAndOneFarAboveIsRefusedInEvery) {
  const ref::PrecisionScope precision(64);
  const std::string exponent = "6000000000000000000000008000000000000000000000000684777228";  // 58 digits
  for (const std::string& tiny : {"0.05e-" + exponent, "-00.0000000500004e-" + exponent, "5e-" + exponent}) {
    const bool negative = tiny.front() == '-';
    const mpfr_real r = core::parse_real<mpfr_real>(tiny, "x");
    EXPECT_TRUE(mpfr_zero_p(r.backend().data())) << tiny;
    EXPECT_EQ(mpfr_signbit(r.backend().data()) != 0, negative) << tiny;
    EXPECT_EQ(core::parse_real<double>(tiny, "x"), 0.0) << tiny;
    EXPECT_EQ(std::signbit(core::parse_real<float>(tiny, "x")), negative) << tiny;
  }
  for (const std::string& huge : {"0.05e+" + exponent, "5e" + exponent}) {
    EXPECT_THROW(core::parse_real<mpfr_real>(huge, "x"), InputError) << huge;
    EXPECT_THROW(core::parse_real<double>(huge, "x"), InputError) << huge;
  }
  // Inside MPFR's range, beyond double's: MPFR reads it, double refuses or underflows as before.
  EXPECT_FALSE(mpfr_zero_p(core::parse_real<mpfr_real>("0.05e-300000000", "x").backend().data()));
  EXPECT_EQ(core::parse_real<double>("0.05e-300000000", "x"), 0.0);
}

TEST(SignedZero, SurvivesParsingAndPrintingInEveryFormat) {
  ref::set_working_precision_bits(256);
  const mpfr_real zero = core::parse_real<mpfr_real>("-0", "x");
  EXPECT_TRUE(mpfr_signbit(zero.backend().data()));
  EXPECT_EQ(core::to_decimal(zero).rfind("-0.0", 0), 0u) << core::to_decimal(zero);
  EXPECT_EQ(core::to_decimal(zero, 5), "-0.0000e+00");  // 5 significant digits
  EXPECT_EQ(core::to_decimal(mpfr_real(0), 5), "0.0000e+00");
  EXPECT_EQ(core::to_decimal(mpfr_real(1) / 3, 5), "3.3333e-01");  // it printed 3.33333e-01 before 2026-12-01
  EXPECT_EQ(core::to_decimal(-0.0f), "-0");
  EXPECT_TRUE(std::signbit(core::parse_real<float>("-0", "x")));
}

// --- items 6, 8, 26, 5: the stream parser ---------------------------------------------------------------------

cgad::differential::PseudoGradientStream parse(const std::string& text) {
  std::istringstream in(text);
  return cgad::differential::read_stream(in, "s");
}

void expect_refused_stream(const std::string& text, const std::string& fragment) {
  try {
    parse(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(StreamParser, DuplicateKeysAndNulBytesAreRefused) {
  expect_refused_stream("{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0, \"tau\": 40}\n",
                        "s:2: duplicate key \"tau\"");
  expect_refused_stream("{\"params\": [1], \"params\": [2]}\n", "s:1: duplicate key \"params\"");
  expect_refused_stream(
      "{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0}\n{\"grad\": [1, 2], \"tau\": 0, \"fragment\": 0, "
      "\"fragment\": 0}\n",
      "s:3: duplicate key");
  expect_refused_stream(std::string("{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0}") + '\0' + "trailing\n",
                        "s:2: NUL byte");
  expect_refused_stream(std::string("{\"params\": [1, 2]}\0\n", 20), "s:1: NUL byte");
  // Keys that repeat in different objects (lines) are fine.
  EXPECT_EQ(
      parse("{\"params\": [1, 2]}\n{\"grad\": [1, 2], \"tau\": 0}\n{\"grad\": [1, 2], \"tau\": 1}\n").events.size(),
      2u);
}

TEST(StreamParser, ANumberAndTheSameDigitsInAStringAreTheSameValue) {
  const auto s = parse(
      "{\"params\": [-0, 0.1, 1e400, \"1e400\", 123456789012345678901234567890, -7, 18446744073709551615]}\n"
      "{\"grad\": [1e-400, -0.0], \"tau\": 0}\n");
  EXPECT_EQ(s.params, (std::vector<std::string>{"-0", "0.1", "1e400", "1e400", "123456789012345678901234567890", "-7",
                                                "18446744073709551615"}));
  EXPECT_EQ(s.events[0].grad, (std::vector<std::string>{"1e-400", "-0.0"}));
  // Integer fields still take integers only; a number that is not one is refused as before.
  expect_refused_stream("{\"params\": [1]}\n{\"grad\": [1], \"tau\": 1e2}\n", "\"tau\" must be a non-negative integer");
  expect_refused_stream("{\"params\": [1]}\n{\"grad\": [1], \"tau\": -0}\n", "\"tau\" must be a non-negative integer");
  expect_refused_stream("{\"params\": [1, 2], \"tensors\": [1.5]}\n", "tensors[0] must be a non-negative integer");
  // Malformed numbers stay malformed JSON.
  for (const char* bad : {"01", "1.", ".5", "+1", "1e", "--1", "0x10"}) {
    expect_refused_stream("{\"params\": [" + std::string(bad) + "]}\n", "not a valid JSON value");
  }
  // Strings are untouched, escapes included.
  EXPECT_EQ(parse("{\"params\": [\"1e5\\\\\", 2]}\n").params.size(), 2u);
}

TEST(StreamParser, ParametersMustBeFiniteAGradientMayNot) {
  for (const char* p : {"\"nan\"", "\"inf\"", "\"-Infinity\"", "\"NaN\""}) {
    expect_refused_stream("{\"params\": [1, " + std::string(p) + "]}\n", "parameters must be finite");
  }
  EXPECT_EQ(parse("{\"params\": [1, 2]}\n{\"grad\": [\"nan\", \"-inf\"], \"tau\": 0}\n").events[0].grad[0], "nan");
}

// --- items 1, 13, 27: the atomic writer ------------------------------------------------------------------------

using AtomicFileOutputs = Folder;

TEST_F(AtomicFileOutputs, ReplacesOnlyRegularFilesKeepingTheirModeAndWritesThroughLinks) {
  // A new file: the mode a plain open() gives.
  cgad::io::write_file_atomically(dir_ / "new", "a", 1);
  EXPECT_EQ(static_cast<::mode_t>(fs::status(dir_ / "new").permissions()), cgad::io::default_file_mode());
  // An existing 0600 file keeps 0600 (item 13).
  put(dir_ / "private", "old");
  fs::permissions(dir_ / "private", fs::perms::owner_read | fs::perms::owner_write);
  cgad::io::write_file_atomically(dir_ / "private", "new", 3);
  EXPECT_EQ(slurp(dir_ / "private"), "new");
  EXPECT_EQ(fs::status(dir_ / "private").permissions(), fs::perms::owner_read | fs::perms::owner_write);
  // A symlink is written through: the file it names is replaced, the link stays a link (item 13).
  fs::create_directories(dir_ / "sub");
  put(dir_ / "sub" / "real", "old");
  fs::create_symlink("sub/real", dir_ / "link");
  cgad::io::write_file_atomically(dir_ / "link", "through", 7);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link")));
  EXPECT_EQ(slurp(dir_ / "sub" / "real"), "through");
  // A dangling link, a directory, a FIFO, "" and a missing directory are refused and left as they are.
  fs::create_symlink("missing", dir_ / "dangling");
  EXPECT_THROW(cgad::io::AtomicFile(dir_ / "dangling"), InputError);
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
  EXPECT_THROW(cgad::io::AtomicFile(dir_ / "sub"), InputError);
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_THROW(cgad::io::AtomicFile(dir_ / "fifo"), InputError);
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));
  EXPECT_THROW(cgad::io::AtomicFile(""), InputError);
  EXPECT_THROW(cgad::io::AtomicFile(dir_ / "no" / "such"), InputError);
  // A device node (made here, never a real one): refused, still a device afterwards. Needs root (mknod).
  if (::mknod((dir_ / "null").c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0) {
    EXPECT_THROW(cgad::io::write_file_atomically(dir_ / "null", "x", 1), InputError);
    EXPECT_TRUE(fs::is_character_file(dir_ / "null"));
  }
  // No temporary anywhere.
  EXPECT_EQ(others({"new", "private", "sub", "link", "dangling", "fifo", "null"}), std::vector<std::string>{});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "sub"), fs::directory_iterator()), 1);
}

TEST_F(AtomicFileOutputs, AnUncommittedWriteChangesNothing) {
  put(dir_ / "out", "old");
  {
    cgad::io::AtomicFile file(dir_ / "out");
    file.stream() << "half a result";
  }
  EXPECT_EQ(slurp(dir_ / "out"), "old");
  EXPECT_EQ(others({"out"}), std::vector<std::string>{});
}

using Temporaries = Folder;

TEST_F(Temporaries, AKilledWriterLeavesNothingAndStaleOnesOfDeadProcessesAreRemoved) {
  // kill -9 in the middle of a write: the child exits without commit or destructors.
  const int status = in_child(
      [&] {
        cgad::io::AtomicFile file(dir_ / "out.jsonl");
        file.stream() << std::string(1 << 20, 'x');
        file.stream().flush();
        ::raise(SIGKILL);
      },
      30);
  EXPECT_EQ(status, 128 + SIGKILL);
  EXPECT_EQ(others({}), std::vector<std::string>{}) << "an unnamed temporary leaves no name behind";
  // Named temporaries of cgad's pattern: a dead process's is removed by the next write beside the same target;
  // a live process's (ours), another target's and a file of another pattern are left alone.
  const std::string stale = temporary_name_of("out.jsonl", dead_pid());
  const std::string live = cgad::io::fresh_temporary_name("out.jsonl");
  const std::string other_target = temporary_name_of("other.jsonl", dead_pid());
  for (const std::string& name : {stale, live, other_target, std::string(".out.jsonl.XXXXXX")}) put(dir_ / name, "t");
  EXPECT_TRUE(cgad::io::is_stale_temporary(stale, "out.jsonl"));
  EXPECT_FALSE(cgad::io::is_stale_temporary(live, "out.jsonl"));
  cgad::io::write_file_atomically(dir_ / "out.jsonl", "r", 1);
  EXPECT_FALSE(fs::exists(dir_ / stale));
  EXPECT_TRUE(fs::exists(dir_ / live));
  EXPECT_TRUE(fs::exists(dir_ / other_target));
  EXPECT_TRUE(fs::exists(dir_ / ".out.jsonl.XXXXXX"));
  // A symlink under a stale name is not followed, only a regular file is removed.
  put(dir_ / "precious", "keep");
  const std::string planted = temporary_name_of("out.jsonl", dead_pid());
  fs::create_symlink("precious", dir_ / planted);
  cgad::io::write_file_atomically(dir_ / "out.jsonl", "r", 1);
  EXPECT_EQ(slurp(dir_ / "precious"), "keep");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / planted)));
}

// --- item 12: the report folder is swapped in whole -------------------------------------------------------------

using ReportFolder = Folder;

TEST_F(ReportFolder, AKilledReportLeavesTheOldOneWholeAndTheNextRunCleansUp) {
  const fs::path report = dir_ / "report";
  fs::create_directories(report);
  put(report / "report.md", "old report");
  put(report / "gate.csv", "old gate");
  put(report / "notes.txt", "the user's");
  // A run killed after writing a new gate.csv.
  const int status = in_child(
      [&] {
        cgad::io::AtomicFolder folder(report, "report");
        folder.write_file("gate.csv", "new gate");
        ::raise(SIGKILL);
      },
      30);
  EXPECT_EQ(status, 128 + SIGKILL);
  EXPECT_EQ(slurp(report / "report.md"), "old report");
  EXPECT_EQ(slurp(report / "gate.csv"), "old gate");
  ASSERT_EQ(others({"report"}).size(), 1u) << "the half-built folder, beside the report";
  // The next run removes it, and its commit() swaps the whole folder in, keeping the user's file.
  {
    cgad::io::AtomicFolder folder(report, "report");
    EXPECT_EQ(others({"report", folder.dir().filename().string()}), std::vector<std::string>{});
    folder.write_file("gate.csv", "new gate");
    folder.write_file("report.md", "new report");
    EXPECT_EQ(slurp(report / "report.md"), "old report");  // nothing visible before commit()
    folder.commit();
    EXPECT_EQ(folder.target(), report);
  }
  EXPECT_EQ(slurp(report / "report.md"), "new report");
  EXPECT_EQ(slurp(report / "gate.csv"), "new gate");
  EXPECT_EQ(slurp(report / "notes.txt"), "the user's");
  EXPECT_FALSE(fs::exists(report / ".cgad-building"));
  EXPECT_EQ(others({"report"}), std::vector<std::string>{});
  // An abandoned run (an exception) leaves the report as it was and nothing beside it.
  {
    cgad::io::AtomicFolder folder(report, "report");
    folder.write_file("gate.csv", "abandoned");
  }
  EXPECT_EQ(slurp(report / "gate.csv"), "new gate");
  EXPECT_EQ(others({"report"}), std::vector<std::string>{});
  // A new folder is created by one rename.
  {
    cgad::io::AtomicFolder folder(dir_ / "fresh" / "r", "report");
    folder.write_file("report.md", "x");
    folder.commit();
  }
  EXPECT_EQ(slurp(dir_ / "fresh" / "r" / "report.md"), "x");
  // Refused: a file, the current directory, a folder above it.
  put(dir_ / "file", "f");
  EXPECT_THROW(cgad::io::AtomicFolder(dir_ / "file", "report"), InputError);
  const fs::path cwd = fs::current_path();
  fs::current_path(report);
  EXPECT_THROW(cgad::io::AtomicFolder(".", "report"), InputError);
  EXPECT_THROW(cgad::io::AtomicFolder(dir_, "report"), InputError);
  fs::current_path(cwd);
}

// --- item 20: pipes and FIFOs are streams, and never a wait without end -----------------------------------------

using InputRule = Folder;

TEST_F(InputRule, AFifoWithoutAWriterIsRefusedInBoundedTimeOneWithAWriterIsRead) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(cgad::io::InputFile{fifo.string()}, InputError);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, cgad::io::InputFile::kFifoWriterWait + 2.0);
  // A writer that comes a moment later, and writes slowly: read to its end.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream out(fifo);
    out << "{\"params\": [1, 2]}\n" << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    out << "{\"grad\": [1, 2], \"tau\": 0}\n";
  });
  cgad::io::InputFile input(fifo.string());
  EXPECT_FALSE(input.regular());
  const auto stream = cgad::differential::read_stream(input.stream(), "fifo");
  writer.join();
  EXPECT_EQ(stream.events.size(), 1u);
  // Directories and devices are refused (reading /dev/zero would never end).
  EXPECT_THROW(cgad::io::InputFile{dir_.string()}, InputError);
  EXPECT_THROW(cgad::io::InputFile{"/dev/zero"}, InputError);
  EXPECT_THROW(cgad::io::InputFile{(dir_ / "missing").string()}, InputError);
}

// --- item 16: a noise study's memory is estimated and bounded before it runs -------------------------------------

TEST(NoiseMemory, AStudyThatWouldExhaustMemoryIsRefusedBeforeItRunsAndTheDefaultsAreNot) {
  namespace diff = cgad::differential;
  const ref::PrecisionScope precision(128);  // cgad noise's default
  diff::NoiseScenario s;                     // the CLI's defaults: 2000 steps logged every 100, 4096 elements
  s.size = 4096;
  s.steps = 2000;
  s.log_every = 100;
  EXPECT_NO_THROW(diff::check_memory(std::vector<diff::NoiseScenario>(3, s)));
  // The issue's case: 10^7 steps logged at every one held ~1.8 GB per scenario.
  s.steps = 10'000'000;
  s.log_every = 1;
  const diff::NoiseMemory m = diff::estimated_memory(s);
  EXPECT_GT(m.kept, 1e9) << "10^7 samples of " << sizeof(diff::NoiseSample) << " bytes";
  EXPECT_THROW(diff::check_memory({s}), InputError);
  // Logged sparsely the same run is fine: memory follows the samples kept, not the steps run.
  s.log_every = 10'000;
  EXPECT_NO_THROW(diff::check_memory({s}));
  // Many runs are held together until printed: what one run may keep, a thousand may not.
  s.steps = 2000;
  s.log_every = 1;
  s.size = 1u << 16;
  EXPECT_NO_THROW(diff::check_memory({s}));
  EXPECT_THROW(diff::check_memory(std::vector<diff::NoiseScenario>(1000, s)), InputError);
}

// --- items 19, 21: the thread pool ------------------------------------------------------------------------------

TEST(ThreadPoolLimits, RefusesMoreThreadsThanItsCap) {
  EXPECT_THROW(fp::ThreadPool(fp::ThreadPool::kMaxThreads + 1), InputError);
  EXPECT_THROW(fp::ThreadPool(4294967295u), InputError);
  EXPECT_LE(fp::ThreadPool(0).threads(), fp::ThreadPool::kMaxThreads);
}

TEST(ThreadPoolLimits, AFailedThreadCreationIsAnErrorNotAHang) {
  // Address space for a few more thread stacks only: pthread_create fails part-way through 200 threads. Before the
  // fix the constructor left the started threads waiting on a condition variable it then destroyed (a hang in
  // pthread_cond_destroy, or std::terminate on a joinable std::thread).
  const int status = in_child(
      [] {
        std::ifstream status_file("/proc/self/status");
        long vm_kb = 0;
        for (std::string line; std::getline(status_file, line);) {
          if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stol(line.substr(7));
        }
        const rlim_t limit = static_cast<rlim_t>(vm_kb + 48 * 1024) * 1024;
        const rlimit rl{limit, limit};
        if (vm_kb == 0 || ::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(3);
        try {
          fp::ThreadPool pool(200);
          ::_exit(pool.threads() == 200 ? 4 : 5);  // all 200 started: the limit did not bite
        } catch (const InputError&) {
          ::_exit(0);
        } catch (...) {
          ::_exit(6);
        }
      },
      60);
  if (status == 4) GTEST_SKIP() << "the address-space limit did not stop thread creation here";
  EXPECT_EQ(status, 0) << "-1: the constructor hung; 128+6: std::terminate";
}

// --- item 4: the overflow rule for Nesterov and SDM, and the hyperparameter ranges ------------------------------

TEST(OverflowRule, NesterovAndSdmRefuseAnOverflowingEventWholeInTheReferenceAndTheFastPathAlike) {
  ref::set_working_precision_bits(256);
  for (const auto kind : {core::OptimizerKind::nesterov, core::OptimizerKind::sdm}) {
    // Reference: Δ = 2e38 (|σΔ| ≥ 2^63 at τ = 0 and 1) is refused and changes nothing.
    core::OptimizerConfig<mpfr_real> config;
    config.optimizer = kind;
    auto optimizer = ref::make_optimizer(config, 2);
    std::vector<mpfr_real> params{mpfr_real(1), mpfr_real(2)};
    const std::vector<mpfr_real> grad{mpfr_real(1), core::parse_real<mpfr_real>("2e38", "g")};
    const auto report = optimizer->apply(params, {grad, 1, 0});
    EXPECT_FALSE(report.applied);
    EXPECT_EQ(report.reason, core::SkipReason::overflowing_gradient);
    EXPECT_EQ(report.nonfinite_index, 1u);
    EXPECT_EQ(params[0], mpfr_real(1));
    EXPECT_EQ(optimizer->buffers()[0].values[1], mpfr_real(0));
    // SDM at τ = 1 halves Δ: 2^64 is refused (σΔ = 2^63), 1.5·2^63 applied; Nesterov refuses both.
    const mpfr_real edge = ldexp(mpfr_real(1), 64), below = ldexp(mpfr_real(3), 62);
    EXPECT_FALSE(optimizer->apply(params, {std::vector<mpfr_real>{mpfr_real(0), edge}, 1, 0}).applied);
    const bool below_applied = optimizer->apply(params, {std::vector<mpfr_real>{mpfr_real(0), below}, 1, 0}).applied;
    EXPECT_EQ(below_applied, kind == core::OptimizerKind::sdm);
    // Fast path, every format: the same decisions, nothing changed by a refused event, finite results.
    for (const fp::StepConfig& base : fp::testing::all_format_configs(kind)) {
      fp::StepConfig c = base;
      fp::CpuOptimizer cpu(c, 2, 1);
      fp::testing::Params p(c, {1.0f, 2.0f});
      const auto before = fp::testing::state_bytes(cpu);
      const auto bytes = p.bytes();
      const auto r = p.step(cpu, {1.0f, 2e38f}, 1);
      EXPECT_FALSE(r.applied) << fp::testing::describe(c);
      EXPECT_EQ(r.reason, core::SkipReason::overflowing_gradient) << fp::testing::describe(c);
      EXPECT_EQ(r.nonfinite_index, 1u);
      EXPECT_EQ(p.bytes(), bytes) << fp::testing::describe(c);
      EXPECT_EQ(fp::testing::state_bytes(cpu), before) << fp::testing::describe(c);
      EXPECT_FALSE(p.step(cpu, {0.0f, 0x1p64f}, 1).applied) << fp::testing::describe(c);
      EXPECT_EQ(p.step(cpu, {0.0f, 0x1.8p63f}, 1).applied, kind == core::OptimizerKind::sdm)
          << fp::testing::describe(c);
      std::vector<float> b(2);
      cpu.read_buffer("b", b);
      EXPECT_TRUE(std::isfinite(b[1])) << fp::testing::describe(c);
#if defined(CGAD_FASTPATH_HAS_CUDA)
      if (fp::cuda_device_available() && c.params == fp::ParamFormat::fp32) {
        // The CUDA refusal scan decides alike (the same σ reaches it).
        fp::CudaOptimizer gpu(c, 2);
        float* device_params = nullptr;
        float* device_grad = nullptr;
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_params), 2 * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_grad), 2 * sizeof(float)), cudaSuccess);
        const float host_params[2] = {1.0f, 2.0f}, host_grad[2] = {1.0f, 2e38f};
        cudaMemcpy(device_params, host_params, sizeof host_params, cudaMemcpyHostToDevice);
        cudaMemcpy(device_grad, host_grad, sizeof host_grad, cudaMemcpyHostToDevice);
        gpu.step(device_params, 2, device_grad, 2, 1, 0, nullptr);
        const auto gr = gpu.report();
        EXPECT_FALSE(gr.applied) << "cuda " << fp::testing::describe(c);
        EXPECT_EQ(gr.reason, core::SkipReason::overflowing_gradient);
        float back[2];
        cudaMemcpy(back, device_params, sizeof back, cudaMemcpyDeviceToHost);
        EXPECT_EQ(back[0], 1.0f);
        EXPECT_EQ(back[1], 2.0f);
        cudaFree(device_params);
        cudaFree(device_grad);
      }
#endif
    }
  }
}

TEST(HyperparameterRanges, HyperparametersThatMakeFiniteInputInfiniteAreRefusedWithTheirRange) {
  core::AdamHyper<float> adam;
  EXPECT_NO_THROW(core::validate_range(adam));
  adam.lr = 3e38f;
  EXPECT_THROW(core::validate_range(adam), InputError);
  adam = {};
  adam.weight_decay = 1e30f;
  EXPECT_THROW(core::validate_range(adam), InputError);
  adam = {};
  adam.lr = 1.0f;
  adam.weight_decay = 3.0f;  // the decay multiplies θ by -2 each step
  EXPECT_THROW(core::validate_range(adam), InputError);
  adam.weight_decay = 2.0f;
  EXPECT_NO_THROW(core::validate_range(adam));
  adam = {};
  adam.lr = static_cast<float>(cgad::core::kMaxLearningRate);
  EXPECT_NO_THROW(core::validate_range(adam));
  core::NesterovHyper<mpfr_real> nesterov;
  EXPECT_NO_THROW(core::validate_range(nesterov));
  nesterov.lr = core::parse_real<mpfr_real>("3e38", "lr");
  try {
    core::validate_range(nesterov);
    ADD_FAILURE() << "lr 3e38 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("2^38"), std::string::npos) << "the message states the range: " << e.what();
  }
}

// --- the report folder's swap never deletes through a mount or a link, and keeps who owns it -------------------

// A tmpfs mounted at `at` for the scope (root only: where mount(2) is not permitted, mounted() is false and the
// test says why it is skipped), unmounted on the way out whatever the test did.
class TmpfsMount {
 public:
  explicit TmpfsMount(const fs::path& at) : at_(at) {
    fs::create_directories(at);
    mounted_ = ::mount("cgad-test", at.c_str(), "tmpfs", 0, "size=1m") == 0;
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(at_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;
  bool mounted() const { return mounted_; }

 private:
  fs::path at_;
  bool mounted_ = false;
};

using ReportFolderSwap = Folder;

TEST_F(ReportFolderSwap, AFolderThatIsOrHoldsAMountPointIsRefusedAndTheMountedFilesStay) {
  const fs::path report = dir_ / "report";
  fs::create_directories(report);
  put(report / "report.md", "old report");
  TmpfsMount mount(report / "data");
  if (!mount.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (needs root): " << std::strerror(errno);
  put(report / "data" / "results.csv", "the user's results");
  try {
    cgad::io::AtomicFolder folder(report, "report");
    folder.write_file("report.md", "new report");
    folder.commit();
    ADD_FAILURE() << "a folder holding a mount point was replaced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds a mount point"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(report / "data" / "results.csv"), "the user's results");
  EXPECT_EQ(slurp(report / "report.md"), "old report");
  EXPECT_EQ(others({"report"}), std::vector<std::string>{}) << "a temporary left beside the report";
  // The report folder itself a mount point: refused alike.
  TmpfsMount whole(dir_ / "mounted");
  ASSERT_TRUE(whole.mounted());
  put(dir_ / "mounted" / "notes.txt", "kept");
  EXPECT_THROW(cgad::io::AtomicFolder(dir_ / "mounted", "report"), InputError);
  EXPECT_EQ(slurp(dir_ / "mounted" / "notes.txt"), "kept");
}

TEST_F(ReportFolderSwap, ALinkToAFolderIsWrittenThroughAndStaysALink) {
  const fs::path real = dir_ / "real";
  fs::create_directories(real);
  put(real / "report.md", "old report");
  put(real / "notes.txt", "the user's");
  fs::create_symlink("real", dir_ / "link");
  {
    cgad::io::AtomicFolder folder(dir_ / "link", "report");
    folder.write_file("report.md", "new report");
    folder.commit();
  }
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link")));
  EXPECT_EQ(slurp(real / "report.md"), "new report");
  EXPECT_EQ(slurp(real / "notes.txt"), "the user's");
  EXPECT_EQ(others({"real", "link"}), std::vector<std::string>{});
  // A link in a loop, and one to a missing folder, are refused with what they are.
  fs::create_symlink("loop", dir_ / "loop");
  try {
    cgad::io::AtomicFolder folder(dir_ / "loop", "report");
    ADD_FAILURE() << "a link loop was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("in a loop"), std::string::npos) << e.what();
  }
  fs::create_symlink("absent", dir_ / "dangling");
  EXPECT_THROW(cgad::io::AtomicFolder(dir_ / "dangling", "report"), InputError);
  EXPECT_FALSE(fs::exists(dir_ / "absent"));
}

TEST_F(ReportFolderSwap, TheReplacedFolderKeepsItsOwnerGroupAndSetgidMode) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a folder to another owner needs root";
  const fs::path report = dir_ / "report";
  fs::create_directories(report);
  put(report / "notes.txt", "the user's");
  const uid_t owner = 12345;
  const gid_t group = 23456;
  ASSERT_EQ(::chown(report.c_str(), owner, group), 0);
  ASSERT_EQ(::chmod(report.c_str(), 02775), 0);
  {
    cgad::io::AtomicFolder folder(report, "report");
    folder.write_file("report.md", "new report");
    folder.commit();
  }
  struct stat st;
  ASSERT_EQ(::stat(report.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, owner);
  EXPECT_EQ(st.st_gid, group);
  EXPECT_EQ(st.st_mode & 07777, 02775u) << std::oct << (st.st_mode & 07777);
  ASSERT_EQ(::stat((report / "report.md").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, group) << "a file written into a setgid folder gets its group";
  EXPECT_EQ(slurp(report / "notes.txt"), "the user's");
}

}  // namespace
