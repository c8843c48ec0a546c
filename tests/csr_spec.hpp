// Checks a device's registers against the access the spec declares for them
// (rtl/spec/tessera.toml, as spec::csr::kRegisters): the unit tests run it on the model, the cosim
// tests on the RTL, so neither the hand-written tsr_csr.sv nor the model can drift from the spec.
#pragma once

#include <catch2/catch.hpp>

#include "tessera/driver/device.hpp"

namespace tessera::test {

// Leaves the engine disabled, soft-reset and with its ring registers cleared.
inline void check_csr_access(driver::Backend& b) {
  namespace csr = spec::csr;
  using csr::Access;
  const auto settle = [&b] {  // let a soft reset drain
    for (int i = 0; i < 100 && (b.csr_read(csr::STATUS) & csr::STATUS_RESETTING_MASK); ++i) b.advance(16);
    REQUIRE((b.csr_read(csr::STATUS) & csr::STATUS_RESETTING_MASK) == 0);
  };
  b.csr_write(csr::CTRL, 0);
  b.csr_write(csr::CTRL, csr::CTRL_SOFT_RESET_MASK);
  settle();
  CHECK((b.csr_read(csr::CTRL) & csr::CTRL_SOFT_RESET_MASK) == 0);  // write-only: reads 0

  for (const auto& r : csr::kRegisters) {
    INFO("register " << r.name << " at " << r.offset);
    const uint32_t before = b.csr_read(r.offset);
    CHECK((before & ~r.mask) == 0);  // bits outside the fields read 0
    switch (r.access) {
      case Access::kRo:
        b.csr_write(r.offset, ~before);
        CHECK(b.csr_read(r.offset) == before);
        break;
      case Access::kRw:
        // Write-only fields act on a write (CTRL.SOFT_RESET); they are checked above.
        for (const uint32_t v : {0xffffffffu, 0xa5a5a5a5u, 0x5a5a5a5au, 0u}) {
          b.csr_write(r.offset, v & ~r.wo_mask);
          CHECK(b.csr_read(r.offset) == (v & r.mask & ~r.wo_mask));
        }
        break;
      case Access::kW1c:  // nothing is set yet (checked below once something is)
      case Access::kWo:
        b.csr_write(r.offset, ~0u);
        CHECK(b.csr_read(r.offset) == 0);
        break;
    }
  }

  // A w1c bit holds until a one is written to it: raise IRQ_STATUS.ERROR with a bad ring size.
  b.csr_write(csr::RING_SIZE, 3);
  b.csr_write(csr::RING_TAIL, 1);
  b.csr_write(csr::CTRL, csr::CTRL_ENABLE_MASK);
  b.advance(64);
  REQUIRE(b.csr_read(csr::ERR_CODE) == static_cast<uint32_t>(spec::ErrorCode::kRing));
  CHECK(b.csr_read(csr::IRQ_STATUS) == csr::IRQ_STATUS_ERROR_MASK);
  b.csr_write(csr::IRQ_STATUS, ~csr::IRQ_STATUS_ERROR_MASK);
  CHECK(b.csr_read(csr::IRQ_STATUS) == csr::IRQ_STATUS_ERROR_MASK);
  b.csr_write(csr::IRQ_STATUS, csr::IRQ_STATUS_ERROR_MASK);
  CHECK(b.csr_read(csr::IRQ_STATUS) == 0);

  b.csr_write(csr::CTRL, csr::CTRL_SOFT_RESET_MASK);
  settle();
  b.csr_write(csr::RING_SIZE, 0);
}

}  // namespace tessera::test
