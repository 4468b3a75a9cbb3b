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

}  // namespace deltafin
