// q8 maps given at run time (StepConfig::q8_codes, q8_maps.hpp): the built-in codes given as data step bit for bit
// as the built-in maps; the maps a PyTorch build of bitsandbytes' formula gives (fastpath/tools/data, written by
// fastpath/tools/bnb_dynamic_map.py) are taken, and a code moved in them moves exactly the elements the exact
// nearest-code rule says; codes of another shape are refused with one line; the state file records given maps and
// refuses a state of other maps than the loading optimizer's.
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/state_file.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace cgad::fastpath {
namespace {

using testing::all_format_configs;
using testing::describe;
using testing::Params;
using testing::random_vector;
using testing::state_bytes;
using testing::zero_free_configs;

Q8Codes built_in_codes() {
  Q8Codes codes;
  std::memcpy(codes.signed_codes.data(), dynamic_map(Q8MapKind::signed_map).code, sizeof(float) * kQ8Codes);
  std::memcpy(codes.unsigned_codes.data(), dynamic_map(Q8MapKind::unsigned_map).code, sizeof(float) * kQ8Codes);
  return codes;
}

// The maps torch 1.13's AVX2 linspace gives bitsandbytes' formula (45 of 512 codes 1-2 ulps off ours).
Q8Codes torch_avx2_codes() {
  std::ifstream in(std::string(CGAD_FASTPATH_DATA_DIR) + "/bnb_maps_torch1.13_avx2.txt");
  std::vector<float> codes;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') codes.push_back(static_cast<float>(std::stod(line)));
  }
  EXPECT_EQ(codes.size(), 2 * kQ8MapCodes);
  Q8Codes out;
  std::copy(codes.begin(), codes.begin() + kQ8Codes, out.signed_codes.begin());
  std::copy(codes.begin() + kQ8Codes, codes.end(), out.unsigned_codes.begin());
  return out;
}

int codes_differing(const Q8Codes& a, const Q8Codes& b) {
  int n = 0;
  for (int k = 0; k < kQ8Codes; ++k) {
    n += std::bit_cast<std::uint32_t>(a.signed_codes[k]) != std::bit_cast<std::uint32_t>(b.signed_codes[k]);
    n += std::bit_cast<std::uint32_t>(a.unsigned_codes[k]) != std::bit_cast<std::uint32_t>(b.unsigned_codes[k]);
  }
  return n;
}

// Parameter bytes, state bytes and the state file's bytes after 12 events over 3001 parameters (two q8 tensors).
std::vector<unsigned char> run_and_save(const StepConfig& config) {
  const std::vector<std::size_t> tensors{2000, 1001};
  CpuOptimizer opt(config, tensors, 2);
  Params p(config, random_vector(opt.parameters(), 7));
  for (int s = 0; s < 12; ++s) {
    p.step(opt, random_vector(opt.parameters(), 100 + static_cast<unsigned>(s), s == 6 ? 1e-30f : 1.0f), s % 5);
  }
  std::vector<unsigned char> out = p.bytes();
  const auto state = state_bytes(opt);
  out.insert(out.end(), state.begin(), state.end());
  const auto file = opt.save_bytes();
  out.insert(out.end(), file.begin(), file.end());
  return out;
}

std::vector<StepConfig> q8_configs() {
  std::vector<StepConfig> out;
  for (const auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::adam, core::OptimizerKind::nesterov}) {
    for (StepConfig c : all_format_configs(kind)) {
      if (c.state != StateFormat::q8) continue;
      c.min_q8_size = 0;  // bnb semantics too keeps the test tensors in 8-bit state
      out.push_back(c);
    }
    for (const StepConfig& c : zero_free_configs(kind)) out.push_back(c);
  }
  return out;
}

TEST(FastpathQ8GivenMaps, TheBuiltInCodesGivenAsDataStepAndSaveBitIdentically) {
  for (StepConfig config : q8_configs()) {
    const auto built_in = run_and_save(config);
    config.q8_codes = built_in_codes();
    EXPECT_EQ(run_and_save(config), built_in) << describe(config);
  }
}

