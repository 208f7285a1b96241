// Saving and loading the fast path's state: bit-exact round trip, and every way a file can be wrong refused
// with an InputError that leaves the in-memory state untouched — every single corrupted byte position included.
#include "support/fastpath_test_support.hpp"

#include <gtest/gtest.h>

#include <boost/crc.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
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
  for (const auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::nesterov}) {
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
  StepConfig config = all_format_configs(core::OptimizerKind::cgad)[4];  // q8 state: codes and absmax
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
      ASSERT_THROW(target.load(path), core::InputError) << "byte " << position << " xor " << int{flip};
    }
  }
  for (std::size_t length = 0; length < good.size(); length += (length < 64 ? 1 : 97)) {
    write_all(path, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)));
    ASSERT_THROW(target.load(path), core::InputError) << "truncated to " << length;
  }
  std::vector<char> longer = good;
  longer.push_back(0);
  write_all(path, longer);
  EXPECT_THROW(target.load(path), core::InputError);
  EXPECT_EQ(state_bytes(target), before);
  std::printf("state file: %zu bytes, each corrupted three ways, all refused\n", good.size());
  std::filesystem::remove(path);
}

TEST(FastpathStateFile, OtherConfigurationOrSizeIsRefused) {
  StepConfig config = all_format_configs(core::OptimizerKind::cgad)[4];
  const auto path = temp_path("mismatch");
  stepped(config, 300, 4)->save(path);
  std::vector<StepConfig> others(6, config);
  others[0].state = StateFormat::bf16;
  others[1].params = ParamFormat::bf16;
  others[2].adam.beta2 = 0.99f;
  others[3].seed = 1;
  others[4].optimizer = core::OptimizerKind::adam;
  others[5].rounding = Rounding::stochastic;
  for (const StepConfig& other : others) {
    CpuOptimizer target(other, 300, 1);
    const auto before = state_bytes(target);
    EXPECT_THROW(target.load(path), core::InputError) << describe(other);
    EXPECT_EQ(state_bytes(target), before);
  }
  CpuOptimizer smaller(config, 299, 1);
  EXPECT_THROW(smaller.load(path), core::InputError);
  CpuOptimizer fine(config, 300, 1);
  EXPECT_NO_THROW(fine.load(path));
  EXPECT_THROW(fine.load(temp_path("does_not_exist")), core::InputError);
  std::filesystem::remove(path);
}

// A save that cannot complete is an InputError, leaves the previous file as it was and no temporary behind.
TEST(FastpathStateFile, FailedSaveLeavesTheOldFile) {
  StepConfig config = all_format_configs(core::OptimizerKind::cgad)[0];
  const auto dir = temp_path("dir");
  std::filesystem::create_directories(dir);
  const auto path = dir / "state.bin";
  stepped(config, 100, 5)->save(path);
  const auto good = read_all(path);
  EXPECT_THROW(stepped(config, 100, 6)->save(dir / "missing" / "state.bin"), core::InputError);
  // Renaming onto a directory fails after the temporary was written: it must be removed, the target kept.
  std::filesystem::create_directories(dir / "occupied");
  EXPECT_THROW(stepped(config, 100, 6)->save(dir / "occupied"), core::InputError);
  EXPECT_EQ(read_all(path), good);
  std::size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) entries += entry.is_regular_file();
  EXPECT_EQ(entries, 1u) << "only state.bin, no temporary left behind";
  std::filesystem::remove_all(dir);
}

// A file whose CRC was recomputed over impossible contents -- a NaN or infinite moment, a negative
// v, a NaN/Inf/negative q8 absmax -- is refused (it loaded, and the next step made NaN parameters while reporting
// "applied"), and the state in memory is kept.
std::vector<char> with_crc(std::vector<char> bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), bytes.size() - 4);
  const std::uint32_t sum = crc.checksum();
  std::memcpy(bytes.data() + bytes.size() - 4, &sum, 4);
  return bytes;
}
void put_float(std::vector<char>& bytes, std::size_t offset, float value) {
  std::memcpy(bytes.data() + offset, &value, 4);
}

