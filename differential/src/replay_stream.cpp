#include "cgad/differential/replay_stream.hpp"

#include "cgad/reference/errors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <istream>
#include <set>
#include <string>
#include <string_view>

namespace cgad::differential {
namespace {

using nlohmann::json;

bool digit(char c) { return c >= '0' && c <= '9'; }

// Whether `token` is a JSON number (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), and whether it is
// written as an integer.
bool json_number(std::string_view token, bool& integer) {
  std::size_t i = 0;
  if (i < token.size() && token[i] == '-') ++i;
  if (i >= token.size() || !digit(token[i])) return false;
  if (token[i] == '0') {
    ++i;
  } else {
    while (i < token.size() && digit(token[i])) ++i;
  }
  integer = true;
  if (i < token.size() && token[i] == '.') {
    integer = false;
    const std::size_t first = ++i;
    while (i < token.size() && digit(token[i])) ++i;
    if (i == first) return false;
  }
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    integer = false;
    ++i;
    if (i < token.size() && (token[i] == '+' || token[i] == '-')) ++i;
    const std::size_t first = i;
    while (i < token.size() && digit(token[i])) ++i;
    if (i == first) return false;
  }
  return i == token.size();
}

// nlohmann keeps a JSON number exactly only if it is an integer that fits 64 bits: any other becomes the nearest
// double (0.1 is then not 0.1), -0 becomes 0, and one past double's range (1e400) is a parse error. So before
// parsing, every number token outside strings that is not such an integer is turned into a JSON string of the
// same characters: the numbers a stream holds stay the text the user wrote, whether or not it was quoted. A
// token that is not a valid JSON number is left as it is, for the parser to refuse. Integer fields ("tau",
// "fragment", "tensors") still refuse such a token: it is then a string.
std::string quote_inexact_numbers(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 16);
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {  // a string, copied through; \" and \\ do not end it
      const std::size_t start = i++;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      i = std::min(i + 1, text.size());
      out.append(text, start, i - start);
      continue;
    }
    if (c != '-' && !digit(c)) {
      out += c;
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < text.size() && (digit(text[i]) || text[i] == '-' || text[i] == '+' || text[i] == '.' ||
                               text[i] == 'e' || text[i] == 'E')) {
      ++i;
    }
    const std::string_view token(text.data() + start, i - start);
    bool integer = false;
    bool exact = false;
    if (json_number(token, integer) && integer && token != "-0") {
      std::int64_t signed_value;
      std::uint64_t unsigned_value;
      exact = token.front() == '-'
                  ? std::from_chars(token.data(), token.data() + token.size(), signed_value).ec == std::errc()
                  : std::from_chars(token.data(), token.data() + token.size(), unsigned_value).ec == std::errc();
    }
    if (json_number(token, integer) && !exact) {
      out += '"';
      out += token;
      out += '"';
    } else {
      out += token;
    }
  }
  return out;
}

// nlohmann's DOM builder, refusing a duplicate key (the stock builder keeps the last value silently) and keeping
// the parser's own words for any other error.
class StrictDom : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using json_sax_dom_parser::json_sax_dom_parser;
  bool start_object(std::size_t elements) {
    keys_.emplace_back();
    return json_sax_dom_parser::start_object(elements);
  }
  bool end_object() {
    keys_.pop_back();
    return json_sax_dom_parser::end_object();
  }
  bool key(json::string_t& name) {
    if (!keys_.empty() && !keys_.back().insert(name).second) {
      duplicate = name;
      return false;
    }
    return json_sax_dom_parser::key(name);
  }
  // Not reached after quote_inexact_numbers; kept exact all the same.
  bool number_float(json::number_float_t /*rounded*/, const json::string_t& text) {
    json::string_t copy = text;
    return json_sax_dom_parser::string(copy);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& error) {
    const std::string what = error.what();
    const std::size_t column = what.find("column");
    detail = column == std::string::npos ? what : what.substr(column);
    return json_sax_dom_parser::parse_error(position, token, error);
  }
  std::optional<std::string> duplicate;
  std::string detail;

 private:
  std::vector<std::set<std::string>> keys_;
};

