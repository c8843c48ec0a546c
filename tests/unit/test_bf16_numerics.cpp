// The BF16 precision's arithmetic (bf16_numerics.hpp) and the golden model's BF16 GEMMs against an
// independent reference: MPFR, which rounds the exact result of each operation once. The
// reference applies the engine's rules (docs/ENGINE.md, "BF16 numerics") on its own, from values
// rather than bit fields: each operand scaled by a power of two from its block and truncated to an
// integer, the products summed exactly, subnormal inputs as zero, results below 2^-126 flushed to
// zero, at 2^128 or above infinite, the one quiet NaN. Edge cases (signed zeros, subnormals,
// overflow, NaN and infinity, cancellation, ties, truncation, long K), then random values over
// every exponent with a printed seed.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <mpfr.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "seed.hpp"
#include "tessera/model/bf16_numerics.hpp"
#include "tessera/model/golden.hpp"

using namespace tessera;
namespace D = spec::desc;

namespace {

// An MPFR number at fp32's 24 bits, with MPFR's own (practically unbounded) exponent range.
struct Big {
  mpfr_t v;
  explicit Big(mpfr_prec_t prec = 24) { mpfr_init2(v, prec); }
  ~Big() { mpfr_clear(v); }
  Big(const Big&) = delete;
  Big& operator=(const Big&) = delete;
};

// fp32 bits into MPFR as the engine reads an operand: exponent field zero means a signed zero.
void load(Big& x, uint32_t bits) {
  const bool neg = bits >> 31;
  const uint32_t exp = (bits >> 23) & 0xff, frac = bits & 0x7fffff;
  if (exp == 0xff && frac) {
    mpfr_set_nan(x.v);
  } else if (exp == 0xff) {
    mpfr_set_inf(x.v, neg ? -1 : 1);
  } else if (exp == 0) {
    mpfr_set_zero(x.v, neg ? -1 : 1);
  } else {
    // (2^23 + frac) * 2^(exp - 150), exact at 24 bits
    mpfr_set_ui_2exp(x.v, (1u << 23) | frac, static_cast<mpfr_exp_t>(exp) - 150, MPFR_RNDN);
    if (neg) mpfr_neg(x.v, x.v, MPFR_RNDN);
  }
}

// An MPFR result (already rounded to 24 bits) as the engine stores it.
uint32_t store(const Big& x) {
  if (mpfr_nan_p(x.v)) return numerics::kFp32QuietNan;
  const uint32_t sign = mpfr_signbit(x.v) ? numerics::kFp32Sign : 0;
  if (mpfr_inf_p(x.v)) return sign | numerics::kFp32Inf;
  if (mpfr_zero_p(x.v)) return sign;
  const mpfr_exp_t e = mpfr_get_exp(x.v);  // |x| in [2^(e-1), 2^e)
  if (e - 1 >= 128) return sign | numerics::kFp32Inf;
  if (e - 1 < -126) return sign;
  return std::bit_cast<uint32_t>(mpfr_get_flt(x.v, MPFR_RNDN));  // exact: 24 bits, normal range
}

// A block's exponent from its values: the largest e with 2^(e - 127) <= |x| over the finite nonzero
// normal elements (0 where there are none).
int ref_block(const std::vector<uint16_t>& xs) {
  int e = 0;
  for (uint16_t x : xs) {
    Big v;
    load(v, uint32_t{x} << 16);
    if (mpfr_number_p(v.v) && !mpfr_zero_p(v.v)) e = std::max<int>(e, static_cast<int>(mpfr_get_exp(v.v)) - 1 + 127);
  }
  return e;
}

// One output before the epilogue: sum over k of trunc(a_k x 2^(145 - EA)) x trunc(b_k x 2^(143 - EB)),
// exact, times 2^(EA + EB - 288), rounded once to 24 bits (an exact zero is +0); NaN for a NaN
// operand, inf x 0 or infinite products of both signs, else an infinite product's infinity.
uint32_t ref_dot(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  bool nan = false, pos = false, neg = false;
  for (size_t k = 0; k < a.size(); ++k) {
    Big x, y, p;
    load(x, uint32_t{a[k]} << 16);
    load(y, uint32_t{b[k]} << 16);
    mpfr_mul(p.v, x.v, y.v, MPFR_RNDN);  // only its class matters here
    nan |= mpfr_nan_p(p.v);
    if (mpfr_inf_p(p.v)) (mpfr_signbit(p.v) ? neg : pos) = true;
  }
  if (nan || (pos && neg)) return numerics::kFp32QuietNan;
  if (pos || neg) return (neg ? numerics::kFp32Sign : 0) | numerics::kFp32Inf;
  const int ea = ref_block(a), eb = ref_block(b);
  Big sum(256), r;
  mpfr_set_zero(sum.v, 1);
  for (size_t k = 0; k < a.size(); ++k) {
    Big x(64), y(64), p(128);
    load(x, uint32_t{a[k]} << 16);
    load(y, uint32_t{b[k]} << 16);
    mpfr_mul_2si(x.v, x.v, 145 - ea, MPFR_RNDN);
    mpfr_mul_2si(y.v, y.v, 143 - eb, MPFR_RNDN);
    mpfr_rint_trunc(x.v, x.v, MPFR_RNDN);
    mpfr_rint_trunc(y.v, y.v, MPFR_RNDN);
    mpfr_mul(p.v, x.v, y.v, MPFR_RNDN);  // exact: 128 bits
    mpfr_add(sum.v, sum.v, p.v, MPFR_RNDN);  // exact: under 2^60 in 256 bits
  }
  if (mpfr_zero_p(sum.v)) return 0;
  mpfr_mul_2si(sum.v, sum.v, ea + eb - 288, MPFR_RNDN);
  mpfr_set(r.v, sum.v, MPFR_RNDN);
  return store(r);
}

uint32_t ref_add(uint32_t a, uint32_t b) {
  Big x, y, r;
  load(x, a);
  load(y, b);
  mpfr_add(r.v, x.v, y.v, MPFR_RNDN);
  return store(r);
}

uint16_t ref_to_bf16(uint32_t f) {
  Big x, r(8);  // bf16: 8 significant bits, fp32's exponent range
  load(x, f);
  mpfr_set(r.v, x.v, MPFR_RNDN);
  if (mpfr_nan_p(r.v)) return 0x7fc0;
  const bool inf = mpfr_inf_p(r.v) || (!mpfr_zero_p(r.v) && mpfr_get_exp(r.v) - 1 >= 128);
  if (inf) return static_cast<uint16_t>((mpfr_signbit(r.v) ? 0x8000 : 0) | 0x7f80);
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(mpfr_get_flt(r.v, MPFR_RNDN)) >> 16);
}

