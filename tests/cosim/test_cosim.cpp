// Cosimulation: the RTL (rtl backend, its own simulator process per test case) against the
// golden model, byte for byte, plus the platform's scoreboard.
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <tuple>

#include <fmt/format.h>

#include "csr_spec.hpp"
#include "harness.hpp"
#include "seed.hpp"

using namespace tessera;
using test::Mirror;
using test::rtl;
using test::Shape;

namespace {

// `count` GEMMs of the shapes `make(rng, i, properties)` draws from a printed seed, back to back on
// one device, against the golden model.
void seeded_gemms(const std::string& spec, int count,
                  const std::function<Shape(std::mt19937_64&, int, const driver::Properties&)>& make) {
  const uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  Mirror mx(spec);
  std::vector<Descriptor> ds;
  for (int i = 0; i < count; ++i) {
    const Shape s = make(rng, i, mx.device().properties());
    INFO("seed " << seed << " #" << i << ": " << s.m << "x" << s.n << "x" << s.k << " int8=" << s.int8
                 << " bias=" << s.bias << " acc=" << s.acc << " relu=" << s.relu << " fold=" << s.fold
                 << " bf16=" << s.bf16 << " bf16_out=" << s.bf16_out << " specials=" << s.specials);
    ds.push_back(mx.gemm(s, rng));
  }
  INFO("seed " << seed);
  mx.run(ds);
}

void random_gemms(const std::string& preset, int count, uint32_t max_mn, uint32_t max_k,
                  const std::string& options = "") {
  seeded_gemms(rtl(preset) + options, count,
               [&](std::mt19937_64& rng, int, const driver::Properties&) { return test::random_shape(rng, max_mn, max_k); });
}

}  // namespace

TEST_CASE("cosim: every output mode and flag back to back", "[cosim]") {
  std::mt19937_64 rng(11);
  Mirror mx(rtl("default"));
  std::vector<Descriptor> ds;
  for (int int8 = 0; int8 < 2; ++int8)
    for (int bias = 0; bias < 2; ++bias)
      for (int acc = 0; acc < 2; ++acc)
        for (int relu = 0; relu <= int8; ++relu)
          ds.push_back(mx.gemm({.m = 37, .n = 45, .k = 70, .int8 = bool(int8), .bias = bool(bias),
                                .acc = bool(acc), .relu = bool(relu)},
                               rng));
  mx.run(ds);
}

TEST_CASE("cosim: every CSR behaves as the spec declares", "[cosim]") {
  Mirror mx(rtl("default"));
  test::check_csr_access(mx.device().backend());
}

TEST_CASE("cosim: M or N or K of 1", "[cosim]") {
  std::mt19937_64 rng(12);
  Mirror mx(rtl("default"));
  std::vector<Descriptor> ds;
  for (const auto& [m, n, k] : {std::tuple{1u, 1u, 1u}, {1u, 40u, 1u}, {40u, 1u, 1u}, {1u, 1u, 300u}, {33u, 17u, 1u},
                                {1u, 33u, 65u}})
    for (bool int8 : {false, true}) ds.push_back(mx.gemm({.m = m, .n = n, .k = k, .int8 = int8, .bias = true}, rng));
  mx.run(ds);
}

TEST_CASE("cosim: shapes that are not multiples of the array and large strides", "[cosim]") {
  std::mt19937_64 rng(13);
  Mirror mx(rtl("default"));
  mx.run({mx.gemm({.m = 17, .n = 33, .k = 65, .int8 = true, .bias = true}, rng),
          mx.gemm({.m = 31, .n = 15, .k = 129, .acc = true}, rng),
          mx.gemm({.m = 50, .n = 47, .k = 100, .int8 = true, .pad_a = 64, .pad_b = 63, .pad_c = 65}, rng),
          mx.gemm({.m = 20, .n = 70, .k = 33, .acc = true, .pad_a = 3, .pad_b = 100, .pad_c = 7, .pad_cin = 129}, rng)});
}

