// Corner cases (docs/REGRESSION.md, "Corner cases"): GEMMs that reach every branch of the int8
// numerics, every descriptor and ring check at its limit, one below and one past, soft resets in
// the middle of work, BF16 sums at the bottom of fp32's range, and the points where the schedule
// changes. The golden model is the reference for every byte and the timing model for the busy
// counter; the cover points in tsr_epilogue and tsr_ctrl_sva show that the stimulus got there
// (rtl/testplan.toml).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <ranges>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness.hpp"
#include "seed.hpp"

using namespace tessera;
using test::Mirror;
using test::rtl;

namespace {

template <typename T>
void put(Mirror& mx, uint64_t addr, const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  mx.write(addr, bytes);
}

// The multipliers and values at the edges of int32 that the requantization treats apart.
constexpr int32_t kMultipliers[] = {INT32_MIN, INT32_MAX, 0, 1, 1 << 30, -1, 0x5a5a5a5a};
constexpr int32_t kExtremes[] = {INT32_MIN, INT32_MAX, 0, -1, 1, INT32_MIN + 1, INT32_MAX - 1};

// An int8 GEMM whose columns take every shift from -31 to 31 (column c: -31 + c mod 63) and, in
// turn, each multiplier above; bias and C_in at int32's extremes, so the sums wrap.
Descriptor requant_gemm(Mirror& mx, std::mt19937_64& rng, uint32_t m, uint32_t k, int rotate, int8_t zp,
                        int8_t lo, int8_t hi) {
  const uint32_t n = 70;
  Descriptor d = mx.gemm({.m = m, .n = n, .k = k, .int8 = true, .bias = true, .acc = true}, rng);
  d.out_zp = zp, d.act_min = lo, d.act_max = hi;
  std::vector<int32_t> mult(n), bias(n), cin(uint64_t{d.ldcin / 4} * m);
  std::vector<int8_t> shift(n);
  for (uint32_t c = 0; c < n; ++c) {
    shift[c] = static_cast<int8_t>(spec::kShiftMin + static_cast<int>(c % 63));
    mult[c] = kMultipliers[(c + rotate) % std::size(kMultipliers)];
    bias[c] = kExtremes[(c * 3 + rotate) % std::size(kExtremes)];
  }
  for (uint64_t i = 0; i < cin.size(); ++i) cin[i] = kExtremes[(i * 5 + rotate) % std::size(kExtremes)];
  put(mx, d.mult_addr, mult);
  put(mx, d.shift_addr, shift);
  put(mx, d.bias_addr, bias);
  put(mx, d.cin_addr, cin);
  return d;
}

}  // namespace

TEST_CASE("cosim corners: every shift and multiplier with extreme zero points and clamps", "[cosim][corners]") {
  const uint64_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Mirror mx(rtl("default"));
  const uint32_t k_max = mx.config().k_max;
  // (zero point, act_min, act_max): the common case, zero points at both ends, clamps below zero,
  // one value allowed, and clamps at one end of int8.
  const struct {
    int8_t zp, lo, hi;
  } clamps[] = {{0, -128, 127}, {-128, -128, 127}, {127, -128, 127}, {-7, -100, -3},
                {5, 20, 20},    {0, 127, 127},     {0, -128, -128}, {-1, -2, 3}};
  std::vector<Descriptor> ds;
  int rotate = 0;
  for (const auto& c : clamps)
    for (const uint32_t k : {1u, 37u}) ds.push_back(requant_gemm(mx, rng, 9, k, rotate++, c.zp, c.lo, c.hi));
  // Sums of -128 * -128 at K = k_max on top of the extremes: the accumulator wraps.
  Descriptor big = requant_gemm(mx, rng, 5, k_max, rotate++, 0, -128, 127);
  std::vector<int8_t> a(uint64_t{big.lda} * big.m, -128), b(uint64_t{big.ldb} * big.k, -128);
  put(mx, big.a_addr, a);
  put(mx, big.b_addr, b);
  ds.push_back(big);
  mx.run(ds);
}

TEST_CASE("cosim corners: the doubling high multiply saturates", "[cosim][corners]") {
  // INT32_MIN x INT32_MIN is the one product whose doubled high half overflows: acc << left is
  // INT32_MIN with A = 0 and C_in = INT32_MIN (shift <= 0), or C_in = 2^(31 - s) shifted left by s.
  std::mt19937_64 rng(31);
  Mirror mx(rtl("default"));
  const uint32_t m = 6, n = 40;
  Descriptor d = mx.gemm({.m = m, .n = n, .k = 3, .int8 = true, .acc = true}, rng);
  put(mx, d.a_addr, std::vector<int8_t>(uint64_t{d.lda} * m, 0));
  std::vector<int32_t> mult(n, INT32_MIN), cin(uint64_t{d.ldcin / 4} * m);
  std::vector<int8_t> shift(n);
  for (uint32_t c = 0; c < n; ++c) shift[c] = static_cast<int8_t>(c % 2 ? -static_cast<int>(c % 32) : c % 32);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < n; ++c)
      cin[uint64_t{r} * d.ldcin / 4 + c] =
          shift[c] > 0 ? int32_t(uint32_t{1} << (31 - shift[c])) : r % 2 ? INT32_MIN : INT32_MIN + int32_t(r);
  put(mx, d.mult_addr, mult);
  put(mx, d.shift_addr, shift);
  put(mx, d.cin_addr, cin);
  d.out_zp = 3;
  mx.run({d});
}