uint16_t bf16_of(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }  // f must be exact in bf16
uint32_t fp32_of(float f) { return std::bit_cast<uint32_t>(f); }

// Operands that reach every branch: signed zeros, the smallest and largest normals, subnormals
// (read as zeros), ones and their neighbours, infinities and NaNs.
const std::vector<uint16_t> kBf16Edges = {
    0x0000, 0x8000,                  // +-0
    0x0001, 0x807f, 0x0040,          // subnormals
    0x0080, 0x8080, 0x0081,          // 2^-126 and beyond
    0x3f80, 0xbf80, 0x3f81, 0x3f7f,  // 1, -1, 1 + 2^-7, 1 - 2^-8
    0x4000, 0x3b80, 0x3380,          // 2, 2^-8, 2^-24
    0x7f7f, 0xff7f, 0x7f00,          // the largest finite, 2^127
    0x1f80, 0x5f80,                  // 2^-64, 2^64
    0x7f80, 0xff80,                  // +-inf
    0x7fc0, 0xffc1, 0x7f81,          // NaNs (a signalling pattern too)
};
const std::vector<uint32_t> kFp32Edges = {
    0x00000000, 0x80000000, 0x00800000, 0x80800000, 0x00800001, 0x3f800000, 0xbf800000,
    0x3f800001, 0x3f7fffff, 0x4b800000, 0xcb800000, 0x7f7fffff, 0xff7fffff, 0x7f000000,
    0x33800000, 0x34000000, 0x00000001, 0x807fffff, 0x7f800000, 0xff800000, 0x7fc00000,
    0xffc00001, 0x7f800001,
};

