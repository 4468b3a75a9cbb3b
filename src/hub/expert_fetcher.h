// A streamed store's experts fetched on first use (`setup --stream`): each
// expert's six tensors are located by the shard headers kept in
// STORE/.setup/checkpoint, fetched by Range requests from the repository
// the manifest's `stream` section pins (a few connections in flight, each
// reused; a reset, a stall, 408, 429 or a 5xx retried from the last byte
// received after a backoff, one stderr line per retry: hub/retry.h, tuned by
// DELTAFIN_FETCH_RETRIES, DELTAFIN_FETCH_STALL_TIMEOUT and
// DELTAFIN_FETCH_RETRY_BACKOFF_MS), written into every placement of the
// expert in its packs, synced, and only then recorded in
// STORE/.stream/fetched.log with their xxh3-128.
#pragma once
#include <memory>
#include <string>

#include "core/result.h"
#include "store/manifest.h"
#include "store/remote_experts.h"

namespace deltafin::hub {

// For StoreRunOptions::remote. Fails when the shard headers are missing or
// do not describe the manifest's experts, the token file is unreadable, or a
// DELTAFIN_FETCH_* variable is not a number in its range.
Result<std::shared_ptr<RemoteExperts>> open_expert_fetcher(const Manifest& m, const std::string& store_dir);

}  // namespace deltafin::hub
