#pragma once
// Running the `cgad` binary from a test as a user would: a fresh folder per test that is also the working
// directory of every run, stdout and stderr captured, and the project's rule for a refusal checked in one place.
// The binary's path comes from the build (cgad_add_proptest(... RUNS_CGAD) defines CGAD_BINARY).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace cgad::testing {

struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class CgadCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("cgad_" + std::string(test->test_suite_name()) + "_" + std::to_string(::getpid()) + "_" + test->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `cgad ARGS` inside dir_ with stdin closed.
  Outcome cgad(const std::string& args) const {
    const std::string command =
        "cd '" + dir_.string() + "' && " + CGAD_BINARY + " " + args + " >.stdout 2>.stderr </dev/null";
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(dir_ / ".stdout"), slurp(dir_ / ".stderr")};
  }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }
  // A refusal is exit status 2, exactly one line on stderr that starts with "cgad: " and names the problem,
  // and nothing on stdout.
  void expect_refused(const Outcome& o, const std::string& fragment) const {
    EXPECT_EQ(o.status, 2) << o.err;
    EXPECT_EQ(o.err.rfind("cgad: ", 0), 0u) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find(fragment), std::string::npos) << "wanted '" << fragment << "' in: " << o.err;
    EXPECT_TRUE(o.out.empty()) << o.out;
  }

  std::filesystem::path dir_;
};

}  // namespace cgad::testing
