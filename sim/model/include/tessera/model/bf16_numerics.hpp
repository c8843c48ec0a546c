// The BF16 precision's float arithmetic, exactly as the engine computes it (docs/ENGINE.md, "BF16
// numerics"). Values travel as their bit patterns: fp32 as uint32_t, bf16 as uint16_t. Header-only
// so the golden model, the runtime and the tests share one definition.
//
// Every finite value in play (fp32 normals, products of two bf16 normals, sums of two of those) is
// a normal double, and a product of two 8-bit significands is exact in a double's 53 bits. A sum
// of a 24-bit and a 16-bit value rounded first to 53 bits and then to 24 rounds as if rounded once,
// because 53 >= 2 x 24 + 1 (Figueroa's double-rounding theorem), so a double add followed by
// round_fp32() is the single rounding the engine performs. tests/unit/test_bf16_numerics.cpp
// checks this against MPFR, which rounds the exact result.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tessera::numerics {

inline constexpr uint32_t kFp32Sign = 0x80000000u;
inline constexpr uint32_t kFp32Inf = 0x7f800000u;
inline constexpr uint32_t kFp32QuietNan = 0x7fc00000u;  // the one NaN the engine produces
inline constexpr uint32_t kFp32NegZero = kFp32Sign;     // a PE's sum starts here: -0 + x == x

constexpr bool fp32_is_nan(uint32_t x) { return (x & ~kFp32Sign) > kFp32Inf; }
constexpr bool fp32_is_inf(uint32_t x) { return (x & ~kFp32Sign) == kFp32Inf; }
constexpr bool fp32_is_zero(uint32_t x) { return (x & ~kFp32Sign) == 0; }

// An fp32 operand as the engine reads it: a subnormal is a zero of its sign (denormals are zero).
constexpr uint32_t fp32_daz(uint32_t x) { return (x & kFp32Inf) == 0 ? x & kFp32Sign : x; }

// A bf16 operand widened to fp32 bits (exact), subnormals as zero.
constexpr uint32_t bf16_operand(uint16_t b) { return fp32_daz(static_cast<uint32_t>(b) << 16); }

// A finite fp32 (no subnormal) as a double, exactly.
inline double fp32_value(uint32_t x) { return static_cast<double>(std::bit_cast<float>(x)); }

// A finite double rounded as the engine rounds: to 24 significant bits, nearest even, with an
// unbounded exponent; then a magnitude of 2^128 or more is an infinity and one below 2^-126 a zero
// (flush to zero), both with the value's sign. A zero keeps its sign.
inline uint32_t round_fp32(double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  const uint32_t sign = static_cast<uint32_t>(bits >> 32) & kFp32Sign;
  const uint64_t mag = bits & ~(uint64_t{1} << 63);
  if (mag == 0) return sign;
  // Drop 29 of the double's 52 fraction bits, to nearest even; a carry out of the fraction bumps
  // the exponent field, which is the right value.
  const uint64_t rest = mag & ((uint64_t{1} << 29) - 1), half = uint64_t{1} << 28;
  uint64_t kept = mag >> 29;
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  const int64_t exp = static_cast<int64_t>(kept >> 23) - 1023;
  if (exp > 127) return sign | kFp32Inf;
  if (exp < -126) return sign;
  return sign | static_cast<uint32_t>((exp + 127) << 23) | static_cast<uint32_t>(kept & 0x7fffff);
}

// One PE step: acc + a * b, the product exact and the sum rounded once (a fused multiply-add).
// Any NaN operand, inf x 0 and inf - inf give the quiet NaN.
inline uint32_t bf16_fma(uint32_t acc, uint16_t a, uint16_t b) {
  const uint32_t fa = bf16_operand(a), fb = bf16_operand(b);
  if (fp32_is_nan(acc) || fp32_is_nan(fa) || fp32_is_nan(fb)) return kFp32QuietNan;
  if (fp32_is_inf(fa) || fp32_is_inf(fb)) {
    const uint32_t sign = (fa ^ fb) & kFp32Sign;
    if (fp32_is_zero(fa) || fp32_is_zero(fb)) return kFp32QuietNan;
    if (fp32_is_inf(acc) && (acc & kFp32Sign) != sign) return kFp32QuietNan;
    return sign | kFp32Inf;
  }
  if (fp32_is_inf(acc)) return acc;
  return round_fp32(fp32_value(acc) + fp32_value(fa) * fp32_value(fb));
}

