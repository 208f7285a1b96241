// The figures read at a glance (docs/report.md): `cgad noise --plot-dir` draws its two figures through a stand-in
// gnuplot on PATH that keeps the script it is fed, and the scripts are checked for what a reader needs -- at most
// six series to a panel, every series named in words (no slash-joined scenario names), and no two series of a
// panel drawn alike (colour, dash pattern and point type together), with one optimizer drawn alike in every panel.
#include "support/cli_harness.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace cgad::testing {
namespace {

class CliFigures : public CgadCommandTest {
 protected:
  // A `gnuplot` that appends its script to scripts.gp, a line "#figure" before each, and answers the smallest file
  // the figure writer takes for a whole PNG: the signature and an empty IEND chunk (its CRC, 0xAE426082).
  void SetUp() override {
    CgadCommandTest::SetUp();
    std::filesystem::create_directories(dir_ / "bin");
    write("bin/gnuplot", "#!/bin/sh\n{ echo '#figure'; cat; } >> '" + (dir_ / "scripts.gp").string() +
                             "'\nprintf '\\211PNG\\r\\n\\032\\n\\000\\000\\000\\000IEND\\256\\102\\140\\202'\n");
    ::chmod((dir_ / "bin" / "gnuplot").c_str(), 0755);
    path_ = std::getenv("PATH");
    ::setenv("PATH", ((dir_ / "bin").string() + ":" + path_).c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", path_.c_str(), 1);
    CgadCommandTest::TearDown();
  }

  struct Series {
    std::string style, title;
  };
  // Each figure's plot commands (one per panel), each as its series' style clause and title.
  std::vector<std::vector<std::vector<Series>>> figures() const {
    std::vector<std::vector<std::vector<Series>>> out;
    std::istringstream in(slurp(dir_ / "scripts.gp"));
    const std::regex clause(R"(\$data\S* using 1:2 with (.*?) title '((?:[^']|'')*)')");
    for (std::string line; std::getline(in, line);) {
      if (line == "#figure") out.emplace_back();
      if (line.rfind("plot ", 0) != 0 || out.empty()) continue;
      std::vector<Series> panel;
      for (std::sregex_iterator m(line.begin(), line.end(), clause), end; m != end; ++m) {
        panel.push_back({(*m)[1], (*m)[2]});
      }
      out.back().push_back(panel);
    }
    return out;
  }

  // Every panel: at most six series, no two drawn alike, nor with the same dash pattern (which tells them apart
  // in grey).
  static void expect_readable_panels(const std::vector<std::vector<Series>>& figure) {
    const std::regex dash(R"(dashtype (\S+))");
    for (const auto& panel : figure) {
      EXPECT_LE(panel.size(), 6u);
      std::set<std::string> styles, dashes;
      for (const Series& s : panel) {
        std::smatch m;
        EXPECT_TRUE(std::regex_search(s.style, m, dash)) << s.style;
        EXPECT_TRUE(dashes.insert(m.empty() ? "" : m[1].str()).second) << "two series with one dash: " << s.style;
        EXPECT_TRUE(styles.insert(s.style).second) << "two series of a panel drawn alike: " << s.style;
      }
    }
  }

  std::string path_;
};

TEST_F(CliFigures, NoiseFiguresHoldAHandfulOfSeriesPerPanelNamedInWordsAndDrawnApart) {
  // Twelve runs: three optimizers by two state formats by two roundings (`noise_v_bias.png` drew them as twelve
  // slash-joined names in one legend, its colours repeating).
  const Outcome o = cgad(
      "noise --optimizers adam-decay,cgad,cgad-skip --state bf16,q8 --rounding nearest,stochastic --size 64 "
      "--steps 40 --log-every 10 --plot-dir .");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "noise_v_rms.png"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "noise_v_bias.png"));
  const auto drawn = figures();
  ASSERT_EQ(drawn.size(), 2u);
  for (const auto& figure : drawn) {
    std::size_t series = 0;
    std::map<std::string, std::string> style_of;  // optimizer's words -> style, across the panels
    expect_readable_panels(figure);
    for (const auto& panel : figure) {
      for (const Series& s : panel) {
        ++series;
        EXPECT_EQ(s.title.find('/'), std::string::npos) << s.title;
        EXPECT_NE(s.style.find("pointtype"), std::string::npos) << s.style;
        const auto [it, fresh] = style_of.emplace(s.title, s.style);
        EXPECT_EQ(it->second, s.style) << s.title << " drawn two ways";
      }
    }
    EXPECT_EQ(series, 12u);  // every run is drawn once
    EXPECT_EQ(style_of.size(), 3u);
    EXPECT_TRUE(style_of.count("Adam-Decay") && style_of.count("CGAD")) << "optimizers named in words";
  }
}

TEST_F(CliFigures, RealizedBiasSweepSplitsTheIdealAndTheRealUpdates) {
  // Six sweep columns and two bounds: eight series in one legend before, the gates' colours repeating.
  const Outcome o = cgad(
      "verify-bound --update cgad-adam --objective sine-ripple --delays uniform --tau-max 8 --steps 50 --seed 3 "
      "--precision 128 --sweep-tau-max --plot sweep.png");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto drawn = figures();
  ASSERT_EQ(drawn.size(), 1u);
  ASSERT_EQ(drawn[0].size(), 2u);  // the ideal update's panel and the real update's
  expect_readable_panels(drawn[0]);
  // A gate is drawn alike in both panels: the CGAD gate ideal ("cgad") and in front of Adam ("cgad-adam").
  const auto style = [&](std::size_t panel, const std::string& title) {
    for (const Series& s : drawn[0][panel]) {
      if (s.title == title) return s.style;
    }
    return "no series '" + title + "'";
  };
  EXPECT_EQ(style(0, "cgad"), style(1, "cgad-adam"));
  EXPECT_EQ(style(0, "ungated"), style(1, "adam"));
}

}  // namespace
}  // namespace cgad::testing
