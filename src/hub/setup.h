// `deltafin setup`: install a model from a Hugging Face repository (or a
// mirror that serves the Hub's paths, or a local snapshot with --from) as a
// store. The checkpoint is downloaded into STORE/.setup/checkpoint (resumable
// and verified, hub/download.h), `prepare` converts it, and the download is
// deleted once the store's manifest is written. Disk space for all of it is
// checked up front, per file system, before a byte is downloaded.
#pragma once
#include <cstdint>
#include <string>

#include "core/result.h"
#include "hub/retry.h"
#include "store/prepare.h"

namespace deltafin::hub {

struct SetupOptions {
  std::string repo;      // ORG/NAME[@REVISION]
  std::string from_dir;  // a local snapshot instead of --repo
  std::string endpoint = "https://huggingface.co";
  std::string token_file;
  int connections = 8;
  uint64_t chunk_mb = 32;
  // Every request: a reset, a stall (no byte for stall_timeout_s), 408,
  // 429 or a 5xx is retried from the last byte written after a backoff
  // (one line each); a 4xx refusal fails at once.
  RetryPolicy retry;
  bool keep_checkpoint = false;
  bool space_check = true;
  // --stream: the spine, the manifest and sparse packs first; experts are
  // fetched on first use (hub/expert_fetcher.h). --resume: complete such a
  // store (every shard downloaded and verified, the fetched experts checked).
  bool stream = false;
  bool resume = false;
  PrepareOptions prepare;  // out_dir, drives, replicate_hot, spine, quiet, pause_ms
};

Status setup_store(const SetupOptions& o);

// What the disk-space check counts, from the safetensors headers.
struct CheckpointSizes {
  uint64_t total = 0;          // every file of the checkpoint
  uint64_t tensors = 0;        // bytes of tensor data
  uint64_t expert_bytes = 0;   // bytes of routed-expert tensors (".experts.")
  uint64_t experts = 0;        // routed experts (their w1.weight_packed tensors)
};
// Tensor bytes of one safetensors header (its JSON text): (all, routed experts, expert count).
Result<CheckpointSizes> sizes_from_header(const std::string& header_json, const std::string& what);

}  // namespace deltafin::hub
