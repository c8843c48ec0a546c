// The driver over the model backend: device discovery from registers, the allocator, submission,
// fences, errors; device spec parsing; the timing model's basic laws.
#include <catch2/catch.hpp>

#include "csr_spec.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/driver/gemm_job.hpp"
#include "tessera/model/timing.hpp"

using namespace tessera;
using driver::Device;
using driver::DeviceSpec;

TEST_CASE("device specs parse and reject what they must", "[unit][driver]") {
  const auto s = DeviceSpec::parse("rtl:2?preset=small&mem_latency=120");
  CHECK(s.kind == "rtl");
  CHECK(s.index == 2);
  CHECK(s.option("preset", "") == "small");
  CHECK(s.option("mem_latency", "") == "120");
  CHECK(DeviceSpec::parse("xdma:/dev/xdma1").path == "/dev/xdma1");
  CHECK(DeviceSpec::parse("model").str() == "model:0");
  CHECK_THROWS_AS(DeviceSpec::parse("tpu"), driver::UsageError);
  CHECK_THROWS_AS(DeviceSpec::parse("model:x"), driver::UsageError);
  CHECK_THROWS_AS(DeviceSpec::parse("model?preset"), driver::UsageError);
  CHECK_THROWS_AS(Device(DeviceSpec::parse("model?preset=huge")), driver::UsageError);
  CHECK_THROWS_AS(Device(DeviceSpec::parse("model?mem_latency=-3")), driver::UsageError);
  CHECK_THROWS_AS(Device(DeviceSpec::parse("model?speed=fast")), driver::UsageError);
}

TEST_CASE("model device: properties come from the configuration registers", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model?preset=large&mem_mb=64"));
  const auto& p = dev.properties();
  CHECK(p.rows == 32);
  CHECK(p.cols == 32);
  CHECK(p.axi_bytes == 64);
  CHECK(p.align == spec::kAlignBytes);
  CHECK(p.mem_bytes == 64u << 20);
  CHECK(p.preset == "large");
}

TEST_CASE("precisions are a preset's configuration: int8-only presets and their BF16 twins", "[unit][driver]") {
  CHECK(DeviceSpec::parse("model").preset() == "default");
  CHECK(DeviceSpec::parse("model?precision=bf16").preset() == "default-bf16");
  CHECK(DeviceSpec::parse("model?preset=small&precision=bf16").preset() == "small");
  CHECK_FALSE(Device(DeviceSpec::parse("model")).properties().bf16);
  Device bf16(DeviceSpec::parse("model?precision=bf16"));
  CHECK(bf16.properties().bf16);
  CHECK(bf16.properties().preset == "default-bf16");
  Device twin(DeviceSpec::parse("model?preset=large-bf16"));
  CHECK(twin.properties().rows == 32);
  CHECK(twin.properties().preset == "large-bf16");
  // An int8-only preset asked for BF16 is bad usage, and the message names the twin with BF16.
  CHECK_THROWS_WITH(Device(DeviceSpec::parse("model?preset=small&precision=bf16")),
                    Catch::Contains("no BF16") && Catch::Contains("preset=small-bf16 is the same engine with BF16"));
  CHECK_THROWS_AS(Device(DeviceSpec::parse("model?preset=small&precision=bf16")), driver::UsageError);
}

TEST_CASE("allocator: alignment, reuse, exhaustion, bounds", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model?mem_mb=1"));
  uint64_t first;
  {
    auto a = dev.alloc(100);
    auto b = dev.alloc(5000, 4096);
    CHECK(a.addr() % 64 == 0);
    CHECK(b.addr() % 4096 == 0);
    CHECK(a.size() == 128);
    first = a.addr();
    std::vector<uint8_t> big(200);
    CHECK_THROWS_AS(dev.write(a, 0, big), driver::UsageError);
    CHECK_THROWS_AS(dev.read(a, 100, std::span<uint8_t>(big.data(), 29)), driver::UsageError);
    CHECK_NOTHROW(dev.write(a, 100, std::span<const uint8_t>(big.data(), 28)));
  }
  auto again = dev.alloc(100);
  CHECK(again.addr() == first);  // freed blocks coalesce and are reused
  CHECK_THROWS_AS(dev.alloc(2u << 20), driver::UsageError);
  driver::Buffer moved = std::move(again);
  CHECK_FALSE(again);
  CHECK_THROWS_AS(dev.write(again, 0, std::vector<uint8_t>(1)), driver::UsageError);
}