TEST_CASE("cosim corners: int32 results wrap at both ends", "[cosim][corners]") {
  std::mt19937_64 rng(32);
  Mirror mx(rtl("default"));
  std::vector<Descriptor> ds;
  for (int rotate = 0; rotate < 3; ++rotate) {
    Descriptor d = mx.gemm({.m = 7, .n = 33, .k = mx.config().k_max, .bias = true, .acc = true}, rng);
    const int8_t v = rotate == 0 ? -128 : 127;
    put(mx, d.a_addr, std::vector<int8_t>(uint64_t{d.lda} * d.m, v));
    put(mx, d.b_addr, std::vector<int8_t>(uint64_t{d.ldb} * d.k, rotate == 2 ? -128 : v));
    std::vector<int32_t> bias(d.n), cin(uint64_t{d.ldcin / 4} * d.m);
    for (uint32_t c = 0; c < d.n; ++c) bias[c] = kExtremes[(c + rotate) % std::size(kExtremes)];
    for (uint64_t i = 0; i < cin.size(); ++i) cin[i] = kExtremes[(i * 3 + rotate) % std::size(kExtremes)];
    put(mx, d.bias_addr, bias);
    put(mx, d.cin_addr, cin);
    ds.push_back(d);
  }
  mx.run(ds);
}

// ---------------------------------------------------------------- descriptor checks at their limits

namespace {

// Runs one descriptor: it completes (bit-exact with the golden model) or faults with `code`, and
// `addr` where given; after a fault the engine is reset for the next case.
void expect(Mirror& mx, const std::string& what, const Descriptor& d, spec::ErrorCode code = spec::ErrorCode::kNone,
            std::optional<uint64_t> addr = {}) {
  INFO(what);
  const Fault f = mx.run({d});
  CHECK(f.code == code);
  if (addr) CHECK(f.addr == *addr);
  if (f) mx.device().soft_reset();
}

}  // namespace

TEST_CASE("cosim errors: every dimension at its limit with one below and one past", "[cosim][errors][corners]") {
  using spec::ErrorCode;
  std::mt19937_64 rng(33);
  Mirror mx(rtl("small-bf16"));  // an engine with both precisions: the BF16 limits too
  const EngineConfig& cfg = mx.config();
  const uint32_t dim = spec::kDimMax;
  for (const uint32_t k : {cfg.k_max - 1, cfg.k_max}) expect(mx, fmt::format("K = {}", k), mx.gemm({.m = 3, .n = 5, .k = k}, rng));
  Descriptor d = mx.gemm({.m = 3, .n = 5, .k = cfg.k_max}, rng);
  d.k = cfg.k_max + 1;
  expect(mx, "K = k_max + 1", d, ErrorCode::kDim);
  // M and N at 65535: one row (or column) of one product per output element.
  for (const uint32_t v : {dim - 1, dim}) {
    expect(mx, fmt::format("M = {}", v), mx.gemm({.m = v, .n = 1, .k = 1, .int8 = true}, rng));
    expect(mx, fmt::format("N = {}", v), mx.gemm({.m = 1, .n = v, .k = 1, .bias = true}, rng));
  }
  Descriptor tall = mx.gemm({.m = dim, .n = 1, .k = 1}, rng), wide = mx.gemm({.m = 1, .n = dim, .k = 1}, rng);
  tall.m = dim + 1, wide.n = dim + 1;
  expect(mx, "M = 65536 (the low 16 bits are 0)", tall, ErrorCode::kDim);
  expect(mx, "N = 65536", wide, ErrorCode::kDim);
  for (const char* which : {"M", "N", "K"}) {
    Descriptor z = mx.gemm({.m = 2, .n = 2, .k = 2}, rng);
    (which[0] == 'M' ? z.m : which[0] == 'N' ? z.n : z.k) = 0;
    expect(mx, fmt::format("{} = 0", which), z, ErrorCode::kDim);
  }
  // BF16 halves K; FOLD takes half the rows and half of K.
  if (cfg.bf16) {
    expect(mx, "BF16 K = k_max / 2", mx.gemm({.m = 2, .n = 3, .k = cfg.k_max / 2, .bf16 = true}, rng));
    Descriptor b = mx.gemm({.m = 2, .n = 3, .k = cfg.k_max / 2, .bf16 = true}, rng);
    b.k = cfg.k_max / 2 + 1;
    expect(mx, "BF16 K = k_max / 2 + 1", b, ErrorCode::kDim);
  }
  if (cfg.fold) {
    expect(mx, "FOLD M = rows / 2, K = k_max / 2", mx.gemm({.m = cfg.rows / 2, .n = 40, .k = cfg.k_max / 2, .fold = true}, rng));
    Descriptor f = mx.gemm({.m = cfg.rows / 2, .n = 40, .k = cfg.k_max / 2, .fold = true}, rng);
    f.k = cfg.k_max / 2 + 1;
    expect(mx, "FOLD K = k_max / 2 + 1", f, ErrorCode::kDim);
  }
}