// One code of the signed map moved a quarter of the way towards the next: after one step from zero with β1 = 0.5 and
// the largest |Δ| = 1, m/absmax is Δ itself, exactly (absmax = 0.5, m = Δ/2), so the code each element must hold is
// the exact nearest code of Δ_i (brute force over the codes in double, where the distance of two floats in [-1, 1]
// of this map is exact; ties to the lower), and the elements holding other codes than under the built-in map are
// exactly those whose nearest code moved — Δ has some on each side of each moved boundary. v's map is unchanged.
TEST(FastpathQ8GivenMaps, AMovedCodeMovesExactlyTheElementsItShould) {
  const int moved = 200;
  const Q8Codes built_in = built_in_codes();
  Q8Codes given = built_in;
  const float low = built_in.signed_codes[moved], high = built_in.signed_codes[moved + 1];
  given.signed_codes[moved] = low + (high - low) / 4;
  const float below = built_in.signed_codes[moved - 1];
  // Δ: 1 (sets absmax), then floats around both boundaries of the moved code, old and new, and every code.
  std::vector<float> delta{1.0f};
  for (const Q8Codes* codes : {&built_in, static_cast<const Q8Codes*>(&given)}) {
    for (const float m : {(codes->signed_codes[moved] + below) / 2, (codes->signed_codes[moved] + high) / 2}) {
      for (int k = -3; k <= 3; ++k) {
        float x = m;
        for (int j = 0; j < std::abs(k); ++j) x = std::nextafter(x, k < 0 ? -1.0f : 1.0f);
        delta.push_back(x);
      }
    }
  }
  for (int k = 0; k < kQ8Codes; ++k) delta.push_back(built_in.signed_codes[k]);
  const auto nearest = [](float x, const std::array<float, kQ8MapCodes>& codes) {
    int best = 0;
    for (int k = 1; k < kQ8Codes; ++k) {
      if (std::fabs(static_cast<double>(x) - codes[k]) < std::fabs(static_cast<double>(x) - codes[best])) best = k;
    }
    return best;
  };
  for (const auto kind : {core::OptimizerKind::adam, core::OptimizerKind::nesterov}) {
    StepConfig config;
    config.optimizer = kind;
    config.params = ParamFormat::fp32;
    config.state = StateFormat::q8;
    config.adam.beta1 = 0.5f;
    config.nesterov.momentum = 0.5f;
    std::vector<std::uint8_t> codes[2];
    for (int run = 0; run < 2; ++run) {
      if (run == 1) config.q8_codes = given;
      CpuOptimizer opt(config, delta.size(), 1);
      Params p(config, std::vector<float>(delta.size(), 0.0f));
      ASSERT_TRUE(p.step(opt, delta, 0).applied);
      const HostState& s = detail::host_state_of(opt);
      // Nesterov's b = μ·b + Δ stores Δ with absmax 1; Adam's m = Δ/2 with absmax 1/2: both m/absmax = Δ.
      ASSERT_EQ(s.absmax[0][0], kind == core::OptimizerKind::adam ? 0.5f : 1.0f);
      codes[run] = s.codes[0];
      if (kind == core::OptimizerKind::adam && run == 1) {
        StepConfig plain_config = config;
        plain_config.q8_codes.reset();
        CpuOptimizer plain(plain_config, delta.size(), 1);
        Params q(config, std::vector<float>(delta.size(), 0.0f));
        q.step(plain, delta, 0);
        EXPECT_EQ(detail::host_state_of(plain).codes[1], s.codes[1]) << "v's map is not the one given";
      }
    }
    int moved_elements = 0, onto_moved = 0, off_moved = 0;
    for (std::size_t i = 0; i < delta.size(); ++i) {
      const int want_built_in = nearest(delta[i], built_in.signed_codes),
                want_given = nearest(delta[i], given.signed_codes);
      ASSERT_EQ(codes[0][i], want_built_in) << i << " " << testing::hex(delta[i]);
      ASSERT_EQ(codes[1][i], want_given) << i << " " << testing::hex(delta[i]);
      moved_elements += want_built_in != want_given;
      onto_moved += want_built_in != moved && want_given == moved;
      off_moved += want_built_in == moved && want_given != moved;
    }
    EXPECT_GT(onto_moved, 0);
    EXPECT_GT(off_moved, 0);
    EXPECT_EQ(moved_elements, onto_moved + off_moved);
    // The decoded state is the given code times absmax.
    CpuOptimizer opt(config, delta.size(), 1);
    Params p(config, std::vector<float>(delta.size(), 0.0f));
    p.step(opt, delta, 0);
    std::vector<float> m(delta.size());
    opt.read_buffer(kind == core::OptimizerKind::adam ? "m" : "b", m);
    const float absmax = detail::host_state_of(opt).absmax[0][0];
    for (std::size_t i = 0; i < delta.size(); ++i) {
      ASSERT_EQ(m[i], given.signed_codes[codes[1][i]] * absmax) << i;
    }
  }
}

