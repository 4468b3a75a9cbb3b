// Request bodies as JSON, in bounded time and memory:
//  - scan_body: one byte pass that builds nothing: nesting depth, and how many
//    top-level "messages" there are, so a body can be refused for its shape
//    (too deep, more messages than fit in the context) before any tree exists;
//  - parse_body: nlohmann's parser into an ordered_json tree that moves each
//    string out of the parser's buffer instead of copying it (a 100 MB prompt
//    is held once, not twice, while parsing).
#pragma once
#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deltafin::server {

struct BodyShape {
  bool too_deep = false;           // nests deeper than the limit
  size_t messages = 0;             // elements of the root object's "messages" array (counted lexically)
  bool too_many_messages = false;  // over the limit
};

// max_messages 0: no limit. Malformed JSON is left to parse_body to refuse.
BodyShape scan_body(std::string_view body, int max_depth, size_t max_messages);

// A discarded value when `body` is not valid JSON (never throws for bad input).
nlohmann::ordered_json parse_body(std::string_view body);

}  // namespace deltafin::server
