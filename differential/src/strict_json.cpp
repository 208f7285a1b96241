#include "cgad/differential/strict_json.hpp"

#include "cgad/core/errors.hpp"

#include <optional>
#include <set>
#include <vector>

namespace cgad::differential {
namespace {

using nlohmann::json;

// nlohmann's DOM builder, refusing a duplicate key and nesting past kMaxJsonDepth, and keeping the parser's words
// for any other error.
class StrictDom : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using json_sax_dom_parser::json_sax_dom_parser;
  bool start_object(std::size_t elements) {
    if (!deeper()) return false;
    keys_.emplace_back();
    return json_sax_dom_parser::start_object(elements);
  }
  bool end_object() {
    --depth_;
    keys_.pop_back();
    return json_sax_dom_parser::end_object();
  }
  bool start_array(std::size_t elements) { return deeper() && json_sax_dom_parser::start_array(elements); }
  bool end_array() {
    --depth_;
    return json_sax_dom_parser::end_array();
  }
  bool key(json::string_t& name) {
    if (!keys_.empty() && !keys_.back().insert(name).second) {
      duplicate = name;
      return false;
    }
    return json_sax_dom_parser::key(name);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& error) {
    detail = error.what();
    return json_sax_dom_parser::parse_error(position, token, error);
  }
  std::optional<std::string> duplicate;
  bool too_deep = false;
  std::string detail;

 private:
  bool deeper() {
    too_deep = ++depth_ > kMaxJsonDepth;
    return !too_deep;
  }
  std::size_t depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

}  // namespace

json parse_json_document(std::istream& in, const std::string& where) {
  json value;
  StrictDom dom(value, /*allow_exceptions=*/false);
  const bool ok = json::sax_parse(in, &dom, json::input_format_t::json, /*strict=*/true);
  if (dom.duplicate) throw core::InputError(where + ": duplicate key \"" + *dom.duplicate + "\"");
  if (dom.too_deep) {
    throw core::InputError(where + ": arrays and objects nested more than " + std::to_string(kMaxJsonDepth) +
                           " deep (no cgad file nests so deep)");
  }
  if (!ok || dom.is_errored()) {
    throw core::InputError(where + ": not JSON" + (dom.detail.empty() ? std::string() : ": " + dom.detail));
  }
  return value;
}

}  // namespace cgad::differential
