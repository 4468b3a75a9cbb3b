// What run and chat open: with --store, the spine from the store and the
// experts streamed (its warnings and startup lines printed to stderr); else
// the checkpoint of --model, experts read in place.
#pragma once
#include <string>

#include "core/result.h"
#include "store/store_run.h"

namespace deltafin::cli {

Result<StoreModel> open_model_or_store(const std::string& model_dir, const StoreRunOptions& store, int threads);

}  // namespace deltafin::cli
