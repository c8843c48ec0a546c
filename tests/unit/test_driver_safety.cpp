// Wrong use of the driver API is a clear exception, never a stray access: buffers that outlive
// their device, descriptors that point outside allocated memory; fences that time out; polling.
#include <catch2/catch.hpp>

#include "tessera/driver/device.hpp"
#include "tessera/driver/gemm_job.hpp"

using namespace tessera;
using driver::Device;
using driver::DeviceSpec;

namespace {

Descriptor gemm_in(const driver::Buffer& buf) {
  Descriptor d;
  d.m = d.n = d.k = 4;
  d.a_addr = buf.addr();
  d.b_addr = buf.addr() + 256;
  d.c_addr = buf.addr() + 512;
  d.lda = d.ldb = d.ldc = 64;
  return d;
}

}  // namespace

TEST_CASE("a buffer may outlive its device", "[unit][driver]") {
  driver::Buffer kept;
  {
    Device dev(DeviceSpec::parse("model?mem_mb=1"));
    kept = dev.alloc(1000);
    CHECK(kept);
  }
  kept.reset();  // no use of the destroyed device's allocator
  CHECK_FALSE(kept);
}

TEST_CASE("buffers belong to one device", "[unit][driver]") {
  Device a(DeviceSpec::parse("model?mem_mb=1")), b(DeviceSpec::parse("model?mem_mb=1"));
  auto buf = a.alloc(64);
  CHECK_THROWS_WITH(b.write(buf, 0, std::vector<uint8_t>(4)), Catch::Contains("another device"));
  buf.reset();
  CHECK_THROWS_WITH(a.write(buf, 0, std::vector<uint8_t>(4)), Catch::Contains("empty buffer"));
}

TEST_CASE("out of memory names what is free", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model?mem_mb=1"));
  CHECK_THROWS_AS(dev.alloc(2u << 20), driver::OutOfMemory);
  auto big = dev.alloc(dev.free_bytes());
  CHECK(dev.free_bytes() == 0);
  CHECK_THROWS_WITH(dev.alloc(64), Catch::Contains("0 bytes free"));
  CHECK_THROWS_AS(dev.alloc(64, 48), driver::UsageError);  // not a power of two
}

TEST_CASE("descriptors must point into allocated buffers", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model?mem_mb=1"));
  auto buf = dev.alloc(1024);
  Descriptor d = gemm_in(buf);
  CHECK_NOTHROW(dev.wait(dev.submit(std::span<const Descriptor>(&d, 1))));

  Descriptor past = d;
  past.c_addr = buf.addr() + 1024 - 64;  // 4 rows of C at pitch 64 run 192 bytes past the end
  CHECK_THROWS_WITH(dev.submit(std::span<const Descriptor>(&past, 1)), Catch::Contains("C at"));

  const uint64_t freed = buf.addr();
  buf.reset();
  Descriptor stale = d;
  CHECK_THROWS_WITH(dev.submit(std::span<const Descriptor>(&stale, 1)), Catch::Contains("not inside one allocated"));
  CHECK(dev.counters().completed == 1);  // nothing was queued
  (void)freed;
}

TEST_CASE("polled completion works like interrupts", "[unit][driver]") {
  Device dev(DeviceSpec::parse("model?preset=small&completion=poll"));
  const auto out = run_gemm(dev, GemmProblem::random({.m = 9, .n = 7, .k = 5}));
  CHECK(out.bit_exact);
  CHECK_THROWS_AS(Device(DeviceSpec::parse("model?completion=sometimes")), driver::UsageError);
}

TEST_CASE("a hung device ends a wait with the engine's state", "[unit][driver][faults]") {
  Device dev(DeviceSpec::parse("model?fault=hang"));
  auto buf = dev.alloc(1024);
  const Descriptor d = gemm_in(buf);
  try {
    dev.wait(dev.submit(std::span<const Descriptor>(&d, 1)));
    FAIL("no error");
  } catch (const driver::DeviceError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("watchdog") && Catch::Contains("BUSY") && Catch::Contains("head=0 tail=1") &&
                         Catch::Contains("error=none"));
  }
  // Its reset waits for reads that never come: that too is an error, not a hang.
  CHECK_THROWS_WITH(dev.soft_reset(), Catch::Contains("soft reset did not finish"));
}
