// Decimal text to bf16 (differential/bf16_text.hpp): any text is refused or becomes a finite bf16 whose shortest
// decimal parses back to the same bits.
#include "fuzz_support.hpp"

#include "cgad/differential/bf16_text.hpp"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace cgad;
  fuzz::refusal_is_fine([&] {
    const fastpath::bf16 value = differential::parse_bf16(fuzz::as_text(data, size), "fuzz");
    const fastpath::bf16 again = differential::parse_bf16(differential::bf16_to_decimal(value), "round trip");
    if (again.bits != value.bits) std::abort();
  });
  return 0;
}