TEST_CASE("cosim errors: every stride and quantization parameter at its limit", "[cosim][errors][corners]") {
  using spec::ErrorCode;
  std::mt19937_64 rng(34);
  Mirror mx(rtl("small-bf16"));  // an engine with both precisions: the BF16 limits too
  const uint32_t al = spec::kAlignBytes;
  // A row that fills its stride exactly (the limit), one element short of it, and one past it (the
  // stride one alignment unit short).
  for (const uint32_t v : {al - 1, al}) {
    expect(mx, fmt::format("lda for K = {}", v), mx.gemm({.m = 3, .n = 5, .k = v}, rng));
    expect(mx, fmt::format("ldb for N = {}", v), mx.gemm({.m = 3, .n = v, .k = 5, .int8 = true}, rng));
    expect(mx, fmt::format("ldc, ldcin for N = {}", v / 4),
           mx.gemm({.m = 3, .n = v / 4, .k = 5, .acc = true}, rng));
  }
  Descriptor d = mx.gemm({.m = 3, .n = 5, .k = al + 1}, rng);
  d.lda = al;
  expect(mx, "lda one row short", d, ErrorCode::kStride, al);
  d = mx.gemm({.m = 3, .n = al + 1, .k = 5, .int8 = true}, rng);
  d.ldb = al;
  expect(mx, "ldb one row short", d, ErrorCode::kStride, al);
  d = mx.gemm({.m = 3, .n = al / 4 + 1, .k = 5}, rng);
  d.ldc = al;
  expect(mx, "ldc one int32 short", d, ErrorCode::kStride, al);
  d = mx.gemm({.m = 3, .n = al + 1, .k = 5, .int8 = true}, rng);
  d.ldc = al;
  expect(mx, "ldc one int8 short", d, ErrorCode::kStride, al);
  d = mx.gemm({.m = 3, .n = al / 4 + 1, .k = 5, .acc = true}, rng);
  d.ldcin = al;
  expect(mx, "ldcin one int32 short", d, ErrorCode::kStride, al);
  d = mx.gemm({.m = 3, .n = al / 4 + 1, .k = 5}, rng);
  d.ldcin = al;
  expect(mx, "ldcin short without C_in: not checked", d);
  if (mx.config().bf16) {
    d = mx.gemm({.m = 3, .n = 5, .k = al / 2 + 1, .bf16 = true}, rng);
    d.lda = al;
    expect(mx, "BF16 lda one row short", d, ErrorCode::kStride, al);
    d = mx.gemm({.m = 3, .n = al / 2 + 1, .k = 5, .bf16 = true}, rng);
    d.ldb = al;
    expect(mx, "BF16 ldb one row short", d, ErrorCode::kStride, al);
    d = mx.gemm({.m = 3, .n = al / 2 + 1, .k = 5, .bf16 = true, .bf16_out = true}, rng);
    d.ldc = al;
    expect(mx, "bf16 ldc one row short", d, ErrorCode::kStride, al);
    expect(mx, "bf16 ldc at the row", mx.gemm({.m = 3, .n = al / 2, .k = 5, .bf16 = true, .bf16_out = true}, rng));
  }
  // act_min against act_max: equal, one apart either way; at both ends of int8.
  for (const auto& [lo, hi] : {std::pair{4, 4}, {3, 4}, {-128, -128}, {127, 127}, {-128, 127}}) {
    d = mx.gemm({.m = 4, .n = 9, .k = 6, .int8 = true}, rng);
    d.act_min = static_cast<int8_t>(lo), d.act_max = static_cast<int8_t>(hi);
    expect(mx, fmt::format("act_min {} act_max {}", lo, hi), d);
  }
  for (const auto& [lo, hi] : {std::pair{5, 4}, {127, -128}, {-127, -128}}) {
    d = mx.gemm({.m = 4, .n = 9, .k = 6, .int8 = true}, rng);
    d.act_min = static_cast<int8_t>(lo), d.act_max = static_cast<int8_t>(hi);
    expect(mx, fmt::format("act_min {} act_max {}", lo, hi), d, ErrorCode::kParam);
  }
  // Shifts: -31 and 31 run, -32 and 32 are named by their address, in any column.
  for (const int s : {spec::kShiftMin - 1, spec::kShiftMin, spec::kShiftMax, spec::kShiftMax + 1}) {
    d = mx.gemm({.m = 4, .n = 21, .k = 6, .int8 = true}, rng);
    const int8_t v = static_cast<int8_t>(s);
    mx.write(d.shift_addr + 20, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&v), 1));
    const bool bad = s < spec::kShiftMin || s > spec::kShiftMax;
    expect(mx, fmt::format("shift {} in the last column", s), d, bad ? ErrorCode::kParam : ErrorCode::kNone,
           bad ? std::optional<uint64_t>(d.shift_addr + 20) : std::nullopt);
  }
}

TEST_CASE("cosim errors: every address and stride misaligned or out of range", "[cosim][errors][corners]") {
  using spec::ErrorCode;
  std::mt19937_64 rng(35);
  Mirror mx(rtl("default"));
  const uint32_t al = spec::kAlignBytes;
  // Every field the engine checks, in its order (an int8 GEMM with bias and C_in uses them all).
  struct Field {
    const char* name;
    uint64_t Descriptor::*addr;
    uint32_t Descriptor::*stride;
  };
  const Field fields[] = {{"a_addr", &Descriptor::a_addr, nullptr},       {"lda", nullptr, &Descriptor::lda},
                          {"b_addr", &Descriptor::b_addr, nullptr},       {"ldb", nullptr, &Descriptor::ldb},
                          {"c_addr", &Descriptor::c_addr, nullptr},       {"ldc", nullptr, &Descriptor::ldc},
                          {"cin_addr", &Descriptor::cin_addr, nullptr},   {"ldcin", nullptr, &Descriptor::ldcin},
                          {"bias_addr", &Descriptor::bias_addr, nullptr}, {"mult_addr", &Descriptor::mult_addr, nullptr},
                          {"shift_addr", &Descriptor::shift_addr, nullptr}};
  auto full = [&] { return mx.gemm({.m = 5, .n = 6, .k = 7, .int8 = true, .bias = true, .acc = true}, rng); };
  for (const Field& f : fields)
    for (const uint32_t off : {1u, al / 2, al - 1}) {
      Descriptor d = full();
      uint64_t value = 0;
      if (f.addr) value = d.*f.addr += off;
      else value = d.*f.stride += off;
      expect(mx, fmt::format("{} + {}", f.name, off), d, ErrorCode::kAlign, value);
    }
  // Two misaligned: the first in the engine's order is named.
  Descriptor two = full();
  two.c_addr += 8, two.ldb += 8;
  expect(mx, "ldb and c_addr misaligned", two, ErrorCode::kAlign, two.ldb);
  two = full();
  two.shift_addr += 1, two.bias_addr += 2;
  expect(mx, "bias_addr and shift_addr misaligned", two, ErrorCode::kAlign, two.bias_addr);
  // A misaligned address and a stride short of its row (aligned): the alignment comes first.
  two = full();
  two.c_addr += 4, two.lda = 0;
  expect(mx, "c_addr misaligned and lda short", two, ErrorCode::kAlign, two.c_addr);
  // Fields a GEMM does not use are not checked: C_in without ACCUMULATE, bias without BIAS, the
  // requantization tables of an int32 GEMM.
  Descriptor plain = mx.gemm({.m = 5, .n = 6, .k = 7}, rng);
  plain.cin_addr = 0x1001, plain.ldcin = 3, plain.bias_addr = (uint64_t{1} << 40) + 1;
  plain.mult_addr = 0x2002, plain.shift_addr = uint64_t{1} << 33;
  expect(mx, "unused fields misaligned and out of range", plain);
  // Out of the engine's 32-bit addresses: 2^32 is named; 2^32 - 64, the last aligned address
  // within them, passes the check and the access then fails on the bus (no memory there). One
  // row of A and of C: a second would wrap to address 0.
  const uint64_t limit = uint64_t{1} << mx.config().addr_bits;
  for (const Field& f : fields) {
    if (!f.addr) continue;
    Descriptor d = full();
    d.*f.addr = limit;
    expect(mx, fmt::format("{} = 2^32", f.name), d, ErrorCode::kAddr, limit);
    d = mx.gemm({.m = 1, .n = 6, .k = 7, .int8 = true, .bias = true, .acc = true}, rng);
    d.*f.addr = limit - al;
    expect(mx, fmt::format("{} = 2^32 - 64", f.name), d, f.addr == &Descriptor::c_addr ? ErrorCode::kAxiWr : ErrorCode::kAxiRd);
  }
}

