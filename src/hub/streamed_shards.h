// The shards of a streamed setup (the default of `setup --repo`): every shard
// starts as a placeholder (its safetensors header, then a hole) that
// Checkpoint::open reads; prepare asks for a shard before its first unit of
// work, and it is downloaded in place, verified and marked; given back after
// its last, its data is punched out (the header stays). With `--stream`, only
// the spine's byte ranges are fetched into the placeholders.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "hub/download.h"
#include "hub/hub_api.h"
#include "hub/setup.h"
#include "store/prepare.h"

namespace deltafin::hub {

// A shard's placeholder at `path` (written as `tmp`, then renamed): `header`
// at the start, a hole to `size` bytes.
Status write_placeholder(const std::string& path, const std::string& tmp, const std::string& header, uint64_t size);

class StreamedShards : public ShardSource {
 public:
  StreamedShards(HubApi& api, std::string commit, const std::vector<RemoteFile>& files, std::string ck_dir,
                 std::string state_dir, DownloadOptions d, const SetupOptions& o);

  // The whole shard, downloaded into its placeholder and verified (once).
  Status ensure(const std::string& shard_path) override;
  // A streamed store's spine: only its tensors' bytes, by Range, into the
  // placeholder (near ranges merged into one request), each range retried
  // from its last byte written.
  Status ensure_ranges(const std::string& shard_path, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override;
  // Unmarked, then its data punched out.
  Status release(const std::string& shard_path) override;

 private:
  Result<const RemoteFile*> find(const std::string& shard_path);
  std::string state(const RemoteFile& f, const char* ext) const;
  void say(const std::string& line) const;

  HubApi& api_;
  std::string commit_, ck_dir_, state_dir_;
  DownloadOptions d_;
  const SetupOptions& o_;
  std::map<std::string, RemoteFile> files_;
  size_t total_ = 0, fetched_ = 0;
  bool warned_ = false;
};

}  // namespace deltafin::hub
