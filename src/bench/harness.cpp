#include "bench/harness.h"

#include <algorithm>

#include <fmt/format.h>

namespace deltafin::bench {

Result<std::vector<std::string>> split_flags(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        cur += text[++i];
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c, in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      cur += text[++i], in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(cur);
      cur.clear(), in_word = false;
    } else {
      cur += c, in_word = true;
    }
  }
  if (quote) return error("flags '{}': unterminated {} quote", text, quote);
  if (in_word) out.push_back(cur);
  return out;
}

Result<Arm> parse_arm(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) return error("--arm '{}': expected NAME=FLAGS", spec);
  Arm a;
  a.name = spec.substr(0, eq);
  for (char c : a.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return error("--arm '{}': the name may hold letters, digits, '-', '_' and '.' only", spec);
  DF_ASSIGN(a.flags, split_flags(spec.substr(eq + 1)));
  return a;
}

std::vector<int> balanced_order(int arms, int reps) {
  std::vector<int> out;
  for (int r = 0; r < reps; ++r)
    for (int i = 0; i < arms; ++i) out.push_back(r % 2 == 0 ? i : arms - 1 - i);
  return out;
}

OracleVerdict check_oracle(const std::vector<int32_t>& expected, const std::vector<int32_t>& got) {
  OracleVerdict v;
  const size_t n = std::min(expected.size(), got.size());
  while (v.first_difference < n && expected[v.first_difference] == got[v.first_difference]) ++v.first_difference;
  v.match = v.first_difference == n && expected.size() == got.size();
  return v;
}

Spread spread(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front(), s.max = v.back();
  return s;
}

double Limits::disk_mb_s() const {
  double before = 0, after = 0;
  for (const auto& p : disk_before) before += p.mb_s;
  for (const auto& p : disk_after) after += p.mb_s;
  if (disk_after.empty()) return before;
  if (disk_before.empty()) return after;
  return 0.5 * (before + after);
}

ArmSummary summarize_arm(const std::string& name, const std::vector<RunRecord>& runs, const Limits& limits) {
  ArmSummary a;
  a.name = name;
  a.runs = int(runs.size());
  std::vector<double> ttft, prefill, decode, step, read_per_tok, amp, wait, readt, per_pass;
  a.cold = !runs.empty();
  for (const auto& r : runs) {
    ttft.push_back(r.ttft_s);
    if (r.prefill_s > 0) prefill.push_back(double(r.prompt_tokens) / r.prefill_s);
    if (!r.step_s.empty()) {
      decode.push_back(r.decode_tokens_per_s());
      step.push_back(1.0 / r.decode_tokens_per_s());
      read_per_tok.push_back(r.decode_read_bytes_per_token());
      wait.push_back(r.decode_expert_wait_s / double(r.step_s.size()));
      readt.push_back(r.decode_read_s / double(r.step_s.size()));
    }
    amp.push_back(r.prefill_read_amplification());
    if (r.target_passes > 0) per_pass.push_back(r.tokens_per_pass());
    a.cold = a.cold && r.cold;
    if (a.io_mode.find(r.io_mode) == std::string::npos) a.io_mode += (a.io_mode.empty() ? "" : " / ") + r.io_mode;
  }
  a.ttft_s = spread(ttft), a.prefill_tok_s = spread(prefill), a.decode_tok_s = spread(decode);
  a.decode_read_bytes_per_token = spread(read_per_tok).median;
  a.prefill_read_amplification = spread(amp).median;
  a.read_wait_per_token_s = spread(wait).median;
  a.read_time_per_token_s = spread(readt).median;
  a.tokens_per_pass = spread(per_pass).median;
  // A cold store run reads every expert of every token from the drives, so
  // what it measured is the cold cost; otherwise charge the theoretical one.
  a.cold_bytes_per_token = a.cold && a.decode_read_bytes_per_token > 0 ? a.decode_read_bytes_per_token
                           : runs.empty()                              ? 0.0
                                                                       : double(runs[0].cold_bytes_per_token);
  const double disk = limits.disk_mb_s() * 1e6, t = spread(step).median;
  if (disk > 0 && t > 0) a.roofline_session = (a.cold_bytes_per_token / disk) / t;
  a.roofline = a.roofline_session;
  std::vector<double> per_run, probes, engine, engine_ratio;
  for (const auto& r : runs) {
    if (r.engine_mb_s > 0) engine.push_back(r.engine_mb_s);
    if (r.disk_probe_mb_s > 0 && r.engine_mb_s > 0) engine_ratio.push_back(r.engine_mb_s / r.disk_probe_mb_s);
    if (r.disk_probe_mb_s > 0 && r.decode_seconds_per_token() > 0) {
      per_run.push_back((a.cold_bytes_per_token / (r.disk_probe_mb_s * 1e6)) / r.decode_seconds_per_token());
      probes.push_back(r.disk_probe_mb_s);
    }
  }
  a.engine_mb_s = spread(engine).median;
  a.engine_vs_probe = spread(engine_ratio).median;
  if (!runs.empty() && per_run.size() == runs.size()) {
    a.roofline = spread(per_run).median;
    a.run_probe_mb_s = spread(probes).median;
  }
  return a;
}

