// The web chat served at GET / (src/server/web/chat.html, compiled into the
// binary by CMakeLists.txt).
#pragma once
#include <string_view>

namespace deltafin::server {

std::string_view chat_page();

}  // namespace deltafin::server
