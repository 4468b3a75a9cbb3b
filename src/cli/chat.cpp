// `deltafin chat`: an interactive chat at a terminal, or a conversation
// driven line by line through stdin. The conversation is re-rendered with
// the checkpoint's chat format (K3's template, or its own:
// tokenizer/chat_format.h) every turn and the model state of the previous
// turn is reused where the rendering extends it (generate/conversation_state.h), so a
// turn prefills only what is new; the answer is parsed into reasoning and
// text by the server's output filter and shown by cli/chat_display.h.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/chat_display.h"
#include "cli/chat_line_reader.h"
#include "cli/command.h"
#include "cli/open_model.h"
#include "cli/sampling_options.h"
#include "generate/conversation_state.h"
#include "generate/drafter_open.h"
#include "hub/expert_fetcher.h"
#include "model/model.h"
#include "server/chat_output.h"
#include "store/fs_util.h"
#include "store/store_run.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::cli {

namespace {

using ojson = nlohmann::ordered_json;

struct ChatArgs {
  std::string model_dir;
  StoreRunOptions store;
  int max_new = 8192;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  int prefill_chunk = 512;
  bool stats = false;
  std::string draft = "off";
  int draft_max = 7;
  std::string draft_gate = "on";
  SamplingParams sampling;
  bool no_thinking = false;          // render turns with thinking off: the model answers at once
  std::string thinking_effort = "max";
  bool no_thinking_display = false;  // think, but do not show the reasoning
  std::string system;
};

// SIGINT: during an answer the first stops it at the next step (back to the
// prompt), a second exits at once; at the prompt it ends the chat.
volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_answering = 0;
volatile std::sig_atomic_t g_terminal = 0;

void on_sigint(int) {
  if (g_answering && g_stop) {
    if (g_terminal) {
      static const char kEnd[] = "\033[0m\n";
      ssize_t n = ::write(STDOUT_FILENO, kEnd, sizeof kEnd - 1);
      (void)n;
    }
    _exit(130);
  }
  g_stop = 1;
}

// Installs on_sigint without SA_RESTART (a blocked read of the next line
// returns) for its lifetime.
struct SigintGuard {
  struct sigaction old {};
  SigintGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
  }
  ~SigintGuard() { sigaction(SIGINT, &old, nullptr); }
};

const char kHelp[] =
    "Type a message and press Enter. Commands:\n"
    "  /reset       start a new conversation (the model state is dropped)\n"
    "  /save FILE   write the conversation as a chat request (JSON: messages, chat_template_kwargs);\n"
    "               `deltafin render-chat --request FILE` shows what the model saw\n"
    "  /thinking    show the reasoning of the last answer\n"
    "  /set max-new N | temperature T | seed S\n"
    "               change an option for the turns that follow\n"
    "  /help        this text\n"
    "  /exit        leave (so do Ctrl-D and, at the prompt, Ctrl-C)\n"
    "Ctrl-C during an answer stops it; what was written stays in the conversation.\n";

class Chat {
 public:
  Chat(const ChatArgs& a, Model& model, tokenizer::Tokenizer tok, tokenizer::ChatFormat format, Drafter* drafter,
       bool terminal)
      : a_(a), model_(model), tok_(std::move(tok)), format_(std::move(format)), drafter_(drafter), terminal_(terminal),
        state_(model) {
    options_.thinking = !a.no_thinking;
    options_.thinking_effort = a.thinking_effort;
    reset();
  }

  int loop(LineReader& reader) {
    if (terminal_)
      std::printf("%sChatting with %s. /help lists the commands; Ctrl-D quits.%s\n", kDim,
                  model_.checkpoint().dir().c_str(), kReset);
    for (;;) {
      std::fflush(stdout);
      std::optional<std::string> line = reader.read(terminal_ ? ">>> " : "");
      if (!line) break;  // end of input, or Ctrl-C at the prompt
      const size_t first = line->find_first_not_of(" \t");
      if (first == std::string::npos) continue;
      reader.remember(*line);
      if ((*line)[first] == '/') {
        if (!command(line->substr(first))) break;
        continue;
      }
      if (Status s = turn(*line); !s.ok()) std::fprintf(stderr, "error: %s\n", s.message().c_str());
    }
    if (terminal_) std::printf("\n");
    return 0;
  }