std::string format_summary(const std::vector<ArmSummary>& arms, const Limits& limits) {
  std::string s;
  s += fmt::format("memory bandwidth probe: {:.1f} GB/s\n", limits.membw_gb_s);
  for (size_t d = 0; d < limits.disk_before.size(); ++d) {
    const auto& b = limits.disk_before[d];
    s += fmt::format("disk probe, drive {} ({}): {:.0f} MB/s before", d, b.root, b.mb_s);
    if (d < limits.disk_after.size()) s += fmt::format(", {:.0f} MB/s after", limits.disk_after[d].mb_s);
    s += fmt::format(" ({})\n", b.mode);
  }
  s += fmt::format("disk rate of the session (mean of before and after): {:.0f} MB/s\n", limits.disk_mb_s());
  for (const auto& a : arms)
    if (a.run_probe_mb_s > 0)
      s += fmt::format("arm {}: probe after each run, median {:.0f} MB/s; roofline against it {:.3f} (against the session's "
                       "rate {:.3f}); read engine {:.0f} MB/s while busy, {:.0f}% of the probe after its run (median)\n",
                       a.name, a.run_probe_mb_s, a.roofline, a.roofline_session, a.engine_mb_s, 100 * a.engine_vs_probe);
  s += "\n";
  s += fmt::format("{:<14} {:>5} {:<6} {:>9} {:>11} {:>28} {:>8} {:>9} {:>11} {:>9} {:>9}  {}\n", "arm", "runs",
                   "cache", "TTFT s", "prefill t/s", "decode tok/s med [min, max]", "tok/pass", "MB/token",
                   "read ms/tok", "read amp", "roofline", "oracle");
  for (const auto& a : arms) {
    s += fmt::format("{:<14} {:>5} {:<6} {:>9.3f} {:>11.2f} {:>28} {:>8.2f} {:>9.1f} {:>11.2f} {:>9.3f} {:>9.3f}  {}\n",
                     a.name, a.runs, a.cold ? "cold" : "warm", a.ttft_s.median, a.prefill_tok_s.median,
                     fmt::format("{:.3f} [{:.3f}, {:.3f}]", a.decode_tok_s.median, a.decode_tok_s.min, a.decode_tok_s.max),
                     a.tokens_per_pass, a.decode_read_bytes_per_token / 1e6, a.read_time_per_token_s * 1e3, a.prefill_read_amplification,
                     a.roofline,
                     a.rejected ? "REJECTED: " + a.rejection : "ok");
  }
  return s;
}

}  // namespace deltafin::bench
