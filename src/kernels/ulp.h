// Distance in units of the last place between two fp32 values: the number of
// representable floats between them (0 when equal, -0 and +0 included).
#pragma once
#include <bit>
#include <cstdint>

namespace deltafin::kernels {

inline int64_t ulp_distance(float a, float b) {
  auto ordered = [](float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? int64_t(INT32_MIN) - int64_t(i) : int64_t(i);  // monotone in x
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

}  // namespace deltafin::kernels
