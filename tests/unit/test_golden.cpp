// The golden model against a naive reference, its error checks, and the descriptor wire format.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "seed.hpp"
#include "tessera/model/golden.hpp"
#include "tessera/model/numerics.hpp"

using namespace tessera;
namespace D = spec::desc;

namespace {

const EngineConfig kCfg = EngineConfig::from_preset(EngineConfig::preset("default"));

uint64_t up(uint64_t v) { return (v + 63) / 64 * 64; }

struct Case {
  Descriptor d;
  Memory mem{4 << 20};
};

// Random operands at random aligned places with random padded strides.
void fill(Case& c, std::mt19937_64& rng, uint32_t m, uint32_t n, uint32_t k, bool q, bool bias, bool acc) {
  auto& d = c.d;
  d.m = m, d.n = n, d.k = k;
  d.out_mode = static_cast<uint8_t>(q ? spec::OutMode::kInt8 : spec::OutMode::kInt32);
  d.flags = (bias ? D::FLAG_BIAS : 0) | (acc ? D::FLAG_ACCUMULATE : 0);
  auto pad = [&] { return 64 * std::uniform_int_distribution<int>(0, 2)(rng); };
  d.lda = static_cast<uint32_t>(up(k) + pad());
  d.ldb = static_cast<uint32_t>(up(n) + pad());
  d.ldc = static_cast<uint32_t>(up(uint64_t{n} * d.out_bytes()) + pad());
  d.ldcin = static_cast<uint32_t>(up(4ull * n) + pad());
  uint64_t at = 4096;
  auto place = [&](uint64_t bytes) {
    const uint64_t a = at;
    at = up(at + bytes) + pad();
    return a;
  };
  d.a_addr = place(uint64_t{m} * d.lda);
  d.b_addr = place(uint64_t{k} * d.ldb);
  d.c_addr = place(uint64_t{m} * d.ldc);
  d.cin_addr = place(uint64_t{m} * d.ldcin);
  d.bias_addr = place(4ull * n);
  d.mult_addr = place(4ull * n);
  d.shift_addr = place(n);
  std::uniform_int_distribution<int> byte(0, 255), shift(-12, 4);
  for (uint64_t i = 0; i < at; ++i) c.mem.store<uint8_t>(i, static_cast<uint8_t>(byte(rng)));
  for (uint32_t i = 0; i < n; ++i) c.mem.store<int8_t>(d.shift_addr + i, static_cast<int8_t>(shift(rng)));
  d.out_zp = static_cast<int8_t>(byte(rng) - 128);
  d.act_min = -100;
  d.act_max = 120;
}

// The definition in DESIGN.md, written as plainly as possible.
std::vector<uint8_t> naive(const Case& c) {
  const auto& d = c.d;
  std::vector<uint8_t> out(uint64_t{d.m} * d.n * d.out_bytes());
  for (uint32_t m = 0; m < d.m; ++m)
    for (uint32_t n = 0; n < d.n; ++n) {
      int64_t sum = 0;
      for (uint32_t k = 0; k < d.k; ++k)
        sum += int64_t{c.mem.load<int8_t>(d.a_addr + uint64_t{m} * d.lda + k)} *
               c.mem.load<int8_t>(d.b_addr + uint64_t{k} * d.ldb + n);
      if (d.has(D::FLAG_ACCUMULATE)) sum += c.mem.load<int32_t>(d.cin_addr + uint64_t{m} * d.ldcin + 4ull * n);
      if (d.has(D::FLAG_BIAS)) sum += c.mem.load<int32_t>(d.bias_addr + 4ull * n);
      const auto acc = static_cast<int32_t>(static_cast<uint32_t>(sum));  // int32 wraparound
      const uint64_t i = (uint64_t{m} * d.n + n) * d.out_bytes();
      if (d.int8_out()) {
        out[i] = static_cast<uint8_t>(numerics::requantize(acc, c.mem.load<int32_t>(d.mult_addr + 4ull * n),
                                                           c.mem.load<int8_t>(d.shift_addr + n), d.out_zp,
                                                           d.act_min, d.act_max));
      } else {
        std::memcpy(&out[i], &acc, 4);
      }
    }
  return out;
}

std::vector<uint8_t> c_of(const Case& c) {
  const auto& d = c.d;
  const uint64_t row = uint64_t{d.n} * d.out_bytes();
  std::vector<uint8_t> out(row * d.m);
  for (uint32_t m = 0; m < d.m; ++m) std::memcpy(&out[m * row], c.mem.data() + d.c_addr + m * d.ldc, row);
  return out;
}

}  // namespace

