// Per-target SIMD kernels for matmul.h, compiled once per Highway target by
// matmul.cpp (foreach_target.h re-includes this file).
//
// Every kernel keeps the REDUCTION ORDER of matmul.h exactly: each output
// owns 32 fp32 partial sums, held as kVecs vectors of N lanes, updated with a
// true FMA per element in column order, then folded by the fixed pairwise tree.
// Weights may be decoded into a permuted lane order ("position order") as
// long as X is permuted the same way and the partial sums are put back in
// contract order before the tree, so the permutation never changes a value.
//
// Targets without a fused vector multiply-add (SSE4, EMU128, SCALAR...) do
// not run SIMD code at all: they forward to the scalar contract.

#if defined(DELTAFIN_KERNELS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DELTAFIN_KERNELS_MATMUL_INL_H_
#undef DELTAFIN_KERNELS_MATMUL_INL_H_
#else
#define DELTAFIN_KERNELS_MATMUL_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/matmul.h"
#include "kernels/matmul_detail.h"

HWY_BEFORE_NAMESPACE();
namespace deltafin::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// True FMA lanes with a vector width that divides 32 and is known at compile
// time. Anything else takes the scalar contract (correctness over coverage).
#undef DF_KERNEL_SIMD
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || \
    (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON)
#define DF_KERNEL_SIMD 1
#else
#define DF_KERNEL_SIMD 0
#endif

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }
bool UsesSimd() { return DF_KERNEL_SIMD != 0; }

#if DF_KERNEL_SIMD

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
constexpr size_t N = HWY_LANES(float);
constexpr size_t kVecs = kLanes / N;
static_assert(kLanes % N == 0 && kVecs >= 2 && kVecs % 2 == 0, "vector width must divide 32");

// Position p = v*N + l of a 32-element group holds contract element
// element_of(p): identity for f32; for BF16/MXFP4 each pair of vectors (2c,
// 2c+1) holds the even / odd elements of the group's c-th chunk of 2N.
inline size_t interleaved_element(size_t p) {
  const size_t v = p / N, l = p % N;
  return 2 * N * (v / 2) + 2 * l + (v & 1);
}

// Folds the kVecs partial-sum vectors (position order) by the contract's tree.
template <bool kInterleaved>
HWY_INLINE float Finish(const VF* acc) {
  HWY_ALIGN float pos[kLanes];
  for (size_t v = 0; v < kVecs; ++v) hn::Store(acc[v], DF(), pos + v * N);
  if constexpr (!kInterleaved) return tree_sum(pos);
  float c[kLanes];
  for (size_t p = 0; p < kLanes; ++p) c[interleaved_element(p)] = pos[p];
  return tree_sum(c);
}

// ---- The tree for many outputs at once. Where the lanes sit (position
// order), the contract's tree is: a few vertical adds of whole vectors (the
// levels that pair elements in different vectors), then, per remaining
// vector, a halving fold of its lanes (lane m + lane m + N/2, then m + N/4,
// ... down to one), and for the interleaved order a last add of the even and
// the odd elements' sums. For AVX-512 (2 vectors of 16):
//   identity:    fold(v0 + v1)             (level 16 pairs e[j] with e[j+16])
//   interleaved: fold(v0) + fold(v1)       (v0 holds e[2l], v1 e[2l+1])
// and for AVX2 (4 vectors of 8):
//   identity:    fold((v0 + v2) + (v1 + v3))
//   interleaved: fold(v0 + v2) + fold(v1 + v3)
// Each add pairs the same two values as tree_sum does, and IEEE addition is
// commutative, so the bits are tree_sum's. FoldBatch folds up to kFoldBatch
// vectors with one shuffle network (each level halves the lanes of every
// vector and packs two vectors into one), so a tile of outputs pays a few
// vector instructions each instead of a scalar tree.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr size_t kFoldBatch = 16;
// Folds M <= 16 vectors with one network; lane 4k + j of the result holds
// the fold of source 4j + k. With kPairs, sources 2q and 2q + 1 are the even
// and the odd elements of output q and are added as well: output q then sits
// in lane 8 (q % 2) + q / 2.
template <size_t M, bool kPairs>
HWY_INLINE void FoldBatch(const VF* v, float* out) {
  static_assert(M <= 16 && (!kPairs || M % 2 == 0));
  __m512 a[16], b[8], c[4], d[2];
  for (size_t s = 0; s < 16; ++s) a[s] = s < M ? v[s].raw : _mm512_setzero_ps();
  // Lanes m + m+8: blocks (0,1) + (2,3); two vectors per result.
  for (int i = 0; i < 8; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  // Lanes m + m+4 within each half: block 0 + 1, block 2 + 3.
  for (int i = 0; i < 4; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  // Within each 128-bit block: lanes m + m+2, then m + m+1.
  for (int i = 0; i < 2; ++i)
    d[i] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0xEE));
  __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xDD));
  HWY_ALIGN float z[16];
  if constexpr (kPairs) {
    // Sources 2q and 2q+1 sit in lanes j and j + 4 (blocks 0/1 and 2/3).
    e = _mm512_add_ps(e, _mm512_shuffle_f32x4(e, e, 0xB1));
    _mm512_store_ps(z, e);
    for (size_t q = 0; q < M / 2; ++q) out[q] = z[8 * (q % 2) + q / 2];
  } else {
    _mm512_store_ps(z, e);
    for (size_t s = 0; s < M; ++s) out[s] = z[4 * (s % 4) + s / 4];
  }
}
#elif HWY_TARGET == HWY_AVX2
constexpr size_t kFoldBatch = 8;
// Folds M <= 8 vectors; lane 4k + j of the result holds the fold of source
// 2j + k. With kPairs, sources 2q and 2q + 1 (even, odd elements of output q)
// are also added: output q then sits in lane q.
template <size_t M, bool kPairs>
HWY_INLINE void FoldBatch(const VF* v, float* out) {
  static_assert(M <= 8 && (!kPairs || M % 2 == 0));
  __m256 a[8], b[4], c[2];
  for (size_t s = 0; s < 8; ++s) a[s] = s < M ? v[s].raw : _mm256_setzero_ps();
  // Lanes m + m+4: the two 128-bit halves.
  for (int i = 0; i < 4; ++i)
    b[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
  for (int i = 0; i < 2; ++i)
    c[i] = _mm256_add_ps(_mm256_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                         _mm256_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
  __m256 e = _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], 0x88), _mm256_shuffle_ps(c[0], c[1], 0xDD));
  HWY_ALIGN float z[8];
  if constexpr (kPairs) {
    // Sources 2q (lane q) and 2q + 1 (lane 4 + q): add the two halves.
    e = _mm256_add_ps(e, _mm256_permute2f128_ps(e, e, 0x01));
    _mm256_store_ps(z, e);
    for (size_t q = 0; q < M / 2; ++q) out[q] = z[q];
  } else {
    _mm256_store_ps(z, e);
    for (size_t s = 0; s < M; ++s) out[s] = z[4 * (s % 2) + s / 2];
  }
}
#else
constexpr size_t kFoldBatch = 0;  // other widths: the scalar tree per output
#endif

