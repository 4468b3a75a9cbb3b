// Picks the drafter a run asks for: `--draft auto|off|ngram|DIR`.
//   off    no drafter (plain greedy decoding)
//   ngram  prompt lookup (ngram_drafter.h)
//   DIR    a checkpoint: DSpark layout (config.json model_type "k3_dspark")
//          or a same-vocabulary K3-layout model (model_drafter.h)
//   auto   a drafter installed beside the target, else ngram: for --model M,
//          the directory M-draft (models/demo finds models/demo-draft); for
//          --store S, S/draft, else the store's source checkpoint + "-draft"
// A drafter that auto finds but cannot open is skipped with a warning (it is
// an optional part); one named explicitly must open. A checkpoint drafter is
// followed by ngram: when the policy switches it off for a request, n-gram
// takes over (DrafterChain).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "generate/drafter.h"
#include "model/model.h"

namespace deltafin {

struct DrafterChoice {
  std::unique_ptr<Drafter> drafter;  // null for off
  std::string description;           // "model drafter models/demo-draft", "ngram", "off"
  std::vector<std::string> warnings;
};

// `candidates`: the directories auto tries, in order (drafter_candidates()).
Result<DrafterChoice> open_drafter(const std::string& spec, const Model& target,
                                   const std::vector<std::string>& candidates, int threads);

// Where auto looks, for a target opened from `model_dir` or from a store
// (`store_dir`, prepared from `store_source_dir`); empty strings are skipped.
std::vector<std::string> drafter_candidates(const std::string& model_dir, const std::string& store_dir,
                                            const std::string& store_source_dir);

}  // namespace deltafin
