#include "server/body_scan.h"

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace deltafin::server {

namespace {

// nlohmann's SAX parser is iterative; returning false stops it.
class ShapeSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  ShapeSax(int max_depth, size_t max_messages, BodyShape& out)
      : max_depth_(max_depth), max_messages_(max_messages), out_(out) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override {
    if (!open()) return false;
    if (depth_ == 2 && key_is_messages_) messages_depth_ = 2;
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) key_is_messages_ = k == "messages";
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  // A value starting inside the messages array (at its own level) is one message.
  bool count() {
    if (messages_depth_ != depth_) return true;
    if (++out_.messages > max_messages_ && max_messages_ != 0) {
      out_.too_many_messages = true;
      return false;
    }
    return true;
  }
  bool value() { return count(); }
  bool open() {
    if (!count()) return false;
    if (++depth_ > max_depth_) {
      out_.too_deep = true;
      return false;
    }
    return true;
  }
  bool close() {
    if (depth_ == messages_depth_) messages_depth_ = -1;
    --depth_;
    return true;
  }

  int max_depth_;
  size_t max_messages_;
  BodyShape& out_;
  int depth_ = 0;
  int messages_depth_ = -1;  // depth of the messages array while inside it
  bool key_is_messages_ = false;
};

}  // namespace

BodyShape scan_body(std::string_view body, int max_depth, size_t max_messages) {
  BodyShape shape;
  ShapeSax sax(max_depth, max_messages, shape);
  shape.valid_json = nlohmann::json::sax_parse(body.begin(), body.end(), &sax);
  return shape;
}

}  // namespace deltafin::server