// out[q] = the contract's result of the q-th output's partial sums
// acc[q * kVecs .. +kVecs) (position order), for Q outputs.
template <bool kInterleaved, size_t Q>
HWY_INLINE void FinishMany(const VF* acc, float* out) {
  if constexpr (kFoldBatch == 0) {
    for (size_t q = 0; q < Q; ++q) out[q] = Finish<kInterleaved>(acc + q * kVecs);
  } else {
    constexpr size_t S = kInterleaved ? 2 : 1;  // vectors to fold per output
    constexpr size_t kPer = kFoldBatch / S;     // outputs per network
    constexpr size_t n = Q < kPer ? Q : kPer;
    VF src[kFoldBatch];
    for (size_t i = 0; i < n; ++i) {
      const VF* a = acc + i * kVecs;
      if constexpr (kVecs == 2) {
        if constexpr (kInterleaved) src[2 * i] = a[0], src[2 * i + 1] = a[1];
        else src[i] = hn::Add(a[0], a[1]);
      } else {  // kVecs == 4 (kFoldBatch is set for AVX-512 and AVX2 only)
        if constexpr (kInterleaved) src[2 * i] = hn::Add(a[0], a[2]), src[2 * i + 1] = hn::Add(a[1], a[3]);
        else src[i] = hn::Add(hn::Add(a[0], a[2]), hn::Add(a[1], a[3]));
      }
    }
    FoldBatch<n * S, kInterleaved>(src, out);
    if constexpr (Q > n) FinishMany<kInterleaved, Q - n>(acc + n * kVecs, out + n);
  }
}

// ---- Tile prefetch. A tile of R output rows walks R contiguous weight rows
// group by group. At step g it asks L2 (prefetcht1) for the bytes the NEXT
// tile will read at its step g, so the data arrives one tile ahead at the
// pace it is used. MXFP4 (all tiles) and BF16 (T = 1 tiles) do this, one
// stream per next row; from DRAM it beat per-row hints 1 KiB ahead by 34-39%
// (then a median +9% more) for MXFP4 and 4% for BF16 at T = 1, but cost BF16 10% at T = 16
// (docs/results/2026-12-kernels.md). Prefetches never fault: running past the matrix is
// harmless. Here the tile reads kGroupBytes per group from each of R
// contiguous rows starting at next_tile; prefetch points 64 bytes apart
// touch each line once.
template <size_t kGroupBytes, size_t R>
HWY_INLINE void PrefetchTileStep(const uint8_t* next_tile, size_t g) {
  constexpr size_t kStep = R * kGroupBytes;  // bytes the tile consumes per group
  if constexpr (kStep >= 64) {
    for (size_t k = 0; k < kStep; k += 64) __builtin_prefetch(next_tile + g * kStep + k, 0, 2);  // L2
  } else {
    static_assert(64 % kStep == 0);
    if (g % (64 / kStep) == 0) __builtin_prefetch(next_tile + g * kStep, 0, 2);
  }
}

// How far ahead (bytes) the T = 1 tiles ask for weights, at least one tile:
// rows of a few hundred bytes (small experts) are otherwise asked for too
// late (docs/results/2026-12-kernels.md).
constexpr size_t kPrefetchAheadBytes = 4096;

// Floats between rows of the prepared X and of decoded panels (whole groups;
// one more cache line per row measured no different, docs/results/2026-12-kernels.md).
inline size_t RowStride(size_t groups) { return groups * kLanes; }

// Asks L2 for bytes [p, p + n), a line at a time (never faults).
HWY_INLINE void PrefetchRange(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  for (size_t k = 0; k < n; k += 64) __builtin_prefetch(c + k, 0, 2);
}

// ---- Weight decoders: row(o) gives a Row whose Load(group, w) writes the
// group's kVecs weight vectors in position order; LoadTail handles a partial
// last group (zeros past cols).

struct F32Rows {
  static constexpr bool kInterleaved = false;
  const float* W;
  size_t cols;
  struct Row {
    const float* w;
    size_t cols;
    HWY_INLINE void Load(size_t g, VF* out) const {
      for (size_t v = 0; v < kVecs; ++v) out[v] = hn::LoadU(DF(), w + g * kLanes + v * N);
    }
    void LoadTail(size_t g, VF* out) const {
      HWY_ALIGN float buf[kLanes] = {};
      for (size_t i = g * kLanes; i < cols; ++i) buf[i - g * kLanes] = w[i];
      for (size_t v = 0; v < kVecs; ++v) out[v] = hn::Load(DF(), buf + v * N);
    }
  };
  Row row(size_t o) const { return Row{W + o * cols, cols}; }
  const float* row_data(size_t o) const { return W + o * cols; }
  static size_t RowBytes(size_t groups) { return groups * kLanes * 4; }
  void PrefetchGroups(size_t o, size_t g0, size_t g1) const { PrefetchRange(W + o * cols + g0 * kLanes, (g1 - g0) * kLanes * 4); }
  static constexpr bool kPrefetch = false;
  static constexpr bool kCostlyDecode = false;
  static constexpr bool kInPlace = true;      // rows of whole groups need no panel
  static constexpr size_t kPanelMinT = 2;
};

