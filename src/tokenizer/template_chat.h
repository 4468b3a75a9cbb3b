// Chat rendering with a checkpoint's own Jinja chat template (src/template/),
// for families other than K3 (Qwen3, ...), encoded so that no message text can
// become a special token.
//
// The prompt text is exactly what transformers' apply_chat_template renders
// (messages, tools, add_generation_prompt, enable_thinking and the special
// tokens of tokenizer_config.json). The encoding differs from
// `tokenizer.encode(text, allow_special=true)` only where a message (or tool)
// string spells a special token: every string the caller gives is rendered a
// second time with each special spelling replaced by a private-use disguise;
// the special spellings left in that rendering are the template's own
// (control segments), the rest, disguises restored, is ordinary text encoded
// with specials disallowed. If restoring the disguises does not give back the
// real rendering (a template whose logic depends on special spellings inside
// message text), the chat is refused rather than encoded unsafely.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "template/checkpoint_template.h"
#include "template/template.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::tokenizer {

class TemplateChat {
 public:
  // `dir`: a checkpoint directory (chat_template.jinja or tokenizer_config.json).
  static Result<TemplateChat> load(const std::string& dir);
  static Result<TemplateChat> from_source(jinja::ChatTemplateSource source);

  // The template's variables for a chat (before the special tokens are added):
  // messages (content parts joined into a string), add_generation_prompt,
  // enable_thinking (options.thinking), tools (when given and non-empty).
  static Result<nlohmann::ordered_json> variables(const nlohmann::ordered_json& messages, const ChatOptions& options);

  // The plain rendering (what transformers renders).
  Result<std::string> render_text(const nlohmann::ordered_json& messages, const ChatOptions& options) const;
  // The rendering as control segments (the template's special-token
  // spellings, one per segment) and ordinary text; chat_text(segments) is
  // render_text's string.
  Result<std::vector<ChatSegment>> render(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                          const ChatOptions& options) const;

  // End-of-turn ids: eos_token (when a special token) and <|im_end|>,
  // <|endoftext|> where the tokenizer has them. Empty is an error.
  Result<std::vector<uint32_t>> stop_ids(const Tokenizer& tok) const;

  const jinja::ChatTemplateSource& source() const { return *source_; }

 private:
  std::shared_ptr<const jinja::Template> template_;
  std::shared_ptr<const jinja::ChatTemplateSource> source_;
};

// Splits text at the tokenizer's special spellings (leftmost, longest first,
// as the encoder matches them): spellings become control segments.
std::vector<ChatSegment> split_at_specials(const Tokenizer& tok, std::string_view text);

}  // namespace deltafin::tokenizer
