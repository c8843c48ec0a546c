// Fault injection in the simulated devices, and the health checks that must catch each fault.
#include <catch2/catch.hpp>

#include <cmath>

#include "seed.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/driver/gemm_job.hpp"
#include "tessera/driver/health.hpp"
#include "tessera/model/faults.hpp"
#include "tessera/model/golden.hpp"

using namespace tessera;
using driver::Device;
using driver::DeviceSpec;

TEST_CASE("fault specs parse and reject what they must", "[unit][faults]") {
  const auto s = FaultConfig::parse("stuck:3,5,7");
  CHECK(s.kind == FaultConfig::Kind::kStuck);
  CHECK((s.row == 3 && s.col == 5 && s.bit == 7 && s.value));
  CHECK_FALSE(FaultConfig::parse("stuck:0,0,31,0").value);
  CHECK(FaultConfig::parse("flip:1e-4").rate == 1e-4);
  CHECK(FaultConfig::parse("slverr:0x8040").addr == 0x8040);
  CHECK(FaultConfig::parse("hang").kind == FaultConfig::Kind::kHang);
  CHECK(FaultConfig::parse(FaultConfig::parse("stuck:1,2,3,0").str()).str() == "stuck:1,2,3,0");
  for (const char* bad : {"stuck:1,2", "stuck:1,2,32", "flip:0", "flip:2", "flip:x", "slverr:", "hang:3", "melt"})
    CHECK_THROWS_AS(FaultConfig::parse(bad), std::invalid_argument);
  CHECK_THROWS_WITH(Device(DeviceSpec::parse("model?preset=small&fault=stuck:4,0,1")), Catch::Contains("no PE (4, 0)"));
}

TEST_CASE("bit flips come at the rate asked for", "[unit][faults]") {
  const uint64_t seed = test_seed();
  BitFlipper f(1e-3, seed);
  std::vector<uint8_t> bytes(1 << 20, 0);
  uint64_t flips = 0;
  for (size_t at = 0; at < bytes.size(); at += 32) flips += f.apply(bytes.data() + at, 32);
  uint64_t ones = 0;
  for (uint8_t b : bytes) ones += static_cast<uint64_t>(__builtin_popcount(b));
  CHECK(ones == flips);
  const double expect = 8.0 * bytes.size() * 1e-3;  // 8389; sd ~ 92
  CHECK(std::abs(double(flips) - expect) < 6 * std::sqrt(expect));
}

TEST_CASE("a stuck result bit corrupts exactly that PE's outputs", "[unit][faults]") {
  Device dev(DeviceSpec::parse("model?preset=small&fault=stuck:1,2,20"));
  const auto p = GemmProblem::random({.m = 9, .n = 11, .k = 40, .seed = 3});
  const auto out = run_gemm(dev, p);
  REQUIRE_FALSE(out.bit_exact);
  for (uint32_t m = 0; m < 9; ++m)
    for (uint32_t n = 0; n < 11; ++n) {
      int32_t got, want;
      std::memcpy(&got, &out.c[(m * 11 + n) * 4], 4);
      std::memcpy(&want, &out.expected[(m * 11 + n) * 4], 4);
      INFO("C[" << m << "][" << n << "]");
      if (m % 4 == 1 && n % 4 == 2)
        CHECK(got == (want | (1 << 20)));  // bit 20 of every result of the PE reads 1
      else
        CHECK(got == want);
    }
}

TEST_CASE("flips on read data corrupt results but not memory", "[unit][faults]") {
  Device dev(DeviceSpec::parse("model?preset=small&fault=flip:0.001&seed=9"));
  const auto p = GemmProblem::random({.m = 40, .n = 40, .k = 64, .accumulate = true, .seed = 4});
  const auto out = run_gemm(dev, p);
  CHECK_FALSE(out.bit_exact);
  // Run it again on a healthy device from the same host data: the host copy was never corrupted.
  Device good(DeviceSpec::parse("model?preset=small"));
  CHECK(run_gemm(good, p).bit_exact);
}

TEST_CASE("SLVERR on an operand halts the engine with AXI_RD", "[unit][faults]") {
  Device dev(DeviceSpec::parse("model?fault=slverr:0x8040"));
  try {
    run_gemm(dev, GemmProblem::random({.m = 30, .n = 30, .k = 70}));
    FAIL("no error");
  } catch (const driver::EngineFault& e) {
    CHECK(e.code == spec::ErrorCode::kAxiRd);
    CHECK(e.addr <= 0x8040);
    CHECK(e.addr + 64 > 0x8040);
  }
}

