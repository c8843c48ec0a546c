// The BF16 precision's float arithmetic, exactly as the engine computes it (docs/ENGINE.md, "BF16
// numerics"). Values travel as their bit patterns: fp32 as uint32_t, bf16 as uint16_t. Header-only
// so the golden model, the runtime and the tests share one definition.
//
// Every finite value in play (fp32 normals, a PE's fixed-point sum of under 2^53 scaled by a power
// of two, sums of two fp32s) is a normal double. A sum of two 24-bit values rounded first to 53 bits
// and then to 24 rounds as if rounded once, because 53 >= 2 x 24 + 1 (Figueroa's double-rounding
// theorem), so a double add followed by round_fp32() is the single rounding the engine performs.
// tests/unit/test_bf16_numerics.cpp checks this against MPFR, which rounds the exact result.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tessera::numerics {

inline constexpr uint32_t kFp32Sign = 0x80000000u;
inline constexpr uint32_t kFp32Inf = 0x7f800000u;
inline constexpr uint32_t kFp32QuietNan = 0x7fc00000u;  // the one NaN the engine produces

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

// ---- A PE's sum: block floating point (docs/ENGINE.md, "BF16 numerics") ----
// Each A row of a tile (K elements) and each B column of a column block has a block exponent: the
// largest exponent field among its finite nonzero elements. An element becomes a fixed-point
// integer relative to its block, its significand (8 bits, the hidden one included) shifted so that
// the block's largest significand has kFixedBitsA (A) or kFixedBitsB (B) bits, truncated toward
// zero. Each product of two of those is exact and so is their sum over K (|S| < 2^47, the DSP48's
// accumulator), which is rounded to fp32 once.
inline constexpr int kFixedBitsA = 19;  // magnitude bits of an A operand (the 25-bit multiplier port, signed)
inline constexpr int kFixedBitsB = 17;  // of a B operand (the 18-bit port, signed)
// S x 2^(ea + eb - kSumExpOffset) is the sum's value: an operand is x_fixed x 2^(block - 134 - (bits - 8)).
inline constexpr int kSumExpOffset = 2 * 134 + (kFixedBitsA - 8) + (kFixedBitsB - 8);

constexpr int bf16_exp_field(uint16_t x) { return (x >> 7) & 0xff; }
constexpr bool bf16_is_nan(uint16_t x) { return (x & 0x7fff) > 0x7f80; }
constexpr bool bf16_is_inf(uint16_t x) { return (x & 0x7fff) == 0x7f80; }
constexpr bool bf16_is_zero(uint16_t x) { return bf16_exp_field(x) == 0; }  // a subnormal too

// A block's exponent (0 where no element is finite and nonzero) and whether any element is a NaN.
struct Bf16Block {
  int exp = 0;
  bool nan = false;
  constexpr void add(uint16_t x) {
    const int e = bf16_exp_field(x);
    if (e != 0xff) exp = std::max(exp, e);
    nan |= bf16_is_nan(x);
  }
};

// x as a fixed-point operand of its block: sign x floor(significand x 2^(bits - 8 - (block - e))),
// the shift a right one for elements far below the block's largest; 0 for zeros, subnormals,
// infinities and NaNs (their class travels beside the value).
constexpr int32_t bf16_fixed(uint16_t x, int block_exp, int bits) {
  const int e = bf16_exp_field(x);
  if (e == 0 || e == 0xff) return 0;
  const int right = block_exp - e - (bits - 8), sig = 0x80 | (x & 0x7f);
  const int32_t mag = right <= 0 ? sig << -right : right >= 8 ? 0 : sig >> right;
  return x & 0x8000 ? -mag : mag;
}

// The special cases of a sum of products, from its operands' classes: a NaN operand anywhere in
// the row or column (the blocks' flags), inf x 0 (a subnormal is a 0), or infinite products of
// both signs give the NaN; otherwise an infinite product gives an infinity of its sign.
struct Bf16Specials {
  bool nan = false, pos_inf = false, neg_inf = false;
  constexpr void add(uint16_t a, uint16_t b) {
    const bool inf = bf16_is_inf(a) || bf16_is_inf(b);
    if (inf && (bf16_is_zero(a) || bf16_is_zero(b)))
      nan = true;
    else if (inf)
      ((a ^ b) & 0x8000 ? neg_inf : pos_inf) = true;
  }
};

// A PE's finished sum: S x 2^(ea + eb - kSumExpOffset), with the row's and column's NaN flags and
// the special cases of its products.
struct Bf16Sum {
  int64_t s = 0;
  int ea = 0, eb = 0;
  bool nan = false;  // a NaN in the row of A or the column of B
  Bf16Specials specials;

  // As fp32 bits: the value rounded once as round_fp32 does (an exact zero is +0), or the special
  // case. |S| < 2^53, so the double is exact.
  uint32_t fp32() const {
    if (nan || specials.nan || (specials.pos_inf && specials.neg_inf)) return kFp32QuietNan;
    if (specials.pos_inf || specials.neg_inf) return (specials.neg_inf ? kFp32Sign : 0) | kFp32Inf;
    if (s == 0) return 0;
    return round_fp32(std::ldexp(static_cast<double>(s), ea + eb - kSumExpOffset));
  }
  // The low 32 bits of S replaced (a stuck bit of the PE's result register), the rest kept.
  Bf16Sum with_low_bits(uint32_t low) const {
    Bf16Sum r = *this;
    r.s = (s & ~int64_t{0xffffffff}) | low;
    return r;
  }
};

// One output of a BF16 GEMM before the epilogue: the row a[0], a[a_step], ... against the column
// b[0], b[b_step], ..., k elements each.
inline Bf16Sum bf16_dot(const uint16_t* a, size_t a_step, const uint16_t* b, size_t b_step, uint32_t k) {
  Bf16Block ba, bb;
  for (uint32_t i = 0; i < k; ++i) ba.add(a[i * a_step]), bb.add(b[i * b_step]);
  Bf16Sum r{.ea = ba.exp, .eb = bb.exp, .nan = ba.nan || bb.nan, .specials = {}};
  for (uint32_t i = 0; i < k; ++i) {
    r.specials.add(a[i * a_step], b[i * b_step]);
    r.s += int64_t{bf16_fixed(a[i * a_step], ba.exp, kFixedBitsA)} * bf16_fixed(b[i * b_step], bb.exp, kFixedBitsB);
  }
  return r;
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