 private:
  void reset() {
    messages_ = ojson::array();
    if (!a_.system.empty()) messages_.push_back({{"role", "system"}, {"content", a_.system}});
    state_.clear();
    last_reasoning_.clear();
    turns_ = 0;
  }

  // False: leave the chat.
  bool command(const std::string& line) {
    const size_t sp = line.find_first_of(" \t");
    const std::string name = line.substr(0, sp);
    std::string arg;
    if (const size_t b = line.find_first_not_of(" \t", sp); sp != std::string::npos && b != std::string::npos)
      arg = line.substr(b);
    while (!arg.empty() && (arg.back() == ' ' || arg.back() == '\t')) arg.pop_back();
    if (name == "/exit" || name == "/quit" || name == "/bye") return false;
    if (name == "/help") {
      std::fputs(kHelp, stdout);
    } else if (name == "/reset") {
      reset();
      std::printf("The conversation was reset.\n");
    } else if (name == "/save") {
      if (arg.empty()) {
        std::fprintf(stderr, "error: /save needs a file name\n");
        return true;
      }
      ojson request;
      request["messages"] = messages_;
      request["chat_template_kwargs"] = {{"thinking", options_.thinking},
                                         {"thinking_effort", *options_.thinking_effort}};
      const Status s = write_file_atomic(arg, request.dump(2, ' ', /*ensure_ascii=*/false) + "\n");
      if (!s.ok()) std::fprintf(stderr, "error: /save: %s\n", s.message().c_str());
      else std::printf("Saved %zu messages to %s.\n", messages_.size(), arg.c_str());
    } else if (name == "/set") {
      if (Status s = set_option(arg); !s.ok()) std::fprintf(stderr, "error: /set: %s\n", s.message().c_str());
    } else if (name == "/thinking") {
      if (last_reasoning_.empty()) std::printf("The last answer had no reasoning.\n");
      else std::printf("%s%s%s\n", terminal_ ? kDim : "", last_reasoning_.c_str(), terminal_ ? kReset : "");
    } else {
      std::fprintf(stderr, "error: unknown command %s (/help lists them)\n", name.c_str());
    }
    return true;
  }