// A random bf16 or fp32 bit pattern: mostly finite values around 1 (where ties and cancellation
// happen), some over every exponent, including the specials.
uint32_t random_fp32(std::mt19937_64& rng) {
  const uint32_t bits = static_cast<uint32_t>(rng());
  switch (rng() % 4) {
    case 0: return bits;                                             // anything
    case 1: return (bits & 0x807fffff) | ((120u + rng() % 16) << 23);  // near 1
    case 2: return (bits & 0x807fffff) | ((rng() % 2 ? 1u : 253u + rng() % 2) << 23);  // range ends
    default: return kFp32Edges[rng() % kFp32Edges.size()];
  }
}

uint32_t dot(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  return numerics::bf16_dot(a.data(), 1, b.data(), 1, static_cast<uint32_t>(a.size())).fp32();
}

}  // namespace

TEST_CASE("bf16 dot products equal MPFR on every pair of edge cases, alone and with a second pair",
          "[unit][bf16]") {
  const std::vector<uint16_t> second = {0x3f80, 0xbf80, 0x0000, 0x3380, 0x7f7f, 0x7f80, 0xff80, 0x7fc0};
  for (uint16_t a : kBf16Edges)
    for (uint16_t b : kBf16Edges) {
      INFO(fmt::format("a {:#06x} b {:#06x}", a, b));
      REQUIRE(dot({a}, {b}) == ref_dot({a}, {b}));
      for (uint16_t a2 : second)
        for (uint16_t b2 : second) {
          INFO(fmt::format("a2 {:#06x} b2 {:#06x}", a2, b2));
          REQUIRE(dot({a, a2}, {b, b2}) == ref_dot({a, a2}, {b, b2}));
        }
    }
}