TEST_CASE("cosim: -128 and 127 extremes at K = k_max with saturation and wraparound", "[cosim]") {
  std::mt19937_64 rng(14);
  Mirror mx(rtl("default"));
  const uint32_t K = mx.config().k_max;
  Descriptor big = mx.gemm({.m = 18, .n = 20, .k = K, .bias = true, .acc = true}, rng);
  // A all -128, B alternating -128/127 by column: sums of +-2^14 * 4096 = +-2^26 per output.
  std::vector<uint8_t> a(uint64_t{big.m} * big.lda, 0x80), b(uint64_t{big.k} * big.ldb);
  for (uint64_t i = 0; i < b.size(); ++i) b[i] = (i % big.ldb) % 2 ? 0x7f : 0x80;
  mx.write(big.a_addr, a);
  mx.write(big.b_addr, b);
  std::vector<uint8_t> bias(4ull * big.n);
  for (uint32_t n = 0; n < big.n; ++n) {
    const int32_t v = n % 2 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
    std::memcpy(&bias[4 * n], &v, 4);  // wraps the int32 sum
  }
  mx.write(big.bias_addr, bias);
  // int8 with the largest multiplier and left shifts: saturates both ways; one column at shift 31.
  Descriptor sat = mx.gemm({.m = 16, .n = 16, .k = 64, .int8 = true}, rng);
  std::vector<uint8_t> mult(4ull * sat.n), shift(sat.n);
  for (uint32_t n = 0; n < sat.n; ++n) {
    const int32_t v = n == 0 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
    std::memcpy(&mult[4 * n], &v, 4);
    shift[n] = static_cast<uint8_t>(n < 8 ? n * 4 : 31 - n);
  }
  mx.write(sat.mult_addr, mult);
  mx.write(sat.shift_addr, shift);
  mx.run({big, sat});
}

TEST_CASE("cosim: output rows that straddle a 4 KB page", "[cosim][large]") {
  // Large preset: a row block of 32 int32 is 128 bytes, wider than the 64-byte alignment. With a
  // row pitch of 4160 bytes, row m starts 64 * m bytes into its page, so row 63 crosses a page.
  std::mt19937_64 rng(18);
  Mirror mx(rtl("large"));
  mx.run({mx.gemm({.m = 64, .n = 40, .k = 20, .bias = true, .acc = true, .pad_c = 63, .pad_cin = 63}, rng)});
}

TEST_CASE("cosim: accumulate chain in place", "[cosim]") {
  std::mt19937_64 rng(15);
  Mirror mx(rtl("default"));
  Descriptor first = mx.gemm({.m = 40, .n = 36, .k = 50}, rng);
  std::vector<Descriptor> chain = {first};
  for (uint32_t i = 0; i < 4; ++i) {
    Descriptor d = mx.gemm({.m = 40, .n = 36, .k = 50u + 13u * i, .bias = i % 2 == 1}, rng);
    d.c_addr = first.c_addr;  // C += A_i B_i, read and written in place
    d.ldc = first.ldc;
    d.cin_addr = first.c_addr;
    d.ldcin = first.ldc;
    d.flags |= spec::desc::FLAG_ACCUMULATE;
    chain.push_back(d);
  }
  mx.run(chain);
}

TEST_CASE("cosim: ring wrap-around with hundreds of descriptors", "[cosim]") {
  std::mt19937_64 rng(16);
  Mirror mx(rtl("small"));
  std::vector<Descriptor> ds;
  Descriptor nop;
  nop.opcode = static_cast<uint8_t>(spec::Opcode::kNop);
  for (int i = 0; i < 300; ++i) {
    if (i % 3 == 0)
      ds.push_back(nop);
    else
      ds.push_back(mx.gemm({.m = 5, .n = 6, .k = 7, .int8 = i % 2 == 0, .bias = true}, rng));
  }
  mx.run(ds);
  CHECK(mx.device().counters().completed == 300);
}