  // "max-new N", "temperature T" or "seed S".
  Status set_option(const std::string& arg) {
    const size_t sp = arg.find_first_of(" \t");
    const std::string key = arg.substr(0, sp);
    const std::string value = sp == std::string::npos ? "" : arg.substr(arg.find_first_not_of(" \t", sp));
    char* end = nullptr;
    errno = 0;
    if (key == "max-new") {
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end || errno || v < 1 || v > (1 << 24)) return error("max-new takes a number from 1 to {}", 1 << 24);
      a_.max_new = int(v);
    } else if (key == "temperature") {
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || errno || !(v >= 0 && v <= 2)) return error("temperature takes a number from 0 to 2");
      a_.sampling.temperature = v;
    } else if (key == "seed") {
      const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end || errno || value[0] == '-') return error("seed takes a non-negative integer");
      a_.sampling.seed = uint64_t(v);
    } else {
      return error("'{}' is not an option /set knows (max-new, temperature, seed)", key);
    }
    std::printf("Set %s to %s.\n", key.c_str(), value.c_str());
    return {};
  }

  Status turn(const std::string& text) {
    ojson messages = messages_;
    messages.push_back({{"role", "user"}, {"content", text}});
    DF_ASSIGN(std::vector<uint32_t> rendered, format_.encode(tok_, messages, options_));
    const std::vector<int32_t> ids(rendered.begin(), rendered.end());
    DF_ASSIGN(std::vector<uint32_t> stops, format_.stop_ids(tok_));
    const bool thinking = format_.prompt_in_thinking(tok_, ids, options_.thinking);
    DF_ASSIGN(server::ChatOutput filter,
              server::ChatOutput::create(tok_, format_.family(), /*chat=*/true, thinking));
    ChatPrinter printer(stdout, terminal_, !a_.no_thinking_display);

    GenerateOptions g;
    g.max_new = a_.max_new;
    g.prefill_chunk = a_.prefill_chunk;
    g.stop_ids.assign(stops.begin(), stops.end());
    g.interrupted = [] { return g_stop != 0; };
    TokenPicker picker(a_.sampling);
    g.picker = &picker;
    DraftOptions dopt;
    dopt.policy.draft_max = a_.draft_max;
    if (a_.draft_gate == "off") dopt.policy.economics = false, dopt.policy.backoff_max = 0;

    Status filter_status;
    std::vector<server::Delta> deltas;
    bool ended = false;  // the model closed its message (a stop token)
    auto on_token = [&](int32_t tok, std::span<const float>) {
      if (std::find(g.stop_ids.begin(), g.stop_ids.end(), tok) != g.stop_ids.end()) {
        ended = true;
        return true;
      }
      printer.count_token();
      deltas.clear();
      filter_status = filter.push(uint32_t(tok), deltas);
      for (const auto& d : deltas) printer.push(d);
      return filter_status.ok();
    };
    ConversationTurnStats ts;
    g_answering = 1;
    const Status s = state_.generate(ids, g, drafter_, dopt, on_token, &ts);
    g_answering = 0;
    const bool interrupted = g_stop != 0;
    g_stop = 0;  // consumed: the next SIGINT, at the prompt, leaves
    if (filter_status.ok()) {
      deltas.clear();
      filter_status = filter.finish(deltas);
      for (const auto& d : deltas) printer.push(d);
    }
    printer.finish();
    if (terminal_) std::printf("%s", kReset);
    DF_TRY(s);
    DF_TRY(filter_status);
    ++turns_;
    // What was written (all of it, or up to Ctrl-C / --max-new) joins the conversation.
    messages_ = std::move(messages);
    ojson answer = {{"role", "assistant"}, {"content", printer.content()}};
    if (options_.thinking) answer["reasoning_content"] = printer.reasoning();
    messages_.push_back(std::move(answer));
    last_reasoning_ = printer.reasoning();
    if (interrupted) std::fprintf(stderr, "%s[interrupted: Ctrl-C again or Ctrl-D to leave]%s\n", terminal_ ? kDim : "",
                                  terminal_ ? kReset : "");
    else if (!ended) std::fprintf(stderr, "%s[the answer reached --max-new %d]%s\n", terminal_ ? kDim : "", a_.max_new,
                                  terminal_ ? kReset : "");
    report(ts);
    std::printf("\n");
    return {};
  }

  // The turn's cost: the prompt tokens prefilled (and reused) and the answer's rate.
  void report(const ConversationTurnStats& ts) {
    if (!a_.stats && !terminal_) return;
    const GenerateStats& gs = ts.generate;
    const int64_t decode_tokens = drafter_ ? ts.draft.decode_tokens : std::max<int64_t>(gs.generated_tokens - 1, 0);
    const double rate = gs.decode_seconds > 0 ? double(decode_tokens) / gs.decode_seconds : 0.0;
    std::string line = fmt::format(
        "turn {}: prefilled {} new tokens ({} reused) in {:.3f} s; {} tokens generated, decode {:.1f} tok/s", turns_,
        ts.prefilled_tokens, ts.reused_tokens, gs.prefill_seconds, gs.generated_tokens, rate);
    if (drafter_ && !ts.draft.drafter.empty())
      line += fmt::format("; draft {}: {} of {} proposed accepted", ts.draft.drafter, ts.draft.accepted,
                          ts.draft.proposed);
    if (terminal_ && !a_.stats) std::printf("%s%s%s\n", kDim, line.c_str(), kReset);
    else std::fprintf(stderr, "%s%s%s\n", terminal_ ? kDim : "", line.c_str(), terminal_ ? kReset : "");
  }

  ChatArgs a_;  // a copy: /set changes it
  Model& model_;
  tokenizer::Tokenizer tok_;
  tokenizer::ChatFormat format_;  // K3 or the checkpoint's own template
  Drafter* drafter_;
  bool terminal_;
  tokenizer::ChatOptions options_;
  ConversationState state_;
  ojson messages_;
  std::string last_reasoning_;
  int turns_ = 0;
};

