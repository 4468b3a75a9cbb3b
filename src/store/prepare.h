// `deltafin prepare`: one pass over a published checkpoint that validates it
// and writes a store: spine pack, expert packs on the drive roots (with
// replicas of hot experts), manifest. Atomic and resumable: every output file
// is written under a temp name and renamed, then recorded in STORE/.prepare;
// a rerun with the same options skips recorded work; the manifest is written
// last, so a store is complete or refused.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/manifest.h"

namespace deltafin {

// Where a streamed `setup` keeps the checkpoint's shards: each present as a
// placeholder (its header, then a hole) until a unit of work needs its data.
// prepare asks for a shard before the first unit that reads it and gives it
// back after the last, so the disk holds the store plus the shards in use.
class ShardSource {
 public:
  virtual ~ShardSource() = default;
  virtual Status ensure(const std::string& shard_path) = 0;   // downloaded and verified
  // Only these byte ranges [offset, offset + bytes) of the shard, fetched as
  // they are (a streamed store's spine: trusted on first use, verified by
  // `setup --resume`). Default: the whole shard.
  virtual Status ensure_ranges(const std::string& shard_path,
                               const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    (void)ranges;
    return ensure(shard_path);
  }
  virtual Status release(const std::string& shard_path) = 0;  // its data no longer needed
};

// A streamed store (`setup --stream`): Stream writes the spine and sparse
// packs and a manifest with a `stream` section and no expert checksums; Fill
// (`setup --resume`) completes such a store in place from verified shards,
// keeping its placements, and writes the manifest without `stream`.
enum class StreamMode { None, Stream, Fill };

struct PrepareOptions {
  std::string model_dir, out_dir;
  std::vector<std::string> drives;  // "DIR" (rate probed) or "DIR:RATE" (MB/s)
  std::string replicate_hot;        // "", a count, or "all"
  std::string replicas_from;        // route trace file
  std::string spine = "bf16";       // bf16 | int8 (not implemented yet)
  int pause_ms = 0;                 // test aid: sleep after each unit of work
  // Set by `setup`: the manifest's checkpoint.dir names where the checkpoint
  // came from (its download is deleted), and the SHA-256 of each file, which
  // setup verified on download, is not computed a second time.
  std::string source_label;
  std::map<std::string, std::string> known_sha256;
  ShardSource* shards = nullptr;  // streamed setup (null: every shard is local)
  StreamMode stream_mode = StreamMode::None;
  std::optional<StreamSource> stream_source;  // Stream: the manifest's `stream` section
  bool quiet = false;
};

Status prepare_store(const PrepareOptions& o);

// "DIR[:RATE]" -> absolute root and rate in MB/s (0: measure).
Result<std::pair<std::string, double>> parse_drive_arg(const std::string& arg);
// Every --drive parsed, none twice, each an existing directory (prepare never
// creates a drive root); `make-model --store` checks them before writing anything.
Result<std::vector<std::pair<std::string, double>>> parse_drive_args(const std::vector<std::string>& args);
Status check_drive_roots(const std::vector<std::string>& roots);
// The path checks that need no checkpoint: the drives as above; --out neither
// the source nor inside it; the source not inside --out/spine; no drive root
// inside the source.
Status check_prepare_paths(const PrepareOptions& o);

}  // namespace deltafin
