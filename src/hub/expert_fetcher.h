// A streamed store's experts fetched on first use (`setup --stream`): each
// expert's six tensors are located by the shard headers kept in
// STORE/.setup/checkpoint, fetched by Range requests from the repository
// the manifest's `stream` section pins (a few connections in flight, each
// reused), written into every placement of the expert in its packs, synced,
// and only then recorded in STORE/.stream/fetched.log with their xxh3-128.
#pragma once
#include <memory>
#include <string>

#include "core/result.h"
#include "store/manifest.h"
#include "store/remote_experts.h"

namespace deltafin::hub {

// For StoreRunOptions::remote. Fails when the shard headers are missing or
// do not describe the manifest's experts, or the token file is unreadable.
Result<std::shared_ptr<RemoteExperts>> open_expert_fetcher(const Manifest& m, const std::string& store_dir);

}  // namespace deltafin::hub