TEST_CASE("cosim errors: the ring's size and base and tail at their limits", "[cosim][errors][corners]") {
  std::mt19937_64 rng(36);
  Mirror mx(rtl("default"));
  auto& dev = mx.device();
  auto& csr = dev.backend();
  // The ring as the engine sees it after `set_up` (on top of the driver's ring of 256), with the
  // tail moved to `tail`: ERR_RING naming `value`.
  auto bad_ring = [&](const std::string& what, uint32_t tail, uint64_t value, const std::function<void()>& set_up) {
    INFO(what);
    set_up();
    csr.csr_write(spec::csr::RING_TAIL, tail);
    CHECK(csr.wait_irq(100000));
    CHECK(csr.csr_read(spec::csr::ERR_CODE) == static_cast<uint32_t>(spec::ErrorCode::kRing));
    CHECK((uint64_t{csr.csr_read(spec::csr::ERR_ADDR_HI)} << 32 | csr.csr_read(spec::csr::ERR_ADDR_LO)) == value);
    dev.soft_reset();
  };
  const uint32_t max = spec::kRingMaxEntries, slots = driver::Device::kRingEntries;
  for (const uint32_t size : {max * 2, max + 1, max - 1, 0u, 3u})
    bad_ring(fmt::format("size {}", size), 1, size, [&] { csr.csr_write(spec::csr::RING_SIZE, size); });
  bad_ring("tail at the size", slots, slots, [] {});
  bad_ring("tail past the size", slots + 1, slots + 1, [] {});
  const uint64_t base = uint64_t{csr.csr_read(spec::csr::RING_BASE_HI)} << 32 | csr.csr_read(spec::csr::RING_BASE_LO);
  bad_ring("base off its descriptor slots", 1, base + spec::kDescBytes / 2,
           [&] { csr.csr_write(spec::csr::RING_BASE_LO, static_cast<uint32_t>(base + spec::kDescBytes / 2)); });
  bad_ring("base at 2^32", 1, base | uint64_t{1} << 32, [&] { csr.csr_write(spec::csr::RING_BASE_HI, 1); });
  // At their limits they run: the largest ring (one descriptor, in slot 0) and the last slot.
  csr.csr_write(spec::csr::RING_SIZE, max);
  mx.run({mx.gemm({.m = 3, .n = 4, .k = 5, .int8 = true}, rng)});
  dev.soft_reset();
  std::vector<Descriptor> fill;
  for (uint32_t i = 0; i + 1 < slots; ++i) fill.push_back(mx.gemm({.m = 1, .n = 1, .k = 1}, rng));
  mx.run(fill);  // the tail ends at slots - 1, then wraps to 0 with the next
  mx.run({mx.gemm({.m = 2, .n = 3, .k = 4}, rng)});
}

// ---------------------------------------------------------------- soft reset

namespace {

// Writes CTRL with SOFT_RESET (and ENABLE where `enable`) and steps the engine until RESETTING
// clears. While the engine is busy RESETTING must show: a driver that saw it clear early would set
// up the ring while the clear was still to land. The reset raises no interrupt of its own (an
// error that the clear then wipes would still have sent one).
void soft_reset_watched(driver::Backend& csr, bool enable) {
  const bool irq_before = csr.wait_irq(0);
  csr.csr_write(spec::csr::CTRL, spec::csr::CTRL_SOFT_RESET_MASK | (enable ? spec::csr::CTRL_ENABLE_MASK : 0));
  uint32_t status = 0;
  for (int i = 0; i < 100000; ++i) {
    status = csr.csr_read(spec::csr::STATUS);
    INFO("STATUS " << status << " after " << i << " polls");
    REQUIRE(!((status & spec::csr::STATUS_BUSY_MASK) && !(status & spec::csr::STATUS_RESETTING_MASK)));
    if (!irq_before) REQUIRE(!csr.wait_irq(0));
    if (!(status & spec::csr::STATUS_RESETTING_MASK)) break;
    csr.advance(1);
  }
  CHECK(status == 0);  // neither busy, halted nor resetting
  CHECK(csr.csr_read(spec::csr::ERR_CODE) == static_cast<uint32_t>(spec::ErrorCode::kNone));
  CHECK(csr.csr_read(spec::csr::IRQ_STATUS) == 0);
  CHECK(csr.csr_read(spec::csr::RING_HEAD) == 0);
  CHECK(csr.csr_read(spec::csr::RING_TAIL) == 0);
  CHECK(csr.csr_read(spec::csr::COMPLETED) == 0);
}

}  // namespace

