// setup's disk-space check, up front and per file system: what the store,
// the download and each drive's expert packs will need (from the listing and
// the safetensors headers), against what each file system has free.
#pragma once
#include <cstdint>

#include "core/result.h"
#include "hub/setup.h"

namespace deltafin::hub {

// Needs per file system: --out's holds the spine, the small files and
// `to_download` bytes of download; each drive its share of the expert spans
// (with the replicas --replicate-hot asks for). Prints one line per file
// system; fails, naming each that lacks room, before a byte is downloaded.
Status plan_space(const SetupOptions& o, const CheckpointSizes& sz, uint64_t to_download);

}  // namespace deltafin::hub
