#include "replay_stream.hpp"

#include "cgad/reference/errors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <istream>
#include <string>

namespace cgad::cli {
namespace {

using nlohmann::json;

// nlohmann's DOM builder, except that a non-integer number is stored as the exact text it was written as.
// The SAX interface hands us that text; the stock parser would keep only the nearest double.
class ExactNumberDom : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using json_sax_dom_parser::json_sax_dom_parser;
  bool number_float(json::number_float_t /*rounded*/, const json::string_t& text) {
    json::string_t copy = text;
    return json_sax_dom_parser::string(copy);
  }
};

json parse_line(const std::string& text, const std::string& where) {
  json value;
  ExactNumberDom dom(value, /*allow_exceptions=*/false);
  const bool ok = json::sax_parse(text, &dom, json::input_format_t::json, /*strict=*/true);
  if (!ok || dom.is_errored()) throw reference::InputError(where + ": not a valid JSON value (truncated or malformed)");
  return value;
}

std::vector<std::string> number_array(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) throw reference::InputError(where + ": missing \"" + key + "\"");
  if (!it->is_array()) throw reference::InputError(where + ": \"" + key + "\" must be an array");
  std::vector<std::string> out;
  out.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& x = (*it)[i];
    if (x.is_string()) {
      out.push_back(x.get<std::string>());
    } else if (x.is_number_integer()) {
      out.push_back(x.dump());
    } else {
      throw reference::InputError(where + ": " + key + "[" + std::to_string(i) +
                                  "] must be a number or a decimal string");
    }
  }
  return out;
}

std::int64_t non_negative_integer(const json& object, const char* key, const std::string& where) {
  const json& x = object.at(key);
  if (!x.is_number_integer() || (x.is_number_integer() && !x.is_number_unsigned() && x.get<std::int64_t>() < 0)) {
    throw reference::InputError(where + ": \"" + key + "\" must be a non-negative integer");
  }
  if (x.is_number_unsigned() && x.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    throw reference::InputError(where + ": \"" + key + "\" is too large");
  }
  return x.get<std::int64_t>();
}

// "tensors": non-negative integers summing to the parameter count.
std::vector<std::size_t> tensor_sizes(const json& object, std::size_t parameters, const std::string& where) {
  const json& sizes = object.at("tensors");
  if (!sizes.is_array() || sizes.empty()) throw reference::InputError(where + ": \"tensors\" must be a non-empty array");
  std::vector<std::size_t> out;
  std::size_t total = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const json& x = sizes[k];
    if (!x.is_number_unsigned() || x.get<std::uint64_t>() > parameters - std::min(total, parameters)) {
      throw reference::InputError(where + ": tensors[" + std::to_string(k) +
                                  "] must be a non-negative integer, and the sizes must sum to the " +
                                  std::to_string(parameters) + " parameters");
    }
    out.push_back(x.get<std::size_t>());
    total += out.back();
  }
  if (total != parameters) {
    throw reference::InputError(where + ": the tensor sizes sum to " + std::to_string(total) + ", not to the " +
                                std::to_string(parameters) + " parameters");
  }
  return out;
}

void only_keys(const json& object, std::initializer_list<const char*> allowed, const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const char* name : allowed) known = known || key == name;
    if (!known) throw reference::InputError(where + ": unknown key \"" + key + "\"");
  }
}

}  // namespace

PseudoGradientStream read_stream(std::istream& in, const std::string& source) {
  PseudoGradientStream stream;
  bool have_params = false;
  std::string text;
  std::size_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(line);
    const json value = parse_line(text, where);
    if (!value.is_object()) throw reference::InputError(where + ": each line must be a JSON object");
    if (!have_params) {
      only_keys(value, {"params", "tensors"}, where);
      stream.params = number_array(value, "params", where);
      if (stream.params.empty()) throw reference::InputError(where + ": \"params\" is empty");
      if (value.contains("tensors")) stream.tensors = tensor_sizes(value, stream.params.size(), where);
      have_params = true;
      continue;
    }
    only_keys(value, {"grad", "tau", "fragment"}, where);
    StreamEvent event;
    event.line = line;
    event.grad = number_array(value, "grad", where);
    if (!value.contains("tau")) throw reference::InputError(where + ": missing \"tau\"");
    event.tau = non_negative_integer(value, "tau", where);
    if (value.contains("fragment")) event.fragment = static_cast<std::size_t>(non_negative_integer(value, "fragment", where));
    stream.events.push_back(std::move(event));
  }
  if (in.bad()) throw reference::InputError(source + ": read error");
  if (!have_params) throw reference::InputError(source + ": empty input (the first line must be {\"params\": [...]})");
  return stream;
}

}  // namespace cgad::cli