TEST(FastpathStateFile, ImpossibleContentsUnderAValidChecksumAreRefused) {
  const std::size_t n = 300;
  // One tensor, one fragment: the header is 8 + 4 + 16·4 + 8·5 + 8 + 8 + 8 + 16 bytes.
  const std::size_t header = 8 + 4 + 64 + 40 + 8 + 8 + 8 + 16;
  const auto path = temp_path("contents");
  {
    StepConfig config = all_format_configs(core::OptimizerKind::cgad)[0];  // fp32 params, fp32 state
    config.params = ParamFormat::fp32;
    stepped(config, n, 7)->save(path);
    const std::vector<char> good = read_all(path);
    ASSERT_EQ(good.size(), header + 8 * n + 4);
    const auto target_owner = stepped(config, n, 8);
    const auto before = state_bytes(*target_owner);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const auto& [offset, value] : std::vector<std::pair<std::size_t, float>>{
             {header + 4 * 5, nan},                   // m[5] NaN
             {header + 4 * 6, -inf},                  // m[6] -Inf
             {header + 4 * n + 4 * 7, -1.0f},         // v[7] < 0
             {header + 4 * n + 4 * 8, inf},           // v[8] Inf
             {header + 4 * n, nan},                   // v[0] NaN
             {header + 4 * 9, -0x1p64f},              // |m[9]| = 2^64 > 2^63, past any step's reach (fuzz_state_bytes)
             {header + 4 * n + 4 * 10, 0x1p127f}}) {  // v[10] = 2^127 > 2^126
      std::vector<char> bad = good;
      put_float(bad, offset, value);
      write_all(path, with_crc(bad));
      EXPECT_THROW(target_owner->load(path), core::InputError) << "offset " << offset << " value " << value;
    }
    EXPECT_EQ(state_bytes(*target_owner), before);
    write_all(path, with_crc(good));  // the checksum helper itself is right
    EXPECT_NO_THROW(target_owner->load(path));
    // The bounds themselves are reachable (|g| just under 2^63 for long enough: m and v together), so they load.
    std::vector<char> edge = good;
    put_float(edge, header + 4 * 11, -0x1p63f);
    put_float(edge, header + 4 * n + 4 * 11, 0x1p126f);
    put_float(edge, header + 4 * n + 4 * 12, 0x1p126f);
    write_all(path, with_crc(edge));
    EXPECT_NO_THROW(target_owner->load(path));
  }
  {
    // q8 state: m's codes (n bytes), then m's absmax (2 blocks), m's fallback (none), v's codes, v's absmax.
    StepConfig config = all_format_configs(core::OptimizerKind::cgad)[4];
    stepped(config, n, 9)->save(path);
    const std::vector<char> good = read_all(path);
    const auto target_owner = stepped(config, n, 10);
    const auto before = state_bytes(*target_owner);
    for (const float value : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1.0f}) {
      for (const std::size_t offset : {header + n, header + n + 8 + n + 4}) {
        std::vector<char> bad = good;
        put_float(bad, offset, value);
        write_all(path, with_crc(bad));
        EXPECT_THROW(target_owner->load(path), core::InputError) << "absmax at " << offset << " = " << value;
      }
    }
    EXPECT_EQ(state_bytes(*target_owner), before);
  }
  {
    // Nesterov's b, bf16 state: a bf16 NaN.
    StepConfig config = all_format_configs(core::OptimizerKind::nesterov)[2];  // fp32 params, bf16 state
    ASSERT_EQ(config.state, StateFormat::bf16);
    stepped(config, n, 11)->save(path);
    std::vector<char> bad = read_all(path);
    const std::uint16_t bf16_nan = 0x7FC0;
    std::memcpy(bad.data() + header + 2 * 9, &bf16_nan, 2);
    write_all(path, with_crc(bad));
    CpuOptimizer target(config, n, 1);
    EXPECT_THROW(target.load(path), core::InputError);
  }
  std::filesystem::remove(path);
}

