#pragma once
// `cgad replay --backend fastpath`: the same stream through the production-precision step (fastpath/), on the
// CPU or a CUDA device, writing the same records as the reference backend with every stored fp32/bf16 value
// as the shortest decimal that reads back to it in its own format.
#include "cgad/differential/optimizer_options.hpp"
#include "cgad/differential/replay_reference.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cgad::differential {

struct FastpathOptions {
  std::string params = "bf16";
  std::string state = "fp32";
  std::string rounding = "nearest";
  std::uint64_t seed = 0;
  std::string device = "cpu";
  std::string q8_semantics = "cgad";
  std::string v_map = "dynamic";
  std::optional<std::size_t> min_q8_size;
};

// The options as a StepConfig's formats (and the semantics), over `config`'s optimizer; InputError if invalid.
void apply_fastpath_options(const FastpathOptions& options, fastpath::StepConfig& config);

// The fast-path replay, streaming as replay_reference does.
ReplayCounts replay_fastpath(const StreamHeader& header, const EventSource& next, const std::string& source,
                             const OptimizerOptions& optimizer, const FastpathOptions& fastpath, std::ostream& notes,
                             const RecordSink& sink);

}  // namespace cgad::differential