struct Bf16Rows {
  static constexpr bool kInterleaved = true;
  const uint16_t* W;
  size_t cols;
  struct Row {
    const uint16_t* w;
    size_t cols;
    // N u32 lanes hold 2N bf16: the low half is the even element. Shifting
    // it up (or masking the high half) is the exact widening.
    HWY_INLINE void Load(size_t g, VF* out) const {
      const DU du;
      const hn::Repartition<uint16_t, DU> d16;
      for (size_t c = 0; c < kVecs / 2; ++c) {
        const auto u = hn::BitCast(du, hn::LoadU(d16, w + g * kLanes + c * 2 * N));
        out[2 * c] = hn::BitCast(DF(), hn::ShiftLeft<16>(u));
        out[2 * c + 1] = hn::BitCast(DF(), hn::And(u, hn::Set(du, 0xFFFF0000u)));
      }
    }
    void LoadTail(size_t g, VF* out) const {
      HWY_ALIGN float buf[kLanes] = {};
      for (size_t p = 0; p < kLanes; ++p) {
        const size_t i = g * kLanes + interleaved_element(p);
        if (i < cols) buf[p] = bf16_to_f32(w[i]);
      }
      for (size_t v = 0; v < kVecs; ++v) out[v] = hn::Load(DF(), buf + v * N);
    }
    HWY_INLINE void Prefetch(size_t g) const { hwy::Prefetch(w + (g + 16) * kLanes); }  // 1 KiB ahead
  };
  Row row(size_t o) const { return Row{W + o * cols, cols}; }
  static size_t RowBytes(size_t groups) { return groups * kLanes * 2; }
  void PrefetchGroups(size_t o, size_t g0, size_t g1) const { PrefetchRange(W + o * cols + g0 * kLanes, (g1 - g0) * kLanes * 2); }
  // T = 1 tiles fetch the next tile, one stream per row; the compute-bound
  // T > 1 tiles keep Row::Prefetch, which measured faster there.
  template <size_t R>
  HWY_INLINE void PrefetchTile(size_t o, size_t g) const {
    for (size_t r = 0; r < R; ++r)
      PrefetchTileStep<kLanes * sizeof(uint16_t), 1>(reinterpret_cast<const uint8_t*>(W + (o + r) * cols), g);
  }
  static constexpr bool kPrefetch = true;
  static constexpr bool kCostlyDecode = false;
  static constexpr bool kInPlace = false;
  static constexpr size_t kPanelMinT = 3;
};

// Row-int8: w = float(q) * row scale, in contract (identity) order. The
// int8 -> int32 -> fp32 conversion is exact and the product with the row's
// fp16-widened scale is the scalar contract's product bit for bit.
struct I8Rows {
  static constexpr bool kInterleaved = false;
  static constexpr bool kCostlyDecode = false;  // 4 x 2 tiles, as measured when the kernel landed
  const int8_t* q;
  const uint16_t* scales;
  size_t cols;
  struct Row {
    const int8_t* w;
    float scale;
    size_t cols;
    HWY_INLINE void Load(size_t g, VF* out) const {
      const DF df;
      const hn::RebindToSigned<DF> di;
      const hn::Rebind<int8_t, decltype(di)> d8;
      const VF sc = hn::Set(df, scale);
      for (size_t v = 0; v < kVecs; ++v)
        out[v] = hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, w + g * kLanes + v * N))), sc);
    }
    void LoadTail(size_t g, VF* out) const {
      HWY_ALIGN float buf[kLanes] = {};
      for (size_t i = g * kLanes; i < cols; ++i) buf[i - g * kLanes] = float(w[i]) * scale;
      for (size_t v = 0; v < kVecs; ++v) out[v] = hn::Load(DF(), buf + v * N);
    }
    // One cache line holds two groups: fetch every other group, 1 KiB ahead.
    HWY_INLINE void Prefetch(size_t g) const {
      if ((g & 1) == 0) hwy::Prefetch(w + (g + 32) * kLanes);
    }
  };
  Row row(size_t o) const { return Row{q + o * cols, f16_to_f32(scales[o]), cols}; }
  static size_t RowBytes(size_t groups) { return groups * kLanes; }
  void PrefetchGroups(size_t o, size_t g0, size_t g1) const { PrefetchRange(q + o * cols + g0 * kLanes, (g1 - g0) * kLanes); }
  static constexpr bool kPrefetch = true;
  static constexpr bool kInPlace = false;
  static constexpr size_t kPanelMinT = 3;
};

// 2^(s-127) for every scale byte, computed by the same function as the scalar
// contract so the products below are the same IEEE multiplications.
// products[s] holds the 16 decoded values kE2M1[k] * 2^(s-127) of a group
// with scale byte s, each the scalar contract's own fp32 product: one 64-byte
// line per scale (16 KiB in all, of which a model touches the few lines of
// the scales it uses), so the decode looks values up instead of
// multiplying a table per group.
// flipped[s][k] (k < 8) is products[s][k] with the bits of k xor-ed into
// bits 28..30 (the AVX2 decode below xors them out again together with the
// sign): a bit pattern, not a value to compute with.
struct E8M0Table {
  float v[256];
  alignas(64) float products[256][16];
  alignas(32) uint32_t flipped[256][8];
  E8M0Table() {
    for (int s = 0; s < 256; ++s) {
      v[s] = e8m0_to_f32(uint8_t(s));
      for (int k = 0; k < 16; ++k) products[s][k] = kE2M1[k] * v[s];
      for (uint32_t k = 0; k < 8; ++k) {
        uint32_t bits;
        std::memcpy(&bits, &products[s][k], 4);
        flipped[s][k] = bits ^ (k << 28);
      }
    }
  }
};
inline const E8M0Table& e8m0_table() {
  static const E8M0Table t;
  return t;
}

struct Mxfp4Rows {
  static constexpr bool kInterleaved = true;
  const uint8_t* packed;
  const uint8_t* scales;
  size_t cols;
  const E8M0Table* e8m0;

  struct Row {
    const uint8_t* packed;  // this row's blocks
    const uint8_t* scales;  // this row's scales
    const E8M0Table* e8m0;

