#include "template/checkpoint_template.h"

#include <filesystem>

#include "core/files.h"

namespace deltafin::jinja {

namespace {

Result<ChatTemplateSource> from_config(const std::string& path, const std::string* jinja_text) {
  DF_ASSIGN(std::string body, read_file(path));
  const auto cfg = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) return error("{} is not a JSON object", path);
  ChatTemplateSource out;
  // transformers' special_tokens_map: these names, as strings or {"content": ...}.
  for (const char* name :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!cfg.contains(name)) continue;
    const auto& v = cfg[name];
    if (v.is_string()) out.special_tokens[name] = v;
    if (v.is_object() && v.contains("content") && v["content"].is_string()) out.special_tokens[name] = v["content"];
  }
  if (cfg.contains("additional_special_tokens") && cfg["additional_special_tokens"].is_array())
    out.special_tokens["additional_special_tokens"] = cfg["additional_special_tokens"];
  if (jinja_text) {
    out.text = *jinja_text;
    return out;
  }
  if (!cfg.contains("chat_template")) return error("{} has no chat_template", path);
  const auto& t = cfg["chat_template"];
  if (t.is_string()) {
    out.text = t.get<std::string>();
    return out;
  }
  if (t.is_array()) {
    for (const auto& e : t)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string()) {
        out.text = e["template"].get<std::string>();
        return out;
      }
    return error("{}: chat_template is a list without a \"default\" template", path);
  }
  return error("{}: chat_template is neither a string nor a list of named templates", path);
}

}  // namespace

Result<ChatTemplateSource> load_chat_template(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    const std::string jinja = path + "/chat_template.jinja";
    const std::string config = path + "/tokenizer_config.json";
    if (std::filesystem::exists(jinja, ec)) {
      DF_ASSIGN(std::string text, read_file(jinja));
      if (std::filesystem::exists(config, ec)) return from_config(config, &text);
      return ChatTemplateSource{std::move(text), nlohmann::ordered_json::object()};
    }
    return from_config(config, nullptr);
  }
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return from_config(path, nullptr);
  DF_ASSIGN(std::string text, read_file(path));
  return ChatTemplateSource{std::move(text), nlohmann::ordered_json::object()};
}

nlohmann::ordered_json with_special_tokens(nlohmann::ordered_json vars, const ChatTemplateSource& source) {
  for (const auto& [k, v] : source.special_tokens.items())
    if (!vars.contains(k)) vars[k] = v;
  return vars;
}

}  // namespace deltafin::jinja
