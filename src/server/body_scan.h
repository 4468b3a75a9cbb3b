// One streaming pass over a request body before any JSON tree is built: is it
// JSON, how deep does it nest, and how many top-level "messages" are there.
// Memory stays O(depth) plus the longest string, so a body can be refused for
// its shape (too deep, too many messages for the context) before it costs a
// tree several times its size.
#pragma once
#include <cstddef>
#include <string_view>

namespace deltafin::server {

struct BodyShape {
  bool valid_json = false;
  bool too_deep = false;     // nests deeper than the limit (the scan stops there)
  size_t messages = 0;       // elements of the root object's "messages" array, if it is one
  bool too_many_messages = false;  // over the limit (the scan stops there)
};

// max_messages 0: no limit.
BodyShape scan_body(std::string_view body, int max_depth, size_t max_messages);

}  // namespace deltafin::server
