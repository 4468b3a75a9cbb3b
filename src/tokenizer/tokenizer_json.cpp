#include "tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "tokenizer/byte_level.h"

namespace deltafin::tokenizer {

namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 64;              // nesting a real tokenizer.json never nears
constexpr uint32_t kMaxIds = 1u << 24;     // vocabulary ids must stay below this
// GPT-2's pattern, which ByteLevel applies when use_regex is true (as transformers.js writes it).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// nlohmann's parser recurses per level: refuse deep nesting before parsing.
bool too_deep(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// The parser's own message for malformed JSON (it names the position).
struct ErrorSax : nlohmann::json_sax<json> {
  std::string message;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool key(string_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    message = e.what();
    return false;
  }
};

// A printable, bounded rendering of a token for messages.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 60)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  if (s.size() > 60) out += "...";
  return out;
}

// An optional boolean field: absent or null reads as `fallback`.
Result<bool> flag(const json& obj, const char* key, bool fallback, const std::string& where) {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  if (!obj[key].is_boolean()) return error("{}.{} is not a boolean", where, key);
  return obj[key].get<bool>();
}

std::string type_of(const json& obj) {
  if (!obj.is_object() || !obj.contains("type") || !obj["type"].is_string()) return "";
  return obj["type"].get<std::string>();
}

// A literal string as a regex (JavaScript dialect): escape every metacharacter.
std::string escape_regex(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Status parse_normalizer(const json& n, TokenizerJsonSpec& spec, int depth) {
  if (n.is_null()) return Status();
  const std::string type = type_of(n);
  if (type == "NFC") {
    spec.nfc = true;
    return Status();
  }
  if (type == "Sequence" && depth == 0) {
    if (!n.contains("normalizers") || !n["normalizers"].is_array())
      return error("normalizer Sequence has no \"normalizers\" array");
    for (const auto& item : n["normalizers"]) DF_TRY(parse_normalizer(item, spec, depth + 1));
    return Status();
  }
  if (type.empty()) return error("normalizer has no \"type\"");
  return error("normalizer type '{}' is not supported (supported: NFC)", shown(type));
}

Status parse_pre_tokenizer(const json& p, TokenizerJsonSpec& spec, int depth, bool& byte_level) {
  const std::string type = type_of(p);
  if (type.empty()) return error("pre_tokenizer has no \"type\"");
  if (byte_level) return error("pre_tokenizer: ByteLevel must be the last step (found '{}' after it)", shown(type));
  if (type == "Sequence") {
    if (depth >= 4) return error("pre_tokenizer: Sequence nested too deeply");
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
      return error("pre_tokenizer Sequence has no \"pretokenizers\" array");
    for (const auto& item : p["pretokenizers"]) DF_TRY(parse_pre_tokenizer(item, spec, depth + 1, byte_level));
    return Status();
  }
  if (type == "Split") {
    if (!p.contains("pattern") || !p["pattern"].is_object())
      return error("pre_tokenizer Split has no \"pattern\" object");
    const json& pat = p["pattern"];
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      spec.splits.push_back(pat["Regex"].get<std::string>());
    } else if (pat.contains("String") && pat["String"].is_string()) {
      if (pat["String"].get<std::string>().empty()) return error("pre_tokenizer Split: empty String pattern");
      spec.splits.push_back(escape_regex(pat["String"].get<std::string>()));
    } else {
      return error("pre_tokenizer Split: pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}");
    }
    if (!p.contains("behavior") || !p["behavior"].is_string())
      return error("pre_tokenizer Split has no \"behavior\"");
    if (p["behavior"] != "Isolated")
      return error("pre_tokenizer Split behavior '{}' is not supported (supported: Isolated)",
                   shown(p["behavior"].get<std::string>()));
    DF_ASSIGN(bool invert, flag(p, "invert", false, "pre_tokenizer Split"));
    if (invert) return error("pre_tokenizer Split with invert true is not supported");
    return Status();
  }
  if (type == "ByteLevel") {
    DF_ASSIGN(bool prefix, flag(p, "add_prefix_space", false, "pre_tokenizer ByteLevel"));
    if (prefix) return error("pre_tokenizer ByteLevel with add_prefix_space true is not supported");
    DF_ASSIGN(bool use_regex, flag(p, "use_regex", true, "pre_tokenizer ByteLevel"));
    if (use_regex) spec.splits.push_back(kGpt2Pattern);
    byte_level = true;
    return Status();
  }
  return error("unknown or unsupported pre_tokenizer type '{}' (supported: Sequence, Split, ByteLevel)", shown(type));
}

Status parse_model(const json& m, TokenizerJsonSpec& spec, std::unordered_map<std::string, uint32_t>& vocab) {
  if (!m.is_object()) return error("\"model\" is missing or not an object");
  const std::string type = type_of(m);
  if (type.empty()) return error("model has no \"type\"");
  if (type != "BPE") return error("model type '{}' is not supported (only BPE)", shown(type));
  if (m.contains("dropout") && !m["dropout"].is_null() &&
      !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0))
    return error("model.dropout is not supported (must be null)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(key) && !m[key].is_null() && !(m[key].is_string() && m[key].get<std::string>().empty()))
      return error("model.{} is not supported (must be null or empty)", key);
  }
  DF_ASSIGN(bool byte_fallback, flag(m, "byte_fallback", false, "model"));
  if (byte_fallback) return error("model.byte_fallback true is not supported (byte-level BPE only)");
  DF_ASSIGN(spec.ignore_merges, flag(m, "ignore_merges", false, "model"));