    // w = kE2M1[code] * scale: the group's 16 products (each the scalar's
    // product bit for bit) are looked up by scale byte, then each element
    // picks its product by a lane permute on its nibble.
    HWY_INLINE void Load(size_t g, VF* w) const {
      const DF df;
      const DU du;
      const hn::Rebind<uint8_t, DU> d8;
      const uint8_t* p = packed + g * (kLanes / 2);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      static_assert(N == 16);
      // vpermps reads only the low 4 index bits: no masking of the low nibble.
      const VF tbl = hn::Load(df, e8m0->products[scales[g]]);
      const auto u = hn::PromoteTo(du, hn::LoadU(d8, p));
      w[0] = VF{_mm512_permutexvar_ps(u.raw, tbl.raw)};
      w[1] = VF{_mm512_permutexvar_ps(hn::ShiftRight<4>(u).raw, tbl.raw)};
#elif HWY_TARGET == HWY_AVX2
      static_assert(N == 8);
      // Codes 8..15 are codes 0..7 negated, and so are their products (a
      // sign flip is exact): one vpermps on the low 3 bits of the code picks
      // from the 8 non-negative products, then the code shifted to bits
      // 28..31 is xor-ed in: its bit 3 lands on the sign, and its low 3 bits
      // undo those the table was stored with (E8M0Table::flipped). Half the
      // permutes of a lookup in two tables and a blend, and no mask
      // (docs/design/kernels.md, "MXFP4 on AVX2").
      const VF tbl = hn::BitCast(df, hn::Load(du, e8m0->flipped[scales[g]]));
      for (size_t c = 0; c < 2; ++c) {
        const auto lo = hn::PromoteTo(du, hn::LoadU(d8, p + c * 8));  // the byte; bits 4..7 shift out below
        const auto hi = hn::ShiftRight<4>(lo);
        w[2 * c] = hn::Xor(VF{_mm256_permutevar8x32_ps(tbl.raw, lo.raw)}, hn::BitCast(df, hn::ShiftLeft<28>(lo)));
        w[2 * c + 1] = hn::Xor(VF{_mm256_permutevar8x32_ps(tbl.raw, hi.raw)}, hn::BitCast(df, hn::ShiftLeft<28>(hi)));
      }
#else
      // Portable: the same 16 products, picked per element through memory.
      (void)du;
      (void)d8;
      const VF sc = hn::Set(df, e8m0->v[scales[g]]);
      HWY_ALIGN float tbl[16];
      for (size_t k = 0; k < 16; k += N) hn::Store(hn::Mul(hn::LoadU(df, kE2M1 + k), sc), df, tbl + k);
      HWY_ALIGN float buf[kLanes];
      for (size_t q = 0; q < kLanes; ++q) {
        const size_t i = interleaved_element(q);
        buf[q] = tbl[(p[i / 2] >> (4 * (i & 1))) & 15];
      }
      for (size_t v = 0; v < kVecs; ++v) w[v] = hn::Load(df, buf + v * N);
#endif
    }
    void LoadTail(size_t g, VF* w) const { Load(g, w); }  // cols % 32 == 0: never partial
  };
  Row row(size_t o) const { return Row{packed + o * (cols / 2), scales + o * (cols / kLanes), e8m0}; }
  static size_t RowBytes(size_t groups) { return groups * (kLanes / 2 + 1); }
  void PrefetchGroups(size_t o, size_t g0, size_t g1) const {
    PrefetchRange(packed + o * (cols / 2) + g0 * (kLanes / 2), (g1 - g0) * (kLanes / 2));
    PrefetchRange(scales + o * (cols / kLanes) + g0, g1 - g0);
  }
  // Blocks and scales are two row-major arrays: 16 bytes and 1 byte per group.
  // The next tile's blocks as R streams, one per row (median +9% over a
  // single linear stream of the same bytes, docs/results/2026-12-kernels.md; our guess is
  // that the L2 hardware prefetcher follows several streams better); its
  // scales, R bytes per group, as one.
  template <size_t R>
  HWY_INLINE void PrefetchTile(size_t o, size_t g) const {
    for (size_t r = 0; r < R; ++r) PrefetchTileStep<kLanes / 2, 1>(packed + (o + r) * (cols / 2), g);
    PrefetchTileStep<1, R>(scales + o * (cols / kLanes), g);
  }
  static constexpr bool kPrefetch = false;  // per tile instead
  static constexpr bool kCostlyDecode = true;
  static constexpr bool kInPlace = false;
  static constexpr size_t kPanelMinT = 3;
};

// ---- The tiled product: R output rows x TT input rows share each decoded
// weight group and each loaded X group; every (t, o) keeps its own 32 sums.

template <size_t R, size_t TT>
HWY_INLINE void Accumulate(const VF (&w)[R][kVecs], const float* x, size_t stride, VF (&acc)[R][TT][kVecs]) {
  const DF df;
  for (size_t t = 0; t < TT; ++t)
    for (size_t v = 0; v < kVecs; ++v) {
      const VF xv = hn::Load(df, x + t * stride + v * N);
      for (size_t r = 0; r < R; ++r) acc[r][t][v] = hn::MulAdd(w[r][v], xv, acc[r][t][v]);
    }
}

template <class Rows, size_t R, size_t TT>
HWY_INLINE void Tile(const Rows& rows_of, size_t o0, size_t t0, size_t groups, size_t full_groups,
                     const float* Xp, size_t rows, float* Y, size_t ahead = 1) {
  const DF df;
  const size_t stride = RowStride(groups);
  const float* x = Xp + t0 * stride;
  VF acc[R][TT][kVecs];
  for (size_t r = 0; r < R; ++r)
    for (size_t t = 0; t < TT; ++t)
      for (size_t v = 0; v < kVecs; ++v) acc[r][t][v] = hn::Zero(df);
  typename Rows::Row row[R];
  for (size_t r = 0; r < R; ++r) row[r] = rows_of.row(o0 + r);
  // Next-tile prefetch where the format has it: always without per-row hints
  // (MXFP4), else for the memory-bound single-input-row tiles only (BF16).
  constexpr bool kTilePrefetch =
      requires { rows_of.template PrefetchTile<R>(o0, size_t(0)); } && (TT == 1 || !Rows::kPrefetch);
  for (size_t g = 0; g < full_groups; ++g) {
    if constexpr (kTilePrefetch) rows_of.template PrefetchTile<R>(o0 + R * ahead, g);
    VF w[R][kVecs];
    for (size_t r = 0; r < R; ++r) {
      if constexpr (Rows::kPrefetch && !kTilePrefetch) row[r].Prefetch(g);
      row[r].Load(g, w[r]);
    }
    Accumulate<R, TT>(w, x + g * kLanes, stride, acc);
  }
  if (full_groups < groups) {  // the zero-padded last group
    VF w[R][kVecs];
    for (size_t r = 0; r < R; ++r) row[r].LoadTail(full_groups, w[r]);
    Accumulate<R, TT>(w, x + full_groups * kLanes, stride, acc);
  }
  float out[R * TT];
  FinishMany<Rows::kInterleaved, R * TT>(&acc[0][0][0], out);
  for (size_t r = 0; r < R; ++r)
    for (size_t t = 0; t < TT; ++t) Y[(t0 + t) * rows + o0 + r] = out[r * TT + t];
}

