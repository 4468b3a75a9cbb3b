// The test models' seeding, defined bit for bit (unlike std::hash or
// std::seed_seq across libraries): FNV-1a over a tensor's name, SplitMix64
// over (seed, hash). Shared by the K3 and Qwen3 checkpoint writers.
#pragma once
#include <cstdint>
#include <string_view>

namespace deltafin {

inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace deltafin
