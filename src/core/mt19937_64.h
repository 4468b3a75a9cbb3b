// MT19937-64 with the exact output of std::mt19937_64(seed), plus a bulk
// fill. make-model's weights are defined by std::mt19937_64's stream; this
// engine produces the same stream faster (a branch-free refill the compiler
// vectorises, tempering in bulk), so generating a large test model keeps up
// with the disk.
#pragma once
#include <cstddef>
#include <cstdint>

namespace deltafin {

class Mt19937_64 {
 public:
  explicit Mt19937_64(uint64_t seed);

  uint64_t operator()() {
    if (pos_ == kN) refill();
    return temper(state_[pos_++]);
  }
  // The next n outputs, as n calls of operator() would give them.
  void fill(uint64_t* out, size_t n);

 private:
  static constexpr size_t kN = 312, kM = 156;
  static uint64_t temper(uint64_t z) {
    z ^= (z >> 29) & 0x5555555555555555ull;
    z ^= (z << 17) & 0x71d67fffeda60000ull;
    z ^= (z << 37) & 0xfff7eee000000000ull;
    return z ^ (z >> 43);
  }
  void refill();
  uint64_t state_[kN];
  size_t pos_ = kN;
};

}  // namespace deltafin