TEST_CASE("golden model equals the naive definition on random GEMMs", "[unit][golden]") {
  const uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  for (int t = 0; t < 60; ++t) {
    std::uniform_int_distribution<uint32_t> dim(1, 70), kd(1, 300), coin(0, 1);
    Case c;
    const uint32_t m = dim(rng), n = dim(rng), k = kd(rng);
    const bool q = coin(rng), bias = coin(rng), acc = coin(rng);
    fill(c, rng, m, n, k, q, bias, acc);
    INFO("seed " << seed << " case " << t << ": " << m << "x" << n << "x" << k << " int8=" << q << " bias=" << bias
                 << " acc=" << acc);
    const auto want = naive(c);
    REQUIRE_FALSE(execute(c.d, 0, c.mem, kCfg));
    REQUIRE(c_of(c) == want);
  }
}

TEST_CASE("golden model: extremes saturate and wrap as specified", "[unit][golden]") {
  Case c;
  std::mt19937_64 rng(7);
  fill(c, rng, 3, 5, 4096, false, true, true);
  auto& d = c.d;
  // All -128 * -128 over K = 4096 is 2^26 per output; add C_in and bias near INT32_MAX to wrap.
  for (uint32_t m = 0; m < d.m; ++m)
    for (uint32_t k = 0; k < d.k; ++k) c.mem.store<int8_t>(d.a_addr + m * d.lda + k, -128);
  for (uint32_t k = 0; k < d.k; ++k)
    for (uint32_t n = 0; n < d.n; ++n) c.mem.store<int8_t>(d.b_addr + k * d.ldb + n, -128);
  for (uint32_t n = 0; n < d.n; ++n) {
    c.mem.store<int32_t>(d.bias_addr + 4 * n, std::numeric_limits<int32_t>::max());
    for (uint32_t m = 0; m < d.m; ++m) c.mem.store<int32_t>(d.cin_addr + m * d.ldcin + 4 * n, 1);
  }
  const auto want = naive(c);
  REQUIRE_FALSE(execute(d, 0, c.mem, kCfg));
  const int32_t expect = static_cast<int32_t>(uint32_t{1u << 26} + 1u + 0x7fffffffu);
  CHECK(c.mem.load<int32_t>(d.c_addr) == expect);
  CHECK(expect < 0);  // it wrapped
  CHECK(c_of(c) == want);
}

