// Every fp32 input through SiTU's exp and tanh (kernels/activation.h) and
// through glibc's expf and tanhf, each compared with the double-precision libm
// value rounded to fp32 (the correctly rounded result but for the rare input
// whose value lies within a double ulp of a rounding boundary). Prints, per
// function, how many finite inputs differ from it and the largest distance.
// Usage: deltafin_activation_sweep [STRIDE]   (1, the default: all 2^32 inputs)
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/activation.h"
#include "kernels/ulp.h"

namespace {

struct Tally {
  uint64_t inputs = 0, off = 0;
  int64_t worst = 0;
  float worst_x = 0;
  void add(float x, float got, float want) {
    ++inputs;
    const int64_t d = deltafin::kernels::ulp_distance(got, want);
    if (d) ++off;
    if (d > worst) worst = d, worst_x = x;
  }
  void print(const char* name) const {
    std::printf("%-22s %llu of %llu inputs differ from the rounded double value; largest %lld ulp (x = %.9g)\n", name,
                (unsigned long long)off, (unsigned long long)inputs, (long long)worst, double(worst_x));
  }
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t stride = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  if (stride == 0) return std::fprintf(stderr, "stride must be at least 1\n"), 2;
  Tally ours_exp, ours_tanh, libm_exp, libm_tanh;
  const size_t block = 1 << 16;
  std::vector<float> x, e(block), t(block);
  x.reserve(block);
  auto flush = [&] {
    deltafin::kernels::exp_f32(x.data(), e.data(), x.size());
    deltafin::kernels::tanh_f32(x.data(), t.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double xd = x[i];
      const float we = float(std::exp(xd)), wt = float(std::tanh(xd));
      ours_exp.add(x[i], e[i], we);
      ours_tanh.add(x[i], t[i], wt);
      libm_exp.add(x[i], std::exp(x[i]), we);
      libm_tanh.add(x[i], std::tanh(x[i]), wt);
    }
    x.clear();
  };
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += stride) {
    const float f = std::bit_cast<float>(uint32_t(b));
    if (!std::isfinite(f)) continue;
    x.push_back(f);
    if (x.size() == block) flush();
  }
  flush();
  ours_exp.print("exp (SiTU's)");
  libm_exp.print("expf (glibc)");
  ours_tanh.print("tanh (SiTU's)");
  libm_tanh.print("tanhf (glibc)");
  return 0;
}
