#include "cgad/fastpath/state_file.hpp"

#include "cgad/fastpath/detail/derived_constants.hpp"
#include "cgad/core/errors.hpp"

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

// The exact size of a file for this optimizer: what write_state_file writes.
std::size_t expected_size(const StepPlanner& planner, const HostState& state) {
  std::size_t size = sizeof kMagic + 4 + 16 * 4 + 8 + 8 + 8 + 8 + 8 + 8 * planner.tensor_sizes().size() + 8 + 8 +
                     16 * planner.config().fragments + 4;
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

// A moment within its range (validate_contents, below) is not enough: m and v are sums of the same gradients, so a
// large |m| needs a large v (|m| = 2^63 beside the smallest subnormal v loaded, and a zero-gradient step then sent θ to
// −Inf while reporting "applied"). From m = v = 0 under constant β1, β2, after t steps
//   m = (1 − β1)·Σ_j β1^j·g_j,   v = (1 − β2)·Σ_j β2^j·g_j²     (g_j: the gradient j steps back),
// and Cauchy–Schwarz on Σ_j (β1^j/β2^(j/2))·(β2^(j/2)·|g_j|) gives, for ρ = β1²/β2 < 1,
//   |m| <= (1 − β1)·sqrt(Σ_j ρ^j)·sqrt(v/(1 − β2)) <= K·sqrt(v),   K = (1 − β1)/sqrt((1 − β2)·(1 − ρ)).
// The same sums bound m and v for any coefficients the step multiplies g and g² by, so the step's own floats
// 1 − β1 and 1 − β2 stand in K for 1 − β1 and 1 − β2 (derived_constants.hpp: cgad semantics rounds them from the
// decimals, not from the float β). The step rounds: each of its float operations (element_update.hpp: three for m,
// four for v; the factor kept for a 1 − β rounded once only loosens the bound) has relative error <= u = 2^-24,
// and storing bf16 state adds one rounding of up to 2^-7 (stochastic rounding: a whole bf16 ulp). So β1 and 1 − β1
// are taken larger by those factors, β2 and 1 − β2 smaller. In the subnormal range each operation also errs by up
// to half (nearest) or one (stochastic) spacing of its format absolutely: <= 2^-148 per step for fp32 state,
// 2^-131 for bf16, which the geometric weights sum to at most that over (1 − β). Hence, with
// b1 = β1·(1 + u)²·(1 + s), b2 = β2·(1 − u)²·(1 − s) (s: the store's rounding),
//   |m| <= K'·sqrt(v + δ/(1 − b2)) + δ/(1 − b1),
//   K' = (1 − β1)(1 + u)³(1 + s) / sqrt((1 − β2)(1 − u)⁴(1 − s)(1 − b1²/b2)).
// Where b1² >= b2 (β1² >= β2) the sum has no bound independent of t and only the ranges above are checked; q8
// codes are not checked jointly either, since m and v are quantized in blocks of their own, so a v that rounds to a
// small code under a large absmax is a state the q8 step does produce. A state made under other betas (a schedule
// that changed them) is checked against the current ones.
class JointBound {
 public:
  JointBound(const StepConfig& config, bool bf16_store) {
    const double u = 0x1p-24, store = bf16_store ? 0x1p-7 : 0.0;
    const double beta1 = config.adam.beta1, beta2 = config.adam.beta2;
    const BetaConstants step = beta_constants(config);
    const double keep1 = step.one_minus_beta1, keep2 = step.one_minus_beta2;
    b1_ = beta1 * (1 + u) * (1 + u) * (1 + store);
    const double b2 = beta2 * (1 - u) * (1 - u) * (1 - store);
    active_ = b1_ * b1_ < b2 && b2 < 1.0;
    if (!active_) return;
    delta_ = bf16_store ? 0x1p-131 : 0x1p-148;
    v_floor_ = delta_ / (1 - b2);
    k_ = keep1 * std::pow(1 + u, 3) * (1 + store) /
         std::sqrt(keep2 * std::pow(1 - u, 4) * (1 - store) * (1 - b1_ * b1_ / b2));
  }
  // Whether (m, v) is a pair some sequence of steps reaches (m and v already checked finite, v >= 0).
  bool reachable(double m, double v) const {
    return !active_ || std::fabs(m) <= k_ * std::sqrt(v + v_floor_) + delta_ / (1 - b1_);
  }

 private:
  bool active_ = false;
  double b1_ = 0, k_ = 0, delta_ = 0, v_floor_ = 0;
};

// A checksum proves only that the bytes are the ones written; a hand-made file with a recomputed CRC could still
// hold a state no step can reach and that would turn the next step's parameters into NaN or Inf while it reports
// "applied". So every moment must lie in the range steps can reach. Every applied pseudo-gradient g = σΔ has
// |g| < 2^63 (the overflow rule, core/overflow_rule.hpp), so:
//   m = β1·m + (1 − β1)·g, a convex combination from m = 0: |m| ≤ 2^63 (rounding can reach 2^63, not pass it);
//   v = β2·v + (1 − β2)·g²: 0 ≤ v ≤ 2^126;
//   b = μ·b + g (Nesterov; SDM's g/(1 + τ) is smaller): |b| ≤ 2^63/(1 − μ) in exact arithmetic, and with each step's
//   two roundings (a factor ≤ (1 + 2^-24)^2 < 1 + 2^-22) below 2^63·(1 + 2^-20)/(1 − μ·(1 + 2^-20)), the
//   bound used (μ(1 + 2^-20) < 1 for every μ ≤ 1 − 2^-19; above that b is only required to be finite).
// A q8 block's absmax is the largest magnitude in its block, so it obeys the same bound (and is >= 0); q8 codes
// are all valid (any byte is an index into the 256-entry map). The fuzzer (fuzz/fuzz_state_bytes.cpp) found a
// bf16 m of ~1.7e38 with a recomputed CRC that loaded and stepped θ to −Inf before these bounds. Then m and v
// together must obey JointBound.
void validate_contents(const HostState& s, const StepConfig& config, bool adam_family, const Reader& r) {
  const double slack = 1.0 + 0x1p-20;
  const double mu = static_cast<double>(config.nesterov.momentum);
  const double b_bound = mu * slack < 1.0 ? 0x1p63 * slack / (1.0 - mu * slack) : HUGE_VAL;
  const auto name = [&](int k) { return adam_family ? (k == 0 ? "m" : "v") : "b"; };
  const auto in_range = [&](double x, int k) {
    if (!std::isfinite(x)) return false;
    if (!adam_family) return std::fabs(x) <= b_bound;
    return k == 0 ? std::fabs(x) <= 0x1p63 : (x >= 0.0 && x <= 0x1p126);
  };
  const char* range = adam_family ? "|m| <= 2^63, 0 <= v <= 2^126" : "|b| <= 2^63/(1 - momentum)";
  const auto check = [&](float x, int k, std::size_t i, const char* where) {
    if (!in_range(x, k)) {
      r.fail(std::string("holds an impossible ") + where + " " + name(k) + "[" + std::to_string(i) +
             "] = " + core::to_decimal(x) + " (a step can reach only " + range + ")");
    }
  };
  for (int k = 0; k < s.moments; ++k) {
    for (std::size_t i = 0; i < s.fp32[k].size(); ++i)
      check(s.fp32[k][i], k, i, s.format == StateFormat::q8 ? "fp32-fallback" : "fp32");
    for (std::size_t i = 0; i < s.bf16_values[k].size(); ++i) check(to_float(s.bf16_values[k][i]), k, i, "bf16");
    for (std::size_t i = 0; i < s.absmax[k].size(); ++i) {
      const float a = s.absmax[k][i];
      if (!(a >= 0.0f) || !in_range(a, k)) {
        r.fail(std::string("holds an impossible q8 absmax ") + std::to_string(i) + " = " + core::to_decimal(a) +
               " of " + name(k) + " (it must be >= 0, and a step can reach only " + range + ")");
      }
    }
  }
  if (!adam_family) return;
  const auto check_pair = [&](double m, double v, const JointBound& bound, std::size_t i, const char* where) {
    if (!bound.reachable(m, v)) {
      r.fail(std::string("holds an impossible ") + where + " pair m[" + std::to_string(i) +
             "] = " + core::to_decimal(static_cast<float>(m)) + ", v[" + std::to_string(i) +
             "] = " + core::to_decimal(static_cast<float>(v)) + " (no sequence of steps makes |m| that large beside " +
             "that v; fastpath/src/state_file.cpp derives the bound)");
    }
  };
  const JointBound fp32_bound(config, false), bf16_bound(config, true);
  for (std::size_t i = 0; i < s.fp32[0].size(); ++i) {
    check_pair(s.fp32[0][i], s.fp32[1][i], fp32_bound, i, s.format == StateFormat::q8 ? "fp32-fallback" : "fp32");
  }
  for (std::size_t i = 0; i < s.bf16_values[0].size(); ++i) {
    check_pair(to_float(s.bf16_values[0][i]), to_float(s.bf16_values[1][i]), bf16_bound, i, "bf16");
  }
}

}  // namespace

std::vector<unsigned char> state_bytes(const StepPlanner& planner, const HostState& state) {
  const StepConfig& config = planner.config();
  Writer w;
  w.append(kMagic, sizeof kMagic);
  w.put(kStateFileVersion);
  const ConfigWords words = config_words(config);
  for (std::uint32_t word : words.words) w.put(word);
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
  return parse_state_bytes(read_bounded(path, what, expected_size(planner, current)), what, planner, current);
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
  if (version != kStateFileVersion && version != 2) {
    r.fail("has format version " + std::to_string(version) + ", this build reads versions 2 and " +
           std::to_string(kStateFileVersion));
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
  validate_contents(loaded.state, planner.config(), planner.adam_family(), r);
  return loaded;
}

}  // namespace cgad::fastpath
