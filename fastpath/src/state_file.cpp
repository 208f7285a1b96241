#include "cgad/fastpath/state_file.hpp"
#include "cgad/fastpath/detail/host_state.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/state_contents.hpp"

#include <boost/crc.hpp>

#include "cgad/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace cgad::fastpath {
namespace {

static_assert(std::endian::native == std::endian::little, "the state file format is little-endian");

constexpr char kMagic[8] = {'C', 'G', 'A', 'D', 'F', 'P', 'S', 'T'};

class Writer {
 public:
  template <class T>
  void put(const T& value) {
    append(&value, sizeof(T));
  }
  template <class T>
  void put_all(const std::vector<T>& values) {
    append(values.data(), values.size() * sizeof(T));
  }
  void append(const void* data, std::size_t size) {
    const std::size_t old = bytes.size();
    bytes.resize(old + size);
    if (size != 0) std::memcpy(bytes.data() + old, data, size);
  }
  std::vector<unsigned char> bytes;
};

class Reader {
 public:
  Reader(std::span<const unsigned char> bytes, std::size_t end, std::string what)
      : bytes_(bytes), end_(end), what_(std::move(what)) {}
  template <class T>
  T get() {
    T value;
    need(sizeof(T));
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  template <class T>
  std::vector<T> get_all(std::size_t count) {
    if (count > (end_ - pos_) / sizeof(T)) fail("is truncated");
    std::vector<T> values(count);
    if (count != 0) std::memcpy(values.data(), bytes_.data() + pos_, count * sizeof(T));  // data() may be null at 0
    pos_ += count * sizeof(T);
    return values;
  }
  std::size_t position() const { return pos_; }
  [[noreturn]] void fail(const std::string& why) const { throw core::InputError(what_ + " " + why); }

 private:
  void need(std::size_t n) const {
    if (n > end_ - pos_) fail("is truncated");
  }
  std::span<const unsigned char> bytes_;
  std::size_t end_;
  std::size_t pos_ = 0;
  std::string what_;
};

std::uint32_t crc32(const unsigned char* data, std::size_t size) {
  boost::crc_32_type crc;
  crc.process_bytes(data, size);
  return crc.checksum();
}

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// The configuration fields in file order; a file must match the loading optimizer in every one.
struct ConfigWords {
  std::uint32_t words[16];
};
ConfigWords config_words(const StepConfig& c) {
  return ConfigWords{{static_cast<std::uint32_t>(c.optimizer), static_cast<std::uint32_t>(c.params),
                      static_cast<std::uint32_t>(c.state), static_cast<std::uint32_t>(c.rounding),
                      static_cast<std::uint32_t>(c.on_zero_gate), bits(c.adam.lr), bits(c.adam.beta1),
                      bits(c.adam.beta2), bits(c.adam.eps), bits(c.adam.weight_decay), bits(c.nesterov.lr),
                      bits(c.nesterov.momentum), bits(static_cast<float>(c.alpha)), bits(static_cast<float>(c.tau_cut)),
                      static_cast<std::uint32_t>(c.q8_semantics), static_cast<std::uint32_t>(c.v_map)}};
}
// Version 2 stops before the v map: its files are dynamic (VMap's first value, 0).
constexpr int kConfigWordsOfVersion2 = 15;
constexpr const char* kConfigNames[16] = {
    "optimizer", "parameter format", "state format", "rounding", "on_zero_gate", "lr",      "beta1",        "beta2",
    "eps",       "weight_decay",     "nesterov lr",  "momentum", "alpha",        "tau_cut", "q8 semantics", "v map"};

// The q8 maps a state was quantized with, when they are not the built-in ones (q8_maps.hpp): a version 4 file
// records them, so that a state is never decoded with other codes than it was encoded with.
constexpr std::size_t kMapBytes = 2 * kQ8MapCodes * sizeof(float);
bool records_maps(const StepConfig& c) {
  return c.q8_codes && !is_built_in(*c.q8_codes);
}

// The largest file for this optimizer: what write_state_file writes, and a maps section (a file of other maps than
// this optimizer's is read, and refused by what it holds rather than by its size).
std::size_t size_bound(const StepPlanner& planner, const HostState& state) {
  std::size_t size = sizeof kMagic + 4 + 16 * 4 + kMapBytes + 8 + 8 + 8 + 8 + 8 + 8 * planner.tensor_sizes().size() +
                     8 + 8 + 16 * planner.config().fragments + 4;
  for (int k = 0; k < state.moments; ++k) {
    size +=
        4 * state.fp32[k].size() + 2 * state.bf16_values[k].size() + state.codes[k].size() + 4 * state.absmax[k].size();
  }
  return size;
}

// The file's bytes, refusing (InputError) what is not a regular file -- a directory, a device such as /dev/zero
// that would be read without end, a FIFO that could block forever -- and any file longer than `limit` (the size
// a file for this optimizer has), before reading it.
std::vector<unsigned char> read_bounded(const std::filesystem::path& path, const std::string& what, std::size_t limit) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw core::InputError("cannot open " + what + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    throw core::InputError(what + (S_ISDIR(st.st_mode) ? " is a directory" : " is not a regular file"));
  }
  // O_NONBLOCK: should the path have become a FIFO since the stat, opening it must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw core::InputError("cannot open " + what + ": " + std::strerror(errno));
  std::vector<unsigned char> bytes;
  try {
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw core::InputError(what + " is not a regular file");
    if (static_cast<std::uint64_t>(st.st_size) > limit) {
      throw core::InputError(what + " has " + std::to_string(st.st_size) + " bytes, more than the " +
                             std::to_string(limit) + " a state file of this optimizer has");
    }
    // One byte more than the limit is asked for, so a file that grew since the fstat is still caught.
    bytes.resize(limit + 1);
    std::size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw core::InputError("cannot read " + what + ": " + std::strerror(errno));
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got > limit) throw core::InputError(what + " is longer than a state file of this optimizer");
    bytes.resize(got);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return bytes;
}

// The file's q8 maps (a version 4 file's section, else the built-in ones) must be this optimizer's, bit for bit.
void check_maps(Reader& r, bool recorded, const StepConfig& config) {
  const bool mine = records_maps(config);
  if (!recorded) {
    if (mine) r.fail("was saved with the built-in q8 maps, this optimizer has its own (q8_codes)");
    return;
  }
  const std::vector<float> signed_codes = r.get_all<float>(kQ8MapCodes), unsigned_codes = r.get_all<float>(kQ8MapCodes);
  if (!mine) r.fail("was saved with its own q8 maps (q8_codes), this optimizer has the built-in ones");
  const auto first_difference = [](const std::vector<float>& file, const std::array<float, kQ8MapCodes>& own) {
    for (std::size_t k = 0; k < kQ8MapCodes; ++k) {
      if (bits(file[k]) != bits(own[k])) return static_cast<int>(k);
    }
    return -1;
  };
  const int s = first_difference(signed_codes, config.q8_codes->signed_codes);
  const int u = first_difference(unsigned_codes, config.q8_codes->unsigned_codes);
  if (s >= 0 || u >= 0) {
    const bool in_signed = s >= 0;
    const int k = in_signed ? s : u;
    const float file = (in_signed ? signed_codes : unsigned_codes)[static_cast<std::size_t>(k)];
    const float own = (in_signed ? config.q8_codes->signed_codes : config.q8_codes->unsigned_codes)[k];
    r.fail(std::string("was saved with other q8 maps than this optimizer's (") + (in_signed ? "signed" : "unsigned") +
           " code " + std::to_string(k) + ": " + core::show(file) + " in the file, " + core::show(own) + " here)");
  }
}

}  // namespace

