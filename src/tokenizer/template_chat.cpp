#include "tokenizer/template_chat.h"

#include <algorithm>
#include <ctime>
#include <optional>

namespace deltafin::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;

// Special spellings, longest first (so the first that matches at a position is the longest).
std::vector<std::string_view> spellings_longest_first(const Tokenizer& tok) {
  std::vector<std::string_view> out;
  for (const auto& [id, s] : tok.specials().by_id()) out.push_back(s);
  std::stable_sort(out.begin(), out.end(), [](std::string_view a, std::string_view b) { return a.size() > b.size(); });
  return out;
}

// The longest spelling at text[i], or -1.
int match_at(const std::vector<std::string_view>& spellings, const bool (&first)[256], std::string_view text,
             size_t i) {
  if (!first[static_cast<unsigned char>(text[i])]) return -1;
  for (size_t k = 0; k < spellings.size(); ++k)
    if (text.substr(i, spellings[k].size()) == spellings[k]) return int(k);
  return -1;
}

// Replaces every special spelling in message and tool strings with
// mark + <index> + mark, where mark is a private-use character that occurs
// nowhere in the inputs or the template.
class Disguise {
 public:
  Disguise(const Tokenizer& tok, std::string mark) : spellings_(spellings_longest_first(tok)), mark_(std::move(mark)) {
    for (auto s : spellings_) first_[static_cast<unsigned char>(s[0])] = true;
  }

  ojson apply(const ojson& v) {
    if (v.is_string()) return ojson(text(v.get_ref<const std::string&>()));
    if (v.is_array()) {
      ojson out = ojson::array();
      for (const auto& e : v) out.push_back(apply(e));
      return out;
    }
    if (v.is_object()) {
      ojson out = ojson::object();
      for (auto it = v.begin(); it != v.end(); ++it) out[text(it.key())] = apply(it.value());
      return out;
    }
    return v;
  }

  // Restores disguised spellings; nullopt when a mark is not one of ours.
  std::optional<std::string> restore(std::string_view s) const {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      const size_t m = s.find(mark_, i);
      if (m == std::string_view::npos) break;
      out.append(s.substr(i, m - i));
      const size_t digits = m + mark_.size();
      const size_t end = s.find(mark_, digits);
      if (end == std::string_view::npos || end == digits || end - digits > 6) return std::nullopt;
      size_t k = 0;
      for (size_t j = digits; j < end; ++j) {
        if (s[j] < '0' || s[j] > '9') return std::nullopt;
        k = k * 10 + size_t(s[j] - '0');
      }
      if (k >= spellings_.size()) return std::nullopt;
      out.append(spellings_[k]);
      i = end + mark_.size();
    }
    out.append(s.substr(i));
    return out;
  }

  bool changed() const { return changed_; }

 private:
  std::string text(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const int k = match_at(spellings_, first_, s, i);
      if (k < 0) {
        out += s[i++];
        continue;
      }
      out += mark_ + std::to_string(k) + mark_;
      i += spellings_[size_t(k)].size();
      changed_ = true;
    }
    return out;
  }

  std::vector<std::string_view> spellings_;
  bool first_[256] = {};
  std::string mark_;
  bool changed_ = false;
};

// UTF-8 of a code point in the Basic Multilingual Plane's private use area.
std::string utf8_bmp(uint32_t cp) {
  return {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
}

Result<std::string> content_string(const ojson& m, size_t index) {
  const ojson& c = m.contains("content") ? m["content"] : ojson();
  if (!c.is_array()) return std::string();  // not used: strings and null pass through unchanged
  std::string out;
  for (size_t j = 0; j < c.size(); ++j) {
    const ojson& part = c[j];
    if (!part.is_object()) return error("chat: messages[{}].content[{}] is not an object", index, j);
    const ojson type = part.contains("type") ? part["type"] : ojson();
    if (type == "image" || type == "image_url")
      return error("chat: messages[{}].content[{}]: image content is not supported", index, j);
    if (!part.contains("text") || !part["text"].is_string())
      return error("chat: messages[{}].content[{}].text must be a string", index, j);
    out += part["text"].get<std::string>();
  }
  return out;
}

}  // namespace

std::vector<ChatSegment> split_at_specials(const Tokenizer& tok, std::string_view text) {
  const auto spellings = spellings_longest_first(tok);
  bool first[256] = {};
  for (auto s : spellings) first[static_cast<unsigned char>(s[0])] = true;
  std::vector<ChatSegment> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const int k = match_at(spellings, first, text, i);
    if (k < 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({false, std::string(text.substr(start, i - start))});
    out.push_back({true, std::string(spellings[size_t(k)])});
    i += spellings[size_t(k)].size();
    start = i;
  }
  if (start < text.size()) out.push_back({false, std::string(text.substr(start))});
  return out;
}