// Tile shapes that fit the register file: AVX-512 has 32 vector registers
// and needs 2 per partial-sum set, AVX2 has 16 and needs 4.
constexpr size_t kRowsT1 = kVecs == 2 ? 4 : 2;  // T == 1: rows in flight
// T > 1: R output rows x TT input rows. A decoded weight vector serves TT
// FMAs and a loaded X vector R. MXFP4's decode costs more than a load of X,
// so it takes the taller tile (2 x 4 rather than 4 x 2; both 16 sum sets).
template <class Rows>
constexpr size_t kRowsTn = kVecs == 2 ? (Rows::kCostlyDecode ? 2 : 4) : 1;
template <class Rows>
constexpr size_t kTileT = kVecs == 2 && Rows::kCostlyDecode ? 4 : 2;

template <class Rows, size_t R, size_t TT>
void RowBlock(const Rows& rows_of, size_t b, size_t e, size_t groups, size_t full_groups, const float* Xp, size_t T,
              size_t rows, float* Y) {
  // Short rows: prefetch several tiles ahead, so the bytes asked for are
  // about kPrefetchAheadBytes ahead of those being read.
  const size_t tile_bytes = R * Rows::RowBytes(groups);
  const size_t ahead = std::max<size_t>(1, (kPrefetchAheadBytes + tile_bytes - 1) / tile_bytes);
  size_t o = b;
  for (; o + R <= e; o += R) {
    size_t t = 0;
    for (; t + TT <= T; t += TT) Tile<Rows, R, TT>(rows_of, o, t, groups, full_groups, Xp, rows, Y, ahead);
    for (; t < T; ++t) Tile<Rows, R, 1>(rows_of, o, t, groups, full_groups, Xp, rows, Y);
  }
  for (; o < e; ++o) {
    size_t t = 0;
    for (; t + TT <= T; t += TT) Tile<Rows, 1, TT>(rows_of, o, t, groups, full_groups, Xp, rows, Y);
    for (; t < T; ++t) Tile<Rows, 1, 1>(rows_of, o, t, groups, full_groups, Xp, rows, Y);
  }
}

// X in the decoder's position order, zero-padded to whole groups; built once
// per call (split over the pool's threads when large) and shared read-only
// by the workers. The interleaved order takes the even and the odd elements
// of each 2N-element chunk (ConcatEven / ConcatOdd), a permutation.
template <bool kInterleaved>
void PrepareXRows(const float* X, size_t t0, size_t t1, size_t cols, size_t groups, float* buf) {
  const DF df;
  const size_t stride = RowStride(groups), full = cols / kLanes;
  for (size_t t = t0; t < t1; ++t) {
    const float* x = X + t * cols;
    float* out = buf + t * stride;
    for (size_t g = 0; g < full; ++g) {
      const float* xg = x + g * kLanes;
      float* og = out + g * kLanes;
      if constexpr (kInterleaved) {
        for (size_t c = 0; c < kVecs / 2; ++c) {
          const VF lo = hn::LoadU(df, xg + 2 * c * N), hi = hn::LoadU(df, xg + 2 * c * N + N);
          hn::Store(hn::ConcatEven(df, hi, lo), df, og + 2 * c * N);
          hn::Store(hn::ConcatOdd(df, hi, lo), df, og + (2 * c + 1) * N);
        }
      } else {
        for (size_t v = 0; v < kVecs; ++v) hn::Store(hn::LoadU(df, xg + v * N), df, og + v * N);
      }
    }
    for (size_t g = full; g < groups; ++g)
      for (size_t p = 0; p < kLanes; ++p) {
        const size_t i = g * kLanes + (kInterleaved ? interleaved_element(p) : p);
        out[g * kLanes + p] = i < cols ? x[i] : 0.0f;
      }
  }
}

template <bool kInterleaved>
const float* PrepareX(const float* X, size_t T, size_t cols, size_t groups, ThreadPool* pool) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf;
  thread_local size_t capacity = 0;
  const size_t stride = RowStride(groups);
  if (capacity < T * stride) {
    buf = hwy::AllocateAligned<float>(T * stride);
    capacity = T * stride;
  }
  float* out = buf.get();
  if (pool && T >= 8 && T * stride >= (size_t(1) << 16))
    pool->parallel_for(T, 1, [&](size_t b, size_t e) { PrepareXRows<kInterleaved>(X, b, e, cols, groups, out); });
  else
    PrepareXRows<kInterleaved>(X, 0, T, cols, groups, out);
  return out;
}

// ---- Many input rows: decode a panel of weight rows once into fp32 (in
// position order, zero-padded to whole groups) and reuse it for every input
// row. The micro-kernel then only loads and multiplies: kPanelR x kPanelT
// outputs per tile, X vectors held in registers, each weight vector loaded
// once per tile and used kPanelT times. The FMAs per output are the
// contract's, in its order, so the panel changes no value.
// AVX-512: 6 x 2 tiles hold 24 partial-sum vectors, the 4 input vectors
// and one weight vector in registers; each weight vector is loaded once for
// 2 FMAs and each input vector once for 6. AVX2 (16 registers): 3 x 1.
constexpr size_t kPanelR = kVecs == 2 ? 6 : 3;     // weight rows per tile
constexpr size_t kPanelT = kVecs == 2 ? 2 : 1;     // input rows per tile
// Columns are taken in chunks of kPanelK groups so that a tile's weight
// rows (reused by every input tile) and the input rows stay in L1.
constexpr size_t kPanelK = 32;

