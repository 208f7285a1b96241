// Saving and loading the fast path's state: bit-exact round trip, and every way a file can be wrong refused
// with an InputError that leaves the in-memory state untouched — every single corrupted byte position included.
#include "fastpath_test_support.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <unistd.h>

namespace cgad::fastpath {
namespace {

using testing::all_format_configs;
using testing::describe;
using testing::Params;
using testing::random_vector;
using testing::state_bytes;

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("cgad_fastpath_" + std::to_string(::getpid()) + "_" + name);
}

std::vector<char> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_all(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An optimizer with some history: two applied events over `n` parameters.
std::unique_ptr<CpuOptimizer> stepped(const StepConfig& config, std::size_t n, std::uint32_t seed) {
  auto opt = std::make_unique<CpuOptimizer>(config, n, 2);
  Params params(config, random_vector(n, seed));
  params.step(*opt, random_vector(n, seed + 1), 0);
  params.step(*opt, random_vector(n, seed + 2), 1);
  return opt;
}

TEST(FastpathStateFile, RoundTripIsBitExactAndContinuesIdentically) {
  for (const auto kind : {reference::OptimizerKind::cgad, reference::OptimizerKind::nesterov}) {
    for (const StepConfig& config : all_format_configs(kind)) {
      const std::size_t n = 300;
      const auto path = temp_path("roundtrip");
      const auto stepped_optimizer = stepped(config, n, 1);
      CpuOptimizer& saved = *stepped_optimizer;
      saved.save(path);
      CpuOptimizer loaded(config, n, 3);
      loaded.load(path);
      ASSERT_EQ(state_bytes(saved), state_bytes(loaded)) << describe(config);
      // Stepping both on from the same parameters gives the same bits.
      Params a(config, random_vector(n, 9)), b(config, random_vector(n, 9));
      a.step(saved, random_vector(n, 10), 2);
      b.step(loaded, random_vector(n, 10), 2);
      ASSERT_EQ(a.bytes(), b.bytes()) << describe(config);
      ASSERT_EQ(state_bytes(saved), state_bytes(loaded)) << describe(config);
      std::filesystem::remove(path);
    }
  }
}

TEST(FastpathStateFile, EveryCorruptedByteIsRefusedAndTheStateKept) {
  StepConfig config = all_format_configs(reference::OptimizerKind::cgad)[4];  // q8 state: codes and absmax
  const std::size_t n = 300;
  const auto path = temp_path("corrupt");
  stepped(config, n, 2)->save(path);
  const std::vector<char> good = read_all(path);
  const auto target_owner = stepped(config, n, 3);  // a different history, which must survive every refusal
  CpuOptimizer& target = *target_owner;
  const auto before = state_bytes(target);
  for (std::size_t position = 0; position < good.size(); ++position) {
    for (const unsigned char flip : {0x01, 0x80, 0xFF}) {
      std::vector<char> bad = good;
      bad[position] = static_cast<char>(bad[position] ^ flip);
      write_all(path, bad);
      ASSERT_THROW(target.load(path), reference::InputError) << "byte " << position << " xor " << int{flip};
    }
  }
  for (std::size_t length = 0; length < good.size(); length += (length < 64 ? 1 : 97)) {
    write_all(path, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)));
    ASSERT_THROW(target.load(path), reference::InputError) << "truncated to " << length;
  }
  std::vector<char> longer = good;
  longer.push_back(0);
  write_all(path, longer);
  EXPECT_THROW(target.load(path), reference::InputError);
  EXPECT_EQ(state_bytes(target), before);
  std::printf("state file: %zu bytes, each corrupted three ways, all refused\n", good.size());
  std::filesystem::remove(path);
}

TEST(FastpathStateFile, OtherConfigurationOrSizeIsRefused) {
  StepConfig config = all_format_configs(reference::OptimizerKind::cgad)[4];
  const auto path = temp_path("mismatch");
  stepped(config, 300, 4)->save(path);
  std::vector<StepConfig> others(6, config);
  others[0].state = StateFormat::bf16;
  others[1].params = ParamFormat::bf16;
  others[2].adam.beta2 = 0.99f;
  others[3].seed = 1;
  others[4].optimizer = reference::OptimizerKind::adam;
  others[5].rounding = Rounding::stochastic;
  for (const StepConfig& other : others) {
    CpuOptimizer target(other, 300, 1);
    const auto before = state_bytes(target);
    EXPECT_THROW(target.load(path), reference::InputError) << describe(other);
    EXPECT_EQ(state_bytes(target), before);
  }
  CpuOptimizer smaller(config, 299, 1);
  EXPECT_THROW(smaller.load(path), reference::InputError);
  CpuOptimizer fine(config, 300, 1);
  EXPECT_NO_THROW(fine.load(path));
  EXPECT_THROW(fine.load(temp_path("does_not_exist")), reference::InputError);
  std::filesystem::remove(path);
}

// A save that cannot complete is an InputError, leaves the previous file as it was and no temporary behind.
TEST(FastpathStateFile, FailedSaveLeavesTheOldFile) {
  StepConfig config = all_format_configs(reference::OptimizerKind::cgad)[0];
  const auto dir = temp_path("dir");
  std::filesystem::create_directories(dir);
  const auto path = dir / "state.bin";
  stepped(config, 100, 5)->save(path);
  const auto good = read_all(path);
  EXPECT_THROW(stepped(config, 100, 6)->save(dir / "missing" / "state.bin"), reference::InputError);
  // Renaming onto a directory fails after the temporary was written: it must be removed, the target kept.
  std::filesystem::create_directories(dir / "occupied");
  EXPECT_THROW(stepped(config, 100, 6)->save(dir / "occupied"), reference::InputError);
  EXPECT_EQ(read_all(path), good);
  std::size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) entries += entry.is_regular_file();
  EXPECT_EQ(entries, 1u) << "only state.bin, no temporary left behind";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cgad::fastpath
