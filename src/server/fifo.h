// The generation queue: a bounded FIFO of waiting requests. push() refuses
// when full (the caller answers 429) or closed; remove() takes out a request
// whose client left while it waited; close() hands back whatever still
// waits, and pop() then returns nullptr once nothing is left.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace deltafin::server {

template <typename T>
class BoundedFifo {
 public:
  struct Ticket {
    uint64_t number;  // 1, 2, 3, ... in the order requests joined
    size_t ahead;     // requests waiting in front of this one when it joined
  };

  explicit BoundedFifo(size_t capacity) : capacity_(capacity) {}

  // on_join(item, ticket) runs under the lock before the item can be popped,
  // so whatever it records is there when a consumer takes the item.
  template <typename F>
  std::optional<Ticket> push(std::shared_ptr<T> item, F&& on_join) {
    std::lock_guard lock(mu_);
    if (closed_ || items_.size() >= capacity_) return std::nullopt;
    const Ticket t{++joined_, items_.size()};
    on_join(*item, t);
    items_.push_back(std::move(item));
    cv_.notify_one();
    return t;
  }
  std::optional<Ticket> push(std::shared_ptr<T> item) {
    return push(std::move(item), [](T&, const Ticket&) {});
  }

  // Blocks until an item is there; nullptr once closed and empty.
  std::shared_ptr<T> pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return nullptr;
    auto item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  bool remove(const T* item) {
    std::lock_guard lock(mu_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->get() == item) {
        items_.erase(it);
        return true;
      }
    return false;
  }

  std::vector<std::shared_ptr<T>> close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    std::vector<std::shared_ptr<T>> rest(std::make_move_iterator(items_.begin()), std::make_move_iterator(items_.end()));
    items_.clear();
    cv_.notify_all();
    return rest;
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<T>> items_;
  uint64_t joined_ = 0;
  bool closed_ = false;
};

}  // namespace deltafin::server
