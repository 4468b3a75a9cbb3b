// How a streamed store's missing experts arrive (`setup --stream`): the
// store's read path asks for the experts of a layer that are not local,
// before it reads them like any other expert, so the bytes a kernel uses are
// the bytes on disk, checked against the checksum recorded when each was
// published. The implementation fetches over HTTP (hub/expert_fetcher.h);
// the engine library only knows this interface.
#pragma once
#include <span>
#include <string>

#include "core/result.h"
#include "store/fetched_log.h"

namespace deltafin {

class RemoteExperts {
 public:
  virtual ~RemoteExperts() = default;
  // Fetches experts `experts` of MoE layer index `moe_index` into every
  // placement of each, syncs them, and appends each one's record to `log`.
  // Errors name the layer, the expert, the URL and the failure.
  virtual Status fetch(int moe_index, std::span<const int> experts, FetchedLog& log) = 0;
  // "from ENDPOINT/REPO@COMMIT", for messages.
  virtual std::string describe() const = 0;
};

}  // namespace deltafin