TEST_CASE("cosim: random GEMMs under memory back-pressure", "[cosim]") {
  // A memory that takes two bursts each way at a time, 8 bytes a cycle: AR, AW and W stall.
  random_gemms("small", 12, 40, 200, "&mem_max_reads=2&mem_max_writes=2&mem_bytes_per_cycle=8&mem_latency=40");
}
TEST_CASE("cosim: random GEMMs with a memory that takes write data before its address", "[cosim]") {
  // As AXI allows a slave to; one write burst at a time, so W runs ahead of a stalled AW.
  const std::string memory = "&mem_w_first=1&mem_max_writes=1&mem_latency=40";
  random_gemms("small", 12, 40, 200, memory);
  // And one GEMM alone on a fresh device, where the busy and stall counters are the timing model's
  // to the cycle: a row that waited a cycle longer for its burst would show.
  std::mt19937_64 rng(test_seed());
  for (int i = 0; i < 6; ++i) {
    Mirror mx(rtl("small") + memory);
    mx.run({mx.gemm(test::random_shape(rng, 40, 200), rng)});
  }
}
TEST_CASE("cosim: random GEMMs on the small preset", "[cosim][random]") { random_gemms("small", 60, 40, 300); }
TEST_CASE("cosim: random GEMMs on the default preset", "[cosim][random]") { random_gemms("default", 40, 100, 600); }
TEST_CASE("cosim: random GEMMs on the large preset", "[cosim][random][large]") { random_gemms("large", 20, 120, 400); }

TEST_CASE("cosim: small GEMMs back to back with A loaded once", "[cosim][random]") {
  // Without C_in, row blocks that fit in the A banks are loaded in the first column block and read
  // again by the others (resident A); the next GEMM may be resident too, or a normal one (ACCUMULATE,
  // or A too large: long K on several row blocks) that alternates slots per tile.
  seeded_gemms(rtl("default"), 24, [](std::mt19937_64& rng, int, const driver::Properties& p) {
    Shape s;
    s.m = std::uniform_int_distribution<uint32_t>(1, 3 * p.rows + 2)(rng);
    s.n = std::uniform_int_distribution<uint32_t>(1, 5 * p.cols)(rng);
    s.k = std::uniform_int_distribution<uint32_t>(1, rng() % 4 ? 300 : p.k_max)(rng);
    s.int8 = rng() & 1;
    s.bias = rng() & 1;
    s.acc = rng() % 4 == 0;
    return s;
  });
}

namespace {

// FOLD GEMMs (M <= R/2) mixed with normal ones, so the engine switches dataflow between
// descriptors that follow each other in the ring.
void fold_gemms(const std::string& preset) {
  seeded_gemms(rtl(preset), 18, [](std::mt19937_64& rng, int i, const driver::Properties& p) {
    REQUIRE(p.fold);
    const uint32_t rows = p.rows, cols = p.cols;
    Shape s;
    s.fold = i % 3 != 2;
    s.m = std::uniform_int_distribution<uint32_t>(1, s.fold ? rows / 2 : rows + 2)(rng);
    s.n = std::uniform_int_distribution<uint32_t>(1, 6 * cols)(rng);
    // K below C + R/2 too: there the tile interval, not K, keeps a tile's lower band from being
    // overwritten before it is read
    s.k = std::uniform_int_distribution<uint32_t>(1, rng() % 3 ? 300 : cols + rows / 2)(rng);
    if (!s.fold) {
      s.int8 = rng() & 1;
      s.bias = rng() & 1;
      s.acc = rng() % 4 == 0;
    }
    return s;
  });
}

}  // namespace

TEST_CASE("cosim: FOLD GEMMs among normal ones on the small preset", "[cosim][random]") { fold_gemms("small"); }
TEST_CASE("cosim: FOLD GEMMs among normal ones on the default preset", "[cosim][random]") { fold_gemms("default"); }
TEST_CASE("cosim: FOLD GEMMs among normal ones on the large preset", "[cosim][random][large]") { fold_gemms("large"); }

// ---------------------------------------------------------------- BF16