// Keeps a loaded vector in a register: without it the compiler may fold the
// load into each FMA that uses it (one load per use instead of one).
HWY_INLINE VF InRegister(VF v) {
#if HWY_ARCH_X86
  asm("" : "+v"(v.raw));
#endif
  return v;
}

// One tile over groups [g0, g1). The R x TT outputs' partial sums start at
// zero (kFirst) or come from `sums` ([t][r][v], the previous column chunk:
// a store and a reload are exact); after the last chunk they are folded
// into Y, otherwise stored back.
// W's column 0 is group `wg0` (the whole row, or a decoded chunk of it).
template <size_t R, size_t TT, bool kInterleaved, bool kFirst, bool kLast>
HWY_INLINE void PanelTile(const float* W, size_t wstride, size_t wg0, const float* x, size_t xstride, size_t g0,
                          size_t g1, VF* sums, float* Y, size_t rows, size_t o0, size_t t0) {
  const DF df;
  VF acc[R][TT][kVecs];
  for (size_t r = 0; r < R; ++r)
    for (size_t t = 0; t < TT; ++t)
      for (size_t v = 0; v < kVecs; ++v) acc[r][t][v] = kFirst ? hn::Zero(df) : sums[(t * R + r) * kVecs + v];
  for (size_t g = g0; g < g1; ++g) {
    VF xv[TT][kVecs];
    for (size_t t = 0; t < TT; ++t)
      for (size_t v = 0; v < kVecs; ++v) xv[t][v] = hn::Load(df, x + t * xstride + g * kLanes + v * N);
    for (size_t r = 0; r < R; ++r)
      for (size_t v = 0; v < kVecs; ++v) {
        const VF wv = InRegister(hn::LoadU(df, W + r * wstride + (g - wg0) * kLanes + v * N));
        for (size_t t = 0; t < TT; ++t) acc[r][t][v] = hn::MulAdd(wv, xv[t][v], acc[r][t][v]);
      }
  }
  if constexpr (kLast) {
    float out[R * TT];
    FinishMany<kInterleaved, R * TT>(&acc[0][0][0], out);
    for (size_t r = 0; r < R; ++r)
      for (size_t t = 0; t < TT; ++t) Y[(t0 + t) * rows + o0 + r] = out[r * TT + t];
  } else {
    for (size_t r = 0; r < R; ++r)
      for (size_t t = 0; t < TT; ++t)
        for (size_t v = 0; v < kVecs; ++v) sums[(t * R + r) * kVecs + v] = acc[r][t][v];
  }
}

template <size_t R, size_t TT, bool kInterleaved>
HWY_INLINE void PanelChunk(const float* W, size_t wstride, size_t wg0, const float* x, size_t xstride, size_t g0,
                           size_t g1, size_t groups, VF* sums, float* Y, size_t rows, size_t o0, size_t t0) {
  const bool first = g0 == 0, last = g1 == groups;
  if (first && last)
    PanelTile<R, TT, kInterleaved, true, true>(W, wstride, wg0, x, xstride, g0, g1, sums, Y, rows, o0, t0);
  else if (first)
    PanelTile<R, TT, kInterleaved, true, false>(W, wstride, wg0, x, xstride, g0, g1, sums, Y, rows, o0, t0);
  else if (last)
    PanelTile<R, TT, kInterleaved, false, true>(W, wstride, wg0, x, xstride, g0, g1, sums, Y, rows, o0, t0);
  else
    PanelTile<R, TT, kInterleaved, false, false>(W, wstride, wg0, x, xstride, g0, g1, sums, Y, rows, o0, t0);
}

// Weight rows for PanelRows, in fp32 position order: F32 rows used in place,
// or rows decoded one column chunk at a time into `buf` right before the
// tiles use them (so they are read back from L1, never from L2).
struct InPlaceRows {
  const float* W;
  size_t wstride;
  template <size_t R>
  const float* Chunk(size_t /*g0*/, size_t /*g1*/, size_t& stride, size_t& wg0) const {
    stride = wstride;
    wg0 = 0;
    return W;
  }
};
template <class Rows>
struct DecodedChunks {
  const Rows& rows_of;
  size_t o0, groups, full_groups;
  float* buf;  // kPanelR rows x kPanelK groups
  template <size_t R>
  const float* Chunk(size_t g0, size_t g1, size_t& stride, size_t& wg0) const {
    const DF df;
    stride = kPanelK * kLanes;
    wg0 = g0;
    const size_t full_end = std::min(g1, full_groups);
    // The bytes the next chunk will decode: these rows' next columns, or
    // the next rows' first ones (weights just read from a drive sit in DRAM).
    for (size_t r = 0; r < R; ++r) {
      if (g1 < groups)
        rows_of.PrefetchGroups(o0 + r, g1, std::min(groups, g1 + kPanelK));
      else
        rows_of.PrefetchGroups(o0 + R + r, 0, std::min(groups, kPanelK));
    }
    for (size_t r = 0; r < R; ++r) {
      const typename Rows::Row row = rows_of.row(o0 + r);
      float* dst = buf + r * stride;
      VF w[kVecs];
#pragma GCC unroll 4
      for (size_t g = g0; g < full_end; ++g) {
        row.Load(g, w);
        for (size_t v = 0; v < kVecs; ++v) hn::Store(w[v], df, dst + (g - g0) * kLanes + v * N);
      }
      if (full_groups < g1) {  // the zero-padded last group
        row.LoadTail(full_groups, w);
        for (size_t v = 0; v < kVecs; ++v) hn::Store(w[v], df, dst + (full_groups - g0) * kLanes + v * N);
      }
    }
    return buf;
  }
};