  if (!m.contains("vocab") || !m["vocab"].is_object()) return error("model.vocab is missing or not an object");
  if (m["vocab"].empty()) return error("model.vocab is empty");
  for (const auto& [token, id] : m["vocab"].items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= kMaxIds)
      return error("model.vocab['{}']: id must be an integer 0..{}", shown(token), kMaxIds - 1);
    const uint32_t v = id.get<uint32_t>();
    if (v >= spec.bytes.size()) {
      spec.bytes.resize(v + 1);
      spec.byte_level.resize(v + 1);
    }
    if (spec.byte_level[v] || !spec.bytes[v].empty()) return error("model.vocab: id {} is used twice", v);
    if (token.empty()) return error("model.vocab: empty token (id {})", v);
    auto bytes = byte_level_decode(token);
    spec.byte_level[v] = bytes.has_value();
    spec.bytes[v] = bytes ? std::move(*bytes) : token;  // not byte-level: decodes to its UTF-8, as HF does
    vocab.emplace(token, v);
  }

  if (!m.contains("merges") || !m["merges"].is_array()) return error("model.merges is missing or not an array");
  const json& merges = m["merges"];
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& e = merges[i];
    std::string left, right;
    if (e.is_string()) {  // "left right" (tokenizers < 0.20)
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return error("model.merges[{}]: '{}' is not two tokens separated by one space", i, shown(s));
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      return error("model.merges[{}]: expected \"left right\" or [left, right]", i);
    }
    const auto l = vocab.find(left), r = vocab.find(right);
    if (l == vocab.end()) return error("model.merges[{}]: unknown token '{}'", i, shown(left));
    if (r == vocab.end()) return error("model.merges[{}]: unknown token '{}'", i, shown(right));
    const auto res = vocab.find(left + right);
    if (res == vocab.end())
      return error("model.merges[{}]: the merged token '{}' is not in the vocab", i, shown(left + right));
    spec.merges.push_back({l->second, r->second, res->second});
  }
  return Status();
}

