// `cgad replay --q8-maps FILE` (docs/commands.md): q8 state's maps as data. The built-in maps, as `cgad codebook
// --json` prints them, replay bit for bit as without the flag; one code moved changes the replay; a file of another
// shape, codes the fast path refuses and the flag with the reference backend are refused with one line, status 2.
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cgad::testing {
namespace {

using Q8MapsCli = CgadCommandTest;

// 300 parameters, 6 events of mixed-scale pseudo-gradients.
std::string stream() {
  std::string text = "{\"params\": [";
  for (int i = 0; i < 300; ++i) text += (i ? ", " : "") + std::to_string(0.01 * (i % 17) - 0.08);
  text += "]}\n";
  for (int e = 0; e < 6; ++e) {
    text += "{\"grad\": [";
    for (int i = 0; i < 300; ++i) {
      text += (i ? ", " : "") + std::to_string(std::ldexp(((i * 7 + e * 13) % 23) - 11.0, -(i % 9)) / 11.0);
    }
    text += "], \"tau\": " + std::to_string(e % 3) + "}\n";
  }
  return text;
}

const std::string kReplay =
    "replay --backend fastpath --optimizer adam --params fp32 --state q8 --q8-semantics bnb --min-q8-size 0 "
    "--input s.jsonl --output out.jsonl";

TEST_F(Q8MapsCli, TheCodebooksMapsReplayBitForBitAndAMovedCodeChangesTheReplay) {
  write("s.jsonl", stream());
  const Outcome book = cgad("codebook --json");
  ASSERT_EQ(book.status, 0) << book.err;
  write("maps.json", book.out);
  ASSERT_EQ(cgad(kReplay).status, 0);
  const std::string built_in = slurp(dir_ / "out.jsonl");
  const Outcome given = cgad(kReplay + " --q8-maps maps.json");
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_EQ(slurp(dir_ / "out.jsonl"), built_in);
  // Signed codes 200 to 254 (in the last decade, 0.1 to 1) one float lower: the m of the elements on them decode a
  // little lower.
  nlohmann::json moved = nlohmann::json::parse(book.out);
  for (int k = 200; k < 255; ++k) {
    const float code = std::strtof(moved["signed"]["hex"][k].get<std::string>().c_str(), nullptr);
    char text[32];
    std::snprintf(text, sizeof text, "%a", static_cast<double>(std::nextafter(code, 0.0f)));
    moved["signed"]["hex"][k] = text;
  }
  write("moved.json", moved.dump());
  const Outcome other = cgad(kReplay + " --q8-maps moved.json");
  ASSERT_EQ(other.status, 0) << other.err;
  EXPECT_NE(slurp(dir_ / "out.jsonl"), built_in);
}

TEST_F(Q8MapsCli, BadMapsAreRefusedWithOneLine) {
  write("s.jsonl", stream());
  const Outcome book = cgad("codebook --json");
  ASSERT_EQ(book.status, 0) << book.err;
  nlohmann::json maps = nlohmann::json::parse(book.out);
  write("maps.json", book.out);
  nlohmann::json no_unsigned = maps;
  no_unsigned.erase("unsigned");
  write("no_unsigned.json", no_unsigned.dump());
  expect_refused(cgad(kReplay + " --q8-maps no_unsigned.json"),
                 "q8 maps file no_unsigned.json: \"unsigned\" is missing");
  nlohmann::json short_map = maps;
  short_map["signed"]["hex"].erase(0);
  write("short.json", short_map.dump());
  expect_refused(cgad(kReplay + " --q8-maps short.json"), "\"signed\" must be an array of 256 codes");
  nlohmann::json swapped = maps;
  std::swap(swapped["signed"]["hex"][10], swapped["signed"]["hex"][11]);
  write("swapped.json", swapped.dump());
  expect_refused(cgad(kReplay + " --q8-maps swapped.json"), "q8 maps: the signed map is not strictly increasing");
  nlohmann::json inexact = maps;
  inexact["unsigned"]["hex"][5] = 0.1;
  write("inexact.json", inexact.dump());
  expect_refused(cgad(kReplay + " --q8-maps inexact.json"), "\"unsigned\" code 5 is 0.1, not a float32 value");
  write("broken.json", "{\"signed\": [");
  expect_refused(cgad(kReplay + " --q8-maps broken.json"), "q8 maps file broken.json");
  expect_refused(cgad(kReplay + " --q8-maps absent.json"), "absent.json");
  expect_refused(cgad("replay --backend reference --input s.jsonl --output out.jsonl --q8-maps maps.json"),
                 "--q8-maps applies to --backend fastpath only");
  expect_refused(cgad("replay --backend fastpath --state fp32 --input s.jsonl --output out.jsonl --q8-maps maps.json"),
                 "q8 maps are the codes of q8 state: they need state q8");
}

}  // namespace
}  // namespace cgad::testing
