// `deltafin render-chat`: shows exactly what the model is fed for a chat —
// the rendered prompt, its control/ordinary segments (docs/design/tokenizer.md) and the
// token ids — from a messages array or a whole chat-completions request.
#include <cstdio>
#include <ctime>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/files.h"
#include "template/checkpoint_template.h"
#include "template/template.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/chat_request.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::cli {

namespace {

using ojson = nlohmann::ordered_json;

struct RenderChatArgs {
  std::string tokenizer, messages, request;
  std::string template_path, vars;  // --template: render that Jinja template (src/template/)
  bool json = false;
  bool dictsort_case_sensitive = false;  // --template: K3's reference sorts keys case-sensitively
};

// --template: the template rendered by src/template/ with --vars (all the
// template's variables) or --messages (with add_generation_prompt), plus the
// special tokens of the tokenizer_config.json it came from; prints the text.
int run_template(const RenderChatArgs& a) {
  if (a.vars.empty() == a.messages.empty()) return fail("render-chat --template: give exactly one of --vars or --messages");
  auto source = jinja::load_chat_template(a.template_path);
  if (!source.ok()) return fail(source.message());
  ojson vars;
  if (!a.vars.empty()) {
    std::string body;
    if (a.vars == "-") {
      body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      auto file = read_file(a.vars);
      if (!file.ok()) return fail(file.message());
      body = std::move(*file);
    }
    vars = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
    if (vars.is_discarded() || !vars.is_object()) return fail("render-chat: --vars must be a JSON object");
  } else {
    ojson messages = ojson::parse(a.messages, nullptr, /*allow_exceptions=*/false);
    if (messages.is_discarded() || !messages.is_array()) return fail("render-chat: --messages must be a JSON array");
    vars = {{"messages", std::move(messages)}, {"add_generation_prompt", true}};
  }
  auto tmpl = jinja::Template::parse(source->text);
  if (!tmpl.ok()) return fail(tmpl.message());
  jinja::RenderOptions options;
  options.now = static_cast<int64_t>(std::time(nullptr));
  options.dictsort_case_sensitive = a.dictsort_case_sensitive;
  auto text = tmpl->render(jinja::with_special_tokens(std::move(vars), *source), options);
  if (!text.ok()) return fail(text.message());
  if (a.json) {
    const std::string dumped = ojson{{"text", *text}}.dump(-1, ' ', /*ensure_ascii=*/false) + "\n";
    std::fwrite(dumped.data(), 1, dumped.size(), stdout);
  } else {
    std::fwrite(text->data(), 1, text->size(), stdout);
  }
  return 0;
}

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
  if (!a.template_path.empty()) return run_template(a);
  if (a.tokenizer.empty()) return fail("render-chat: --tokenizer is required (or --template)");
  auto input = read_input(a);
  if (!input.ok()) return fail(input.message());
  auto tok = tokenizer::Tokenizer::load_from_checkpoint_dir(a.tokenizer);
  if (!tok.ok()) return fail(tok.message());
  // The checkpoint's chat format: K3's template, or its own (tokenizer/chat_format.h).
  auto format = tokenizer::ChatFormat::from_checkpoint_dir(a.tokenizer);
  if (!format.ok()) return fail(format.message());
  auto segments = format->render(*tok, input->messages, input->options);
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
  auto* cmd = root.add_subcommand("render-chat",
                                  "Render a chat with the checkpoint's template (K3's, or its own): the prompt "
                                  "text, segments and ids");
  set_example(cmd, "deltafin render-chat --tokenizer models/demo --messages '[{\"role\": \"user\", \"content\": \"Hi\"}]'");
  static RenderChatArgs args;
  cmd->add_option("--tokenizer", args.tokenizer,
                  "checkpoint directory with its tokenizer; rendered with K3's template, or with the checkpoint's "
                  "own chat_template when config.json's model_type is not a Kimi one");
  cmd->add_option("--template", args.template_path,
                  "render this chat template instead: a .jinja file, a tokenizer_config.json (its chat_template) "
                  "or a checkpoint directory; prints the text");
  cmd->add_option("--vars", args.vars, "with --template: a JSON object file (- for stdin) of all template variables");
  cmd->add_flag("--dictsort-case-sensitive", args.dictsort_case_sensitive,
                "with --template: dictsort compares keys case-sensitively (K3's reference) instead of as Jinja does");
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
