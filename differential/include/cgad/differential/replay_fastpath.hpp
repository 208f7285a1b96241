#pragma once
// `cgad replay --backend fastpath`: the same stream through the production-precision step (fastpath/), on the
// CPU or a CUDA device, writing the same records as the reference backend with every stored fp32/bf16 value
// as the shortest decimal that reads back to it in its own format.
#include "cgad/differential/replay_reference.hpp"
#include "cgad/fastpath/options.hpp"
#include "cgad/core/optimizer_options.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cgad::differential {

// The fast-path replay, streaming as replay_reference does.
ReplayCounts replay_fastpath(const StreamHeader& header, const EventSource& next, const std::string& source,
                             const core::OptimizerOptions& optimizer, const fastpath::FastpathOptions& fastpath,
                             std::ostream& notes, const RecordSink& sink);

}  // namespace cgad::differential
