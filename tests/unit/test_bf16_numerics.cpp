// The BF16 precision's arithmetic (bf16_numerics.hpp) and the golden model's BF16 GEMMs against an
// independent reference: MPFR, which rounds the exact result of each operation once. The
// reference applies the engine's rules (docs/ENGINE.md, "BF16 numerics") on its own: subnormal
// inputs as zero, results below 2^-126 flushed to zero, at 2^128 or above infinite, the one quiet
// NaN. Edge cases (signed zeros, subnormals, overflow, NaN and infinity, cancellation, ties, long
// K), then random values over every exponent with a printed seed.
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

uint32_t ref_fma(uint32_t acc, uint16_t a, uint16_t b) {
  Big x, y, z, r;
  load(x, uint32_t{a} << 16);
  load(y, uint32_t{b} << 16);
  load(z, acc);
  mpfr_fma(r.v, x.v, y.v, z.v, MPFR_RNDN);
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

}  // namespace

TEST_CASE("bf16 fused multiply-add equals MPFR on every pair of edge cases", "[unit][bf16]") {
  for (uint32_t acc : kFp32Edges) {
    if ((acc & 0x7f800000) == 0 && (acc & 0x7fffff)) continue;  // the accumulator never holds a subnormal
    for (uint16_t a : kBf16Edges)
      for (uint16_t b : kBf16Edges) {
        INFO(fmt::format("acc {:#010x} a {:#06x} b {:#06x}", acc, a, b));
        REQUIRE(numerics::bf16_fma(acc, a, b) == ref_fma(acc, a, b));
      }
  }
}

TEST_CASE("bf16 arithmetic: the rules that define it", "[unit][bf16]") {
  using numerics::bf16_fma;
  const uint32_t neg0 = numerics::kFp32NegZero, nan = numerics::kFp32QuietNan;
  // A sum starts at -0, so one product comes out as itself, -0 included.
  CHECK(bf16_fma(neg0, bf16_of(-0.0f), bf16_of(1.0f)) == neg0);
  CHECK(bf16_fma(neg0, bf16_of(0.0f), bf16_of(1.0f)) == 0);
  CHECK(bf16_fma(0, bf16_of(-0.0f), bf16_of(1.0f)) == 0);  // +0 + -0 is +0
  // Cancellation is an exact +0.
  CHECK(bf16_fma(fp32_of(1.0f), bf16_of(-1.0f), bf16_of(1.0f)) == 0);
  // Subnormal operands are zeros of their sign.
  CHECK(bf16_fma(neg0, 0x0001, bf16_of(1.0f)) == 0);
  CHECK(bf16_fma(neg0, 0x8001, bf16_of(1.0f)) == neg0);
  // Products below 2^-126 flush to zero; above the range, infinity.
  CHECK(bf16_fma(neg0, 0x1f80, 0x1f80) == 0);                                   // 2^-128
  CHECK(bf16_fma(neg0, 0x5f80, 0x5f80) == numerics::kFp32Inf);                   // 2^128
  CHECK(bf16_fma(fp32_of(-0x1p127f), 0x5f80, 0x5f80) == fp32_of(0x1p127f));     // back in range: the product is exact
  // Just below 2^-126: 2^-126 - 2^-151 is the midpoint of the 24-bit grid there, and rounds to
  // 2^-126 (even); a little less rounds down and flushes. The fast row step agrees.
  const uint32_t above_min = fp32_of(0x1p-126f + 0x1p-149f);
  for (const auto& [b16, want] : {std::pair<uint16_t, uint32_t>{bf16_of(-0x1.4p-74f), fp32_of(0x1p-126f)},
                                  {bf16_of(-0x1.5p-74f), 0u}}) {
    CHECK(bf16_fma(above_min, bf16_of(0x1p-75f), b16) == want);
    CHECK(ref_fma(above_min, bf16_of(0x1p-75f), b16) == want);
    float acc = std::bit_cast<float>(above_min), bv = std::bit_cast<float>(numerics::bf16_operand(b16));
    numerics::bf16_fma_row(&acc, 0x1p-75f, &bv, 1);
    CHECK(std::bit_cast<uint32_t>(acc) == want);
  }
  // Ties go to even: 1 + 2^-24 is half an ulp above 1.
  CHECK(bf16_fma(fp32_of(1.0f), bf16_of(0x1p-12f), bf16_of(0x1p-12f)) == fp32_of(1.0f));
  CHECK(bf16_fma(fp32_of(1.0f + 0x1p-23f), bf16_of(0x1p-12f), bf16_of(0x1p-12f)) == fp32_of(1.0f + 0x1p-22f));
  // The product is exact, not flushed: 2^-127 is below the range alone but not added to 2^-126.
  CHECK(bf16_fma(fp32_of(0x1p-126f), bf16_of(0x1p-63f), bf16_of(0x1p-64f)) == fp32_of(0x1.8p-126f));
  // NaN: any NaN in, inf x 0, inf - inf; always the one quiet NaN.
  CHECK(bf16_fma(fp32_of(1.0f), 0xffc1, bf16_of(1.0f)) == nan);
  CHECK(bf16_fma(fp32_of(1.0f), 0x7f80, 0x0000) == nan);
  CHECK(bf16_fma(fp32_of(1.0f), 0x7f80, 0x0001) == nan);  // a subnormal is a zero
  CHECK(bf16_fma(numerics::kFp32Inf, 0xff80, bf16_of(1.0f)) == nan);
  CHECK(bf16_fma(numerics::kFp32Inf, bf16_of(1.0f), bf16_of(1.0f)) == numerics::kFp32Inf);
  // The epilogue's operations.
  CHECK(numerics::fp32_add(fp32_of(1.0f), 0x00000001) == fp32_of(1.0f));  // a subnormal bias is zero
  CHECK(numerics::fp32_add(numerics::kFp32Inf, 0xff800000) == nan);
  CHECK(numerics::fp32_relu(fp32_of(-2.0f)) == 0);
  CHECK(numerics::fp32_relu(neg0) == 0);
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
  for (int i = 0; i < 300000; ++i) {
    uint32_t acc = random_fp32(rng);
    if ((acc & 0x7f800000) == 0) acc &= numerics::kFp32Sign;  // the accumulator never holds a subnormal
    const auto a = static_cast<uint16_t>(random_fp32(rng) >> 16), b = static_cast<uint16_t>(random_fp32(rng) >> 16);
    const uint32_t y = random_fp32(rng);
    INFO(fmt::format("seed {} acc {:#010x} a {:#06x} b {:#06x} y {:#010x}", seed, acc, a, b, y));
    REQUIRE(numerics::bf16_fma(acc, a, b) == ref_fma(acc, a, b));
    REQUIRE(numerics::fp32_add(acc, y) == ref_add(acc, y));
    REQUIRE(numerics::fp32_to_bf16(acc) == ref_to_bf16(acc));
  }
}

