// The output parser for a checkpoint's chat family (tokenizer/chat_format.h):
// K3's OutputFilter (server/output_filter.h) or the <think>/<tool_call>
// parser of template families (server/qwen3_output.h), behind one interface.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "server/output_filter.h"
#include "server/qwen3_output.h"
#include "tokenizer/chat_format.h"

namespace deltafin::server {

class ChatOutput {
 public:
  // chat=false: raw text (K3's filter, any family). `thinking`: K3, the
  // template's thinking switch; template families, whether the prompt left
  // the model inside <think> (ChatFormat::prompt_in_thinking).
  static Result<ChatOutput> create(const tokenizer::Tokenizer& tok, tokenizer::ChatFamily family, bool chat,
                                   bool thinking, std::string tool_id_prefix = "");
  Status push(uint32_t id, std::vector<Delta>& out);
  Status finish(std::vector<Delta>& out);
  size_t tool_calls() const;

 private:
  explicit ChatOutput(std::variant<OutputFilter, Qwen3OutputFilter> f) : f_(std::move(f)) {}
  std::variant<OutputFilter, Qwen3OutputFilter> f_;
};

}  // namespace deltafin::server