Status parse_added(const json& added, TokenizerJsonSpec& spec) {
  if (added.is_null()) return Status();
  if (!added.is_array()) return error("added_tokens is not an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const std::string where = fmt::format("added_tokens[{}]", i);
    if (!a.is_object()) return error("{} is not an object", where);
    if (!a.contains("id") || !a["id"].is_number_unsigned() || a["id"].get<uint64_t>() >= kMaxIds)
      return error("{}.id must be an integer 0..{}", where, kMaxIds - 1);
    if (!a.contains("content") || !a["content"].is_string() || a["content"].get<std::string>().empty())
      return error("{}.content must be a non-empty string", where);
    TokenizerJsonAddedToken t;
    t.id = a["id"].get<uint32_t>();
    t.content = a["content"].get<std::string>();
    DF_ASSIGN(t.special, flag(a, "special", false, where));
    DF_ASSIGN(t.normalized, flag(a, "normalized", !t.special, where));
    for (const char* key : {"single_word", "lstrip", "rstrip"}) {
      DF_ASSIGN(bool on, flag(a, key, false, where));
      if (on) return error("{} ('{}'): {} true is not supported", where, shown(t.content), key);
    }
    for (const auto& other : spec.added)
      if (other.content == t.content) return error("{}: content '{}' is also id {}", where, shown(t.content), other.id);
    spec.added.push_back(std::move(t));
  }
  return Status();
}

}  // namespace

Result<TokenizerJsonSpec> parse_tokenizer_json(std::string_view text, const std::string& name) {
  if (too_deep(text)) return error("{}: JSON nested deeper than {} levels", name, kMaxDepth);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    ErrorSax sax;
    json::sax_parse(text, &sax);
    return error("{}: malformed JSON: {}", name, sax.message);
  }
  if (!j.is_object()) return error("{}: not a JSON object", name);
  TokenizerJsonSpec spec;
  std::unordered_map<std::string, uint32_t> vocab;
  const auto in = [&](Status s) { return s.with_context(name); };
  if (!j.contains("model")) return error("{}: \"model\" is missing", name);
  DF_TRY(in(parse_model(j["model"], spec, vocab)));
  if (j.contains("truncation") && !j["truncation"].is_null())
    return error("{}: truncation is not supported (must be null)", name);
  if (j.contains("normalizer")) DF_TRY(in(parse_normalizer(j["normalizer"], spec, 0)));
  bool byte_level = false;
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null())
    DF_TRY(in(parse_pre_tokenizer(j["pre_tokenizer"], spec, 0, byte_level)));
  if (!byte_level) return error("{}: pre_tokenizer has no ByteLevel step (only byte-level BPE is supported)", name);
  if (!j.contains("decoder") || type_of(j["decoder"]) != "ByteLevel")
    return error("{}: decoder must be ByteLevel (got {})", name,
                 j.contains("decoder") && !type_of(j["decoder"]).empty() ? "'" + shown(type_of(j["decoder"])) + "'"
                                                                          : std::string("none"));
  if (j.contains("added_tokens")) DF_TRY(in(parse_added(j["added_tokens"], spec)));

  // Added tokens decode to their content; they may also be vocab entries.
  for (const auto& a : spec.added) {
    if (a.id >= spec.bytes.size()) {
      spec.bytes.resize(a.id + 1);
      spec.byte_level.resize(a.id + 1);
    }
    spec.bytes[a.id] = a.content;
  }
  for (uint32_t id = 0; id < spec.bytes.size(); ++id)
    if (spec.bytes[id].empty()) return error("{}: id {} is neither in the vocab nor an added token", name, id);
  // Every byte that valid UTF-8 can hold must have a vocab entry.
  for (int b = 0; b < 256; ++b) {
    if (b == 0xC0 || b == 0xC1 || b >= 0xF5) continue;
    if (!vocab.count(byte_level_encode(std::string(1, char(b)))))
      return error("{}: byte 0x{:02x} has no vocab entry (its byte-level spelling '{}')", name, b,
                   byte_level_encode(std::string(1, char(b))));
  }
  return spec;
}

}  // namespace deltafin::tokenizer
