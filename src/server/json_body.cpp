#include "server/json_body.h"

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin::server {

namespace {

using ojson = nlohmann::ordered_json;

// Builds the tree as nlohmann's own DOM parser does (a stack of open
// containers; a parent never grows while a child is open, so the pointers stay
// valid), but moves strings and keys instead of copying them.
class MovingDomSax {
 public:
  explicit MovingDomSax(ojson& root) : root_(root) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(ojson::number_integer_t v) { return put(v); }
  bool number_unsigned(ojson::number_unsigned_t v) { return put(v); }
  bool number_float(ojson::number_float_t v, const ojson::string_t&) { return put(v); }
  bool string(ojson::string_t& v) { return put(std::move(v)); }
  bool binary(ojson::binary_t& v) { return put(ojson::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(ojson::object()); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(ojson::string_t& k) {
    slot_ = &(*stack_.back())[std::move(k)];  // a repeated key: the last value wins, as in nlohmann's parser
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  template <typename V>
  ojson* place(V&& v) {
    if (stack_.empty()) {
      root_ = ojson(std::forward<V>(v));
      return &root_;
    }
    ojson& top = *stack_.back();
    if (top.is_array()) {
      top.emplace_back(std::forward<V>(v));
      return &top.back();
    }
    *slot_ = ojson(std::forward<V>(v));
    return slot_;
  }
  template <typename V>
  bool put(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  bool open(ojson v) {
    stack_.push_back(place(std::move(v)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  ojson& root_;
  std::vector<ojson*> stack_;
  ojson* slot_ = nullptr;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

BodyShape scan_body(std::string_view s, int max_depth, size_t max_messages) {
  enum class Key { Other, Messages, Prompt };
  static constexpr std::string_view kMessages = "messages", kPrompt = "prompt";
  BodyShape shape;
  int depth = 0;
  bool in_str = false;
  int esc = 0;                   // characters of an escape still to skip (1 after '\', 4 more after "\u")
  std::string_view key_text;     // the current depth-1 string, while it is a prefix of a key we look for
  size_t key_len = 0;            // bytes of it so far (SIZE_MAX: not one of ours)
  Key just_closed = Key::Other;  // the depth-1 string that just closed
  Key value_of = Key::Other;     // after `"messages":` or `"prompt":` at depth 1, until the next ','
  bool counting_prompt = false;  // inside the string value of "prompt"
  int messages_depth = -1;       // depth inside the messages array
  bool element_open = false;     // the current array element has started
  for (char c : s) {
    if (in_str) {
      if (esc > 0) {
        esc = (esc == 1 && c == 'u') ? 4 : esc - 1;
        key_len = SIZE_MAX;
      } else if (c == '\\') {
        esc = 1;
        if (counting_prompt) ++shape.prompt_bytes;  // every escape decodes to at least one byte
      } else if (c == '"') {
        in_str = false;
        counting_prompt = false;
        just_closed = Key::Other;
        if (depth == 1 && key_len != SIZE_MAX) {
          if (key_len == kMessages.size() && key_text == kMessages) just_closed = Key::Messages;
          if (key_len == kPrompt.size() && key_text == kPrompt) just_closed = Key::Prompt;
        }
      } else {
        if (counting_prompt) ++shape.prompt_bytes;
        if (depth == 1 && key_len != SIZE_MAX) {
          // Still a prefix of "messages" or "prompt" (they start differently).
          if (key_len == 0) key_text = c == 'm' ? kMessages : c == 'p' ? kPrompt : std::string_view{};
          key_len = (key_len < key_text.size() && c == key_text[key_len]) ? key_len + 1 : SIZE_MAX;
        }
      }
      continue;
    }
    if (is_space(c)) continue;
    if (depth == messages_depth && c != ']' && c != ',' && !element_open) {
      element_open = true;
      if (++shape.messages > max_messages && max_messages != 0) {
        shape.too_many_messages = true;
        return shape;
      }
    }
    const Key was_key = just_closed;
    just_closed = Key::Other;
    switch (c) {
      case '"':
        in_str = true;
        key_len = 0;
        if (depth == 1 && value_of == Key::Prompt) {  // the value of "prompt" is this string (the last one wins)
          counting_prompt = true;
          shape.prompt_bytes = 0;
          value_of = Key::Other;
        }
        break;
      case ':':
        if (depth == 1) value_of = was_key;
        break;
      case '{':
      case '[':
        if (depth == 1 && value_of == Key::Prompt) shape.prompt_bytes = 0;  // not a string
        if (++depth > max_depth) {
          shape.too_deep = true;
          return shape;
        }
        if (c == '[' && depth == 2 && value_of == Key::Messages && messages_depth < 0) {
          messages_depth = 2;
          element_open = false;
        }
        break;
      case '}':
      case ']':
        if (depth == messages_depth) messages_depth = -1;
        --depth;
        break;
      case ',':
        if (depth == messages_depth) element_open = false;
        if (depth == 1) value_of = Key::Other;
        break;
      default:
        if (depth == 1 && value_of == Key::Prompt) shape.prompt_bytes = 0;  // a number or a literal
        break;
    }
  }
  return shape;
}

ojson parse_body(std::string_view body) {
  ojson root;
  MovingDomSax sax(root);
  if (!ojson::sax_parse(body.begin(), body.end(), &sax)) return ojson(ojson::value_t::discarded);
  return root;
}

}  // namespace deltafin::server
