#pragma once
// What every fuzz target shares: the rule that decides a finding. A parser given any bytes may accept them or refuse
// them with core::InputError (the one-line error and exit status 2 of the `cgad` command); anything else — a
// crash, a sanitizer report, another exception (which the command would report as an internal error, exit 1), a
// hang past libFuzzer's -timeout — is a defect. So the targets catch InputError and nothing else.
#include "cgad/core/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cgad::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `parse`, treating a refusal as a normal outcome.
template <class Parse>
void refusal_is_fine(Parse&& parse) {
  try {
    parse();
  } catch (const core::InputError&) {}
}

}  // namespace cgad::fuzz
