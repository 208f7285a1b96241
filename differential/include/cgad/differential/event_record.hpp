#pragma once
// One replay record as it is written: the event's small fields (a JSON object) and its long arrays -- the
// parameters and each state buffer, one decimal per element -- produced element by element as the line is
// written. A record of n parameters is never held as a JSON tree (about 100 bytes per element, per array) or as
// one string: writing it takes a few bytes beyond the values themselves, so a replay's memory is that of its
// optimizer and its input line, not a multiple of its output.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace cgad::differential {

class EventRecord {
 public:
  // An array of `size` values written as JSON strings, element i as decimal(i).
  struct Array {
    std::string name;
    std::size_t size = 0;
    std::function<std::string(std::size_t)> decimal;
  };

  EventRecord(nlohmann::ordered_json head, Array params, std::vector<Array> buffers, nlohmann::ordered_json counters);

  // {<head's fields>, "params": [...], "state": {<buffers>, <counters>}} as one line of compact JSON (what
  // nlohmann's dump() writes for the same tree), without the newline.
  void write(std::ostream& out) const;
  std::string dump() const;

 private:
  nlohmann::ordered_json head_;
  Array params_;
  std::vector<Array> buffers_;
  nlohmann::ordered_json counters_;  // {name: [values]}: one value per fragment, small
};

}  // namespace cgad::differential