TEST_CASE("cosim corners: a soft reset in the middle of a GEMM drains and clears the engine", "[cosim][corners]") {
  // Reset at points from the first reads to deep into the GEMM, with operands, tokens in the array
  // and rows for the store in flight; after each, a GEMM runs and every buffer is compared (a stale
  // write of the reset GEMM's would show there).
  std::mt19937_64 rng(37);
  Mirror mx(rtl("default"));
  auto& dev = mx.device();
  auto& csr = dev.backend();
  for (const double part : {0.003, 0.01, 0.03, 0.1, 0.3, 0.6, 0.95}) {
    const Descriptor big = mx.gemm({.m = 40, .n = 70, .k = 300, .int8 = true, .bias = true, .acc = true}, rng);
    const uint64_t at = static_cast<uint64_t>(part * double(estimate(big, mx.config(), mx.memory()).cycles));
    INFO("soft reset " << at << " cycles into the GEMM");
    dev.submit(std::span<const Descriptor>(&big, 1));
    csr.advance(at);
    REQUIRE((csr.csr_read(spec::csr::STATUS) & spec::csr::STATUS_BUSY_MASK) != 0);
    const driver::Counters before = dev.counters();
    soft_reset_watched(csr, false);
    const driver::Counters c = dev.counters();
    if (part >= 0.3) {  // by then every counter the reset clears had counted, but STALL and MACS (at completion)
      CHECK(before.busy_cycles != 0);
      CHECK(before.read_bytes != 0);
      CHECK(before.write_bytes != 0);
      CHECK(before.steps != 0);
      CHECK(before.tiles != 0);
      CHECK(before.descs != 0);
      CHECK(before.spad_read_bytes != 0);
    }
    CHECK(c.busy_cycles == 0);
    CHECK(c.stall_cycles == 0);
    CHECK(c.macs == 0);
    CHECK(c.read_bytes == 0);
    CHECK(c.write_bytes == 0);
    CHECK(c.steps == 0);
    CHECK(c.tiles == 0);
    CHECK(c.descs == 0);
    CHECK(c.spad_read_bytes == 0);
    // C as the reset left it: some tiles may have landed (docs/ENGINE.md).
    std::vector<uint8_t> c_now(uint64_t{big.m} * big.ldc);
    csr.mem_read(big.c_addr, c_now);
    mx.host().write(big.c_addr, c_now);
    dev.soft_reset();
    mx.run({mx.gemm({.m = 9, .n = 20, .k = 33, .int8 = true}, rng)});
  }
}

TEST_CASE("cosim corners: a soft reset that keeps ENABLE after a ring error comes back idle", "[cosim][corners]") {
  // The clear lands while the ring is still bad and the tail not yet zeroed: that must not raise
  // the ring error again.
  std::mt19937_64 rng(38);
  Mirror mx(rtl("default"));
  auto& dev = mx.device();
  auto& csr = dev.backend();
  csr.csr_write(spec::csr::RING_SIZE, 3);
  const Descriptor d = mx.gemm({.m = 2, .n = 3, .k = 4}, rng);
  CHECK_THROWS_AS(dev.wait(dev.submit(std::span<const Descriptor>(&d, 1))), driver::EngineFault);
  soft_reset_watched(csr, true);
  dev.soft_reset();
  mx.run({mx.gemm({.m = 5, .n = 6, .k = 7, .int8 = true}, rng)});
  // ENABLE first set by the reset's own write, over a bad ring with a descriptor waiting: the ring
  // is checked only after the clear, which empties the queue. An error raised before it would be
  // wiped by the clear, but not the interrupt it sent.
  csr.csr_write(spec::csr::CTRL, 0);
  csr.csr_write(spec::csr::RING_SIZE, 3);
  csr.csr_write(spec::csr::RING_TAIL, csr.csr_read(spec::csr::RING_HEAD) == 0 ? 1 : 0);
  csr.csr_write(spec::csr::IRQ_STATUS, spec::csr::IRQ_STATUS_DONE_MASK | spec::csr::IRQ_STATUS_ERROR_MASK);
  csr.csr_write(spec::csr::CTRL, spec::csr::CTRL_SOFT_RESET_MASK | spec::csr::CTRL_ENABLE_MASK);
  for (int i = 0; i < 100; ++i) {  // the interrupt line, every cycle
    INFO("cycle " << i << " after the write");
    REQUIRE(!csr.wait_irq(0));
    csr.advance(1);
  }
  CHECK(csr.csr_read(spec::csr::STATUS) == 0);
  CHECK(csr.csr_read(spec::csr::ERR_CODE) == static_cast<uint32_t>(spec::ErrorCode::kNone));
  dev.soft_reset();
  mx.run({mx.gemm({.m = 5, .n = 6, .k = 7, .int8 = true}, rng)});
}

