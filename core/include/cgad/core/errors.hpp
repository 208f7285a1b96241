#pragma once
// One exception type for every refusal of bad input (docs/design.md §3 "Bad input"). The message is one line
// that names the offending value; the CLI prints it on stderr and exits with status 2.
#include <stdexcept>
#include <string>

namespace cgad::core {

class InputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace cgad::core
