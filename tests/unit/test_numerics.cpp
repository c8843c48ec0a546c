// Hand-worked cases of gemmlowp/TFLite's reference requantization, computed from its definitions.
#include <catch2/catch.hpp>
#include <limits>

#include "tessera/model/numerics.hpp"

using namespace tessera::numerics;

constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();

TEST_CASE("SaturatingRoundingDoublingHighMul: worked cases", "[unit][numerics]") {
  CHECK(saturating_rounding_doubling_high_mul(kMin, kMin) == kMax);  // the one overflow
  // 2^30 * 2^30 * 2 / 2^32 = 2^29 exactly (the nudge is below one unit).
  CHECK(saturating_rounding_doubling_high_mul(1 << 30, 1 << 30) == 1 << 29);
  CHECK(saturating_rounding_doubling_high_mul(-(1 << 30), 1 << 30) == -(1 << 29));
  // 3 * 0.5 = 1.5 rounds up to 2; -1.5 also rounds up, to -1 (ties go toward +infinity).
  CHECK(saturating_rounding_doubling_high_mul(3, 1 << 30) == 2);
  CHECK(saturating_rounding_doubling_high_mul(-3, 1 << 30) == -1);
  // -1.6 (= -8 * 0.2) rounds to -2.
  CHECK(saturating_rounding_doubling_high_mul(-8, 429496730) == -2);
  CHECK(saturating_rounding_doubling_high_mul(kMax, kMax) == kMax - 1);
  CHECK(saturating_rounding_doubling_high_mul(kMin, kMax) == -kMax);
  CHECK(saturating_rounding_doubling_high_mul(0, kMin) == 0);
}

TEST_CASE("RoundingDivideByPOT: worked cases", "[unit][numerics]") {
  CHECK(rounding_divide_by_pot(5, 1) == 3);    // 2.5 -> 3, half away from zero
  CHECK(rounding_divide_by_pot(-5, 1) == -3);  // -2.5 -> -3
  CHECK(rounding_divide_by_pot(6, 2) == 2);    // 1.5 -> 2
  CHECK(rounding_divide_by_pot(-6, 2) == -2);  // -1.5 -> -2
  CHECK(rounding_divide_by_pot(5, 2) == 1);    // 1.25 -> 1
  CHECK(rounding_divide_by_pot(-7, 2) == -2);  // -1.75 -> -2
  CHECK(rounding_divide_by_pot(123, 0) == 123);
  CHECK(rounding_divide_by_pot(kMax, 31) == 1);
  CHECK(rounding_divide_by_pot(kMin, 31) == -1);
  CHECK(rounding_divide_by_pot(-1, 31) == 0);
}

TEST_CASE("MultiplyByQuantizedMultiplier and requantize: worked cases", "[unit][numerics]") {
  CHECK(multiply_by_quantized_multiplier(1000, 1 << 30, -1) == 250);  // 1000 * 0.5 / 2
  CHECK(multiply_by_quantized_multiplier(7, 1 << 30, 0) == 4);        // 3.5 -> 4
  // 100 * 2 * 0.70710678 = 141.42 -> 141
  CHECK(multiply_by_quantized_multiplier(100, 1518500250, 1) == 141);
  CHECK(multiply_by_quantized_multiplier(-100, 1518500250, 1) == -141);
  CHECK(multiply_by_quantized_multiplier(0x40000000, 1 << 30, 2) == 0);  // x << 2 wraps to 0
  CHECK(multiply_by_quantized_multiplier(kMin, kMin, 0) == kMax);
  CHECK(requantize(1000, 1 << 30, -1, 5, -128, 127) == 127);   // 250 + 5 clamps high
  CHECK(requantize(-1000, 1 << 30, -1, 5, -128, 127) == -128); // -250 + 5 clamps low
  CHECK(requantize(100, 1 << 30, -1, 3, -128, 127) == 28);     // 25 + 3
  CHECK(requantize(-100, 1 << 30, -1, 3, 3, 127) == 3);        // ReLU: act_min = out_zp
  // MBQM saturates at INT32_MAX, adding the zero point wraps to INT32_MIN, which clamps low.
  CHECK(requantize(kMin, kMin, 0, 1, -128, 127) == -128);
}

TEST_CASE("wrapping int32 arithmetic", "[unit][numerics]") {
  CHECK(wrap_add(kMax, 1) == kMin);
  CHECK(wrap_add(kMin, -1) == kMax);
  CHECK(wrap_shl(1, 31) == kMin);
  CHECK(wrap_shl(3, 31) == kMin);
}
