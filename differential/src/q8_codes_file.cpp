#include "cgad/differential/q8_codes_file.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/core/real_scalar.hpp"
#include "cgad/differential/strict_json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace cgad::differential {
namespace {

float code_of(const nlohmann::json& value, const std::string& where) {
  if (value.is_number()) {
    const double x = value.get<double>();
    if (static_cast<double>(static_cast<float>(x)) != x) {
      throw core::InputError(where + " is " + value.dump() + ", not a float32 value");
    }
    return static_cast<float>(x);
  }
  if (!value.is_string()) throw core::InputError(where + " must be a number or a string, got " + value.dump());
  const std::string text = value.get<std::string>();
  if (text.find('x') == std::string::npos && text.find('X') == std::string::npos) {
    return core::parse_real<float>(text, where.c_str());
  }
  // A hexfloat: strtod reads it exactly where it fits a double, which a float32 value does.
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || errno != 0 || static_cast<double>(static_cast<float>(x)) != x) {
    throw core::InputError(where + " is '" + text + "', not the hexfloat of a float32 value");
  }
  return static_cast<float>(x);
}

void read_map(const nlohmann::json& document, const char* name, const std::string& file,
              std::array<float, fastpath::kQ8MapCodes>& into) {
  const std::string where = file + ": \"" + name + "\"";
  if (!document.contains(name)) throw core::InputError(where + " is missing");
  const nlohmann::json& map = document.at(name);
  const nlohmann::json& codes = map.is_object() && map.contains("hex") ? map.at("hex") : map;
  if (!codes.is_array() || codes.size() != fastpath::kQ8MapCodes) {
    throw core::InputError(where + " must be an array of 256 codes (or an object whose \"hex\" array holds them)");
  }
  for (std::size_t k = 0; k < fastpath::kQ8MapCodes; ++k) {
    into[k] = code_of(codes[k], where + " code " + std::to_string(k));
  }
}

}  // namespace

fastpath::Q8Codes read_q8_codes(std::istream& in, const std::string& where) {
  const nlohmann::json document = parse_json_document(in, where);
  if (!document.is_object()) {
    throw core::InputError(where + " must hold an object {\"signed\": ..., \"unsigned\": ...}");
  }
  fastpath::Q8Codes codes;
  read_map(document, "signed", where, codes.signed_codes);
  read_map(document, "unsigned", where, codes.unsigned_codes);
  return codes;
}

}  // namespace cgad::differential