TEST_CASE("cosim corners: a soft reset landing as a descriptor completes over a ring made bad", "[cosim][corners]") {
  // The host makes the ring bad (RING_SIZE 3) while a GEMM runs, so that once the GEMM completes
  // the engine must raise ERR_RING; then writes SOFT_RESET one cycle later each time, on a fresh
  // device whose cycles repeat. A reset that lands by the cycle after the completion comes first
  // and raises nothing; one that lands later finds the error raised. So with only the error
  // interrupt enabled, the line stays low up to some landing cycle and goes high from it on, never
  // low again: an error raised for a reset already on its way would break that order.
  std::mt19937_64 rng(41);
  std::vector<int> outcomes;
  for (int offset = -12; offset <= 12; ++offset) {
    Mirror mx(rtl("small"));
    auto& dev = mx.device();
    auto& csr = dev.backend();
    const Descriptor d = mx.gemm({.m = 3, .n = 5, .k = 7}, rng);
    csr.csr_write(spec::csr::IRQ_ENABLE, spec::csr::IRQ_STATUS_ERROR_MASK);
    const uint64_t at = csr.cycles() + estimate(d, mx.config(), mx.memory()).cycles + offset;
    dev.submit(std::span<const Descriptor>(&d, 1));
    csr.csr_write(spec::csr::RING_SIZE, 3);
    bool error = false;
    while (csr.cycles() < at) {
      error = error || csr.wait_irq(0);
      csr.advance(1);
    }
    csr.csr_write(spec::csr::CTRL, spec::csr::CTRL_SOFT_RESET_MASK | spec::csr::CTRL_ENABLE_MASK);
    for (int i = 0; i < 100; ++i) {
      error = error || csr.wait_irq(0);
      csr.advance(1);
    }
    outcomes.push_back(error);
  }
  INFO("error interrupt for the write at offsets -12 to 12: " << fmt::format("{}", fmt::join(outcomes, "")));
  REQUIRE(outcomes.front() == 0);  // the sweep starts before the completion and ends after it
  REQUIRE(outcomes.back() == 1);
  CHECK(std::is_sorted(outcomes.begin(), outcomes.end()));
}

TEST_CASE("cosim corners: the registers at power-on and a GEMM without a soft reset", "[cosim][corners]") {
  // State that no reset sets powers on random (init_seed), so a register or an operand slot that
  // the power-on reset misses shows: nothing soft-resets the engine first (reset=none).
  const uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3; ++i) {
    const uint32_t init_seed = 1 + static_cast<uint32_t>(rng() % INT32_MAX);
    INFO("init_seed " << init_seed);
    const std::string device = rtl("small") + "&init_seed=" + std::to_string(init_seed);
    // The first access after the power-on reset finds the engine idle, not resetting itself.
    CHECK(driver::make_rtl_backend(driver::DeviceSpec::parse(device))->csr_read(spec::csr::STATUS) == 0);
    Mirror mx(device + "&reset=none");
    // Every register reads 0 but the constant ones and those the driver has written since; last
    // first, so that a counter's high word is read before its low word latches it.
    driver::Backend& regs = mx.device().backend();
    const std::set<std::string_view> written = {"CTRL", "IRQ_ENABLE", "RING_BASE_LO", "RING_BASE_HI", "RING_SIZE"};
    for (const spec::csr::Register& r : spec::csr::kRegisters | std::views::reverse) {
      if (r.offset < spec::csr::SCRATCH || written.count(r.name)) continue;
      INFO("register " << r.name);
      CHECK(regs.csr_read(r.offset) == 0);
    }
    const EngineConfig& cfg = mx.config();
    mx.run({mx.gemm(test::random_shape(rng, 2 * cfg.rows, std::min(cfg.k_max, 64u)), rng)});
  }
}

TEST_CASE("cosim corners: the counters across a carry into their high words", "[cosim][corners]") {
  // Every counter starts just short of 2^32 (counter_start; reset=none, as a soft reset clears them).
  // A GEMM carries the busy, MAC and byte counters into their high words, and their deltas, read
  // low word first, must still equal the models' (Mirror::run). Then the latch: BUSY's low word
  // read just before a carry, its high word after it, twice: both reads give the latched word.
  std::mt19937_64 rng(41);
  const uint64_t start = (uint64_t{1} << 32) - 2;
  const std::string device = rtl("small") + "&reset=none&counter_start=" + std::to_string(start);
  {
    Mirror mx(device);
    const driver::Counters before = mx.device().counters();
    CHECK(before.busy_cycles == start);
    CHECK(before.spad_read_bytes == start);
    mx.run({mx.gemm({.m = 9, .n = 9, .k = 40, .bias = true, .acc = true}, rng)});
    const driver::Counters after = mx.device().counters();
    for (const uint64_t c : {after.busy_cycles, after.macs, after.read_bytes, after.write_bytes, after.spad_read_bytes})
      CHECK(c >> 32 == 1);
  }
  Mirror mx(device);
  driver::Backend& regs = mx.device().backend();
  REQUIRE(regs.csr_read(spec::csr::CNT_BUSY_LO) == static_cast<uint32_t>(start));
  Descriptor nop;
  nop.opcode = static_cast<uint8_t>(spec::Opcode::kNop);
  mx.device().wait(mx.device().submit(std::vector{nop, nop}));
  CHECK(regs.csr_read(spec::csr::CNT_BUSY_HI) == 0);
  CHECK(regs.csr_read(spec::csr::CNT_BUSY_HI) == 0);
  REQUIRE(mx.device().counters().busy_cycles >> 32 == 1);  // the carry happened
  // A word that is no register reads 0, the latched high word (now 1) included: the high word of a
  // counter one past the last.
  regs.csr_read(spec::csr::CNT_BUSY_LO);
  CHECK(regs.csr_read(spec::csr::CNT_BUSY_HI + 8 * spec::kNumCounters) == 0);
}

// ---------------------------------------------------------------- BF16 near fp32's smallest