std::vector<unsigned char> state_bytes(const StepPlanner& planner, const HostState& state) {
  const StepConfig& config = planner.config();
  Writer w;
  w.append(kMagic, sizeof kMagic);
  const bool maps = records_maps(config);
  w.put(maps ? kStateFileVersionWithMaps : kStateFileVersion);
  const ConfigWords words = config_words(config);
  for (std::uint32_t word : words.words) w.put(word);
  if (maps) {
    w.append(config.q8_codes->signed_codes.data(), kMapBytes / 2);
    w.append(config.q8_codes->unsigned_codes.data(), kMapBytes / 2);
  }
  w.put(config.seed);
  w.put(static_cast<std::uint64_t>(effective_min_q8_size(config)));
  w.put(static_cast<std::uint64_t>(planner.parameters()));
  w.put(static_cast<std::uint64_t>(config.fragments));
  w.put(static_cast<std::uint64_t>(planner.tensor_sizes().size()));
  for (const std::size_t size : planner.tensor_sizes()) w.put(static_cast<std::uint64_t>(size));
  const auto& counters = planner.raw_counters();
  w.put(counters.steps);
  w.put(counters.round);
  for (std::size_t f = 0; f < config.fragments; ++f) {
    w.put(counters.t[f]);
    w.put(counters.last_sync[f]);
  }
  for (int k = 0; k < state.moments; ++k) {
    switch (state.format) {
      case StateFormat::fp32:
        w.put_all(state.fp32[k]);
        break;
      case StateFormat::bf16:
        w.put_all(state.bf16_values[k]);
        break;
      case StateFormat::q8:
        w.put_all(state.codes[k]);
        w.put_all(state.absmax[k]);
        w.put_all(state.fp32[k]);
        break;
    }
  }
  w.put(crc32(w.bytes.data(), w.bytes.size()));
  return std::move(w.bytes);
}

void write_state_file(const std::filesystem::path& path, const StepPlanner& planner, const HostState& state) {
  const std::vector<unsigned char> bytes = state_bytes(planner, state);
  io::write_file_atomically(path, bytes.data(), bytes.size());
}

