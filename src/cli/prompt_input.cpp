#include "cli/prompt_input.h"

#include <charconv>
#include <filesystem>
#include <memory>

#include "tokenizer/chat.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::cli {

void add_prompt_options(CLI::App* cmd, PromptInput& in) {
  auto* text = cmd->add_option("--prompt", in.text, "Prompt text (encoded with the checkpoint's tokenizer)");
  auto* ids = cmd->add_option("--prompt-ids", in.ids_csv, "Prompt as comma-separated token ids");
  text->excludes(ids);
  cmd->add_flag("--chat", in.chat, "Render --prompt as one user turn of a chat and stop at end-of-message");
}

Result<std::vector<int32_t>> parse_id_list(const std::string& csv) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i <= csv.size()) {
    size_t j = csv.find(',', i);
    if (j == std::string::npos) j = csv.size();
    std::string_view part(csv.data() + i, j - i);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    int32_t v = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || p != part.data() + part.size() || v < 0)
      return error("--prompt-ids: '{}' is not a non-negative integer", part);
    out.push_back(v);
    i = j + 1;
  }
  return out;
}

namespace {

// A streaming detokeniser over the checkpoint's tokenizer.
std::function<std::string(int32_t)> make_detok(const tokenizer::Tokenizer& tok) {
  auto dec = std::make_shared<tokenizer::StreamDecoder>(tok);
  return [dec](int32_t id) -> std::string {
    if (id < 0) return dec->finish();
    auto text = dec->push(uint32_t(id));
    return text.ok() ? text.value() : std::string("\xEF\xBF\xBD");  // unknown id: U+FFFD
  };
}

std::vector<int32_t> to_i32(const std::vector<uint32_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

}  // namespace

Result<PromptTokens> resolve_prompt(const PromptInput& in, const Model& model) {
  PromptTokens out;
  out.chat = in.chat;
  const auto& cfg = model.config();
  const std::string dir = model.checkpoint().dir();
  const bool has_tokenizer = std::filesystem::exists(std::filesystem::path(dir) / "tiktoken.model") ||
                             std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json");
  std::optional<tokenizer::Tokenizer> tok;
  if (has_tokenizer) {
    auto t = tokenizer::Tokenizer::load_from_checkpoint_dir(dir);
    if (!t.ok()) return t.status();
    if (t.value().vocab_size() > uint32_t(cfg.vocab))
      return error("{}: the tokenizer has {} ids but the model's vocabulary is {}", dir, t.value().vocab_size(),
                   cfg.vocab);
    tok = std::move(t.value());
    out.detok = make_detok(*tok);
    out.tokenizer = std::make_shared<const tokenizer::Tokenizer>(*tok);
  }
  if (!in.ids_csv.empty()) {
    DF_ASSIGN(out.ids, parse_id_list(in.ids_csv));
    for (int32_t id : out.ids)
      if (id >= cfg.vocab) return error("--prompt-ids: id {} is outside the vocabulary (0..{})", id, cfg.vocab - 1);
    if (in.chat) out.stop_ids.push_back(cfg.eos_id);
    return out;
  }
  if (in.text.empty()) return error("give --prompt TEXT or --prompt-ids 1,2,3");
  if (!tok)
    return error("{}: no tiktoken.model or tokenizer.json, so --prompt cannot be encoded; use --prompt-ids", dir);
  if (in.chat) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", in.text}});
    DF_ASSIGN(out.chat_format, tokenizer::ChatFormat::from_checkpoint_dir(dir));
    DF_ASSIGN(auto ids, out.chat_format.encode(*tok, messages, tokenizer::ChatOptions{}));
    DF_ASSIGN(auto stops, out.chat_format.stop_ids(*tok));
    out.ids = to_i32(ids);
    out.stop_ids = to_i32(stops);
  } else {
    // Raw completion: user text never produces special ids; stops at --max-new.
    DF_ASSIGN(auto ids, tok->encode(in.text, /*allow_special=*/false));
    out.ids = to_i32(ids);
  }
  if (out.ids.empty()) return error("--prompt encodes to no tokens");
  return out;
}

}  // namespace deltafin::cli
