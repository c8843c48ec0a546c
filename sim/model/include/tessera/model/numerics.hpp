// The integer numerics of DESIGN.md: int32 two's-complement with wraparound, and TFLite/gemmlowp's
// reference requantization. Header-only so the golden model, the runtime and the tests share one
// definition.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace tessera::numerics {

// a + b with int32 wraparound (no undefined behaviour).
constexpr int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// x * 2^shift with int32 wraparound, shift in [0, 31].
constexpr int32_t wrap_shl(int32_t x, int shift) {
  return static_cast<int32_t>(static_cast<uint32_t>(x) << shift);
}

// gemmlowp SaturatingRoundingDoublingHighMul: high 32 bits of 2*a*b, rounded half away from zero;
// the one overflow case (both INT32_MIN) saturates.
constexpr int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == b && a == std::numeric_limits<int32_t>::min()) return std::numeric_limits<int32_t>::max();
  const int64_t ab = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));  // C++ division truncates
}

// gemmlowp RoundingDivideByPOT: x / 2^exponent rounded half away from zero, exponent in [0, 31].
constexpr int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// TFLite reference MultiplyByQuantizedMultiplier; shift > 0 shifts left first.
constexpr int32_t multiply_by_quantized_multiplier(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(wrap_shl(x, left), multiplier),
                                right);
}

// The int8 output mode: clamp(out_zp + MBQM(acc), act_min, act_max).
constexpr int8_t requantize(int32_t acc, int32_t multiplier, int shift, int8_t out_zp, int8_t act_min,
                            int8_t act_max) {
  const int32_t v = wrap_add(multiply_by_quantized_multiplier(acc, multiplier, shift), out_zp);
  return static_cast<int8_t>(std::clamp<int32_t>(v, act_min, act_max));
}

}  // namespace tessera::numerics
