#include "server/memo.h"

#include <openssl/evp.h>

#include <fmt/format.h>

namespace deltafin::server {

std::string memo_digest(std::string_view fields, std::string_view prompt) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const std::string frame = fmt::format("{}:{}:", fields.size(), prompt.size());
  const bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, frame.data(), frame.size()) == 1 &&
                  EVP_DigestUpdate(ctx, fields.data(), fields.size()) == 1 &&
                  EVP_DigestUpdate(ctx, prompt.data(), prompt.size()) == 1 && EVP_DigestFinal_ex(ctx, md, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return {};  // an empty key: never found (memo insert skips it)
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

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
  if (max_entries_ == 0 || max_bytes_ == 0 || key.empty()) return;
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