// A PyTorch build's maps (1-2 ulps off the built-in ones in 45 codes) are the codes the state decodes with: after
// three events over one tensor, read_buffer's value of element i of each moment is code[c_i]·absmax (q8.hpp's
// decode) in the given map (its code 1 for a zero-free v's code 0), and some of them are not the built-in map's.
TEST(FastpathQ8GivenMaps, APyTorchBuildsMapsAreTheCodesTheStateDecodesWith) {
  const Q8Codes torch_codes = torch_avx2_codes();
  ASSERT_GT(codes_differing(torch_codes, built_in_codes()), 0);
  const std::size_t n = 3001;
  for (StepConfig config : q8_configs()) {
    config.q8_codes = torch_codes;
    CpuOptimizer opt(config, n, 2);
    Params p(config, random_vector(n, 7));
    for (unsigned s = 0; s < 3; ++s) p.step(opt, random_vector(n, 100 + s), 0);
    const HostState& state = detail::host_state_of(opt);
    const std::vector<std::string> names = opt.buffer_names();
    int not_built_in = 0;
    for (std::size_t k = 0; k < names.size(); ++k) {
      std::vector<float> values(n);
      opt.read_buffer(names[k], values);
      const bool v = names[k] == "v";
      const auto& codes = v ? torch_codes.unsigned_codes : torch_codes.signed_codes;
      const Q8Map& built_in = dynamic_map(v ? second_moment_map(config.v_map) : Q8MapKind::signed_map);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t c = state.codes[k][i];
        const float code = v && config.v_map == VMap::zero_free && c == 0 ? codes[1] : codes[c];
        const float absmax = state.absmax[k][i / kQ8BlockSize];
        ASSERT_EQ(std::bit_cast<std::uint32_t>(values[i]), std::bit_cast<std::uint32_t>(code * absmax))
            << describe(config) << " " << names[k] << " " << i;
        not_built_in += code != built_in.code[c];
      }
    }
    EXPECT_GT(not_built_in, 0) << describe(config);
  }
}