namespace {

driver::HealthReport validate(const std::string& spec, driver::Level level) {
  driver::HealthOptions o;
  o.level = level;
  return driver::run_health_checks(DeviceSpec::parse(spec), o);
}

const driver::CheckResult* first_failure(const driver::HealthReport& r) {
  for (const auto& t : r.tests)
    if (t.result == driver::Verdict::kFail) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("health checks pass on a healthy model device at every level", "[unit][health]") {
  for (const auto& preset : spec::kPresets) {
    driver::HealthOptions o;
    o.level = driver::Level::kStress;
    o.stress_count = 20;
    o.seed = test_seed();
    const auto r = driver::run_health_checks(
        DeviceSpec::parse("model?mem_mb=16&preset=" + std::string(preset.name)), o);
    for (const auto& t : r.tests) {
      INFO(preset.name << " " << t.name << ": " << t.detail);
      // An int8-only engine has no BF16 to check: that check alone is skipped, and says why.
      const bool no_bf16 = t.name == "gemm_known_answer_bf16" && !preset.bf16;
      CHECK(t.result == (no_bf16 ? driver::Verdict::kSkip : driver::Verdict::kPass));
    }
    CHECK(r.result == driver::Verdict::kPass);
  }
}

TEST_CASE("health checks catch and name each fault class", "[unit][health][faults]") {
  SECTION("stuck PE, localized") {
    const auto r = validate("model?mem_mb=16&fault=stuck:3,5,7", driver::Level::kStandard);
    CHECK(r.result == driver::Verdict::kFail);
    const auto* f = first_failure(r);
    REQUIRE(f);
    CHECK(f->name == "gemm_known_answer");
    CHECK_THAT(f->detail, Catch::Contains("faulty PE at row 3, column 5") && Catch::Contains("bit 7 of its result register is stuck at 1"));
  }
  SECTION("bit flips") {
    const auto r = validate("model?mem_mb=16&fault=flip:1e-5", driver::Level::kStandard);
    CHECK(r.result == driver::Verdict::kFail);
    const auto* f = first_failure(r);
    REQUIRE(f);
    CHECK_THAT(f->detail, Catch::Contains("corrupted"));
  }
  SECTION("bus error") {
    const auto r = validate("model?mem_mb=16&fault=slverr:0x8040", driver::Level::kStandard);
    CHECK(r.result == driver::Verdict::kFail);
    const auto* f = first_failure(r);
    REQUIRE(f);
    CHECK_THAT(f->detail, Catch::Contains("bus error") && Catch::Contains("axi_rd"));
  }
  SECTION("hang") {
    const auto r = validate("model?mem_mb=16&fault=hang", driver::Level::kStandard);
    CHECK(r.result == driver::Verdict::kFail);
    const auto* f = first_failure(r);
    REQUIRE(f);
    CHECK(f->name == "gemm_known_answer");
    CHECK_THAT(f->detail, Catch::Contains("engine hung"));
    // The device does not come back from the reset: later checks say so instead of hanging.
    CHECK(r.tests.back().result == driver::Verdict::kIncomplete);
  }
}

TEST_CASE("a device that cannot be opened fails validation; a bad option is a usage error", "[unit][health]") {
  const auto r = validate("xdma:/nonexistent/xdma9", driver::Level::kQuick);
  CHECK(r.result == driver::Verdict::kFail);
  REQUIRE(r.tests.size() >= 2);
  CHECK(r.tests[0].name == "open");
  CHECK_THAT(r.tests[0].detail, Catch::Contains("no XDMA card"));
  CHECK(r.tests[1].result == driver::Verdict::kIncomplete);
  CHECK_THROWS_AS(validate("model?speed=fast", driver::Level::kQuick), driver::UsageError);
}

TEST_CASE("verdicts: skips fail only under --strict", "[unit][health]") {
  using driver::Verdict;
  std::vector<driver::CheckResult> t = {{"a", Verdict::kPass, ""}, {"b", Verdict::kSkip, ""}};
  CHECK(driver::overall(t, false) == Verdict::kPass);
  CHECK(driver::overall(t, true) == Verdict::kFail);
  t.push_back({"c", Verdict::kIncomplete, ""});
  CHECK(driver::overall(t, false) == Verdict::kIncomplete);
  t.push_back({"d", Verdict::kFail, ""});
  CHECK(driver::overall(t, false) == Verdict::kFail);
  CHECK(driver::overall({}, false) == Verdict::kFail);
}

TEST_CASE("a check the device is too small for is skipped with the reason; --strict fails it", "[unit][health]") {
  driver::HealthOptions o;
  o.level = driver::Level::kStandard;
  auto r = driver::run_health_checks(DeviceSpec::parse("model?mem_mb=1"), o);
  const auto it = std::find_if(r.tests.begin(), r.tests.end(), [](const auto& t) { return t.name == "dma_host_copies"; });
  REQUIRE(it != r.tests.end());
  CHECK(it->result == driver::Verdict::kSkip);
  CHECK_THAT(it->detail, Catch::Contains("too little memory"));
  CHECK(r.result == driver::Verdict::kPass);
  o.strict = true;
  r = driver::run_health_checks(DeviceSpec::parse("model?mem_mb=1"), o);
  CHECK(r.result == driver::Verdict::kFail);
}
