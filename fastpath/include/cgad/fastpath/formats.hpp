#pragma once
// How the fast path stores parameters and optimizer state: plain 8-bit enums with no dependency, so the same types
// are the configuration's (config.hpp) and the step arguments' that cross to the GPU (block_step.hpp, C++17).
#include <cstdint>

namespace cgad::fastpath {

enum class ParamFormat : std::uint8_t { fp32, bf16 };
enum class StateFormat : std::uint8_t { fp32, bf16, q8 };

}  // namespace cgad::fastpath
