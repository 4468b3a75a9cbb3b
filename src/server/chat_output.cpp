#include "server/chat_output.h"

namespace deltafin::server {

Result<ChatOutput> ChatOutput::create(const tokenizer::Tokenizer& tok, tokenizer::ChatFamily family, bool chat,
                                      bool thinking, std::string tool_id_prefix) {
  if (chat && family == tokenizer::ChatFamily::Template)
    return ChatOutput(Qwen3OutputFilter(tok, thinking, std::move(tool_id_prefix)));
  DF_ASSIGN(OutputFilter f, OutputFilter::create(tok, chat, thinking, std::move(tool_id_prefix)));
  return ChatOutput(std::move(f));
}

Status ChatOutput::push(uint32_t id, std::vector<Delta>& out) {
  return std::visit([&](auto& f) { return f.push(id, out); }, f_);
}

Status ChatOutput::finish(std::vector<Delta>& out) {
  return std::visit([&](auto& f) { return f.finish(out); }, f_);
}

size_t ChatOutput::tool_calls() const {
  return std::visit([](const auto& f) { return f.tool_calls(); }, f_);
}

}  // namespace deltafin::server