LoadedState read_state_file(const std::filesystem::path& path, const StepPlanner& planner, const HostState& current) {
  const std::string what = "state file " + path.string();
  return parse_state_bytes(read_bounded(path, what, size_bound(planner, current)), what, planner, current);
}

LoadedState parse_state_bytes(std::span<const unsigned char> bytes, const std::string& what, const StepPlanner& planner,
                              const HostState& current) {
  constexpr std::size_t kMinimum = sizeof kMagic + 4 + 4;
  if (bytes.size() < kMinimum) throw core::InputError(what + " is truncated");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    throw core::InputError(what + " is not a cgad fast-path state file");
  }
  const std::size_t body = bytes.size() - 4;
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + body, 4);
  Reader r(bytes, body, what);
  r.get_all<char>(sizeof kMagic);
  const auto version = r.get<std::uint32_t>();
  if (version != kStateFileVersion && version != kStateFileVersionWithMaps && version != 2) {
    r.fail("has format version " + std::to_string(version) + ", this build reads versions 2 to " +
           std::to_string(kStateFileVersionWithMaps));
  }
  if (crc32(bytes.data(), body) != stored_crc) r.fail("is corrupt (checksum mismatch)");

  const StepConfig& config = planner.config();
  const ConfigWords expected = config_words(config);
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t stored = version == 2 && i >= kConfigWordsOfVersion2 ? 0u : r.get<std::uint32_t>();
    if (stored != expected.words[i]) {
      r.fail(std::string("was saved with another ") + kConfigNames[i] + " than this optimizer's" +
             (i == 15 ? std::string(" (") +
                            (stored == 0   ? "dynamic"
                             : stored == 1 ? "zero-free"
                                           : "unknown") +
                            ", this optimizer " + std::string(to_string(config.v_map)) + ")"
                      : std::string()));
    }
  }
  check_maps(r, version == kStateFileVersionWithMaps, config);
  if (r.get<std::uint64_t>() != config.seed) r.fail("was saved with another seed than this optimizer's");
  if (r.get<std::uint64_t>() != effective_min_q8_size(config)) {
    r.fail("was saved with another min_q8_size than this optimizer's");
  }
  const auto parameters = r.get<std::uint64_t>();
  const auto fragments = r.get<std::uint64_t>();
  if (parameters != planner.parameters() || fragments != config.fragments) {
    r.fail("holds " + std::to_string(parameters) + " parameters in " + std::to_string(fragments) +
           " fragments, this optimizer " + std::to_string(planner.parameters()) + " in " +
           std::to_string(config.fragments));
  }
  const auto tensors = r.get<std::uint64_t>();
  bool same_tensors = tensors == planner.tensor_sizes().size();
  for (std::uint64_t k = 0; same_tensors && k < tensors; ++k) {
    same_tensors = r.get<std::uint64_t>() == planner.tensor_sizes()[k];
  }
  if (!same_tensors) r.fail("was saved with another tensor layout than this optimizer's");
  LoadedState loaded;
  loaded.counters.steps = r.get<std::uint64_t>();
  loaded.counters.round = r.get<std::int64_t>();
  for (std::size_t f = 0; f < fragments; ++f) {
    loaded.counters.t.push_back(r.get<std::int64_t>());
    loaded.counters.last_sync.push_back(r.get<std::int64_t>());
  }
  try {
    StepPlanner check = planner;
    check.set_raw_counters(loaded.counters);
  } catch (const core::InputError& e) {
    r.fail(std::string("holds impossible counters: ") + e.what());
  }
  HostState& s = loaded.state;
  s.format = current.format;
  s.moments = current.moments;
  for (int k = 0; k < s.moments; ++k) {
    switch (s.format) {
      case StateFormat::fp32:
        s.fp32[k] = r.get_all<float>(current.fp32[k].size());
        break;
      case StateFormat::bf16:
        s.bf16_values[k] = r.get_all<bf16>(current.bf16_values[k].size());
        break;
      case StateFormat::q8:
        s.codes[k] = r.get_all<std::uint8_t>(current.codes[k].size());
        s.absmax[k] = r.get_all<float>(current.absmax[k].size());
        s.fp32[k] = r.get_all<float>(current.fp32[k].size());
        break;
    }
  }
  if (r.position() != body) r.fail("has " + std::to_string(body - r.position()) + " unexpected trailing bytes");
  TensorState whole;  // every buffer as one span per moment: the indices in a refusal are the file's
  whole.moments = s.moments;
  for (int k = 0; k < s.moments; ++k) {
    whole.fp32[k] = s.fp32[k];
    whole.bf16_values[k] = s.bf16_values[k];
    whole.codes[k] = s.codes[k];
    whole.absmax[k] = s.absmax[k];
  }
  whole.fp32_fallback = s.format == StateFormat::q8;
  check_state_contents(whole, planner.config(), planner.adam_family(), [&](const std::string& why) { r.fail(why); });
  return loaded;
}

}  // namespace cgad::fastpath