TEST_CASE("bf16 arithmetic: the rules that define it", "[unit][bf16]") {
  const uint32_t nan = numerics::kFp32QuietNan, inf = numerics::kFp32Inf, one = fp32_of(1.0f);
  const uint16_t b1 = bf16_of(1.0f), bm1 = bf16_of(-1.0f), b0 = 0;
  // One product is itself; an exact zero sum is +0, from zero operands or cancellation.
  CHECK(dot({b1}, {b1}) == one);
  CHECK(dot({bf16_of(-0.0f)}, {b1}) == 0);
  CHECK(dot({b1, bm1}, {b1, b1}) == 0);
  // Subnormal operands are zeros.
  CHECK(dot({0x0001, b1}, {b1, b0}) == 0);
  // An A operand keeps 11 bits below its row's largest exponent, a B operand 9 below its column's;
  // below that it is truncated toward zero, and from 19 (17) below it is gone.
  CHECK(dot({b1, bf16_of(0x1.02p-11f)}, {b0, b1}) == fp32_of(0x1.02p-11f));
  CHECK(dot({b1, bf16_of(0x1.02p-12f)}, {b0, b1}) == fp32_of(0x1p-12f));
  CHECK(dot({b1, bf16_of(-0x1.02p-12f)}, {b0, b1}) == fp32_of(-0x1p-12f));
  CHECK(dot({b0, b1}, {b1, bf16_of(0x1.02p-10f)}) == fp32_of(0x1p-10f));
  CHECK(dot({b1, bf16_of(0x1p-19f)}, {b0, b1}) == 0);
  CHECK(dot({b1, bf16_of(0x1p-18f)}, {b0, b1}) == fp32_of(0x1p-18f));
  // The sum is exact and rounded once, to nearest even: 1 + 2^-24 is a tie, and so is
  // 1 + 2^-23 + 2^-24, which goes up.
  const uint16_t e12 = bf16_of(0x1p-12f), e11 = bf16_of(0x1p-11f);
  CHECK(dot({b1, e12}, {b1, e12}) == one);
  CHECK(dot({b1, e12, e12}, {b1, e11, e12}) == fp32_of(1.0f + 0x1p-22f));
  // The range applies to the rounded sum only: 2^128 - 2^127 is finite, 2^128 infinite, a
  // negative result below 2^-126 a -0.
  const uint16_t p64 = bf16_of(0x1p64f), p63 = bf16_of(0x1p63f);
  CHECK(dot({p64, p63}, {p64, bf16_of(-0x1p64f)}) == fp32_of(0x1p127f));
  CHECK(dot({p64}, {p64}) == inf);
  CHECK(dot({bf16_of(0x1p-64f)}, {bf16_of(-0x1p-64f)}) == numerics::kFp32Sign);
  // NaN: a NaN anywhere in the row or column, inf x 0 (a subnormal is a 0), infinities of both signs.
  CHECK(dot({0xffc1, b1}, {b0, b1}) == nan);
  CHECK(dot({0x7f80}, {b0}) == nan);
  CHECK(dot({0x7f80}, {0x0001}) == nan);
  CHECK(dot({0x7f80, 0x7f80}, {b1, bm1}) == nan);
  // An infinity times a finite operand truncated to 0 is still an infinity, of the product's sign.
  CHECK(dot({0x7f80, b1}, {bf16_of(-0x1p-20f), b1}) == (numerics::kFp32Sign | inf));
  // The epilogue's operations.
  CHECK(numerics::fp32_add(one, 0x00000001) == one);  // a subnormal bias is zero
  CHECK(numerics::fp32_add(inf, 0xff800000) == nan);
  CHECK(numerics::fp32_relu(fp32_of(-2.0f)) == 0);
  CHECK(numerics::fp32_relu(numerics::kFp32Sign) == 0);
  CHECK(numerics::fp32_relu(0xff800000) == 0);
  CHECK(numerics::fp32_relu(nan) == nan);
  CHECK(numerics::fp32_to_bf16(fp32_of(1.0f + 0x1p-8f)) == 0x3f80);          // tie, to even
  CHECK(numerics::fp32_to_bf16(fp32_of(1.0f + 0x1p-8f + 0x1p-23f)) == 0x3f81);
  CHECK(numerics::fp32_to_bf16(0x7f7fffff) == 0x7f80);                         // past the largest bf16
  CHECK(numerics::fp32_to_bf16(0xffc00001) == 0x7fc0);
}

TEST_CASE("bf16 arithmetic equals MPFR on random values over every exponent", "[unit][bf16]") {
  const uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 100000; ++i) {
    // Dots of 1 to 8 products: operands of any class, or near a shared exponent (so that sums
    // cancel and round), some far below it (truncated).
    const size_t k = 1 + rng() % 8;
    std::vector<uint16_t> a(k), b(k);
    for (size_t j = 0; j < k; ++j) {
      a[j] = static_cast<uint16_t>(random_fp32(rng) >> 16);
      b[j] = static_cast<uint16_t>(random_fp32(rng) >> 16);
      if (rng() % 4 == 0) a[j] = static_cast<uint16_t>((a[j] & 0x807f) | ((100u + rng() % 30) << 7));
    }
    const uint32_t x = random_fp32(rng), y = random_fp32(rng);
    INFO(fmt::format("seed {} case {}", seed, i));
    REQUIRE(dot(a, b) == ref_dot(a, b));
    const uint32_t acc = (x & 0x7f800000) == 0 ? x & numerics::kFp32Sign : x;  // an fp32 result is never subnormal
    REQUIRE(numerics::fp32_add(acc, y) == ref_add(acc, y));
    REQUIRE(numerics::fp32_to_bf16(acc) == ref_to_bf16(acc));
  }
}