// All T input rows against R weight rows: column chunk by column chunk,
// each chunk's weight rows reused by every input tile. `sums` holds
// T x R x kVecs vectors.
template <size_t R, bool kInterleaved, class Source>
HWY_NOINLINE void PanelRows(const Source& src, const float* Xp, size_t T, size_t groups, float* Y, size_t rows,
                            size_t o0, VF* sums) {
  const size_t xstride = RowStride(groups);
  for (size_t g0 = 0; g0 < groups; g0 += kPanelK) {
    const size_t g1 = std::min(groups, g0 + kPanelK);
    size_t wstride, wg0;
    const float* W = src.template Chunk<R>(g0, g1, wstride, wg0);
    size_t t = 0;
    for (; t + kPanelT <= T; t += kPanelT)
      PanelChunk<R, kPanelT, kInterleaved>(W, wstride, wg0, Xp + t * xstride, xstride, g0, g1, groups,
                                           sums + t * R * kVecs, Y, rows, o0, t);
    for (; t < T; ++t)
      PanelChunk<R, 1, kInterleaved>(W, wstride, wg0, Xp + t * xstride, xstride, g0, g1, groups,
                                     sums + t * R * kVecs, Y, rows, o0, t);
  }
}

// `n` (< kPanelR) leftover weight rows; make(r) gives the source of the rows
// from the r-th leftover row on.
template <bool kInterleaved, class Make>
void PanelRowsTail(size_t n, const Make& make, const float* Xp, size_t T, size_t groups, float* Y, size_t rows,
                   size_t o0, VF* sums) {
  switch (n) {
    case 1: return PanelRows<1, kInterleaved>(make(0), Xp, T, groups, Y, rows, o0, sums);
    case 2: return PanelRows<2, kInterleaved>(make(0), Xp, T, groups, Y, rows, o0, sums);
    case 3: return PanelRows<3, kInterleaved>(make(0), Xp, T, groups, Y, rows, o0, sums);
    case 4: return PanelRows<4, kInterleaved>(make(0), Xp, T, groups, Y, rows, o0, sums);
    case 5: return PanelRows<5, kInterleaved>(make(0), Xp, T, groups, Y, rows, o0, sums);
    default:
      for (size_t r = 0; r < n; ++r) PanelRows<1, kInterleaved>(make(r), Xp, T, groups, Y, rows, o0 + r, sums);
  }
}

// Rows [b, e) of the product, kPanelR rows at a time: F32 weights whose rows
// are whole groups are used in place; other formats are decoded a column
// chunk at a time into an L1-sized buffer.
// Input rows are taken kPanelTBlock at a time, so that a column chunk of
// them (64 rows x kPanelK groups: 192 KiB) stays in L2 while every weight
// tile passes over it; each chunk of weights is decoded once per block.
constexpr size_t kPanelTBlock = 64;

template <class Rows>
void PanelBlock(const Rows& rows_of, size_t b, size_t e, size_t groups, size_t full_groups, const float* Xp,
                size_t T, size_t rows, float* Y) {
  constexpr bool kIl = Rows::kInterleaved;
  // Partial sums carried between column chunks: [rows of a block][kPanelR][kVecs].
  thread_local hwy::AlignedFreeUniquePtr<float[]> sums_buf;
  if (!sums_buf) sums_buf = hwy::AllocateAligned<float>(kPanelTBlock * kPanelR * kLanes);
  VF* sums = reinterpret_cast<VF*>(sums_buf.get());
  thread_local hwy::AlignedFreeUniquePtr<float[]> chunk_buf;
  if (!chunk_buf) chunk_buf = hwy::AllocateAligned<float>(kPanelR * kPanelK * kLanes);
  float* buf = chunk_buf.get();
  const bool in_place = Rows::kInPlace && full_groups == groups;
  const size_t wstride = groups * kLanes;  // in place: the weights' own rows
  for (size_t t0 = 0; t0 < T; t0 += kPanelTBlock) {
    const size_t Tb = std::min(kPanelTBlock, T - t0);
    const float* Xb = Xp + t0 * RowStride(groups);
    float* Yb = Y + t0 * rows;
    size_t o = b;
    if constexpr (Rows::kInPlace) {
      if (in_place) {
        for (; o + kPanelR <= e; o += kPanelR)
          PanelRows<kPanelR, kIl>(InPlaceRows{rows_of.row_data(o), wstride}, Xb, Tb, groups, Yb, rows, o, sums);
        if (o < e)
          PanelRowsTail<kIl>(
              e - o, [&](size_t r) { return InPlaceRows{rows_of.row_data(o + r), wstride}; }, Xb, Tb, groups, Yb,
              rows, o, sums);
        continue;
      }
    }
    for (; o + kPanelR <= e; o += kPanelR)
      PanelRows<kPanelR, kIl>(DecodedChunks<Rows>{rows_of, o, groups, full_groups, buf}, Xb, Tb, groups, Yb, rows, o,
                              sums);
    if (o < e)
      PanelRowsTail<kIl>(
          e - o, [&](size_t r) { return DecodedChunks<Rows>{rows_of, o + r, groups, full_groups, buf}; }, Xb, Tb,
          groups, Yb, rows, o, sums);
  }
}

constexpr size_t kGrain = 16;  // a multiple of every tile height

// Rows [b, e) of one product, by the shape of the call: T = 1 tiles several
// rows per X load; a few input rows share each decoded weight group in
// registers; many input rows go through decoded panels.
template <class Rows>
void Block(const Rows& rows_of, size_t b, size_t e, size_t groups, size_t full_groups, const float* Xp, size_t T,
           size_t rows, float* Y) {
  if (T == 1)
    RowBlock<Rows, kRowsT1, 1>(rows_of, b, e, groups, full_groups, Xp, T, rows, Y);
  else if (T >= Rows::kPanelMinT)
    PanelBlock<Rows>(rows_of, b, e, groups, full_groups, Xp, T, rows, Y);
  else
    RowBlock<Rows, kRowsTn<Rows>, kTileT<Rows>>(rows_of, b, e, groups, full_groups, Xp, T, rows, Y);
}

inline bool InterleavedFormat(WeightFormat f) { return f == WeightFormat::kBf16 || f == WeightFormat::kMxfp4; }

