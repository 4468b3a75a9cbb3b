#include "tokenizer/chat_format.h"

#include <filesystem>

#include "core/files.h"

namespace deltafin::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;

// config.json's model_type ("" when absent or unreadable: K3 is the default).
std::string model_type(const std::string& dir) {
  auto body = read_file((std::filesystem::path(dir) / "config.json").string());
  if (!body.ok()) return "";
  const ojson cfg = ojson::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!cfg.is_object() || !cfg.contains("model_type") || !cfg["model_type"].is_string()) return "";
  return cfg["model_type"].get<std::string>();
}

bool has_template(const std::string& dir) {
  std::error_code ec;
  const auto p = std::filesystem::path(dir);
  if (std::filesystem::exists(p / "chat_template.jinja", ec)) return true;
  auto body = read_file((p / "tokenizer_config.json").string());
  if (!body.ok()) return false;
  const ojson cfg = ojson::parse(*body, nullptr, /*allow_exceptions=*/false);
  return cfg.is_object() && cfg.contains("chat_template") && !cfg["chat_template"].is_null();
}

// The id of an added token spelled exactly `s` (one id), or -1.
int64_t single_id(const Tokenizer& tok, std::string_view s) {
  auto ids = tok.encode(s, /*allow_special=*/false);
  return ids.ok() && ids->size() == 1 ? int64_t((*ids)[0]) : -1;
}

}  // namespace

Result<ChatFormat> ChatFormat::from_checkpoint_dir(const std::string& dir) {
  const std::string type = model_type(dir);
  if (type.empty() || type.rfind("kimi", 0) == 0 || !has_template(dir)) return ChatFormat();
  DF_ASSIGN(TemplateChat t, TemplateChat::load(dir));
  return ChatFormat(std::move(t));
}

Result<std::vector<ChatSegment>> ChatFormat::render(const Tokenizer& tok, const ojson& messages,
                                                    const ChatOptions& options) const {
  if (template_) return template_->render(tok, messages, options);
  return render_chat(messages, options);
}

Result<std::vector<uint32_t>> ChatFormat::encode(const Tokenizer& tok, const ojson& messages,
                                                 const ChatOptions& options) const {
  if (!template_) return encode_chat(tok, messages, options);
  DF_ASSIGN(auto segments, template_->render(tok, messages, options));
  return encode_segments(tok, segments, true);
}

Result<std::vector<uint32_t>> ChatFormat::stop_ids(const Tokenizer& tok) const {
  if (template_) return template_->stop_ids(tok);
  return chat_stop_ids(tok);
}

bool ChatFormat::prompt_in_thinking(const Tokenizer& tok, std::span<const int32_t> prompt, bool thinking) const {
  if (!template_) return thinking;
  const int64_t open = single_id(tok, "<think>"), close = single_id(tok, "</think>");
  if (open < 0) return false;
  for (size_t i = prompt.size(); i-- > 0;) {
    const int32_t id = prompt[i];
    if (id == open) return true;
    if (id == close || (id >= 0 && tok.is_special(uint32_t(id)))) return false;
  }
  return false;
}

}  // namespace deltafin::tokenizer
