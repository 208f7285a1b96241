#include "cgad/differential/event_record.hpp"

#include <ostream>
#include <sstream>

namespace cgad::differential {
namespace {

void write_array(std::ostream& out, const EventRecord::Array& array) {
  out << '[';
  for (std::size_t i = 0; i < array.size; ++i) {
    if (i > 0) out << ',';
    // A decimal has no character JSON escapes; dump() keeps the rule in one place all the same.
    out << nlohmann::ordered_json(array.decimal(i)).dump();
  }
  out << ']';
}

}  // namespace

EventRecord::EventRecord(nlohmann::ordered_json head, Array params, std::vector<Array> buffers,
                         nlohmann::ordered_json counters)
    : head_(std::move(head)),
      params_(std::move(params)),
      buffers_(std::move(buffers)),
      counters_(std::move(counters)) {}

void EventRecord::write(std::ostream& out) const {
  const std::string head = head_.dump();  // "{...}": the closing brace comes after the arrays
  out.write(head.data(), static_cast<std::streamsize>(head.size() - 1));
  out << (head.size() > 2 ? "," : "") << "\"params\":";
  write_array(out, params_);
  out << ",\"state\":{";
  bool first = true;
  for (const Array& buffer : buffers_) {
    out << (first ? "" : ",") << nlohmann::ordered_json(buffer.name).dump() << ':';
    write_array(out, buffer);
    first = false;
  }
  for (const auto& [name, values] : counters_.items()) {
    out << (first ? "" : ",") << nlohmann::ordered_json(name).dump() << ':' << values.dump();
    first = false;
  }
  out << "}}";
}

std::string EventRecord::dump() const {
  std::ostringstream out;
  write(out);
  return out.str();
}

}  // namespace cgad::differential
