// The server's model side: prompt encoding, greedy generation through the
// output filter, and conversation state reuse. One generation at a time: only
// the server's generation thread calls generate(), publish() and discard();
// encode() is const and may run on another thread meanwhile.
//
// Reuse: after a chat response has been delivered, publish() keeps up to two
// boundaries, each a Session snapshot plus the token tape it stands for: the
// prompt (all committed), and prompt + answer (the last emitted token still
// pending, as generate() leaves it). A later chat prompt that strictly extends
// a tape restores that snapshot and prefills only the rest; any other request
// drops them. No common-prefix rollback: KDA state is recurrent.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "generate/drafter.h"
#include "generate/speculative.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/output_filter.h"
#include "tokenizer/chat_format.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::server {

struct EngineOptions {
  int prefill_chunk = 512;
  int max_context = 32768;  // prompt + max_tokens
  bool state_reuse = true;
  DraftPolicyOptions draft;  // used when a drafter is set (set_drafter)
};

// One generated token's log probability (request `logprobs`), from the
// target's fp32 logits (generate/logprobs.h). Stop tokens get none.
struct TokenAlternative {
  std::string text;  // the token's bytes, specials spelled (may be part of a UTF-8 character)
  double logprob = 0;
};
struct TokenLogprob {
  std::string text;
  double logprob = 0;
  std::vector<TokenAlternative> top;  // the request's top_logprobs likeliest, descending
  int64_t text_offset = 0;            // bytes of the entries before it (completions' text_offset)
};

struct GenerationOutcome {
  std::vector<Delta> deltas;
  std::vector<TokenLogprob> logprobs;  // when the request asked for them: one per generated non-stop token
  std::vector<int32_t> tokens;  // every generated id, the stop token included
  std::string stop_string;      // the request's stop string that ended the output, if one did
  std::string finish_reason;    // "stop" | "length"
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t prefill_tokens = 0, cached_tokens = 0;  // prompt_tokens = prefill + cached
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t target_passes = 0;                 // decode passes of the target (drafting: fewer than tokens)
  uint64_t expert_bytes = 0;                 // routed expert bytes the model used (union per layer per block)
  double expert_wait_seconds = 0;            // compute idle, waiting for expert reads
  int64_t draft_proposed = 0, draft_accepted = 0;
  bool cancelled = false;       // the sink or the cancel flag asked to stop (client gone, shutdown)
};

// Called once prefill is planned (before any model work) with its token counts.
using StartCallback = std::function<void(int64_t prefill_tokens, int64_t cached_tokens)>;
// Receives each step's new deltas (possibly none); false cancels generation.
// `logprobs`: the entries of the tokens decided since the last call (empty
// unless the request asked for them).
using DeltaSink = std::function<bool(const std::vector<Delta>& deltas, std::span<const TokenLogprob> logprobs)>;

class Engine {
 public:
  Engine(std::unique_ptr<Model> model, tokenizer::Tokenizer tok, EngineOptions opt);
  // Loads the checkpoint's tokenizer (checked to fit the model's vocabulary)
  // and its chat format (tokenizer/chat_format.h: K3, or its own template).
  static Result<std::unique_ptr<Engine>> create(std::unique_ptr<Model> model, const std::string& tokenizer_dir,
                                                EngineOptions opt);

  // Prompt ids for a request, or a 400 (bad text, over the context bound).
  // Thread-safe (const); a prompt whose byte count alone proves it over the
  // context bound is refused before it is tokenised.
  std::variant<std::vector<int32_t>, ApiError> encode(const GenRequest& req) const;

  // `cancel` (optional), set from another thread, stops the generation before
  // the next layer of the block in flight, prefill included (cancelled = true).
  // `choice` (n > 1): sampling uses seed + choice.
  Result<GenerationOutcome> generate(const GenRequest& req, const std::vector<int32_t>& ids,
                                     const StartCallback& on_start, const DeltaSink& sink,
                                     const std::atomic<bool>* cancel = nullptr, int choice = 0);
  // Drafting for every request (null: off). Drafts never change a token
  // (docs/guide/drafting.md); the policy switches itself off per request when it
  // does not pay.
  void set_drafter(std::unique_ptr<Drafter> drafter) { drafter_ = std::move(drafter); }
  const Drafter* drafter() const { return drafter_.get(); }

  // The last generate()'s response reached the client: keep its boundaries.
  void publish();
  // Drop every retained boundary.
  void discard();
  size_t retained_boundaries() const { return slot_.size(); }

  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  // How chats are rendered and parsed (K3 unless set; create() reads the checkpoint's).
  void set_chat_format(tokenizer::ChatFormat format) { format_ = std::move(format); }
  const tokenizer::ChatFormat& chat_format() const { return format_; }
  Model& model() { return *model_; }
  const EngineOptions& options() const { return opt_; }
  size_t max_token_bytes() const { return max_token_bytes_; }  // the longest ordinary token, in bytes

 private:
  struct Boundary {
    std::vector<int32_t> tape;
    Session session;  // commits tape[0, session.length)
  };
  // Appends the entry of `tok` (its bytes, log p, the `top` likeliest) to `out`.
  Status add_logprob(std::vector<TokenLogprob>& out, std::span<const float> logits, int32_t tok, int top,
                     int64_t& offset) const;

  std::unique_ptr<Model> model_;
  std::unique_ptr<Drafter> drafter_;
  tokenizer::Tokenizer tok_;
  tokenizer::ChatFormat format_;
  EngineOptions opt_;
  size_t max_token_bytes_ = 1;     // the longest ordinary token: bytes / this <= token count
  uint64_t generations_ = 0;       // tool-call ids name the generation
  std::vector<Boundary> slot_;     // published, usable by the next request
  std::vector<Boundary> pending_;  // from the last generate(), awaiting publish()
};

}  // namespace deltafin::server