int run_chat(const ChatArgs& a) {
  auto sm_or = open_model_or_store(a.model_dir, a.store, a.threads);
  if (!sm_or.ok()) return fail(sm_or.message());
  StoreModel sm = std::move(sm_or.value());
  Model& model = *sm.model;
  const std::string dir = model.checkpoint().dir();
  auto tok = tokenizer::Tokenizer::load_from_checkpoint_dir(dir);
  if (!tok.ok()) return fail(fmt::format("chat needs the checkpoint's tokenizer: {}", tok.message()));
  if (tok->vocab_size() > uint32_t(model.config().vocab))
    return fail(fmt::format("{}: the tokenizer has {} ids but the model's vocabulary is {}", dir, tok->vocab_size(),
                            model.config().vocab));
  auto format = tokenizer::ChatFormat::from_checkpoint_dir(dir);
  if (!format.ok()) return fail(format.message());
  const std::string source_dir = sm.source ? sm.source->manifest().source_dir : "";
  auto choice = open_drafter(a.draft, model, drafter_candidates(a.model_dir, a.store.store, source_dir), a.threads);
  if (!choice.ok()) return fail(choice.message());
  for (const auto& w : choice->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());

  const bool terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  if (terminal) std::setlocale(LC_CTYPE, "");  // libedit's multibyte input, and character widths
  g_terminal = terminal;
  int rc = 0;
  {
    Chat chat(a, model, std::move(tok).value(), std::move(format).value(), choice->drafter.get(), terminal);
    SigintGuard sigint;
    auto reader = open_line_reader(terminal, &g_stop);
    rc = chat.loop(*reader);
  }
  if (sm.source)
    if (Status hs = save_store_heat(*sm.source, a.store); !hs.ok())
      std::fprintf(stderr, "warning: heat file not updated: %s\n", hs.message().c_str());
  return rc;
}

void setup(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "Chat with a model: at a terminal, or one user turn per line of stdin");
  auto* model_opt = cmd->add_option("--model", a->model_dir, "Checkpoint directory (published layout)");
  model_opt->excludes(add_store_run_options(cmd, a->store));
  a->store.remote = hub::open_expert_fetcher;
  cmd->add_option("--max-new", a->max_new, "Most tokens per answer (reasoning included)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--threads", a->threads, "Compute threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--prefill-chunk", a->prefill_chunk, "Prompt rows per forward block")->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--stats", a->stats,
                "After each answer, print to stderr the prompt tokens prefilled and reused and the decode rate "
                "(at a terminal this line is always shown, dimmed)");
  cmd->add_option("--system", a->system, "A system message that opens the conversation");
  cmd->add_flag("--no-thinking", a->no_thinking, "Render the turns with thinking off: the model answers at once");
  cmd->add_option("--thinking-effort", a->thinking_effort, "The template's thinking effort")
      ->check(CLI::IsMember({"low", "high", "max"}));
  cmd->add_flag("--no-thinking-display", a->no_thinking_display,
                "Do not show the reasoning (the model still thinks; /thinking shows it afterwards)");
  cmd->add_option("--draft", a->draft,
                  "Drafting: off | auto | ngram | DIR, as for run; tokens never change (docs/guide/drafting.md)");
  cmd->add_option("--draft-max", a->draft_max, "Widest draft proposal (tokens)")->check(CLI::Range(1, 16));
  cmd->add_option("--draft-gate", a->draft_gate, "on: drafting switches itself off when it does not pay; off: never")
      ->check(CLI::IsMember({"on", "off"}));
  add_sampling_options(cmd, a->sampling);
  cmd->footer(
      "\nAt a terminal: line editing and history (libedit; ~/.editrc applies), the reasoning folded into one dim "
      "line, a dim line of prefill and decode figures after each answer. Otherwise each line of stdin is one user "
      "turn and the chat ends at EOF.\n"
      "Commands: /reset, /save FILE, /thinking, /set max-new|temperature|seed VALUE, /help, /exit. Ctrl-C stops an answer; Ctrl-C at the prompt or "
      "Ctrl-D leaves.\n\n"
      "Examples:\n"
      "  deltafin chat --model models/demo\n"
      "  printf 'What does urlsplit do?\\nAnd urljoin?\\n' | deltafin chat --model models/demo --stats\n"
      "  deltafin chat --store /mnt/nvme0/k3 --ram-experts-gb auto --draft auto\n");
  cmd->callback([a] { set_exit_code(run_chat(*a)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
