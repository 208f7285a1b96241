// Sweep part files (simulate/sweep_json.hpp) as `cgad merge` reads them: JSON, then the part's own checks, then the
// merge of the part with itself (which must refuse the duplicate runs, never crash).
#include "fuzz_support.hpp"

#include "cgad/simulate/sweep_json.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace cgad;
  const nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;  // not JSON: `cgad merge` refuses it before the part's checks
  fuzz::refusal_is_fine([&] {
    const simulate::SweepPart part = simulate::part_from_json(json, "fuzz");
    fuzz::refusal_is_fine([&] { simulate::merge_parts({part}, {"fuzz"}, false); });
  });
  return 0;
}
