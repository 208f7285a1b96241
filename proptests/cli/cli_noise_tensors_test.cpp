// `cgad noise --stream FILE` per tensor of the stream's "tensors": a two-tensor stream whose first tensor spans
// five decades (v spans ten, so bitsandbytes' dynamic map stores some of its v as 0) and whose second spans none.
// The trap metrics must be reported for each tensor in JSON, CSV and the table — the first tensor trapped, the
// second not — and the whole run's shares must be the tensors' shares weighted by their sizes.
#include "support/cli_harness.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

namespace cgad::testing {
namespace {

using NoiseTensorsCli = CgadCommandTest;

constexpr int kSize = 256;  // each tensor: one q8 block
constexpr int kEvents = 40;

std::string decimal(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", x);
  return buffer;
}

// Tensor 0: element i has magnitude 10^(-5i/255); tensor 1: magnitudes in [0.5, 1.5]. Signs and sizes vary
// by event deterministically.
std::string two_tensor_stream() {
  std::ostringstream out;
  out << "{\"params\": [";
  for (int i = 0; i < 2 * kSize; ++i) out << (i ? ", " : "") << decimal(0.01 * (i % 7));
  out << "], \"tensors\": [" << kSize << ", " << kSize << "]}\n";
  for (int e = 0; e < kEvents; ++e) {
    out << "{\"grad\": [";
    for (int i = 0; i < 2 * kSize; ++i) {
      const double wobble = 1.0 + 0.5 * std::sin(7.0 * i + 3.0 * e);
      const double scale = i < kSize ? std::pow(10.0, -5.0 * i / (kSize - 1)) : 1.0;
      out << (i ? ", " : "") << decimal(((i + e) % 2 ? -1.0 : 1.0) * scale * wobble);
    }
    out << "], \"tau\": 0}\n";
  }
  return out.str();
}

TEST_F(NoiseTensorsCli, StreamStudyReportsTheTrapPerTensor) {
  write("two.jsonl", two_tensor_stream());
  const std::string study =
      "noise --stream two.jsonl --optimizers adam-decay --state q8 --q8-semantics bnb "
      "--min-q8-size 0 --log-every 20 ";
  const Outcome json = cgad(study + "--json");
  ASSERT_EQ(json.status, 0) << json.err;
  const auto run = nlohmann::json::parse(json.out)["runs"][0];
  const auto& last = run["samples"].back();
  ASSERT_EQ(last["tensors"].size(), 2u);
  const auto& wide = last["tensors"][0];
  const auto& narrow = last["tensors"][1];
  EXPECT_EQ(wide["size"], kSize);
  const double v0 = wide["trap"]["v_zero_fraction"].get<double>(), v1 = narrow["trap"]["v_zero_fraction"].get<double>();
  std::printf("v stored as 0: tensor 0 %a, tensor 1 %a, whole %a; largest step/lr %a, %a\n", v0, v1,
              last["trap"]["v_zero_fraction"].get<double>(), wide["trap"]["max_step_over_lr"].get<double>(),
              narrow["trap"]["max_step_over_lr"].get<double>());
  EXPECT_GT(v0, 0.0);
  EXPECT_EQ(v1, 0.0);
  // Equal sizes: the whole run's share is the mean of the two (exact: shares are counts over powers of two).
  for (const char* key : {"v_zero_fraction", "m_zero_fraction", "step_over_5lr_fraction"}) {
    EXPECT_EQ(last["trap"][key].get<double>(),
              (wide["trap"][key].get<double>() + narrow["trap"][key].get<double>()) / 2)
        << key;
  }
  EXPECT_EQ(last["trap"]["max_step_over_lr"].get<double>(),
            std::max(wide["trap"]["max_step_over_lr"].get<double>(), narrow["trap"]["max_step_over_lr"].get<double>()));
  // The zero-free map on the same stream: no tensor stores v as 0.
  const Outcome zero_free = cgad(study + "--v-map zero-free --json");
  ASSERT_EQ(zero_free.status, 0) << zero_free.err;
  const nlohmann::json zero_free_json = nlohmann::json::parse(zero_free.out);  // alive for the loop
  for (const auto& t : zero_free_json["runs"][0]["samples"].back()["tensors"]) {
    EXPECT_EQ(t["trap"]["v_zero_fraction"].get<double>(), 0.0);
  }

  const Outcome csv = cgad(study + "--csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  const std::string name = run["scenario"].get<std::string>();
  for (const std::string tensor : {"/tensor0,", "/tensor1,"}) {
    EXPECT_NE(csv.out.find("\n" + name + tensor + "20,"), std::string::npos) << tensor << " in\n" << csv.out;
    EXPECT_NE(csv.out.find("\n" + name + tensor + "40,"), std::string::npos) << tensor;
  }
  const Outcome table = cgad(study);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("tensor 0 (256 elements)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tensor 1 (256 elements)"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace cgad::testing
