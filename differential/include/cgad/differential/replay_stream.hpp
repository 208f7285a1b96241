#pragma once
// The pseudo-gradient stream `cgad replay` reads (docs/design.md §7): JSON lines, the first
// {"params": [...], "tensors": [n0, n1, ...]} ("tensors" optional: the sizes of the tensors the parameters are
// made of, summing to their count; q8 blocks restart at each, as bitsandbytes quantizes each tensor
// separately), then one event per line {"grad": [...], "tau": k, "fragment": f}.
// Numbers are kept as the text the user wrote (JSON numbers or decimal strings), so that each backend rounds
// them once, correctly, to its own format: 0.1 reaches an MPFR run as 0.1, not as the double nearest to it.
// A JSON number and the same digits in a string are the same value, whatever its magnitude: 1e400 and "1e400"
// both reach the backend, which says whether its format holds it; -0 keeps its sign.
//
// Refused, naming the source, the line and what is wrong: malformed JSON, a NUL byte, a line longer than
// kMaxLineBytes, a duplicate key ({"tau": 0, "tau": 40} would otherwise mean the last one), an unknown key, a
// missing or mistyped field, a parameter that is not a finite number ("nan", "inf"; a pseudo-gradient may be
// non-finite: that event is skipped and reported).
#include "cgad/reference/real.hpp"

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cgad::differential {

// Longest line read (1 GiB): a bound on what one line can take in memory, so that an input that never ends a
// line is refused instead of exhausting memory; a billion-character line is about 10^8 parameters.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 30;

struct StreamEvent {
  std::vector<std::string> grad;
  std::int64_t tau = 0;
  std::size_t fragment = 0;
  std::size_t line = 0;  // 1-based line of the input it came from, for error messages
};

struct StreamHeader {
  std::vector<std::string> params;
  std::vector<std::size_t> tensors;  // empty: one tensor
  std::size_t line = 1;              // 1-based line of the input it came from, for error messages
};

struct PseudoGradientStream : StreamHeader {
  std::vector<StreamEvent> events;
};

// The stream's numbers, each rounded once (correctly) to Real; InputError naming `what`[i] otherwise.
template <core::RealScalar Real>
std::vector<Real> parse_numbers(const std::vector<std::string>& text, const std::string& what) {
  std::vector<Real> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    out.push_back(core::parse_real<Real>(text[i], what + "[" + std::to_string(i) + "]"));
  }
  return out;
}

// Reads a stream one line at a time: the header when constructed, then one event per next(), so that memory
// does not grow with the stream's length. Blank lines are ignored. InputError on anything refused above.
class StreamReader {
 public:
  StreamReader(std::istream& in, std::string source);
  const StreamHeader& header() const { return header_; }
  // The next event, or nothing at the end of the input.
  std::optional<StreamEvent> next();

 private:
  // The next non-blank line into text_ (false at the end).
  bool next_line();
  std::istream& in_;
  std::string source_;
  std::string text_;
  std::size_t line_ = 0;
  StreamHeader header_;
};

// Reads and checks the whole stream into memory (for the callers that need all of it: noise, the report).
PseudoGradientStream read_stream(std::istream& in, const std::string& source);

}  // namespace cgad::differential