// The v map is part of the file (version 3): a zero-free state round-trips, a file of either map is refused by an
// optimizer of the other with a message naming both, and a version-2 file (no v map word) loads as dynamic.
std::string load_error(CpuOptimizer& target, const std::filesystem::path& path) {
  try {
    target.load(path);
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(FastpathStateFile, VMapIsRecordedAndAVersionTwoFileLoadsAsDynamic) {
  const std::size_t n = 300;
  const StepConfig dynamic = all_format_configs(core::OptimizerKind::cgad)[4];  // q8 state
  StepConfig zero_free = dynamic;
  zero_free.v_map = VMap::zero_free;
  const auto path = temp_path("v_map");
  const auto saved = stepped(zero_free, n, 11);
  saved->save(path);
  CpuOptimizer same(zero_free, n, 1);
  same.load(path);
  EXPECT_EQ(state_bytes(same), state_bytes(*saved));
  CpuOptimizer other(dynamic, n, 1);
  const auto before = state_bytes(other);
  EXPECT_NE(load_error(other, path).find("another v map than this optimizer's (zero-free, this optimizer dynamic)"),
            std::string::npos)
      << load_error(other, path);
  EXPECT_EQ(state_bytes(other), before);

  // A version-2 file: the version-3 bytes of a dynamic state without the v map word (after the 15 words that
  // follow magic and version), version 2, the CRC recomputed.
  const auto dynamic_saved = stepped(dynamic, n, 12);
  dynamic_saved->save(path);
  std::vector<char> bytes = read_all(path);
  const std::size_t v_map_word = 8 + 4 + 15 * 4;
  std::uint32_t word;
  std::memcpy(&word, bytes.data() + v_map_word, 4);
  ASSERT_EQ(word, 0u) << "dynamic is stored as 0";
  bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(v_map_word),
              bytes.begin() + static_cast<std::ptrdiff_t>(v_map_word + 4));
  const std::uint32_t version = 2;
  std::memcpy(bytes.data() + 8, &version, 4);
  write_all(path, with_crc(bytes));
  CpuOptimizer old_reader(dynamic, n, 1);
  old_reader.load(path);
  EXPECT_EQ(state_bytes(old_reader), state_bytes(*dynamic_saved));
  CpuOptimizer zero_free_reader(zero_free, n, 1);
  EXPECT_NE(load_error(zero_free_reader, path)
                .find("another v map than this optimizer's (dynamic, this optimizer zero-free)"),
            std::string::npos)
      << load_error(zero_free_reader, path);
  std::filesystem::remove(path);
}

// m and v are checked together: each inside its own range, |m| = 2^63 beside the smallest subnormal v loaded (CRC
// recomputed), and the next zero-gradient step sent θ to −Inf while reporting "applied". No sequence of steps
// makes such a pair (the bound's derivation is in fastpath/src/state_file.cpp), so it is refused, for fp32 and bf16
// state, and the state in memory is kept.
TEST(FastpathStateFileMoments, AnUnreachableMAndVPairIsRefused) {
  const std::size_t n = 300;
  const std::size_t header = 8 + 4 + 64 + 40 + 8 + 8 + 8 + 16;  // 16 words after magic and version (v map included)
  const auto path = temp_path("joint");
  for (const StateFormat format : {StateFormat::fp32, StateFormat::bf16}) {
    StepConfig config;
    config.params = ParamFormat::fp32;
    config.state = format;
    const std::size_t width = format == StateFormat::fp32 ? 4 : 2;
    stepped(config, n, 21)->save(path);
    const std::vector<char> good = read_all(path);
    ASSERT_EQ(good.size(), header + 2 * width * n + 4);
    const auto put = [&](std::vector<char>& bytes, std::size_t offset, float value) {
      if (width == 4) {
        put_float(bytes, offset, value);
      } else {
        const std::uint16_t half = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(value) >> 16);
        std::memcpy(bytes.data() + offset, &half, 2);
      }
    };
    const float tiny = width == 4 ? 0x1p-149f : 0x1p-133f;  // the format's smallest subnormal
    const auto target = stepped(config, n, 22);
    const auto before = state_bytes(*target);
    std::vector<char> bad = good;
    put(bad, header + width * 5, -0x1p63f);
    put(bad, header + width * n + width * 5, tiny);
    write_all(path, with_crc(bad));
    EXPECT_THROW(target->load(path), core::InputError) << describe(config);
    EXPECT_EQ(state_bytes(*target), before);
    // The same m beside the v a gradient of that size makes loads.
    std::vector<char> paired = good;
    put(paired, header + width * 5, -0x1p63f);
    put(paired, header + width * n + width * 5, 0x1p126f);
    write_all(path, with_crc(paired));
    EXPECT_NO_THROW(target->load(path)) << describe(config);
  }
  std::filesystem::remove(path);
}