namespace {

using Values = std::function<uint32_t()>;

// A BF16 GEMM of shape `s` whose A and B (bf16), C_in and bias (fp32), where given, are drawn from
// those values; the rest as Mirror::gemm draws them.
Descriptor bf16_gemm(Mirror& mx, std::mt19937_64& rng, test::Shape s, const Values& a, const Values& b,
                     const Values& cin, const Values& bias) {
  s.bf16 = true;
  const Descriptor d = mx.gemm(s, rng);
  if (a) mx.fill_values(d.a_addr, uint64_t{d.m} * d.lda, 2, a);
  if (b) mx.fill_values(d.b_addr, uint64_t{d.k} * d.ldb, 2, b);
  if (cin) mx.fill_values(d.cin_addr, uint64_t{d.m} * d.ldcin, 4, cin);
  if (bias) mx.fill_values(d.bias_addr, 4ull * d.n, 4, bias);
  return d;
}

}  // namespace

TEST_CASE("cosim corners: BF16 sums near fp32's smallest normal plus zero and subnormal bias and C_in",
          "[cosim][corners][bf16]") {
  // Products of operands from 2^-64 to 2^-52 lie from 2^-128 to 2^-104, down to where fp32's last
  // place is 2^-149: an addend of zero or a subnormal wrongly given a value would show in their low
  // bits. Bias and C_in: zeros of both signs and subnormals. Then sums of zero plus a C_in just above
  // the smallest normal with its last bit set, plus a zero bias: there even half of 2^-149 would
  // round the sum up.
  const uint64_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Mirror mx(rtl("small-bf16"));
  REQUIRE(mx.config().bf16);
  std::uniform_int_distribution<uint32_t> mantissa(0, 127), exponent(127 - 64, 127 - 52), sign(0, 1);
  const auto tiny_bf16 = [&] { return sign(rng) << 15 | exponent(rng) << 7 | mantissa(rng); };
  const uint32_t zeros_and_subnormals[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00400000u};
  uint32_t i = 0;
  const auto addend = [&] { return zeros_and_subnormals[i++ % std::size(zeros_and_subnormals)]; };
  std::vector<Descriptor> descs;
  for (const bool bf16_out : {false, true})
    descs.push_back(bf16_gemm(mx, rng, {.m = 6, .n = 9, .k = 21, .bias = true, .acc = true, .bf16_out = bf16_out},
                              tiny_bf16, tiny_bf16, addend, addend));
  const uint32_t odd_normals[] = {0x00800001u, 0x80800001u, 0x00800003u, 0x00ffffffu, 0x80ffffffu, 0x01000001u};
  descs.push_back(bf16_gemm(
      mx, rng, {.m = 5, .n = 7, .k = 3, .bias = true, .acc = true}, [] { return 0u; }, {},
      [&] { return odd_normals[i++ % std::size(odd_normals)]; }, [&] { return zeros_and_subnormals[i++ % 2]; }));
  // Zero plus a C_in just above the smallest normal, plus a bias of +-2^-126: where the signs
  // differ the sum falls below 2^-126 and must flush to a zero (of its sign), not keep its bits.
  const uint32_t near_smallest[] = {0x00800001u, 0x00c00000u, 0x00ffffffu, 0x80800003u, 0x80a00000u, 0x80fffffeu};
  descs.push_back(bf16_gemm(
      mx, rng, {.m = 5, .n = 6, .k = 3, .bias = true, .acc = true}, [] { return 0u; }, {},
      [&] { return near_smallest[i++ % std::size(near_smallest)]; }, [&] { return i++ % 2 ? 0x80800000u : 0x00800000u; }));
  mx.run(descs);
}

TEST_CASE("cosim corners: BF16 infinities against opposite infinities and huge values times zero",
          "[cosim][corners][bf16]") {
  // Sums of +-1 and +-inf (so +inf, -inf, NaN and finite ones) plus C_in and bias of +-inf, zero
  // and one: each infinity meets the opposite one in both of the epilogue's adds. Then operands near
  // 2^120 times zeros and subnormals, both ways round: their products are zero, which any value
  // given to the zero (2^120 x 2^-127 and up) would show beside a C_in of one.
  const uint64_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Mirror mx(rtl("small-bf16"));
  REQUIRE(mx.config().bf16);
  const auto pick = [&](std::initializer_list<uint32_t> values) {
    return *(values.begin() + std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng));
  };
  std::uniform_int_distribution<uint32_t> mantissa(0, 127), sign(0, 1), huge(127 + 110, 127 + 126);
  const auto infinities = [&] { return pick({0x7f80u, 0xff80u, 0x3f80u, 0x3f80u, 0xbf80u}); };
  const auto ones = [&] { return pick({0x3f80u, 0xbf80u}); };
  const auto addends = [&] { return pick({0x7f800000u, 0xff800000u, 0x00000000u, 0x3f800000u}); };
  const auto large = [&] { return sign(rng) << 15 | huge(rng) << 7 | mantissa(rng); };
  const auto zero = [&] { return sign(rng) << 15 | (rng() % 2 ? mantissa(rng) : 0u); };  // zeros, subnormals
  std::vector<Descriptor> descs;
  for (const bool bf16_out : {false, true})
    descs.push_back(bf16_gemm(mx, rng, {.m = 7, .n = 9, .k = 5, .bias = true, .acc = true, .bf16_out = bf16_out},
                              infinities, ones, addends, addends));
  const Values one = [] { return 0x3f800000u; };
  descs.push_back(bf16_gemm(mx, rng, {.m = 6, .n = 7, .k = 9, .acc = true}, large, zero, one, {}));
  descs.push_back(bf16_gemm(mx, rng, {.m = 6, .n = 7, .k = 9, .acc = true}, zero, large, one, {}));
  // And whatever the seed: sums of +inf against a C_in of -inf, and against a bias of -inf.
  const Values inf = [] { return 0x7f80u; }, bf16_one = [] { return 0x3f80u; };
  const Values minus_inf = [] { return 0xff800000u; }, zero32 = [] { return 0u; };
  descs.push_back(bf16_gemm(mx, rng, {.m = 3, .n = 5, .k = 2, .acc = true}, inf, bf16_one, minus_inf, {}));
  descs.push_back(bf16_gemm(mx, rng, {.m = 3, .n = 5, .k = 2, .bias = true, .acc = true}, inf, bf16_one, zero32,
                            minus_inf));
  mx.run(descs);
}

