#include "generate/greedy.h"

#include <algorithm>
#include <chrono>

namespace deltafin {

int32_t argmax_lowest(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;  // strict: ties keep the lower id
  return int32_t(best);
}

Status generate(Model& model, Session& session, std::span<const int32_t> prompt, const GenerateOptions& opt,
                const TokenCallback& on_token, GenerateStats* stats) {
  using Clock = std::chrono::steady_clock;
  if (prompt.empty()) return error("the prompt has no tokens");
  if (opt.prefill_chunk < 1) return error("prefill chunk must be at least 1");
  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  CancelScope cancel(model, opt.cancel);
  std::vector<float> logits;
  auto t0 = Clock::now();
  for (size_t i = 0; i < prompt.size(); i += size_t(opt.prefill_chunk)) {
    if (opt.interrupted && opt.interrupted()) {
      st.prefill_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      return {};
    }
    const size_t n = std::min(prompt.size() - i, size_t(opt.prefill_chunk));
    const bool last = i + n == prompt.size();
    DF_TRY(model.forward(prompt.subspan(i, n), session, last ? Logits::LastRow : Logits::None, &logits,
                         &st.forward));
    st.prompt_tokens += int64_t(n);
  }
  st.prefill_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  if (opt.max_new <= 0) return {};

  t0 = Clock::now();
  for (int step = 0;; ++step) {
    const int32_t tok = decide_token(opt, logits, session.length);
    if (opt.picker) opt.picker->accept(tok);
    st.generated_tokens++;
    const bool stop = std::find(opt.stop_ids.begin(), opt.stop_ids.end(), tok) != opt.stop_ids.end();
    if (!on_token(tok, logits) || stop || step + 1 >= opt.max_new) break;
    if (opt.interrupted && opt.interrupted()) break;
    // The newest token is pending: run it to decide the next one.
    DF_TRY(model.forward(std::span<const int32_t>(&tok, 1), session, Logits::LastRow, &logits, &st.forward));
  }
  st.decode_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  return {};
}

}  // namespace deltafin
