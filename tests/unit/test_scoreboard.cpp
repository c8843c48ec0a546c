// The cosimulation scoreboard: it predicts each descriptor's writes with the golden model and names
// the first wrong one with its context.
#include <catch2/catch.hpp>
#include <cstring>

#include "scoreboard.hpp"

using namespace tessera;
namespace csr = spec::csr;

namespace {

struct Fixture {
  EngineConfig cfg = EngineConfig::from_preset(EngineConfig::preset("small"));
  Scoreboard sb{cfg, 1 << 20};
  Descriptor d;

  Fixture() {
    d.m = 6, d.n = 5, d.k = 3;
    d.a_addr = 0x10000, d.b_addr = 0x20000, d.c_addr = 0x30000;
    d.lda = 64, d.ldb = 64, d.ldc = 64;
    std::vector<uint8_t> ones(64 * 6, 1);
    sb.host_write(d.a_addr, ones);
    sb.host_write(d.b_addr, ones);
    const DescriptorBytes bytes = encode(d);
    sb.host_write(0, bytes);
    sb.csr_write(csr::RING_BASE_LO, 0);
    sb.csr_write(csr::RING_SIZE, 4);
    sb.csr_write(csr::RING_TAIL, 1);  // the doorbell
  }

  // C row m as the engine writes it: 5 int32 of value K = 3 at the start of a 32-byte beat.
  void write_row(uint32_t m, int32_t v00 = 3) {
    uint8_t beat[32] = {};
    for (int n = 0; n < 5; ++n) {
      const int32_t v = (m == 0 && n == 0) ? v00 : 3;
      std::memcpy(beat + 4 * n, &v, 4);
    }
    sb.axi_write(d.c_addr + 64ull * m, beat, 0xfffff);
  }
};

}  // namespace

TEST_CASE("scoreboard accepts the right writes and counts them", "[unit][scoreboard]") {
  Fixture f;
  for (uint32_t m = 0; m < 6; ++m) f.write_row(m);
  const auto r = f.sb.report();
  CHECK(r.ok());
  CHECK(r.bytes_checked == 6 * 5 * 4);
  CHECK(r.descriptors_checked == 1);
}

TEST_CASE("scoreboard names the first wrong write", "[unit][scoreboard]") {
  Fixture f;
  f.write_row(0, 4);  // C[0][0] = 4, not 3
  const auto r = f.sb.report();
  CHECK_FALSE(r.ok());
  INFO(r.first_mismatch);
  CHECK_THAT(r.first_mismatch, Catch::Contains("write to 0x30000: expected 0x03, got 0x04"));
  CHECK_THAT(r.first_mismatch, Catch::Contains("descriptor #0 (ring slot 0"));
  CHECK_THAT(r.first_mismatch, Catch::Contains("C[0][0] byte 0"));
  CHECK_THAT(r.first_mismatch, Catch::Contains("tile (row block 0, column block 0) of a 4x4 array"));
}

TEST_CASE("scoreboard flags writes outside C and writes with nothing in flight", "[unit][scoreboard]") {
  Fixture f;
  uint8_t beat[32] = {};
  f.sb.axi_write(f.d.c_addr + 32, beat, 1);  // byte 32 of row 0: past N x 4 = 20 bytes
  CHECK_THAT(f.sb.report().first_mismatch, Catch::Contains("outside C of descriptor #0"));
  Fixture g;
  for (uint32_t m = 0; m < 6; ++m) g.write_row(m);
  g.write_row(0);  // the descriptor is complete: nothing may write now
  CHECK_THAT(g.sb.report().first_mismatch, Catch::Contains("no descriptor is in flight"));
}