TEST_CASE("cosim: BF16 output modes and flags back to back", "[cosim][bf16]") {
  std::mt19937_64 rng(13);
  Mirror mx(rtl("small-bf16"));
  std::vector<Descriptor> ds;
  for (int out = 0; out < 2; ++out)
    for (int bias = 0; bias < 2; ++bias)
      for (int acc = 0; acc < 2; ++acc)
        for (int relu = 0; relu < 2; ++relu)
          ds.push_back(mx.gemm({.m = 37, .n = 45, .k = 70, .bias = bool(bias), .acc = bool(acc), .relu = bool(relu),
                                .bf16 = true, .bf16_out = bool(out), .specials = (bias + acc + relu) % 2 == 1},
                               rng));
  mx.run(ds);
}

namespace {

// BF16 GEMMs mixed with int8 ones, so the engine switches precision between descriptors.
void bf16_gemms(const std::string& preset, int count, uint32_t max_mn, uint32_t max_k) {
  seeded_gemms(rtl(preset), count, [&](std::mt19937_64& rng, int i, const driver::Properties& p) {
    REQUIRE(p.bf16);
    return test::random_shape(rng, max_mn, std::min(max_k, p.k_max / 2), i % 4 != 3);
  });
}

}  // namespace

TEST_CASE("cosim: BF16 GEMMs among int8 ones on the small-bf16 preset", "[cosim][random][bf16]") {
  bf16_gemms("small-bf16", 40, 40, 300);
}
TEST_CASE("cosim: BF16 GEMMs among int8 ones on the default-bf16 preset", "[cosim][random][bf16][default-bf16]") {
  bf16_gemms("default-bf16", 24, 100, 400);
}
TEST_CASE("cosim: BF16 GEMMs among int8 ones on the large-bf16 preset", "[cosim][random][bf16][large-bf16]") {
  bf16_gemms("large-bf16", 12, 120, 300);
}

TEST_CASE("cosim: BF16 at K = k_max / 2 with every kind of operand", "[cosim][bf16]") {
  std::mt19937_64 rng(19);
  Mirror mx(rtl("small-bf16"));
  const uint32_t k = mx.config().k_max / 2;
  mx.run({mx.gemm({.m = 5, .n = 9, .k = k, .bias = true, .acc = true, .bf16 = true}, rng),
          mx.gemm({.m = 6, .n = 7, .k = k, .relu = true, .bf16 = true, .bf16_out = true, .specials = true}, rng)});
}

TEST_CASE("cosim: a transformer-sized GEMM with every epilogue stage", "[cosim]") {
  std::mt19937_64 rng(17);
  Mirror mx(rtl("default"));
  mx.run({mx.gemm({.m = 128, .n = 200, .k = 768, .int8 = true, .bias = true, .acc = true}, rng)});
}

// ---------------------------------------------------------------- errors

namespace {

// Runs a bad descriptor, expects `code`, then recovers with soft reset and runs a good GEMM.
void expect_error(const std::string& spec, spec::ErrorCode code,
                  const std::function<std::vector<Descriptor>(Mirror&, std::mt19937_64&)>& make) {
  std::mt19937_64 rng(21);
  Mirror mx(spec);
  const Fault f = mx.run(make(mx, rng));
  CHECK(f.code == code);
  auto& dev = mx.device();
  const uint32_t status = dev.backend().csr_read(spec::csr::STATUS);
  CHECK((status & spec::csr::STATUS_HALTED_MASK) != 0);
  CHECK(dev.backend().wait_irq(0));  // the ERROR interrupt is raised
  dev.soft_reset();
  CHECK(dev.backend().csr_read(spec::csr::ERR_CODE) == 0);
  CHECK(dev.backend().csr_read(spec::csr::STATUS) == 0);
  mx.run({mx.gemm({.m = 20, .n = 20, .k = 20, .int8 = true, .bias = true}, rng)});
}

}  // namespace