Result<TemplateChat> TemplateChat::from_source(jinja::ChatTemplateSource source) {
  DF_ASSIGN(jinja::Template t, jinja::Template::parse(source.text));
  TemplateChat c;
  c.template_ = std::make_shared<const jinja::Template>(std::move(t));
  c.source_ = std::make_shared<const jinja::ChatTemplateSource>(std::move(source));
  return c;
}

Result<TemplateChat> TemplateChat::load(const std::string& dir) {
  auto source = jinja::load_chat_template(dir);
  if (!source.ok()) return source.status().with_context("chat template");
  auto c = from_source(std::move(source).value());
  if (!c.ok()) return c.status().with_context(fmt::format("{}: chat template", dir));
  return c;
}

Result<ojson> TemplateChat::variables(const ojson& messages, const ChatOptions& options) {
  if (!messages.is_array()) return error("chat: messages must be an array");
  ojson msgs = ojson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    if (!m.is_object()) return error("chat: messages[{}] is not an object", i);
    ojson copy = m;
    if (m.contains("content") && m["content"].is_array()) {
      DF_ASSIGN(std::string text, content_string(m, i));
      copy["content"] = std::move(text);
    }
    msgs.push_back(std::move(copy));
  }
  ojson vars = ojson::object();
  vars["messages"] = std::move(msgs);
  if (options.tools.is_array() && !options.tools.empty()) vars["tools"] = options.tools;
  vars["add_generation_prompt"] = options.add_generation_prompt;
  vars["enable_thinking"] = options.thinking;
  return vars;
}

Result<std::string> TemplateChat::render_text(const ojson& messages, const ChatOptions& options) const {
  DF_ASSIGN(ojson vars, variables(messages, options));
  jinja::RenderOptions ro;
  ro.now = static_cast<int64_t>(std::time(nullptr));
  return template_->render(jinja::with_special_tokens(std::move(vars), *source_), ro);
}

Result<std::vector<ChatSegment>> TemplateChat::render(const Tokenizer& tok, const ojson& messages,
                                                      const ChatOptions& options) const {
  DF_ASSIGN(ojson vars, variables(messages, options));
  jinja::RenderOptions ro;
  ro.now = static_cast<int64_t>(std::time(nullptr));
  DF_ASSIGN(std::string text, template_->render(jinja::with_special_tokens(vars, *source_), ro));

  // A mark that occurs in no input string and not in the template.
  const std::string inputs = vars.dump(-1, ' ', false, ojson::error_handler_t::replace);
  std::string mark;
  for (uint32_t cp = 0xF8FF; cp >= 0xE000 && mark.empty(); --cp) {
    const std::string m = utf8_bmp(cp);
    if (inputs.find(m) == std::string::npos && source_->text.find(m) == std::string::npos &&
        text.find(m) == std::string::npos)
      mark = m;
  }
  if (mark.empty()) return error("chat: the messages use every private-use character; cannot render them safely");
  Disguise disguise(tok, mark);
  ojson disguised = vars;
  disguised["messages"] = disguise.apply(vars["messages"]);
  if (vars.contains("tools")) disguised["tools"] = disguise.apply(vars["tools"]);
  if (!disguise.changed()) return split_at_specials(tok, text);  // no string spells a special token

  DF_ASSIGN(std::string masked, template_->render(jinja::with_special_tokens(std::move(disguised), *source_), ro));
  std::vector<ChatSegment> segments = split_at_specials(tok, masked);
  std::string joined;
  for (ChatSegment& s : segments) {
    if (!s.control) {
      auto restored = disguise.restore(s.text);
      if (!restored) return error("chat: the chat template changes message text that spells a special token");
      s.text = std::move(*restored);
    }
    joined += s.text;
  }
  if (joined != text)
    return error("chat: the chat template treats message text that spells a special token differently; "
                 "refusing to render it");
  return segments;
}

Result<std::vector<uint32_t>> TemplateChat::stop_ids(const Tokenizer& tok) const {
  std::vector<uint32_t> out;
  auto add = [&](std::string_view spelling) {
    const int64_t id = tok.specials().id_of(spelling);
    if (id >= 0 && std::find(out.begin(), out.end(), uint32_t(id)) == out.end()) out.push_back(uint32_t(id));
  };
  const ojson& st = source_->special_tokens;
  if (st.contains("eos_token") && st["eos_token"].is_string()) add(st["eos_token"].get<std::string>());
  add("<|im_end|>");
  add("<|endoftext|>");
  if (out.empty()) return error("chat: the tokenizer has no end-of-turn token (eos_token, <|im_end|>, <|endoftext|>)");
  return out;
}

}  // namespace deltafin::tokenizer