// The joint bound holds for what steps do make at the edges of float: a gradient just under 2^63, then decay on
// zero gradients, then gradients whose squares underflow (v = 0 or subnormal beside a nonzero m), for fp32 and bf16
// state, nearest and stochastic rounding, and two pairs of betas; every state along the way loads again.
TEST(FastpathStateFileMoments, EveryStateStepsReachLoads) {
  const std::size_t n = 8;
  for (const StateFormat format : {StateFormat::fp32, StateFormat::bf16}) {
    for (const Rounding rounding : {Rounding::nearest, Rounding::stochastic}) {
      for (const auto& [beta1, beta2] : {std::pair{0.9f, 0.999f}, std::pair{0.5f, 0.3f}}) {
        StepConfig config;
        config.params = ParamFormat::fp32;
        config.state = format;
        config.rounding = rounding;
        config.adam.beta1 = beta1;
        config.adam.beta2 = beta2;
        CpuOptimizer opt(config, n, 1);
        std::vector<float> theta(n, 0.0f);
        const std::vector<float> grads{0x1.fffffep62f, 0.0f, 0.0f, 0x1p-80f, -0x1p-70f, 0x1p-149f, 3.0f, 0x1p-100f};
        for (int step = 0; step < 400; ++step) {
          std::vector<float> g(n);
          for (std::size_t i = 0; i < n; ++i) g[i] = grads[(i + static_cast<std::size_t>(step)) % grads.size()];
          if (step > 40 && step < 300) g.assign(n, step % 3 == 0 ? 0x1p-90f : 0.0f);
          opt.step(std::span<float>(theta), std::span<const float>(g), 0, 0);
          CpuOptimizer copy(config, n, 1);
          ASSERT_NO_THROW(copy.load_bytes(opt.save_bytes())) << describe(config) << " after step " << step;
        }
      }
    }
  }
}

// What is not a regular file is refused before it is read -- a directory (std::ios_base::failure
// before), a device such as /dev/zero (read without bound before), a FIFO (which would block) -- and so is a file
// longer than this optimizer's (a sparse terabyte is refused at once, not read).
TEST(FastpathStateFile, NonRegularAndOversizedFilesAreRefusedWithoutReading) {
  StepConfig config = all_format_configs(core::OptimizerKind::cgad)[0];
  CpuOptimizer target(config, 100, 1);
  const auto dir = temp_path("nonregular");
  std::filesystem::create_directories(dir);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(target.load(dir), core::InputError);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_THROW(target.load(dir / "fifo"), core::InputError);
  if (::mknod((dir / "zero").c_str(), S_IFCHR | 0444, ::makedev(1, 5)) == 0) {  // our own /dev/zero, read only
    EXPECT_THROW(target.load(dir / "zero"), core::InputError);
  }
  { std::ofstream(dir / "huge").put('C'); }
  std::filesystem::resize_file(dir / "huge", std::uintmax_t{1} << 40);
  EXPECT_THROW(target.load(dir / "huge"), core::InputError);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  std::filesystem::remove_all(dir);
}

// save() replaces only a regular file (or writes through a symlink to one), keeps its mode,
// and refuses a FIFO or a device node instead of replacing it with a regular file.
TEST(FastpathStateFile, SaveReplacesOnlyRegularFilesKeepingModeAndLinks) {
  StepConfig config = all_format_configs(core::OptimizerKind::cgad)[0];
  const auto dir = temp_path("targets");
  std::filesystem::create_directories(dir);
  const auto saver = stepped(config, 100, 12);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_THROW(saver->save(dir / "fifo"), core::InputError);
  EXPECT_TRUE(std::filesystem::is_fifo(dir / "fifo"));
  if (::mknod((dir / "null").c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0) {
    EXPECT_THROW(saver->save(dir / "null"), core::InputError);
    EXPECT_TRUE(std::filesystem::is_character_file(dir / "null"));
  }
  saver->save(dir / "state.bin");
  std::filesystem::permissions(dir / "state.bin",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::create_symlink("state.bin", dir / "link");
  saver->save(dir / "link");
  EXPECT_TRUE(std::filesystem::is_symlink(std::filesystem::symlink_status(dir / "link")));
  EXPECT_EQ(std::filesystem::status(dir / "state.bin").permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  CpuOptimizer loaded(config, 100, 1);
  EXPECT_NO_THROW(loaded.load(dir / "link"));
  EXPECT_EQ(state_bytes(loaded), state_bytes(*saver));
  std::size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    entries += entry.is_regular_file() && !entry.is_symlink();
  EXPECT_EQ(entries, 1u) << "state.bin only: no temporary";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cgad::fastpath