void MatmulGroup(const MatmulJob* jobs, size_t n_jobs, size_t cols, const float* X, size_t T, ThreadPool* pool) {
  if (T == 0 || n_jobs == 0) return;
  const size_t groups = (cols + kLanes - 1) / kLanes, full_groups = cols / kLanes;
  size_t total = 0;
  bool want_il = false, want_id = false;
  for (size_t j = 0; j < n_jobs; ++j) {
    total += jobs[j].rows;
    (InterleavedFormat(jobs[j].format) ? want_il : want_id) = true;
  }
  if (total == 0) return;
  // The two orders live in different thread-local buffers.
  const float* Xil = want_il ? PrepareX<true>(X, T, cols, groups, pool) : nullptr;
  const float* Xid = want_id ? PrepareX<false>(X, T, cols, groups, pool) : nullptr;
  const E8M0Table* e8m0 = &e8m0_table();
  auto body = [&](size_t b, size_t e) {
    size_t first = 0;  // global row index of job j's row 0
    for (size_t j = 0; j < n_jobs && first < e; first += jobs[j].rows, ++j) {
      const MatmulJob& job = jobs[j];
      const size_t lo = std::max(b, first), hi = std::min(e, first + job.rows);
      if (lo >= hi) continue;
      const size_t lb = lo - first, le = hi - first;
      switch (job.format) {
        case WeightFormat::kF32:
          Block(F32Rows{static_cast<const float*>(job.w), cols}, lb, le, groups, full_groups, Xid, T, job.rows, job.Y);
          break;
        case WeightFormat::kBf16:
          Block(Bf16Rows{static_cast<const uint16_t*>(job.w), cols}, lb, le, groups, full_groups, Xil, T, job.rows,
                job.Y);
          break;
        case WeightFormat::kI8:
          Block(I8Rows{static_cast<const int8_t*>(job.w), static_cast<const uint16_t*>(job.scales), cols}, lb, le,
                groups, full_groups, Xid, T, job.rows, job.Y);
          break;
        case WeightFormat::kMxfp4:
          Block(Mxfp4Rows{static_cast<const uint8_t*>(job.w), static_cast<const uint8_t*>(job.scales), cols, e8m0},
                lb, le, groups, full_groups, Xil, T, job.rows, job.Y);
          break;
        case WeightFormat::kFp8Block:  // decoded to F32 jobs by matmul_group (matmul_fp8.cpp): never here
          break;
      }
    }
  };
  if (pool)
    pool->parallel_for(total, kGrain, body);
  else
    body(0, total);
}

void MatmulF32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool) {
  const MatmulJob job{WeightFormat::kF32, W, nullptr, rows, Y};
  MatmulGroup(&job, 1, cols, X, T, pool);
}

void MatmulBf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool) {
  const MatmulJob job{WeightFormat::kBf16, W, nullptr, rows, Y};
  MatmulGroup(&job, 1, cols, X, T, pool);
}

void MatmulMxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X, size_t T,
                 float* Y, ThreadPool* pool) {
  if (cols % kLanes != 0) return scalar_rows_mxfp4(packed, scales, rows, cols, X, T, Y, pool);
  const MatmulJob job{WeightFormat::kMxfp4, packed, scales, rows, Y};
  MatmulGroup(&job, 1, cols, X, T, pool);
}

void MatmulI8(const int8_t* q, const uint16_t* scales, size_t rows, size_t cols, const float* X, size_t T, float* Y,
              ThreadPool* pool) {
  const MatmulJob job{WeightFormat::kI8, q, scales, rows, Y};
  MatmulGroup(&job, 1, cols, X, T, pool);
}

float DotF32(const float* a, const float* b, size_t n) {
  const DF df;
  VF acc[kVecs];
  for (size_t v = 0; v < kVecs; ++v) acc[v] = hn::Zero(df);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t v = 0; v < kVecs; ++v)
      acc[v] = hn::MulAdd(hn::LoadU(df, a + i + v * N), hn::LoadU(df, b + i + v * N), acc[v]);
  if (i < n) {
    HWY_ALIGN float ta[kLanes] = {}, tb[kLanes] = {};
    std::memcpy(ta, a + i, (n - i) * sizeof(float));
    std::memcpy(tb, b + i, (n - i) * sizeof(float));
    for (size_t v = 0; v < kVecs; ++v)
      acc[v] = hn::MulAdd(hn::Load(df, ta + v * N), hn::Load(df, tb + v * N), acc[v]);
  }
  float out;
  FinishMany<false, 1>(acc, &out);
  return out;
}

#else  // !DF_KERNEL_SIMD: the scalar contract, row-parallel.

void MatmulF32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool) {
  scalar_rows_f32(W, rows, cols, X, T, Y, pool);
}
void MatmulBf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool) {
  scalar_rows_bf16(W, rows, cols, X, T, Y, pool);
}
void MatmulMxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X, size_t T,
                 float* Y, ThreadPool* pool) {
  scalar_rows_mxfp4(packed, scales, rows, cols, X, T, Y, pool);
}
void MatmulI8(const int8_t* q, const uint16_t* scales, size_t rows, size_t cols, const float* X, size_t T, float* Y,
              ThreadPool* pool) {
  scalar_rows_i8(q, scales, rows, cols, X, T, Y, pool);
}
float DotF32(const float* a, const float* b, size_t n) { return scalar::dot_f32(a, b, n); }
void MatmulGroup(const MatmulJob* jobs, size_t n_jobs, size_t cols, const float* X, size_t T, ThreadPool* pool) {
  for (size_t j = 0; j < n_jobs; ++j) {
    const MatmulJob& m = jobs[j];
    switch (m.format) {
      case WeightFormat::kF32: MatmulF32(static_cast<const float*>(m.w), m.rows, cols, X, T, m.Y, pool); break;
      case WeightFormat::kBf16: MatmulBf16(static_cast<const uint16_t*>(m.w), m.rows, cols, X, T, m.Y, pool); break;
      case WeightFormat::kI8:
        MatmulI8(static_cast<const int8_t*>(m.w), static_cast<const uint16_t*>(m.scales), m.rows, cols, X, T, m.Y, pool);
        break;
      case WeightFormat::kMxfp4:
        MatmulMxfp4(static_cast<const uint8_t*>(m.w), static_cast<const uint8_t*>(m.scales), m.rows, cols, X, T, m.Y,
                    pool);
        break;      case WeightFormat::kFp8Block:  // decoded to F32 jobs by matmul_group (matmul_fp8.cpp): never here
        break;
    }
  }
}

#endif  // DF_KERNEL_SIMD

}  // namespace HWY_NAMESPACE
}  // namespace deltafin::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
