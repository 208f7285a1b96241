// The replay stream parser (differential/replay_stream.hpp) on arbitrary bytes: the header, every event, and the
// numbers each backend would parse from them (float for the fast path, MPFR for the reference).
#include "fuzz_support.hpp"

#include "cgad/differential/replay_stream.hpp"
#include "cgad/reference/real.hpp"

#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace cgad;
  static const reference::PrecisionScope precision(64);  // the parse, not the precision, is under test
  fuzz::refusal_is_fine([&] {
    std::istringstream in{std::string(fuzz::as_text(data, size))};
    differential::StreamReader reader(in, "fuzz");
    differential::parse_numbers<float>(reader.header().params, "params");
    differential::parse_numbers<reference::mpfr_real>(reader.header().params, "params");
    while (const auto event = reader.next()) {
      differential::parse_numbers<float>(event->grad, "grad");
      differential::parse_numbers<reference::mpfr_real>(event->grad, "grad");
    }
  });
  return 0;
}
