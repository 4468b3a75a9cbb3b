// Resumable, verified download of one remote file: parallel Range requests
// into a sparse file, a record of the finished chunks after each one (so a
// killed run redoes at most the chunks in flight), a chunk that fails resumed
// from its last byte written after a backoff (hub/retry.h), and when its
// retries are spent the bytes it did get synced and recorded too (so a rerun
// resumes from there), a digest check against the
// listing (SHA-256 for LFS files, the git blob SHA-1 otherwise), one more
// download on a mismatch, then fsync and, unless the file is written in
// place, a rename to its final name: a file with its final name is complete
// and verified.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/result.h"
#include "hub/hub_api.h"
#include "hub/retry.h"

namespace deltafin::hub {

struct DownloadOptions {
  int connections = 8;                 // Range requests in flight for one file
  uint64_t chunk_bytes = 32ull << 20;  // the unit of a request and of resume
  RetryPolicy retry;                   // per chunk: resets, stalls, 408, 429, 5xx
  std::string token;
  std::function<void(const std::string&)> log;  // retries, re-fetches (one line each)
};

struct DownloadTarget {
  std::string data;    // the file the bytes are written into
  std::string record;  // its record of finished chunks
  // Renamed to once verified; empty: the data file is the final file, written
  // in place (a streamed shard, whose placeholder a reader has mapped: it is
  // never replaced or deleted, only overwritten).
  std::string final_path;
};

// Downloads `url` (the file `f` of the listing) to `t`. `on_bytes` counts
// new bytes (called from several threads, never at once).
Status download_file(const std::string& url, const RemoteFile& f, const DownloadTarget& t, const DownloadOptions& o,
                     const std::function<void(uint64_t)>& on_bytes);

// One file of a download_files run.
struct DownloadJob {
  std::string url;
  const RemoteFile* file = nullptr;
  DownloadTarget target;
};

// Downloads the files one after another, as download_file does each; the
// check of a file's digest (a second pass over its bytes) runs while the next
// file downloads. `after_each` runs after each file's bytes are on disk.
Status download_files(const std::vector<DownloadJob>& jobs, const DownloadOptions& o,
                      const std::function<void(uint64_t)>& on_bytes, const std::function<void()>& after_each = {});

// Bytes of `f` that `record` lists as on disk: finished chunks, and the
// synced start of a chunk whose retries ran out.
uint64_t recorded_bytes(const RemoteFile& f, const std::string& record, uint64_t chunk_bytes);

// The digest the listing states for `f`, checked against the file at `path`.
Status verify_remote_file(const RemoteFile& f, const std::string& path);

}  // namespace deltafin::hub