// bf16_fma over a row of PEs that share their A operand, for finite operands (no infinity or NaN
// in a or b; subnormals already zeros): acc[i] = bf16_fma(acc[i], a, b[i]), as the golden model's
// fast path. The hardware's conversion of the double sum to float rounds to 24 bits, nearest even,
// and overflows to infinity as round_fp32 does; only a result below 2^-126 needs the engine's rule
// (it is 2^-126 where rounding to 24 bits with an unbounded exponent reaches it, else a zero). An
// infinite accumulator stays infinite, as finite products cannot cancel it.
inline void bf16_fma_row(float* __restrict acc, float a, const float* __restrict b, uint32_t n) {
  constexpr double kReachesMin = 0x1p-126 - 0x1p-151;  // the midpoint below 2^-126 on the 24-bit grid
  constexpr uint32_t kChunk = 64;
  double s[kChunk];
  for (uint32_t i0 = 0; i0 < n; i0 += kChunk) {
    const uint32_t len = std::min(kChunk, n - i0);
    float* __restrict x = acc + i0;
    const float* __restrict y = b + i0;
    // a plain loop of a fixed count, which the compiler vectorizes, noting results of 2^-126 or less ...
    uint32_t tiny = 0;
    auto step = [&](uint32_t i) {
      s[i] = static_cast<double>(x[i]) + static_cast<double>(a) * static_cast<double>(y[i]);
      x[i] = static_cast<float>(s[i]);
      tiny |= static_cast<uint32_t>((std::bit_cast<uint32_t>(x[i]) & ~kFp32Sign) <= 0x00800000u);
    };
    if (len == kChunk)
      for (uint32_t i = 0; i < kChunk; ++i) step(i);
    else
      for (uint32_t i = 0; i < len; ++i) step(i);
    // ... then, where there are any, the results at or below 2^-126: the hardware rounds on the
    // subnormal grid there, which can reach 2^-126 where the engine's 24-bit grid does not
    if (tiny)
      for (uint32_t i = 0; i < len; ++i)
        if ((std::bit_cast<uint32_t>(x[i]) & ~kFp32Sign) <= 0x00800000u && s[i] != 0)
          x[i] = std::bit_cast<float>((static_cast<uint32_t>(std::bit_cast<uint64_t>(s[i]) >> 32) & kFp32Sign) |
                                      (std::abs(s[i]) >= kReachesMin ? 0x00800000u : 0u));
  }
}

// x + y rounded once, for the epilogue's C_in and bias; y comes from memory (subnormal: zero).
inline uint32_t fp32_add(uint32_t x, uint32_t y) {
  y = fp32_daz(y);
  if (fp32_is_nan(x) || fp32_is_nan(y)) return kFp32QuietNan;
  if (fp32_is_inf(x) && fp32_is_inf(y)) return x == y ? x : kFp32QuietNan;
  if (fp32_is_inf(x)) return x;
  if (fp32_is_inf(y)) return y;
  return round_fp32(fp32_value(x) + fp32_value(y));
}

// max(x, +0): every negative value, -0 and -inf included, becomes +0; NaN stays NaN.
constexpr uint32_t fp32_relu(uint32_t x) { return !fp32_is_nan(x) && (x & kFp32Sign) ? 0 : x; }

// The BF16 output mode: fp32 to bf16, nearest even; a carry past the largest bf16 gives inf, and
// the quiet NaN stays the quiet NaN (0x7fc0).
constexpr uint16_t fp32_to_bf16(uint32_t x) {
  if (fp32_is_nan(x)) return static_cast<uint16_t>(kFp32QuietNan >> 16);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

}  // namespace tessera::numerics
