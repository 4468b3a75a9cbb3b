// Exact response memo: a request whose output-deciding fields (GenRequest::
// memo_key) equal an earlier completed one is answered from here without
// entering the model. LRU, bounded by entries and bytes; 0 in either disables.
#pragma once
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "server/output_filter.h"

namespace deltafin::server {

struct MemoEntry {
  std::vector<Delta> deltas;  // exactly as first streamed
  std::string finish_reason;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  uint64_t bytes() const;
};

// A memo key: SHA-256 (hex) over the two parts, length-framed, so a key
// costs 64 bytes whatever the prompt's size.
std::string memo_digest(std::string_view fields, std::string_view prompt);

class ResponseMemo {
 public:
  ResponseMemo(size_t max_entries, uint64_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}
  std::optional<MemoEntry> find(const std::string& key);  // a hit becomes most recent
  void insert(const std::string& key, MemoEntry entry);   // an entry over the byte budget is not kept
  size_t size() const;
  uint64_t bytes() const;

 private:
  using Item = std::pair<std::string, MemoEntry>;
  uint64_t item_bytes(const Item& it) const { return it.first.size() + it.second.bytes(); }
  mutable std::mutex mu_;
  size_t max_entries_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::list<Item> lru_;  // front = oldest
  std::unordered_map<std::string, std::list<Item>::iterator> index_;
};

}  // namespace deltafin::server
