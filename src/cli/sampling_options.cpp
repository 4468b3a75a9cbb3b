#include "cli/sampling_options.h"

namespace deltafin::cli {

void add_sampling_options(CLI::App* cmd, SamplingParams& sp) {
  cmd->add_option("--temperature", sp.temperature, "0: greedy (default); above: seeded sampling (docs/guide/sampling.md)")
      ->check(CLI::Range(0.0, 2.0));
  cmd->add_option("--top-p", sp.top_p, "Nucleus: keep the smallest top set with this share of the mass")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", sp.top_k, "Keep the k likeliest tokens (0: all)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--min-p", sp.min_p, "Keep tokens at least this fraction as likely as the best")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--presence-penalty", sp.presence_penalty, "Subtract from the logit of every generated token")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", sp.frequency_penalty, "Subtract this x how often a token was generated")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--seed", sp.seed, "Sampling seed: the same seed gives the same tokens, with or without drafting")
      ->capture_default_str();
}

}  // namespace deltafin::cli