void expect_refused(const Q8Codes& codes, const std::string& message, StateFormat state = StateFormat::q8) {
  StepConfig config;
  config.state = state;
  config.q8_codes = codes;
  try {
    CpuOptimizer opt(config, 10, 1);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(FastpathQ8GivenMaps, CodesOfAnotherShapeAreRefusedWithOneLine) {
  const Q8Codes good = built_in_codes();
  Q8Codes c = good;
  c.signed_codes[10] = std::numeric_limits<float>::quiet_NaN();
  expect_refused(c, "the signed map has a code that is not finite (code 10)");
  c = good;
  c.unsigned_codes[40] = std::numeric_limits<float>::infinity();
  expect_refused(c, "the unsigned map has a code that is not finite (code 40)");
  c = good;
  std::swap(c.signed_codes[50], c.signed_codes[51]);
  expect_refused(c, "the signed map is not strictly increasing (code 50");
  c = good;
  c.unsigned_codes[3] = c.unsigned_codes[2];  // a repeat: only the zero-free map repeats, and it is made from these
  expect_refused(c, "the unsigned map is not strictly increasing (code 2");
  c = good;
  c.signed_codes[127] = -0.0f;
  expect_refused(c, "the signed map must hold +0 at code 127");
  c = good;
  c.signed_codes[127] = c.signed_codes[128] / 2;  // increasing, without its 0
  expect_refused(c, "the signed map must hold +0 at code 127");
  c = good;
  c.unsigned_codes[0] = 1e-9f;  // zero-free by hand: the v map option makes that map from a map with its 0
  expect_refused(c, "the unsigned map must hold +0 at code 0");
  c = good;
  c.signed_codes[255] = 0.999f;
  expect_refused(c, "the signed map must end at 1");
  c = good;
  c.unsigned_codes[255] = 2.0f;
  expect_refused(c, "the unsigned map must end at 1");
  c = good;
  c.signed_codes[0] = -1.5f;
  expect_refused(c, "the signed map must start at -1 or above");
  c = good;
  // Three codes within one bucket (1/256 of a binade) put two boundaries in it: the nearest-code table refuses.
  c.unsigned_codes[200] = std::nextafter(c.unsigned_codes[201], 0.0f);
  c.unsigned_codes[199] = std::nextafter(c.unsigned_codes[200], 0.0f);
  expect_refused(c, "q8 map: codes too close together for the nearest-code table");
  expect_refused(good, "q8 maps are the codes of q8 state: they need state q8 (got state fp32)", StateFormat::fp32);
}

// New hyperparameters keep the maps: the state's codes decode through them (and CUDA's maps are on the device).
TEST(FastpathQ8GivenMaps, NewHyperparametersMustKeepTheMaps) {
  const StepConfig config = q8_configs().front();
  StepConfig given = config;
  given.q8_codes = torch_avx2_codes();
  StepConfig built_in = config;
  built_in.q8_codes = built_in_codes();
  CpuOptimizer plain(config, 300, 1);
  plain.set_hyperparameters(built_in);  // the built-in codes, given: the same maps
  plain.set_hyperparameters(config);
  CpuOptimizer own(given, 300, 1);
  StepConfig faster = given;
  faster.adam.lr = 0.5f;
  own.set_hyperparameters(faster);
  for (const auto& [opt, next] : {std::pair{&plain, given}, std::pair{&own, config}, std::pair{&own, built_in}}) {
    try {
      opt->set_hyperparameters(next);
      ADD_FAILURE() << "new maps taken";
    } catch (const core::InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "new hyperparameters must keep the optimizer's q8 maps (its state depends on it)");
    }
  }
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("cgad_given_maps_" + std::to_string(::getpid()) + "_" + name);
}

void expect_load_refused(const StepConfig& saved_with, const StepConfig& loaded_into, const std::string& message) {
  CpuOptimizer saved(saved_with, 300, 1);
  Params p(saved_with, random_vector(300, 3));
  p.step(saved, random_vector(300, 4), 0);
  const auto path = temp_path("mismatch");
  saved.save(path);
  CpuOptimizer target(loaded_into, 300, 1);
  Params q(loaded_into, random_vector(300, 5));
  q.step(target, random_vector(300, 6), 0);
  const auto before = state_bytes(target);
  for (const bool from_file : {true, false}) {
    try {
      from_file ? target.load(path) : target.load_bytes(saved.save_bytes());
      ADD_FAILURE() << "loaded; expected: " << message;
    } catch (const core::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    EXPECT_EQ(state_bytes(target), before);
  }
  std::filesystem::remove(path);
}

TEST(FastpathQ8GivenMaps, TheStateFileRecordsGivenMapsAndRefusesOthers) {
  const Q8Codes torch_codes = torch_avx2_codes();
  for (StepConfig config : q8_configs()) {
    StepConfig given = config;
    given.q8_codes = torch_codes;
    // Round trip: version 4, the maps in it, bit-exact state, the same steps after.
    CpuOptimizer saved(given, 300, 1);
    Params p(given, random_vector(300, 3));
    p.step(saved, random_vector(300, 4), 0);
    const auto bytes = saved.save_bytes();
    std::uint32_t version;
    std::memcpy(&version, bytes.data() + 8, 4);
    EXPECT_EQ(version, kStateFileVersionWithMaps);
    EXPECT_EQ(std::memcmp(bytes.data() + 12 + 64, torch_codes.signed_codes.data(), 4 * kQ8Codes), 0);
    EXPECT_EQ(std::memcmp(bytes.data() + 12 + 64 + 4 * kQ8Codes, torch_codes.unsigned_codes.data(), 4 * kQ8Codes), 0);
    const auto path = temp_path("roundtrip");
    saved.save(path);
    CpuOptimizer loaded(given, 300, 1);
    loaded.load(path);
    ASSERT_EQ(state_bytes(loaded), state_bytes(saved)) << describe(config);
    Params a = p, b = p;
    a.step(saved, random_vector(300, 5), 1);
    b.step(loaded, random_vector(300, 5), 1);
    EXPECT_EQ(a.bytes(), b.bytes()) << describe(config);
    EXPECT_EQ(state_bytes(loaded), state_bytes(saved)) << describe(config);
    std::filesystem::remove(path);
    // The built-in codes given: version 3, loadable by an optimizer of the built-in maps.
    StepConfig explicit_built_in = config;
    explicit_built_in.q8_codes = built_in_codes();
    CpuOptimizer same(explicit_built_in, 300, 1);
    const auto same_bytes = same.save_bytes();
    std::memcpy(&version, same_bytes.data() + 8, 4);
    EXPECT_EQ(version, kStateFileVersion);
    CpuOptimizer plain(config, 300, 1);
    plain.load_bytes(same_bytes);
    EXPECT_EQ(plain.save_bytes(), same_bytes);
  }
  const StepConfig config = q8_configs().front();
  StepConfig given = config;
  given.q8_codes = torch_codes;
  expect_load_refused(given, config, "was saved with its own q8 maps (q8_codes), this optimizer has the built-in ones");
  expect_load_refused(config, given, "was saved with the built-in q8 maps, this optimizer has its own (q8_codes)");
  StepConfig other = given;
  other.q8_codes->unsigned_codes[77] = std::nextafter(other.q8_codes->unsigned_codes[77], 1.0f);
  expect_load_refused(given, other, "was saved with other q8 maps than this optimizer's (unsigned code 77: ");
}

}  // namespace
}  // namespace cgad::fastpath
