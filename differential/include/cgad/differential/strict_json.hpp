#pragma once
// The one rule for the JSON documents cgad reads whole (a `cgad simulate` part file, a --q8-maps file; the replay
// stream's lines follow it too, replay_stream.cpp): malformed JSON and a repeated key in any object are refused,
// with the parser's own words for the former. nlohmann's parse() keeps the last of two equal keys silently, so a
// part edited or concatenated by hand ({"shard": ..., "shard": ...}) would mean whatever came last.
// Nesting deeper than kMaxJsonDepth is refused while parsing: nlohmann's parser is iterative, but dump(), copies
// and comparisons of a tree recurse once per level, so a value nested 10^5 deep (a "version" of [[[...]]]) ended
// in a stack overflow (SIGSEGV) in the error message that quoted it (docs/design.md §7, bad input).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <istream>
#include <string>

namespace cgad::differential {

// The deepest nesting of arrays and objects a document may have: cgad's own files nest a few levels deep, and 64
// leaves room for any hand-written file while staying far below what the stack holds in recursion.
inline constexpr std::size_t kMaxJsonDepth = 64;

// The document read from `in` to its end, as a JSON tree; InputError naming `where` (a file) and the problem
// otherwise.
nlohmann::json parse_json_document(std::istream& in, const std::string& where);

}  // namespace cgad::differential
