// cgad's one number grammar (reference/real.hpp), which every CLI value and stream number goes through: on any
// text, parse_real in float, double and MPFR accepts only texts of the grammar, a format with a wider range
// accepts what a narrower one does, and an accepted float or double is the value glibc's strtof/strtod give the
// same text — an independent correctly rounded parser — bit for bit.
#include "fuzz_support.hpp"

#include "cgad/reference/real.hpp"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace {

template <class Real>
std::optional<Real> parsed(std::string_view text) {
  try {
    return cgad::core::parse_real<Real>(text, "fuzz");
  } catch (const cgad::core::InputError&) {
    return std::nullopt;
  }
}

template <class Hardware, class Bits>
void require_same(Hardware ours, Hardware theirs) {
  if (std::isnan(ours) && std::isnan(theirs)) return;
  if (std::bit_cast<Bits>(ours) != std::bit_cast<Bits>(theirs)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace cgad;
  static const reference::PrecisionScope precision(64);
  const std::string_view text = fuzz::as_text(data, size);
  const bool grammar = core::classify_number_text(text) != core::NumberText::invalid;
  const auto as_float = parsed<float>(text);
  const auto as_double = parsed<double>(text);
  const auto as_mpfr = parsed<reference::mpfr_real>(text);
  if ((as_float || as_double || as_mpfr) && !grammar) std::abort();
  if ((as_float && !as_double) || (as_double && !as_mpfr)) std::abort();
  const std::string copy(text);  // strtod needs a terminated string; the grammar has no NUL, so nothing is cut
  if (as_double) require_same<double, std::uint64_t>(*as_double, std::strtod(copy.c_str(), nullptr));
  if (as_float) require_same<float, std::uint32_t>(*as_float, std::strtof(copy.c_str(), nullptr));
  return 0;
}
