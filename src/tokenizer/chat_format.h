// Which chat format a checkpoint uses, and rendering/encoding through it:
// K3's hand-ported template (tokenizer/chat.h) for K3 checkpoints, or the
// checkpoint's own Jinja chat template (tokenizer/template_chat.h) for other
// families (Qwen3, ...). run --chat, `deltafin chat`, `serve` and
// `render-chat --tokenizer` all pick the format here.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/chat.h"
#include "tokenizer/template_chat.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::tokenizer {

enum class ChatFamily : uint8_t {
  K3,        // K3's template and markers (<|open|>..., <|end_of_msg|>)
  Template,  // the checkpoint's chat_template; output in the <think>/<tool_call> convention (Qwen3)
};

class ChatFormat {
 public:
  ChatFormat() = default;  // K3
  explicit ChatFormat(TemplateChat t) : template_(std::make_shared<const TemplateChat>(std::move(t))) {}

  // K3 unless the directory's config.json names a model_type that is not a
  // Kimi one ("kimi_k3", "kimi_linear", ...) and the directory has a chat
  // template (chat_template.jinja or tokenizer_config.json's chat_template).
  // Errors: a template that is present but does not parse.
  static Result<ChatFormat> from_checkpoint_dir(const std::string& dir);

  ChatFamily family() const { return template_ ? ChatFamily::Template : ChatFamily::K3; }
  const char* name() const { return template_ ? "checkpoint template" : "K3"; }

  Result<std::vector<ChatSegment>> render(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                          const ChatOptions& options) const;
  Result<std::vector<uint32_t>> encode(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                       const ChatOptions& options) const;
  Result<std::vector<uint32_t>> stop_ids(const Tokenizer& tok) const;

  // Template family: whether the prompt leaves the model inside a <think>
  // block (after the last special token, a <think> not closed by </think>).
  // K3: `thinking` as rendered (the template opens the think channel).
  bool prompt_in_thinking(const Tokenizer& tok, std::span<const int32_t> prompt, bool thinking) const;

 private:
  std::shared_ptr<const TemplateChat> template_;
};

}  // namespace deltafin::tokenizer
