#include "cgad/differential/replay_stream.hpp"

#include "cgad/core/errors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <istream>
#include <map>
#include <string>
#include <string_view>

namespace cgad::differential {
namespace {

using nlohmann::json;

bool digit(char c) {
  return c >= '0' && c <= '9';
}

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
    while (i < text.size() &&
           (digit(text[i]) || text[i] == '-' || text[i] == '+' || text[i] == '.' || text[i] == 'e' || text[i] == 'E')) {
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

// One line's top-level value for each key, collected by LineSax below: never a JSON tree.
struct LineValue {
  enum class Type { array, string, integer, other } type = Type::other;
  std::vector<std::string> items;  // an array's elements (JSON strings, and integers as their digits)
  bool counts = true;              // every element an integer >= 0 (the "tensors" rule)
  std::int64_t integer = 0;        // Type::integer: the value, unless too_large
  bool negative = false;
  bool too_large = false;  // an integer past INT64_MAX
};

using LineValues = std::map<std::string, LineValue, std::less<>>;

// A SAX handler for one JSON-lines record: a top-level object whose keys (refused when not in `allowed`, or
// repeated: {"tau": 0, "tau": 40} would otherwise mean the last one) map to a scalar or to a flat array of
// strings and integers, collected straight into LineValue. A DOM (nlohmann's tree, about 64 bytes a number, then
// copied out) is never built: each number is held once, as its text. An element that is neither a string nor an
// integer (true, null, an array or an object) ends the parse, naming the key and the index.
class LineSax {
 public:
  explicit LineSax(std::initializer_list<const char*> allowed) : allowed_(allowed) {}

  bool null() { return scalar(LineValue::Type::other); }
  bool boolean(bool) { return scalar(LineValue::Type::other); }
  bool number_integer(json::number_integer_t x) {
    if (depth_ == 2) return element(std::to_string(x), x >= 0);
    if (!scalar(LineValue::Type::integer)) return false;
    current_->integer = x;
    current_->negative = x < 0;
    return true;
  }
  bool number_unsigned(json::number_unsigned_t x) {
    if (depth_ == 2) return element(std::to_string(x), true);
    if (!scalar(LineValue::Type::integer)) return false;
    current_->too_large = x > static_cast<std::uint64_t>(INT64_MAX);
    current_->integer = current_->too_large ? 0 : static_cast<std::int64_t>(x);
    return true;
  }
  // Not reached after quote_inexact_numbers (every other number is a string by then); kept exact all the same.
  bool number_float(json::number_float_t /*rounded*/, const json::string_t& text) {
    if (depth_ == 2) return element(text, false);
    return scalar(LineValue::Type::string);
  }
  bool string(json::string_t& text) {
    if (depth_ == 2) return element(std::move(text), false);
    return scalar(LineValue::Type::string);
  }
  bool binary(json::binary_t&) { return scalar(LineValue::Type::other); }
  bool start_object(std::size_t) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    return nested();
  }
  bool key(json::string_t& name) {
    bool known = false;
    for (const char* allowed : allowed_) known = known || name == allowed;
    if (!known) return stop(unknown, name);
    const auto [it, fresh] = values.try_emplace(name);
    if (!fresh) return stop(duplicate, name);
    current_ = &it->second;
    current_key_ = name;
    return true;
  }
  bool end_object() {
    depth_ = 0;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ != 1) return depth_ == 0 ? stop(not_object, {}) : nested();
    current_->type = LineValue::Type::array;
    depth_ = 2;
    return true;
  }
  bool end_array() {
    depth_ = 1;
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/, const Exception& error) {
    const std::string what = error.what();
    const std::size_t column = what.find("column");
    detail = column == std::string::npos ? what : what.substr(column);
    return false;
  }

  enum Stop { none, not_object, unknown, duplicate, bad_element, bad_value };
  Stop stopped = none;
  std::string stop_key;        // the key of unknown, duplicate, bad_element and bad_value
  std::size_t stop_index = 0;  // bad_element: the element's index
  std::string detail;          // the parser's words for malformed JSON
  LineValues values;

 private:
  bool stop(Stop why, std::string key) {
    stopped = why;
    stop_key = std::move(key);
    return false;
  }
  bool scalar(LineValue::Type type) {
    if (depth_ == 0) return stop(not_object, {});
    if (depth_ == 2) return nested();
    current_->type = type;
    return true;
  }
  bool element(std::string text, bool count) {
    current_->items.push_back(std::move(text));
    current_->counts = current_->counts && count;
    return true;
  }
  // An object as a key's value, or anything but a string or an integer inside an array.
  bool nested() {
    if (depth_ == 1) return stop(bad_value, current_key_);
    stop_index = current_->items.size();
    return stop(bad_element, current_key_);
  }