TEST_CASE("golden model reports each descriptor fault in the engine's order", "[unit][golden][errors]") {
  Case c;
  std::mt19937_64 rng(3);
  fill(c, rng, 20, 20, 20, true, true, true);
  const Descriptor good = c.d;
  REQUIRE_FALSE(validate(good, 0x100, kCfg));
  auto expect = [&](auto mutate, spec::ErrorCode code, uint64_t addr) {
    Descriptor d = good;
    mutate(d);
    const Fault f = validate(d, 0x100, kCfg);
    CHECK(f.code == code);
    CHECK(f.addr == addr);
  };
  using E = spec::ErrorCode;
  expect([](Descriptor& d) { d.opcode = 0; }, E::kOpcode, 0x100);
  expect([](Descriptor& d) { d.opcode = 77; }, E::kOpcode, 0x100);
  expect([](Descriptor& d) { d.out_mode = 3; }, E::kMode, 0x100);
  expect([](Descriptor& d) { d.m = 0; }, E::kDim, 0x100);
  expect([](Descriptor& d) { d.k = kCfg.k_max + 1; }, E::kDim, 0x100);
  expect([](Descriptor& d) { d.n = spec::kDimMax + 1; }, E::kDim, 0x100);
  expect([](Descriptor& d) { d.act_min = 10, d.act_max = 9; }, E::kParam, 0x100);
  expect([&](Descriptor& d) { d.b_addr += 8; }, E::kAlign, good.b_addr + 8);
  expect([&](Descriptor& d) { d.ldc += 4; }, E::kAlign, good.ldc + 4);
  expect([&](Descriptor& d) { d.shift_addr += 1; }, E::kAlign, good.shift_addr + 1);
  expect([&](Descriptor& d) { d.lda = 0; }, E::kStride, 0);
  expect([&](Descriptor& d) { d.k = 100, d.lda = 64; }, E::kStride, 64);
  expect([&](Descriptor& d) { d.a_addr = 1ull << 40; }, E::kAddr, 1ull << 40);
  // FOLD: int32 without bias or C_in, M within half the rows, K within half of k_max.
  constexpr uint32_t kFold = spec::desc::FLAG_FOLD;
  auto plain_fold = [](Descriptor& d) {
    d.flags = kFold, d.out_mode = static_cast<uint8_t>(spec::OutMode::kInt32), d.m = kCfg.rows / 2;
  };
  expect(plain_fold, E::kNone, 0);
  expect([&](Descriptor& d) { plain_fold(d), d.flags |= spec::desc::FLAG_BIAS; }, E::kMode, 0x100);
  expect([&](Descriptor& d) { plain_fold(d), d.flags |= spec::desc::FLAG_ACCUMULATE; }, E::kMode, 0x100);
  expect([&](Descriptor& d) { plain_fold(d), d.out_mode = static_cast<uint8_t>(spec::OutMode::kInt8); }, E::kMode, 0x100);
  expect([&](Descriptor& d) { plain_fold(d), d.m = kCfg.rows / 2 + 1; }, E::kDim, 0x100);
  expect([&](Descriptor& d) { plain_fold(d), d.k = kCfg.k_max / 2 + 1, d.lda = 4096; }, E::kDim, 0x100);
  {
    EngineConfig no_fold = kCfg;
    no_fold.fold = false;
    Descriptor d = good;
    plain_fold(d);
    CHECK(validate(d, 0x100, no_fold).code == E::kMode);
  }
  // Unused fields are not checked: no bias, so a misaligned bias address is fine.
  expect([&](Descriptor& d) { d.flags = 0, d.bias_addr = 3, d.cin_addr = 5; }, E::kNone, 0);
  // A NOP checks nothing but its opcode.
  expect([&](Descriptor& d) { d.opcode = static_cast<uint8_t>(spec::Opcode::kNop), d.m = 0; }, E::kNone, 0);
  // A shift out of range is found when executed, at its own address.
  Descriptor d = good;
  c.mem.store<int8_t>(d.shift_addr + 7, 40);
  const Fault f = execute(d, 0x100, c.mem, kCfg);
  CHECK(f.code == E::kParam);
  CHECK(f.addr == d.shift_addr + 7);
  // Operands outside memory are a bus error.
  d = good;
  d.a_addr = c.mem.size() - 64;
  CHECK(execute(d, 0x100, c.mem, kCfg).code == E::kAxiRd);
}

TEST_CASE("descriptor encode/decode round trip", "[unit][descriptor]") {
  Descriptor d;
  d.opcode = static_cast<uint8_t>(spec::Opcode::kGemm);
  d.out_mode = 1;
  d.flags = D::FLAG_BIAS | D::FLAG_IRQ;
  d.m = 65535, d.n = 7, d.k = 4096;
  d.a_addr = 0x123456789ull << 6, d.b_addr = 0x40, d.c_addr = 0xffffffc0, d.cin_addr = 1ull << 63;
  d.bias_addr = 0x80, d.mult_addr = 0xc0, d.shift_addr = 0x100;
  d.lda = 4096, d.ldb = 64, d.ldc = 128, d.ldcin = 192;
  d.out_zp = -5, d.act_min = -128, d.act_max = 100, d.tag = 0xdeadbeef;
  const DescriptorBytes b = encode(d);
  const Descriptor e = decode(b);
  CHECK(e.opcode == d.opcode);
  CHECK(e.out_mode == d.out_mode);
  CHECK(e.flags == d.flags);
  CHECK((e.m == d.m && e.n == d.n && e.k == d.k));
  CHECK((e.a_addr == d.a_addr && e.b_addr == d.b_addr && e.c_addr == d.c_addr && e.cin_addr == d.cin_addr));
  CHECK((e.bias_addr == d.bias_addr && e.mult_addr == d.mult_addr && e.shift_addr == d.shift_addr));
  CHECK((e.lda == d.lda && e.ldb == d.ldb && e.ldc == d.ldc && e.ldcin == d.ldcin));
  CHECK((e.out_zp == d.out_zp && e.act_min == d.act_min && e.act_max == d.act_max && e.tag == d.tag));
  // Word 0 byte 0 is the opcode, as the spec says.
  CHECK(b[0] == 1);
  CHECK(b[1] == 1);
}