TEST_CASE("cosim corners: BF16 sums whose rounding carries into the next power of two", "[cosim][corners][bf16]") {
  // A sum of 24 ones (1.111...1) plus half its last place or a little more rounds up to 2^(e+1):
  // the significand's carry must raise the exponent by exactly one. In the PEs: row i of A holds
  // 1.1111111 x 2^0, 2^-8 and 2^-16 and 1.x x 2^-24, in an order of its own, all times +-2^e_i (row 0
  // at bf16's largest exponent, where the carry gives an infinity); B's columns are +-1. In the
  // epilogue: C_in of 24 ones plus a bias of half its last place or a little more, of its sign.
  const uint64_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Mirror mx(rtl("small-bf16"));
  REQUIRE(mx.config().bf16);
  const auto bf16 = [](uint32_t sign, int exp, uint32_t mantissa) {
    return sign << 15 | static_cast<uint32_t>(exp + 127) << 7 | mantissa;
  };
  const Values zero = [] { return 0u; };
  std::vector<Descriptor> descs;
  for (const bool bf16_out : {false, true}) {
    const test::Shape s{.m = 9, .n = 7, .k = 4, .bias = true, .acc = true, .bf16 = true, .bf16_out = bf16_out};
    const Descriptor d = mx.gemm(s, rng);
    descs.push_back(d);
    std::vector<uint32_t> a(uint64_t{d.m} * d.lda / 2, 0);
    for (uint32_t i = 0; i < d.m; ++i) {
      const int e = i == 0 ? 127 : std::uniform_int_distribution<int>(-100, 126)(rng);
      const uint32_t sign = rng() % 2;
      const auto row = a.begin() + i * d.lda / 2;
      row[0] = bf16(sign, e, 0x7f), row[1] = bf16(sign, e - 8, 0x7f), row[2] = bf16(sign, e - 16, 0x7f);
      row[3] = bf16(sign, e - 24, static_cast<uint32_t>(rng() % 3));
      std::shuffle(row, row + d.k, rng);
    }
    size_t next = 0;
    uint32_t column = 0;
    mx.fill_values(d.a_addr, a.size() * 2, 2, [&] { return a[next++]; });
    mx.fill_values(d.b_addr, uint64_t{d.k} * d.ldb, 2, [&] { return bf16(column++ % 2, 0, 0); });
    mx.fill_values(d.cin_addr, uint64_t{d.m} * d.ldcin, 4, zero);
    mx.fill_values(d.bias_addr, 4ull * d.n, 4, zero);
    for (const uint32_t exp : {25u, 127u, 254u}) {  // the bias's exponent is exp - 24
      const uint32_t sign = static_cast<uint32_t>(rng() % 2) << 31;
      descs.push_back(bf16_gemm(
          mx, rng, s, zero, {}, [&] { return sign | exp << 23 | 0x7fffffu; },
          [&] { return sign | (exp - 24) << 23 | static_cast<uint32_t>(rng() % 3) << 21; }));
    }
  }
  mx.run(descs);
}

// ---------------------------------------------------------------- where the schedule changes

// These change no byte of C, only when the engine does what: the busy counter, held to the timing
// model's (Mirror::run), is the check.

TEST_CASE("cosim corners: BF16 A rows at the quarter-bank boundary and one past", "[cosim][corners][bf16]") {
  // A BF16 A row of up to k_max / 2 bytes (K <= k_max / 4) rings through four A slots, a longer one
  // through two (tsr_int_pkg::a_quad); their schedules differ (on the small preset by 3% at
  // K = k_max / 4). M of five row blocks keeps A from staying resident, and each GEMM runs on a
  // fresh device, where the busy counter must equal the timing model's. The same with C_in, whose
  // two slots pace the tiles whatever A has.
  std::mt19937_64 rng(39);
  for (const bool acc : {false, true})
    for (const uint32_t quarter_plus : {0u, 1u}) {
      Mirror mx(rtl("small-bf16"));
      const EngineConfig& cfg = mx.config();
      REQUIRE(cfg.bf16);
      const uint32_t k = cfg.k_max / 4 + quarter_plus;
      INFO("K " << k << (acc ? ", with C_in" : ""));
      mx.run({mx.gemm({.m = 4 * cfg.rows + 1, .n = 2 * cfg.cols, .k = k, .acc = acc, .bf16 = true}, rng)});
    }
}

TEST_CASE("cosim corners: FOLD with an empty lower band under a slow store", "[cosim][corners]") {
  // N of an odd number of column blocks: FOLD's last tile has columns in its upper band only, and
  // hands the store half the rows. With a slow store (4 bytes a cycle, or one write burst at a
  // time) the tiles wait for its credits, so a tile that asked for too many would start late: each
  // GEMM runs on a fresh device, where the busy and stall counters are held to the timing model's.
  std::mt19937_64 rng(40);
  for (const char* memory : {"mem_bytes_per_cycle=4", "mem_max_writes=1"})
    for (const uint32_t blocks : {3u, 5u, 11u})
      for (const uint32_t k : {1u, 8u, 40u}) {
        INFO(memory << ", " << blocks << " column blocks, K " << k);
        Mirror mx(rtl("small") + "&" + memory);
        const EngineConfig& cfg = mx.config();
        REQUIRE(cfg.fold);
        mx.run({mx.gemm({.m = cfg.rows / 2, .n = blocks * cfg.cols, .k = k, .fold = true}, rng)});
      }
}