  std::initializer_list<const char*> allowed_;
  int depth_ = 0;
  LineValue* current_ = nullptr;
  std::string current_key_;
};

// The line's keys and values, refusing malformed JSON, a value that is not an object, an unknown or repeated key
// and an array element that is neither a number nor a string.
LineValues parse_line(const std::string& text, const std::string& where, std::initializer_list<const char*> allowed) {
  LineSax sax(allowed);
  const bool ok = json::sax_parse(quote_inexact_numbers(text), &sax, json::input_format_t::json, /*strict=*/true);
  switch (sax.stopped) {
    case LineSax::not_object:
      throw core::InputError(where + ": each line must be a JSON object");
    case LineSax::unknown:
      throw core::InputError(where + ": unknown key \"" + sax.stop_key + "\"");
    case LineSax::duplicate:
      throw core::InputError(where + ": duplicate key \"" + sax.stop_key + "\"");
    case LineSax::bad_element:
      throw core::InputError(where + ": " + sax.stop_key + "[" + std::to_string(sax.stop_index) +
                             "] must be a number or a decimal string");
    case LineSax::bad_value:
      throw core::InputError(where + ": \"" + sax.stop_key + "\" has the wrong type (an object)");
    case LineSax::none:
      break;
  }
  if (!ok) {
    throw core::InputError(where + ": not a valid JSON value (truncated or malformed)" +
                           (sax.detail.empty() ? std::string() : ": " + sax.detail));
  }
  return std::move(sax.values);
}

const LineValue* find(const LineValues& values, const char* key) {
  const auto it = values.find(key);
  return it == values.end() ? nullptr : &it->second;
}

std::vector<std::string> number_array(LineValues& values, const char* key, const std::string& where) {
  const auto it = values.find(key);
  if (it == values.end()) throw core::InputError(where + ": missing \"" + key + "\"");
  if (it->second.type != LineValue::Type::array) {
    throw core::InputError(where + ": \"" + key + "\" must be an array");
  }
  return std::move(it->second.items);
}

std::int64_t non_negative_integer(const LineValue& x, const char* key, const std::string& where) {
  if (x.type != LineValue::Type::integer || x.negative) {
    throw core::InputError(where + ": \"" + key + "\" must be a non-negative integer");
  }
  if (x.too_large) throw core::InputError(where + ": \"" + key + "\" is too large");
  return x.integer;
}

// "tensors": non-negative integers summing to the parameter count. Only what the parser saw as integers counts
// (a quoted "3" is a string).
std::vector<std::size_t> tensor_sizes(const LineValue& sizes, std::size_t parameters, const std::string& where) {
  if (sizes.type != LineValue::Type::array || sizes.items.empty()) {
    throw core::InputError(where + ": \"tensors\" must be a non-empty array");
  }
  std::vector<std::size_t> out;
  std::size_t total = 0;
  for (std::size_t k = 0; k < sizes.items.size(); ++k) {
    const std::string& text = sizes.items[k];
    std::uint64_t x = 0;
    const bool count = sizes.counts && std::from_chars(text.data(), text.data() + text.size(), x).ec == std::errc();
    if (!count || x > parameters - std::min(total, parameters)) {
      throw core::InputError(where + ": tensors[" + std::to_string(k) +
                             "] must be a non-negative integer, and the sizes must sum to the " +
                             std::to_string(parameters) + " parameters");
    }
    out.push_back(static_cast<std::size_t>(x));
    total += out.back();
  }
  if (total != parameters) {
    throw core::InputError(where + ": the tensor sizes sum to " + std::to_string(total) + ", not to the " +
                           std::to_string(parameters) + " parameters");
  }
  return out;
}

}  // namespace

StreamReader::StreamReader(std::istream& in, std::string source) : in_(in), source_(std::move(source)) {
  if (!next_line()) {
    throw core::InputError(source_ + ": empty input (the first line must be {\"params\": [...]})");
  }
  header_.line = line_;
  const std::string where = source_ + ":" + std::to_string(line_);
  LineValues values = parse_line(text_, where, {"params", "tensors"});
  header_.params = number_array(values, "params", where);
  if (header_.params.empty()) throw core::InputError(where + ": \"params\" is empty");
  // Parameters are the optimizer's state: a NaN or an infinity there is never a value to start from (a
  // pseudo-gradient may be one: that event is skipped and reported).
  for (std::size_t i = 0; i < header_.params.size(); ++i) {
    const core::NumberText kind = core::classify_number_text(header_.params[i]);
    if (kind == core::NumberText::infinity || kind == core::NumberText::nan) {
      throw core::InputError(where + ": params[" + std::to_string(i) + "] is '" + header_.params[i] +
                             "': parameters must be finite numbers");
    }
  }
  if (const LineValue* sizes = find(values, "tensors")) {
    header_.tensors = tensor_sizes(*sizes, header_.params.size(), where);
  }
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
        throw core::InputError(source_ + ":" + std::to_string(line_ + 1) + ": NUL byte at column " +
                               std::to_string(text_.size() + 1) + " (not a JSON-lines text file)");
      }
      if (text_.size() >= kMaxLineBytes) {
        throw core::InputError(source_ + ":" + std::to_string(line_ + 1) + ": line longer than " +
                               std::to_string(kMaxLineBytes) + " bytes");
      }
      text_.push_back(static_cast<char>(c));
    }
    if (!any) {
      if (in_.bad()) throw core::InputError(source_ + ": read error");
      return false;
    }
    ++line_;
    if (text_.find_first_not_of(" \t\r") != std::string::npos) return true;
  }
}

std::optional<StreamEvent> StreamReader::next() {
  if (!next_line()) return std::nullopt;
  const std::string where = source_ + ":" + std::to_string(line_);
  LineValues values = parse_line(text_, where, {"grad", "tau", "fragment"});
  StreamEvent event;
  event.line = line_;
  event.grad = number_array(values, "grad", where);
  const LineValue* tau = find(values, "tau");
  if (tau == nullptr) throw core::InputError(where + ": missing \"tau\"");
  event.tau = non_negative_integer(*tau, "tau", where);
  if (const LineValue* fragment = find(values, "fragment")) {
    event.fragment = static_cast<std::size_t>(non_negative_integer(*fragment, "fragment", where));
  }
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
