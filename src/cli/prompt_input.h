// The prompt options shared by run, bench and the server's CLI: text (through
// the checkpoint's tokenizer), chat rendering, or raw token ids.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "model/model.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::cli {

struct PromptInput {
  std::string text;
  std::string ids_csv;
  bool chat = false;
};

struct PromptTokens {
  std::vector<int32_t> ids;
  std::vector<int32_t> stop_ids;  // chat: end-of-message; raw completion: none
  // Streaming detokeniser: text for one token (incomplete UTF-8 held back);
  // called with -1 at the end to flush. Empty when no tokenizer is available.
  std::function<std::string(int32_t)> detok;
  // The checkpoint's tokenizer (null without one): `run --chat` parses the
  // answer with it into reasoning and text (cli/chat_display.h).
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  bool chat = false;  // rendered as a chat turn (--chat)
  // --chat with a tokenizer: the checkpoint's chat format (K3 or its own template).
  tokenizer::ChatFormat chat_format;
};

void add_prompt_options(CLI::App* cmd, PromptInput& in);
Result<PromptTokens> resolve_prompt(const PromptInput& in, const Model& model);
Result<std::vector<int32_t>> parse_id_list(const std::string& csv);

}  // namespace deltafin::cli
