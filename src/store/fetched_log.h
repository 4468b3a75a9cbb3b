// The record of a streamed store's experts that are local: STORE/.stream/
// fetched.log, one fixed-size record per published expert (MoE index,
// expert, xxh3-128 of its payload, a checksum of the record), appended and
// synced after the expert's bytes are synced into its pack. An expert
// without a record is not local (its span is a hole or a write a kill cut
// short); a torn or damaged record is ignored, costing one refetch. Several
// processes may append (a `run` and `setup --resume`); refresh() reads what
// the others added.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/checksum.h"

namespace deltafin {

constexpr const char* kStreamDirName = ".stream";
constexpr const char* kFetchedLogName = "fetched.log";
constexpr size_t kFetchedRecordBytes = 64;  // divides a page: an append never straddles two

class FetchedLog {
 public:
  // Opens (creating STORE/.stream and the log when missing) and reads it.
  static Result<std::unique_ptr<FetchedLog>> open(const std::string& store_dir, int moe_layers, int experts);
  ~FetchedLog();
  FetchedLog(const FetchedLog&) = delete;
  FetchedLog& operator=(const FetchedLog&) = delete;

  // The checksum of a local expert, or nothing.
  std::optional<Hash128> lookup(int moe_index, int expert) const;
  // Reads records other processes appended since the last read.
  Status refresh();
  // Appends and syncs one record (after the expert's bytes are synced).
  Status append(int moe_index, int expert, const Hash128& h);
  size_t local_count() const;
  // Records skipped as torn or damaged when read.
  size_t skipped() const;
  const std::string& path() const { return path_; }

  // The record's bytes (exposed for the tests).
  static std::vector<uint8_t> encode(int moe_index, int expert, const Hash128& h);

 private:
  FetchedLog() = default;
  Status read_from(uint64_t offset);
  std::string path_;
  int fd_ = -1;
  int layers_ = 0, experts_ = 0;
  uint64_t read_to_ = 0;  // bytes of whole records read so far
  mutable std::mutex mu_;
  std::vector<char> have_;
  std::vector<Hash128> sums_;
  size_t count_ = 0, skipped_ = 0;
};

}  // namespace deltafin
