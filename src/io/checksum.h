// Checksums used by the store: xxh3-128 over every expert span (fast enough to
// verify on every read) and SHA-256 over the source checkpoint files (identity).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/result.h"

namespace deltafin {

struct Hash128 {
  uint64_t hi = 0, lo = 0;
  bool operator==(const Hash128&) const = default;
  std::string hex() const;  // 32 lowercase hex digits, high half first
  static Result<Hash128> from_hex(std::string_view s);
};

Hash128 xxh3_128(std::span<const uint8_t> bytes);

// SHA-256 of a whole file, streamed; lowercase hex. Calls `progress(bytes)`
// after each chunk when given.
Result<std::string> sha256_file(const std::string& path, void (*progress)(uint64_t, void*) = nullptr,
                                void* ctx = nullptr);

// The git blob id of a file: SHA-1 of "blob SIZE\0" followed by its bytes
// (what the Hub lists for files not stored in LFS); lowercase hex.
Result<std::string> git_blob_sha1_file(const std::string& path);

}  // namespace deltafin

namespace deltafin {
// SHA-256 of a string; lowercase hex.
std::string sha256_hex(std::string_view text);
// xxh3-128 of a whole file, streamed.
Result<Hash128> xxh3_128_file(const std::string& path);
}  // namespace deltafin