TEST_CASE("bf16 GEMMs in the golden model equal MPFR, K up to k_max / 2", "[unit][bf16][golden]") {
  const uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  EngineConfig cfg = EngineConfig::from_preset(EngineConfig::preset("default"));
  cfg.bf16 = true;
  struct Shape {
    uint32_t m, n, k;
  };
  for (const Shape s : {Shape{5, 7, 3}, Shape{17, 33, 100}, Shape{2, 3, cfg.k_max / 2}}) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool acc = variant & 1, bias = variant & 2, relu = variant == 3, bf16_out = variant >= 2;
      Descriptor d;
      d.precision = static_cast<uint8_t>(spec::Precision::kBf16);
      d.out_mode = static_cast<uint8_t>(bf16_out ? spec::OutMode::kBf16 : spec::OutMode::kFp32);
      d.flags = (acc ? D::FLAG_ACCUMULATE : 0) | (bias ? D::FLAG_BIAS : 0) | (relu ? D::FLAG_RELU : 0);
      d.m = s.m, d.n = s.n, d.k = s.k;
      auto up = [](uint64_t v) { return static_cast<uint32_t>((v + 63) / 64 * 64); };
      d.lda = up(2ull * s.k), d.ldb = up(2ull * s.n) + 64, d.ldc = up(4ull * s.n), d.ldcin = up(4ull * s.n);
      d.a_addr = 0x1000;
      d.b_addr = d.a_addr + up(uint64_t{d.lda} * s.m);
      d.c_addr = d.b_addr + up(uint64_t{d.ldb} * s.k);
      d.cin_addr = d.c_addr + up(uint64_t{d.ldc} * s.m);
      d.bias_addr = d.cin_addr + up(uint64_t{d.ldcin} * s.m);
      Memory mem(d.bias_addr + up(4ull * s.n) + 4096);
      // Mostly values near 1 with mixed signs (long sums cancel and round), a few edge cases.
      auto operand = [&] {
        if (rng() % 64 == 0) return kBf16Edges[rng() % kBf16Edges.size()];
        return static_cast<uint16_t>(((rng() & 1) << 15) | ((124u + rng() % 6) << 7) | (rng() & 0x7f));
      };
      for (uint32_t m = 0; m < s.m; ++m)
        for (uint32_t k = 0; k < s.k; ++k) mem.store<uint16_t>(d.a_addr + uint64_t{m} * d.lda + 2 * k, operand());
      for (uint32_t k = 0; k < s.k; ++k)
        for (uint32_t n = 0; n < s.n; ++n) mem.store<uint16_t>(d.b_addr + uint64_t{k} * d.ldb + 2 * n, operand());
      for (uint32_t n = 0; n < s.n; ++n) {
        mem.store<uint32_t>(d.bias_addr + 4 * n, random_fp32(rng));
        for (uint32_t m = 0; m < s.m; ++m) mem.store<uint32_t>(d.cin_addr + uint64_t{m} * d.ldcin + 4 * n, random_fp32(rng));
      }
      INFO(fmt::format("seed {} {}x{}x{} acc={} bias={} relu={} bf16_out={}", seed, s.m, s.n, s.k, acc, bias, relu,
                       bf16_out));
      Memory before(mem.size());
      std::memcpy(before.data(), mem.data(), mem.size());
      REQUIRE_FALSE(execute(d, 0, mem, cfg));
      for (uint32_t m = 0; m < s.m; ++m)
        for (uint32_t n = 0; n < s.n; ++n) {
          std::vector<uint16_t> ra(s.k), cb(s.k);
          for (uint32_t k = 0; k < s.k; ++k) {
            ra[k] = before.load<uint16_t>(d.a_addr + uint64_t{m} * d.lda + 2 * k);
            cb[k] = before.load<uint16_t>(d.b_addr + uint64_t{k} * d.ldb + 2 * n);
          }
          uint32_t v = ref_dot(ra, cb);
          if (acc) v = ref_add(v, before.load<uint32_t>(d.cin_addr + uint64_t{m} * d.ldcin + 4 * n));
          if (bias) v = ref_add(v, before.load<uint32_t>(d.bias_addr + 4 * n));
          if (relu && (v >> 31)) v = 0;  // store() gives NaN as the positive quiet NaN
          const uint64_t at = d.c_addr + uint64_t{m} * d.ldc;
          if (bf16_out)
            REQUIRE(mem.load<uint16_t>(at + 2 * n) == ref_to_bf16(v));
          else
            REQUIRE(mem.load<uint32_t>(at + 4 * n) == v);
        }
    }
  }
}