json parse_line(const std::string& text, const std::string& where) {
  json value;
  StrictDom dom(value, /*allow_exceptions=*/false);
  const bool ok = json::sax_parse(quote_inexact_numbers(text), &dom, json::input_format_t::json, /*strict=*/true);
  if (dom.duplicate) throw reference::InputError(where + ": duplicate key \"" + *dom.duplicate + "\"");
  if (!ok || dom.is_errored()) {
    throw reference::InputError(where + ": not a valid JSON value (truncated or malformed)" +
                                (dom.detail.empty() ? std::string() : ": " + dom.detail));
  }
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

StreamReader::StreamReader(std::istream& in, std::string source) : in_(in), source_(std::move(source)) {
  if (!next_line()) {
    throw reference::InputError(source_ + ": empty input (the first line must be {\"params\": [...]})");
  }
  const std::string where = source_ + ":" + std::to_string(line_);
  const json value = parse_line(text_, where);
  if (!value.is_object()) throw reference::InputError(where + ": each line must be a JSON object");
  only_keys(value, {"params", "tensors"}, where);
  header_.params = number_array(value, "params", where);
  if (header_.params.empty()) throw reference::InputError(where + ": \"params\" is empty");
  // Parameters are the optimizer's state: a NaN or an infinity there is never a value to start from (a
  // pseudo-gradient may be one: that event is skipped and reported).
  for (std::size_t i = 0; i < header_.params.size(); ++i) {
    const reference::NumberText kind = reference::classify_number_text(header_.params[i]);
    if (kind == reference::NumberText::infinity || kind == reference::NumberText::nan) {
      throw reference::InputError(where + ": params[" + std::to_string(i) + "] is '" + header_.params[i] +
                                  "': parameters must be finite numbers");
    }
  }
  if (value.contains("tensors")) header_.tensors = tensor_sizes(value, header_.params.size(), where);
}

bool StreamReader::next_line() {
  std::streambuf* buffer = in_.rdbuf();
  for (;;) {
    text_.clear();
    bool any = false;
    for (;;) {
      const int c = buffer->sbumpc();
      if (c == std::char_traits<char>::eof()) break;
      any = true;
      if (c == '\n') break;
      if (c == '\0') {
        throw reference::InputError(source_ + ":" + std::to_string(line_ + 1) + ": NUL byte at column " +
                                    std::to_string(text_.size() + 1) + " (not a JSON-lines text file)");
      }
      if (text_.size() >= kMaxLineBytes) {
        throw reference::InputError(source_ + ":" + std::to_string(line_ + 1) + ": line longer than " +
                                    std::to_string(kMaxLineBytes) + " bytes");
      }
      text_.push_back(static_cast<char>(c));
    }
    if (!any) {
      if (in_.bad()) throw reference::InputError(source_ + ": read error");
      return false;
    }
    ++line_;
    if (text_.find_first_not_of(" \t\r") != std::string::npos) return true;
  }
}

std::optional<StreamEvent> StreamReader::next() {
  if (!next_line()) return std::nullopt;
  const std::string where = source_ + ":" + std::to_string(line_);
  const json value = parse_line(text_, where);
  if (!value.is_object()) throw reference::InputError(where + ": each line must be a JSON object");
  only_keys(value, {"grad", "tau", "fragment"}, where);
  StreamEvent event;
  event.line = line_;
  event.grad = number_array(value, "grad", where);
  if (!value.contains("tau")) throw reference::InputError(where + ": missing \"tau\"");
  event.tau = non_negative_integer(value, "tau", where);
  if (value.contains("fragment")) event.fragment = static_cast<std::size_t>(non_negative_integer(value, "fragment", where));
  return event;
}

PseudoGradientStream read_stream(std::istream& in, const std::string& source) {
  StreamReader reader(in, source);
  PseudoGradientStream stream;
  static_cast<StreamHeader&>(stream) = reader.header();
  while (std::optional<StreamEvent> event = reader.next()) stream.events.push_back(std::move(*event));
  return stream;
}

}  // namespace cgad::differential
