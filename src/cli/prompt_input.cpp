#include "cli/prompt_input.h"

#include <charconv>

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

Result<PromptTokens> resolve_prompt(const PromptInput& in, const Model& model) {
  PromptTokens out;
  const auto& cfg = model.config();
  if (!in.ids_csv.empty()) {
    DF_ASSIGN(out.ids, parse_id_list(in.ids_csv));
    for (int32_t id : out.ids)
      if (id >= cfg.vocab) return error("--prompt-ids: id {} is outside the vocabulary (0..{})", id, cfg.vocab - 1);
    if (in.chat) out.stop_ids.push_back(cfg.eos_id);
    return out;
  }
  if (in.text.empty()) return error("give --prompt TEXT or --prompt-ids 1,2,3");
  return error("--prompt needs the tokenizer, which is not built in yet; use --prompt-ids");
}

}  // namespace deltafin::cli
