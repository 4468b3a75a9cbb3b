// One expert pack file: the listed experts' spans back to back, each its
// payload then zero padding to `span`. Written under PATH.tmp, fsynced and
// renamed. Filling the next batch of spans (copy or generate, plus the
// xxh3-128 of each payload) runs on a second thread while the current batch
// is written (O_DIRECT where the file system allows), so generation overlaps
// the disk.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/checksum.h"
#include "store/expert_payloads.h"
#include "store/progress.h"

namespace deltafin {

// Returns each expert's payload checksum, in list order.
Result<std::vector<Hash128>> write_pack(const std::string& path, int moe_index, const std::vector<int>& experts,
                                        const ExpertPayloads& src, uint64_t span, Progress& prog);

// A streamed store's pack (`setup --stream`): PATH sized to `bytes` and
// sparse (every span a hole until its expert is fetched), written under
// PATH.tmp and renamed like a full pack.
Status create_sparse_pack(const std::string& path, uint64_t bytes);

// `setup --resume` completing a streamed store: writes the listed experts'
// spans into the existing pack PATH in place (a running `run` may have it
// open), then syncs it. Returns each payload's checksum, in list order.
Result<std::vector<Hash128>> fill_pack_in_place(const std::string& path, int moe_index, const std::vector<int>& experts,
                                                const ExpertPayloads& src, uint64_t span, Progress& prog);

}  // namespace deltafin
