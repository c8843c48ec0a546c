#include "tessera/model/float_formats.hpp"

#include <bit>
#include <cmath>

namespace tessera {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, or NaN with its payload
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00 | ((abs >> 13) & 0x3ff);  // NaN: quiet bit set, so never inf
  const int exp = static_cast<int>(abs >> 23) - 127;
  if (exp > 15) return sign | 0x7c00;  // too large (or inf): inf
  uint32_t mant = abs & 0x7fffff;
  // Keep `shift` low bits off the 24-bit significand, rounding to nearest even. A carry out of the
  // mantissa bumps the exponent, which is the right encoding (up to inf).
  auto round_shift = [](uint32_t m, int shift) {
    const uint32_t kept = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1)) ? 1 : 0);
  };
  if (exp >= -14) return sign | static_cast<uint16_t>((static_cast<uint32_t>(exp + 15) << 10) + round_shift(mant, 13));
  if (exp < -25) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal half: units of 2^-24; the float is (mant | 2^23) * 2^(exp-23).
  return sign | static_cast<uint16_t>(round_shift(mant | 0x800000, -exp - 1));
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  // Round to nearest even on the low 16 bits; overflow carries into inf.
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

}  // namespace tessera