TEST_CASE("cosim errors: unknown opcode", "[cosim][errors]") {
  expect_error(rtl("default"), spec::ErrorCode::kOpcode, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({}, rng);
    d.opcode = 0x5a;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: unknown output mode", "[cosim][errors]") {
  expect_error(rtl("default"), spec::ErrorCode::kMode, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({}, rng);
    d.out_mode = 2;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: zero and out-of-range dimensions", "[cosim][errors]") {
  expect_error(rtl("small"), spec::ErrorCode::kDim, [](Mirror& mx, auto& rng) {
    Descriptor ok = mx.gemm({}, rng), zero = ok;
    zero.n = 0;
    return std::vector<Descriptor>{ok, zero};  // the good one completes, the bad one halts
  });
  expect_error(rtl("small"), spec::ErrorCode::kDim, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({}, rng);
    d.k = mx.config().k_max + 1;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: FOLD outside its limits", "[cosim][errors]") {
  // FOLD computes plain int32 results for one band of rows and half of k_max.
  for (const auto& flags : {spec::desc::FLAG_BIAS, spec::desc::FLAG_ACCUMULATE, 0u}) {
    expect_error(rtl("default"), spec::ErrorCode::kMode, [flags](Mirror& mx, auto& rng) {
      Descriptor d = mx.gemm({.m = 2, .int8 = flags == 0, .bias = flags == spec::desc::FLAG_BIAS,
                              .acc = flags == spec::desc::FLAG_ACCUMULATE, .fold = true}, rng);
      return std::vector<Descriptor>{d};
    });
  }
  expect_error(rtl("default"), spec::ErrorCode::kDim, [](Mirror& mx, auto& rng) {
    return std::vector<Descriptor>{mx.gemm({.m = mx.config().rows / 2 + 1, .fold = true}, rng)};
  });
  expect_error(rtl("small"), spec::ErrorCode::kDim, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.m = 1, .k = 16, .fold = true}, rng);
    d.k = mx.config().k_max / 2 + 1;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: BF16 outside its limits", "[cosim][errors][bf16]") {
  using spec::ErrorCode;
  // the reserved precisions
  expect_error(rtl("small-bf16"), ErrorCode::kPrecision, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.bf16 = true}, rng);
    d.precision = 2;
    return std::vector<Descriptor>{d};
  });
  // int8's output modes, RELU with int8, FOLD
  for (const auto mode : {spec::OutMode::kInt32, spec::OutMode::kInt8})
    expect_error(rtl("small-bf16"), ErrorCode::kMode, [mode](Mirror& mx, auto& rng) {
      Descriptor d = mx.gemm({.bf16 = true}, rng);
      d.out_mode = static_cast<uint8_t>(mode);
      return std::vector<Descriptor>{d};
    });
  expect_error(rtl("small-bf16"), ErrorCode::kMode, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({}, rng);
    d.flags |= spec::desc::FLAG_RELU;
    return std::vector<Descriptor>{d};
  });
  expect_error(rtl("small-bf16"), ErrorCode::kMode, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.m = 2, .bf16 = true}, rng);
    d.flags |= spec::desc::FLAG_FOLD;
    return std::vector<Descriptor>{d};
  });
  // K above k_max / 2; a row of A shorter than 2K bytes
  expect_error(rtl("small-bf16"), ErrorCode::kDim, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.bf16 = true}, rng);
    d.k = mx.config().k_max / 2 + 1;
    return std::vector<Descriptor>{d};
  });
  expect_error(rtl("small-bf16"), ErrorCode::kStride, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.k = 40, .bf16 = true}, rng);
    d.lda = 64;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: a BF16 GEMM on an int8-only engine", "[cosim][errors][int8-only]") {
  // The datapath is not there (CFG_ARRAY.BF16 clear): the precision is refused, as a reserved one is.
  expect_error(rtl("small"), spec::ErrorCode::kPrecision, [](Mirror& mx, auto& rng) {
    REQUIRE_FALSE(mx.config().bf16);
    return std::vector<Descriptor>{mx.gemm({.m = 5, .n = 6, .k = 7, .bf16 = true}, rng)};
  });
}

