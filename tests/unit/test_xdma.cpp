// The xdma backend without a card: its character devices stood in for by files (a register file
// for the user BAR; one memory file behind both DMA nodes). This checks the register and DMA
// plumbing and the error paths; nothing here runs an engine.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include <fmt/format.h>

#include "tessera/driver/device.hpp"
#include "tessera/driver/health.hpp"

using namespace tessera;
using driver::Device;
using driver::DeviceSpec;
namespace fs = std::filesystem;
namespace csr = spec::csr;

namespace {

struct FakeCard {
  fs::path dir;
  std::string prefix;

  explicit FakeCard(uint32_t id = spec::kEngineId) {
    dir = fs::temp_directory_path() / fmt::format("tessera-xdma-{}-{}", ::getpid(), counter()++);
    fs::create_directories(dir);
    prefix = (dir / "xdma0").string();
    std::vector<uint32_t> regs(1024, 0);
    regs[csr::ID / 4] = id;
    regs[csr::VERSION / 4] = spec::kVersionMajor << 16;
    regs[csr::CFG_ARRAY / 4] = 16 | (16 << 8) | csr::CFG_ARRAY_BF16_MASK;  // the default-bf16 preset's
    regs[csr::CFG_MEM / 4] = 4096 | (32 << 16) | (16u << 24);
    regs[csr::CFG_ADDR / 4] = 32 | (spec::kAlignBytes << 8);
    std::ofstream(prefix + "_user", std::ios::binary).write(reinterpret_cast<const char*>(regs.data()), 4096);
    std::ofstream(prefix + "_ddr", std::ios::binary).close();
    fs::resize_file(prefix + "_ddr", 1 << 20);
    fs::create_symlink(prefix + "_ddr", prefix + "_h2c_0");
    fs::create_symlink(prefix + "_ddr", prefix + "_c2h_0");
  }
  ~FakeCard() { fs::remove_all(dir); }

  uint32_t reg(uint32_t offset) const {
    uint32_t v = 0;
    std::ifstream f(prefix + "_user", std::ios::binary);
    f.seekg(offset);
    f.read(reinterpret_cast<char*>(&v), 4);
    return v;
  }
  std::vector<uint8_t> ddr(uint64_t at, size_t n) const {
    std::vector<uint8_t> v(n);
    std::ifstream f(prefix + "_ddr", std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n));
    return v;
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

}  // namespace

TEST_CASE("xdma: registers through the user BAR, data through the DMA nodes", "[unit][xdma]") {
  FakeCard card;
  Device dev(DeviceSpec::parse("xdma:" + card.prefix + "?mem_mb=1"));
  const auto& p = dev.properties();
  CHECK(p.rows == 16);
  CHECK(p.preset == "default-bf16");
  CHECK(p.mem_bytes == 1u << 20);
  // The reset set the ring up in the BAR.
  CHECK(card.reg(csr::RING_SIZE) == Device::kRingEntries);
  CHECK(card.reg(csr::CTRL) == csr::CTRL_ENABLE_MASK);

  auto buf = dev.alloc(10000);
  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  dev.write(buf, 0, data);
  CHECK(card.ddr(buf.addr(), data.size()) == data);
  std::vector<uint8_t> back(data.size());
  dev.read(buf, 0, back);
  CHECK(back == data);
  CHECK_THROWS_AS(dev.backend().mem_write((1 << 20) - 4, std::vector<uint8_t>(8)), driver::UsageError);
}

TEST_CASE("xdma: an engine that never answers trips the watchdog", "[unit][xdma]") {
  FakeCard card;
  Device dev(DeviceSpec::parse("xdma:" + card.prefix + "?mem_mb=1&completion=poll"));
  auto buf = dev.alloc(1024);
  Descriptor d;
  d.m = d.n = d.k = 4;
  d.a_addr = buf.addr();
  d.b_addr = buf.addr() + 256;
  d.c_addr = buf.addr() + 512;
  d.lda = d.ldb = d.ldc = 64;
  CHECK_THROWS_WITH(dev.wait(dev.submit(std::span<const Descriptor>(&d, 1))), Catch::Contains("watchdog"));
  CHECK(card.reg(csr::RING_TAIL) == 1);  // the doorbell was rung
}

TEST_CASE("xdma: the register checks of validate run on the card's registers", "[unit][xdma][health]") {
  FakeCard card;
  driver::HealthOptions o;
  const auto r = driver::run_health_checks(DeviceSpec::parse("xdma:" + card.prefix + "?mem_mb=1"), o);
  std::map<std::string, driver::Verdict> got;
  for (const auto& t : r.tests) got[t.name] = t.result;
  CHECK(got["identity"] == driver::Verdict::kPass);
  CHECK(got["config_registers"] == driver::Verdict::kPass);
  CHECK(got["scratch_register"] == driver::Verdict::kPass);
  CHECK(got["gemm_known_answer"] == driver::Verdict::kFail);  // no engine behind the files
  CHECK(r.result == driver::Verdict::kFail);
}

TEST_CASE("xdma: clear errors without a card or an engine", "[unit][xdma]") {
  CHECK_THROWS_WITH(Device(DeviceSpec::parse("xdma:/nonexistent/xdma0")), Catch::Contains("no XDMA card"));
  FakeCard wrong(0x12345678);
  CHECK_THROWS_WITH(Device(DeviceSpec::parse("xdma:" + wrong.prefix)), Catch::Contains("not a Tessera engine"));
  FakeCard card;
  CHECK_THROWS_AS(Device(DeviceSpec::parse("xdma:" + card.prefix + "?preset=small")), driver::UsageError);
}
