// Request bodies as JSON, in bounded time and memory:
//  - scan_body: one byte pass that builds nothing: nesting depth, how many
//    top-level "messages" there are, and a lower bound on the bytes of the
//    top-level "prompt" string, so a body can be refused for its shape (too
//    deep, more messages or prompt bytes than fit in the context) before any
//    tree exists;
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
  // The root object's last "prompt" value, when a string: its decoded bytes
  // are at least this (each escape counted as one byte; 0 when not a string).
  size_t prompt_bytes = 0;
};

// max_messages 0: no limit. Malformed JSON is left to parse_body to refuse.
BodyShape scan_body(std::string_view body, int max_depth, size_t max_messages);

// A discarded value when `body` is not valid JSON (never throws for bad input).
nlohmann::ordered_json parse_body(std::string_view body);

}  // namespace deltafin::server