TEST_CASE("cosim errors: bad quantization parameters", "[cosim][errors]") {
  expect_error(rtl("default"), spec::ErrorCode::kParam, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.int8 = true}, rng);
    d.act_min = 5, d.act_max = -5;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: shift out of range is named by address", "[cosim][errors]") {
  expect_error(rtl("default"), spec::ErrorCode::kParam, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.m = 40, .n = 40, .k = 30, .int8 = true}, rng);
    const uint8_t bad = 0xd0;  // -48
    mx.write(d.shift_addr + 35, std::span<const uint8_t>(&bad, 1));
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: misaligned address and stride", "[cosim][errors]") {
  expect_error(rtl("default"), spec::ErrorCode::kAlign, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({}, rng);
    d.b_addr += 32;
    return std::vector<Descriptor>{d};
  });
  expect_error(rtl("default"), spec::ErrorCode::kAlign, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.acc = true}, rng);
    d.ldcin += 4;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: stride shorter than the row", "[cosim][errors]") {
  expect_error(rtl("default"), spec::ErrorCode::kStride, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({.m = 8, .n = 100, .k = 8}, rng);
    d.ldc = 256;  // 100 int32 need 400 bytes
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: address beyond the engine's address width", "[cosim][errors]") {
  expect_error(rtl("default"), spec::ErrorCode::kAddr, [](Mirror& mx, auto& rng) {
    Descriptor d = mx.gemm({}, rng);
    d.c_addr |= 1ull << 40;
    return std::vector<Descriptor>{d};
  });
}

TEST_CASE("cosim errors: bad ring set-up", "[cosim][errors]") {
  std::mt19937_64 rng(22);
  Mirror mx(rtl("default"));
  auto& dev = mx.device();
  dev.backend().csr_write(spec::csr::RING_SIZE, 3);  // not a power of two
  const Descriptor d = mx.gemm({}, rng);
  try {
    dev.wait(dev.submit(std::span<const Descriptor>(&d, 1)));
    FAIL("no error");
  } catch (const driver::EngineFault& e) {
    CHECK(e.code == spec::ErrorCode::kRing);
    CHECK(e.addr == 3);
  }
  dev.soft_reset();
  mx.run({mx.gemm({.int8 = true}, rng)});
}

TEST_CASE("cosim errors: AXI SLVERR on a read then recovery", "[cosim][errors]") {
  // The first buffer allocated after the ring starts at 32 KiB: make a byte of A fail.
  std::mt19937_64 rng(23);
  Mirror mx(rtl("default") + "&slverr=0x8040");
  const Descriptor d = mx.gemm({.m = 30, .n = 30, .k = 70}, rng);
  REQUIRE(d.a_addr == 0x8000);
  auto& dev = mx.device();
  try {
    dev.wait(dev.submit(std::span<const Descriptor>(&d, 1)));
    FAIL("no error");
  } catch (const driver::EngineFault& e) {
    CHECK(e.code == spec::ErrorCode::kAxiRd);
    CHECK(e.addr <= 0x8040);
    CHECK(e.addr + 4096 > 0x8040);
  }
  dev.soft_reset();
  // A GEMM that does not touch the failing address runs clean.
  mx.run({mx.gemm({.m = 30, .n = 30, .k = 70, .int8 = true}, rng)});
}

TEST_CASE("cosim errors: AXI SLVERR on a write then recovery", "[cosim][errors]") {
  // Where C lands is found on the model device (the same allocator), then a byte of it fails.
  std::mt19937_64 probe_rng(24), rng(24);
  Mirror probe("model");
  const uint64_t c_addr = probe.gemm({.m = 30, .n = 30, .k = 70}, probe_rng).c_addr;
  Mirror mx(rtl("default") + fmt::format("&slverr={:#x}", c_addr + 64));
  const Descriptor d = mx.gemm({.m = 30, .n = 30, .k = 70}, rng);
  REQUIRE(d.c_addr == c_addr);
  auto& dev = mx.device();
  try {
    dev.wait(dev.submit(std::span<const Descriptor>(&d, 1)));
    FAIL("no error");
  } catch (const driver::EngineFault& e) {
    CHECK(e.code == spec::ErrorCode::kAxiWr);
  }
  dev.soft_reset();
  // Tiles written before the error stay (docs/ENGINE.md): the mirror takes C as the device has it.
  std::vector<uint8_t> c(uint64_t{d.m} * d.ldc);
  dev.backend().mem_read(d.c_addr, c);
  mx.host().write(d.c_addr, c);
  mx.run({mx.gemm({.m = 8, .n = 8, .k = 8}, rng)});
}