TEST_CASE("golden model checks BF16 descriptors: precision, modes, K and strides", "[unit][bf16][errors]") {
  EngineConfig cfg = EngineConfig::from_preset(EngineConfig::preset("default"));
  cfg.bf16 = false;
  Descriptor d;
  d.precision = static_cast<uint8_t>(spec::Precision::kBf16);
  d.out_mode = static_cast<uint8_t>(spec::OutMode::kFp32);
  d.m = 4, d.n = 40, d.k = 100;
  d.lda = 256, d.ldb = 128, d.ldc = 192, d.ldcin = 192;
  d.a_addr = 0x1000, d.b_addr = 0x2000, d.c_addr = 0x10000;
  // An engine without BF16, and the reserved precisions, refuse it before anything else.
  CHECK(validate(d, 0x40, cfg).code == spec::ErrorCode::kPrecision);
  CHECK(validate(d, 0x40, cfg).addr == 0x40);
  cfg.bf16 = true;
  REQUIRE_FALSE(validate(d, 0x40, cfg));
  auto code = [&](auto mutate) {
    Descriptor e = d;
    mutate(e);
    return validate(e, 0x40, cfg).code;
  };
  using E = spec::ErrorCode;
  CHECK(code([](Descriptor& e) { e.precision = 2; e.m = 0; }) == E::kPrecision);
  CHECK(code([](Descriptor& e) { e.precision = 3; }) == E::kPrecision);
  CHECK(code([](Descriptor& e) { e.out_mode = static_cast<uint8_t>(spec::OutMode::kInt32); }) == E::kMode);
  CHECK(code([](Descriptor& e) { e.out_mode = static_cast<uint8_t>(spec::OutMode::kInt8); }) == E::kMode);
  CHECK(code([](Descriptor& e) { e.flags = D::FLAG_FOLD; }) == E::kMode);
  CHECK(code([](Descriptor& e) { e.flags = D::FLAG_RELU; }) == E::kNone);
  CHECK(code([](Descriptor& e) { e.precision = 0; e.out_mode = static_cast<uint8_t>(spec::OutMode::kFp32); }) ==
        E::kMode);
  CHECK(code([](Descriptor& e) { e.precision = 0; e.out_mode = 0; e.flags = D::FLAG_RELU; }) == E::kMode);
  CHECK(code([&](Descriptor& e) { e.k = cfg.k_max / 2; e.lda = cfg.k_max; }) == E::kNone);
  CHECK(code([&](Descriptor& e) { e.k = cfg.k_max / 2 + 1; e.lda = 2 * cfg.k_max; }) == E::kDim);
  // Two bytes per operand: lda >= 2K, ldb >= 2N; ldc by the output's element.
  CHECK(code([](Descriptor& e) { e.lda = 192; }) == E::kStride);
  CHECK(code([](Descriptor& e) { e.ldb = 64; }) == E::kStride);
  CHECK(code([](Descriptor& e) { e.ldc = 128; }) == E::kStride);
  CHECK(code([](Descriptor& e) {
          e.ldc = 128;
          e.out_mode = static_cast<uint8_t>(spec::OutMode::kBf16);
        }) == E::kNone);
  CHECK(code([](Descriptor& e) { e.flags = D::FLAG_ACCUMULATE; e.cin_addr = 0x20000; e.ldcin = 128; }) == E::kStride);
}