TEST_CASE("model device: GEMMs are bit-exact and counted", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model?preset=small"));
  for (bool int8 : {false, true}) {
    const auto p = GemmProblem::random({.m = 21, .n = 13, .k = 30, .int8_out = int8, .bias = true, .seed = 5});
    const auto out = run_gemm(dev, p);
    CHECK(out.bit_exact);
    CHECK(out.counters.macs == 21u * 13u * 30u);
    CHECK(out.counters.write_bytes == 21u * 13u * (int8 ? 1u : 4u));
    CHECK(out.counters.busy_cycles >= output_stationary_cycles(21, 13, 30, dev.properties().engine()) / 2);
  }
}

TEST_CASE("model device: faults halt the queue until soft reset", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model"));
  auto buf = dev.alloc(4096);
  Descriptor d;
  d.m = 4, d.n = 4, d.k = 0;  // DIM
  d.a_addr = d.b_addr = d.c_addr = buf.addr();
  d.lda = d.ldb = d.ldc = 64;
  try {
    dev.wait(dev.submit(std::span<const Descriptor>(&d, 1)));
    FAIL("no fault");
  } catch (const driver::EngineFault& e) {
    CHECK(e.code == spec::ErrorCode::kDim);
    CHECK(e.ring_index == 0);
  }
  dev.soft_reset();
  d.k = 4;
  CHECK_NOTHROW(dev.wait(dev.submit(std::span<const Descriptor>(&d, 1))));
}

TEST_CASE("model device: the ring wraps many times", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model"));
  Descriptor nop;
  nop.opcode = static_cast<uint8_t>(spec::Opcode::kNop);
  std::vector<Descriptor> ds(1000, nop);
  dev.wait(dev.submit(ds));
  CHECK(dev.counters().completed == 1000);
  CHECK(dev.backend().csr_read(spec::csr::RING_HEAD) == 1000 % Device::kRingEntries);
}

TEST_CASE("model device: a disabled engine trips the watchdog instead of hanging", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model"));
  dev.backend().csr_write(spec::csr::CTRL, 0);
  Descriptor nop;
  nop.opcode = static_cast<uint8_t>(spec::Opcode::kNop);
  const uint32_t fence = dev.submit(std::span<const Descriptor>(&nop, 1));
  CHECK_THROWS_AS(dev.wait(fence), driver::WatchdogTimeout);
  CHECK_THROWS_WITH(dev.wait(fence), Catch::Contains("watchdog"));
}

TEST_CASE("timing model: classic formula and basic laws", "[unit][timing]") {
  const auto cfg = EngineConfig::from_preset(EngineConfig::preset("default"));
  CHECK(output_stationary_cycles(512, 512, 512, cfg) == 32u * 32u * (512u + 30u));
  CHECK(output_stationary_cycles(1, 1, 1, cfg) == 31u);
  Descriptor d;
  d.m = 512, d.n = 512, d.k = 512;
  const MemoryModelConfig mem;
  const auto t = estimate(d, cfg, mem);
  CHECK(t.cycles >= 32u * 32u * 512u);  // never faster than the array
  CHECK(t.write_bytes == 512u * 512u * 4u);
  MemoryModelConfig slow = mem;
  slow.latency = 1000;
  CHECK(estimate(d, cfg, slow).cycles > t.cycles);
}

TEST_CASE("model: every CSR behaves as the spec declares", "[unit][model]") {
  Device dev(DeviceSpec::parse("model?mem_mb=1"));
  test::check_csr_access(dev.backend());
}
