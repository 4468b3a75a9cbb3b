// `deltafin render-chat`: shows exactly what the model is fed for a chat —
// the rendered prompt, its control/ordinary segments (spec §5.4) and the
// token ids — from a messages array or a whole chat-completions request.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/files.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_request.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::cli {

namespace {

using ojson = nlohmann::ordered_json;

struct RenderChatArgs {
  std::string tokenizer, messages, request;
  bool json = false;
};

Result<tokenizer::ChatRequest> read_input(const RenderChatArgs& a) {
  if (a.messages.empty() == a.request.empty()) return error("render-chat: give exactly one of --messages or --request");
  if (!a.messages.empty()) {
    ojson messages = ojson::parse(a.messages, nullptr, /*allow_exceptions=*/false);
    if (messages.is_discarded()) return error("render-chat: --messages is not valid JSON");
    if (!messages.is_array()) return error("render-chat: --messages must be a JSON array of messages");
    return tokenizer::ChatRequest{std::move(messages), {}};
  }
  std::string body;
  if (a.request == "-") {
    body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    DF_ASSIGN(body, read_file(a.request));
  }
  const ojson root = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return error("render-chat: {} is not valid JSON", a.request);
  auto r = tokenizer::chat_request_from_json(root);
  if (!r.ok()) return r.status().with_context(fmt::format("render-chat: {}", a.request));
  return r;
}

int run(const RenderChatArgs& a) {
  auto input = read_input(a);
  if (!input.ok()) return fail(input.message());
  auto tok = tokenizer::Tokenizer::load_from_checkpoint_dir(a.tokenizer);
  if (!tok.ok()) return fail(tok.message());
  auto segments = tokenizer::render_chat(input->messages, input->options);
  if (!segments.ok()) return fail(segments.message());
  // Encoding also rejects invalid UTF-8, so the output below is valid text.
  auto ids = tokenizer::encode_segments(*tok, *segments);
  if (!ids.ok()) return fail(ids.message());
  const std::string text = tokenizer::chat_text(*segments);
  if (!a.json) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  ojson out;
  out["text"] = text;
  out["segments"] = ojson::array();
  for (const auto& s : *segments) out["segments"].push_back({{"text", s.text}, {"control", s.control}});
  out["ids"] = *ids;
  const std::string dumped = out.dump(-1, ' ', /*ensure_ascii=*/false) + "\n";
  std::fwrite(dumped.data(), 1, dumped.size(), stdout);
  return 0;
}

void setup(CLI::App& root) {
  auto* cmd = root.add_subcommand("render-chat", "Render a chat with K3's template: the prompt text, segments and ids");
  static RenderChatArgs args;
  cmd->add_option("--tokenizer", args.tokenizer, "checkpoint directory with tiktoken.model and tokenizer_config.json")
      ->required();
  cmd->add_option("--messages", args.messages, "a JSON array of chat messages (default template options)");
  cmd->add_option("--request", args.request,
                  "a chat-completions request body (JSON file, - for stdin): messages, tools, tool_choice, "
                  "response_format, reasoning_effort, chat_template_kwargs {thinking, thinking_effort}");
  cmd->add_flag("--json", args.json, "print {\"text\", \"segments\": [{\"text\", \"control\"}], \"ids\"}");
  cmd->callback([] { set_exit_code(run(args)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
