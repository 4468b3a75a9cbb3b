#include "core/mt19937_64.h"

#include <algorithm>

namespace deltafin {

namespace {
constexpr uint64_t kMatrixA = 0xb5026f5aa96619e9ull;
constexpr uint64_t kUpper = ~uint64_t(0) << 31, kLower = ~kUpper;

inline uint64_t twist(uint64_t cur, uint64_t next, uint64_t far) {
  const uint64_t y = (cur & kUpper) | (next & kLower);
  return far ^ (y >> 1) ^ ((uint64_t(0) - (y & 1)) & kMatrixA);
}
}  // namespace

Mt19937_64::Mt19937_64(uint64_t seed) {
  state_[0] = seed;
  for (size_t i = 1; i < kN; ++i) state_[i] = 6364136223846793005ull * (state_[i - 1] ^ (state_[i - 1] >> 62)) + i;
}

void Mt19937_64::refill() {
  uint64_t* x = state_;
  for (size_t k = 0; k < kN - kM; ++k) x[k] = twist(x[k], x[k + 1], x[k + kM]);
  for (size_t k = kN - kM; k < kN - 1; ++k) x[k] = twist(x[k], x[k + 1], x[k - (kN - kM)]);
  x[kN - 1] = twist(x[kN - 1], x[0], x[kM - 1]);
  pos_ = 0;
}

void Mt19937_64::fill(uint64_t* out, size_t n) {
  while (n > 0) {
    if (pos_ == kN) refill();
    const size_t take = std::min(n, kN - pos_);
    const uint64_t* src = state_ + pos_;
    for (size_t i = 0; i < take; ++i) out[i] = temper(src[i]);
    pos_ += take, out += take, n -= take;
  }
}

}  // namespace deltafin
