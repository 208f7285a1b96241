// Two rules for every file a command reads (docs/design.md §7, bad input): a JSON input nested deeper than cgad
// reads is one line and exit status 2 (before, a value nested 10^5 deep crashed the command with SIGSEGV in the
// recursive dump of the error message), and no output may name any input -- here the --q8-maps file, which
// `--output` replaced by its own path, a link to it, or `-` appended to it by the shell. Each test failed before
// its fix.
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace cgad::testing {
namespace {

namespace fs = std::filesystem;

class CliInputs : public CgadCommandTest {
 protected:
  // `cgad ARGS` with its standard output appended to `file` (a shell's >>), stderr captured.
  Outcome appending(const std::string& args, const std::string& file) const {
    const std::string command =
        "cd '" + dir_.string() + "' && " + CGAD_BINARY + " " + args + " >>" + file + " 2>.stderr </dev/null";
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, "", slurp(dir_ / ".stderr")};
  }
};

// A JSON value nested `depth` arrays deep: past any limit of recursion the stack could take.
std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

constexpr std::size_t kDeep = 100000;
const std::string kStream = "{\"params\": [1, 0.5, -2.25]}\n{\"grad\": [0.1, -0.2, 0.3], \"tau\": 0}\n";
const std::string kReplay = "replay --backend fastpath --state q8 --min-q8-size 0 --input s.jsonl ";

TEST_F(CliInputs, AQ8MapsCodeNestedDeepIsOneLine) {
  write("s.jsonl", kStream);
  const Outcome book = cgad("codebook --json");
  ASSERT_EQ(book.status, 0) << book.err;
  std::string maps = nlohmann::json::parse(book.out).dump();
  const std::size_t first_code = maps.find("\"hex\":[") + 7;
  maps.replace(first_code, maps.find(',', first_code) - first_code, nested(kDeep));
  write("deep.json", maps);
  expect_refused(cgad(kReplay + "--q8-maps deep.json --output out.jsonl"), "nested more than 64 deep");
  EXPECT_FALSE(fs::exists(dir_ / "out.jsonl"));
}

TEST_F(CliInputs, AStreamLineNestedDeepIsOneLine) {
  write("deep.jsonl", "{\"params\": " + nested(kDeep) + "}\n");
  expect_refused(cgad("replay --input deep.jsonl --output -"), "deep.jsonl:1");
}

TEST_F(CliInputs, APartFileNestedDeepIsOneLineWhereverTheNesting) {
  const std::string sweep = "simulate --optimizer cgad --tau 0 --size 4 --state fp32 --rounds 3 --seeds 2 ";
  const Outcome part = cgad(sweep + "--shard 0/2 --out part0.json");
  ASSERT_EQ(part.status, 0) << part.err;
  ASSERT_EQ(cgad(sweep + "--shard 1/2 --out part1.json").status, 0);
  const nlohmann::json good = nlohmann::json::parse(slurp(dir_ / "part0.json"));
  // A nested "version" (quoted by the version check's message), and a nested value where the part's own arrays are.
  for (const char* key : {"version", "runs"}) {
    nlohmann::json edited = good;
    edited[key] = "NESTED";
    std::string text = edited.dump();
    text.replace(text.find("\"NESTED\""), 8, nested(kDeep));
    write("deep.json", text);
    expect_refused(cgad("merge deep.json part1.json"), "deep.json: arrays and objects nested more than 64 deep");
  }
  // As an existing --out, read to see whether it holds another shard of the sweep: not a part, so replaced.
  nlohmann::json shard = good;
  shard["shard"]["index"] = "NESTED";
  std::string text = shard.dump();
  text.replace(text.find("\"NESTED\""), 8, nested(kDeep));
  write("deep.json", text);
  const Outcome replaced = cgad(sweep + "--shard 1/2 --out deep.json");
  EXPECT_EQ(replaced.status, 0) << replaced.err;
  EXPECT_TRUE(slurp(dir_ / "deep.json") == slurp(dir_ / "part1.json"));  // not printed: 200 kB of brackets
}

TEST_F(CliInputs, TheOutputMayNotBeTheQ8MapsFileByAnyPath) {
  write("s.jsonl", kStream);
  const Outcome book = cgad("codebook --json");
  ASSERT_EQ(book.status, 0) << book.err;
  write("maps.json", book.out);
  fs::create_symlink("maps.json", dir_ / "alias.json");
  fs::create_hard_link(dir_ / "maps.json", dir_ / "hard.json");
  for (const char* output : {"maps.json", "./maps.json", "alias.json", "hard.json"}) {
    expect_refused(cgad(kReplay + "--q8-maps maps.json --output " + output), "is the --q8-maps file 'maps.json'");
    EXPECT_EQ(slurp(dir_ / "maps.json"), book.out) << output;
  }
  expect_refused(cgad(kReplay + "--q8-maps alias.json --output maps.json"), "is the --q8-maps file 'alias.json'");
  // `-` appended to the maps by the shell.
  const Outcome appended = appending(kReplay + "--q8-maps maps.json --output -", "maps.json");
  EXPECT_EQ(appended.status, 2) << appended.err;
  EXPECT_NE(appended.err.find("standard output is the --q8-maps file 'maps.json'"), std::string::npos) << appended.err;
  EXPECT_EQ(slurp(dir_ / "maps.json"), book.out);
  // The same file for both inputs is no output onto an input.
  EXPECT_EQ(cgad(kReplay + "--q8-maps maps.json --output out.jsonl").status, 0);
}

}  // namespace
}  // namespace cgad::testing