TEST_CASE("the golden model's fast row step equals bf16_fma on finite operands, at the range's ends too",
          "[unit][bf16]") {
  const uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  constexpr uint32_t n = 64;
  for (int t = 0; t < 20000; ++t) {
    // Accumulators and products around 2^-126 (where results flush or reach 2^-126), around 2^127
    // (where they overflow) or anywhere; finite, the accumulators normal or zero.
    const uint32_t base = rng() % 3 == 0 ? 1 : rng() % 2 ? 252 : 0;
    auto finite32 = [&] {
      const uint32_t e = base ? std::min<uint32_t>(254, base + rng() % 3) : 1 + rng() % 254;
      return rng() % 16 ? static_cast<uint32_t>((rng() & 1) << 31 | e << 23 | (rng() & 0x7fffff)) : 0u;
    };
    auto finite16 = [&] {
      const uint32_t e = base == 1 ? 60 + rng() % 8 : base ? 189 + rng() % 3 : 1 + rng() % 254;
      return static_cast<uint16_t>((rng() & 1) << 15 | e << 7 | (rng() & 0x7f));
    };
    std::vector<float> acc(n), b(n);
    std::vector<uint16_t> b16(n);
    std::vector<uint32_t> want(n);
    for (uint32_t i = 0; i < n; ++i) {
      acc[i] = std::bit_cast<float>(finite32());
      b[i] = std::bit_cast<float>(numerics::bf16_operand(b16[i] = finite16()));
    }
    const uint16_t a16 = finite16();
    for (uint32_t i = 0; i < n; ++i) want[i] = numerics::bf16_fma(std::bit_cast<uint32_t>(acc[i]), a16, b16[i]);
    numerics::bf16_fma_row(acc.data(), std::bit_cast<float>(numerics::bf16_operand(a16)), b.data(), n);
    for (uint32_t i = 0; i < n; ++i) {
      INFO(fmt::format("seed {} case {} element {}", seed, t, i));
      REQUIRE(std::bit_cast<uint32_t>(acc[i]) == want[i]);
    }
  }
}

TEST_CASE("bf16 GEMMs in the golden model equal an MPFR chain, K up to k_max / 2", "[unit][bf16][golden]") {
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
          uint32_t v = numerics::kFp32NegZero;
          for (uint32_t k = 0; k < s.k; ++k)
            v = ref_fma(v, before.load<uint16_t>(d.a_addr + uint64_t{m} * d.lda + 2 * k),
                        before.load<uint16_t>(d.b_addr + uint64_t{k} * d.ldb + 2 * n));
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
