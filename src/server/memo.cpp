#include "server/memo.h"

namespace deltafin::server {

uint64_t MemoEntry::bytes() const {
  uint64_t n = sizeof(MemoEntry) + finish_reason.size();
  for (const auto& d : deltas) n += sizeof(Delta) + d.text.size();
  return n;
}

std::optional<MemoEntry> ResponseMemo::find(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.end(), lru_, it->second);
  return it->second->second;
}

void ResponseMemo::insert(const std::string& key, MemoEntry entry) {
  std::lock_guard lock(mu_);
  if (max_entries_ == 0 || max_bytes_ == 0) return;
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= item_bytes(*it->second);
    lru_.erase(it->second);
    index_.erase(it);
  }
  Item item{key, std::move(entry)};
  const uint64_t b = item_bytes(item);
  if (b > max_bytes_) return;
  lru_.push_back(std::move(item));
  index_[key] = std::prev(lru_.end());
  bytes_ += b;
  while (lru_.size() > max_entries_ || bytes_ > max_bytes_) {
    bytes_ -= item_bytes(lru_.front());
    index_.erase(lru_.front().first);
    lru_.pop_front();
  }
}

size_t ResponseMemo::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

uint64_t ResponseMemo::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace deltafin::server
