#include "cli/open_model.h"

#include <cstdio>

#include "model/model.h"

namespace deltafin::cli {

Result<StoreModel> open_model_or_store(const std::string& model_dir, const StoreRunOptions& store, int threads) {
  StoreModel sm;
  if (!store.store.empty()) {
    DF_ASSIGN(sm, open_store_model(store, threads));
    for (const auto& w : sm.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::fprintf(stderr, "%s\n", sm.spine_line.c_str());
    if (!sm.tier_line.empty()) std::fprintf(stderr, "%s\n", sm.tier_line.c_str());
    if (!sm.stream_line.empty()) std::fprintf(stderr, "%s\n", sm.stream_line.c_str());
    return sm;
  }
  if (model_dir.empty()) return error("give --model DIR or --store STORE");
  DF_ASSIGN(sm.model, Model::open(model_dir, threads));
  return sm;
}

}  // namespace deltafin::cli
