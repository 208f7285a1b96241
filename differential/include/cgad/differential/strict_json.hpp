#pragma once
// The one rule for the JSON documents cgad reads whole (a `cgad simulate` part file; the replay stream's lines
// follow it too, replay_stream.cpp): malformed JSON and a repeated key in any object are refused, with the
// parser's own words for the former. nlohmann's parse() keeps the last of two equal keys silently, so a part
// edited or concatenated by hand ({"shard": ..., "shard": ...}) would mean whatever came last.
#include <nlohmann/json.hpp>

#include <istream>
#include <string>

namespace cgad::differential {

// The document read from `in` to its end, as a JSON tree; InputError naming `where` (a file) and the problem
// otherwise.
nlohmann::json parse_json_document(std::istream& in, const std::string& where);

}  // namespace cgad::differential
