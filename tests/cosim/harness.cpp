#include "harness.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "tessera/driver/gemm_job.hpp"

namespace tessera::test {

namespace {
uint64_t up(uint64_t v) { return (v + spec::kAlignBytes - 1) / spec::kAlignBytes * spec::kAlignBytes; }
}  // namespace

Mirror::Mirror(const std::string& spec)
    : dev_(driver::DeviceSpec::parse(spec)),
      cfg_(dev_.properties().engine()),
      mem_(driver::describe_simulated(driver::DeviceSpec::parse(spec)).memory),
      host_(dev_.properties().mem_bytes) {}

uint64_t Mirror::alloc(uint64_t bytes) {
  driver::Buffer b = dev_.alloc(bytes);
  const uint64_t addr = b.addr();
  // Fresh device memory may hold an earlier test's bytes: start both sides from the same zeros.
  const std::vector<uint8_t> zeros(b.size(), 0);
  dev_.write(b, 0, zeros);
  host_.write(addr, zeros);
  bufs_.emplace(addr, std::move(b));
  return addr;
}

void Mirror::write(uint64_t addr, std::span<const uint8_t> bytes) {
  dev_.backend().mem_write(addr, bytes);
  host_.write(addr, bytes);
}

void Mirror::fill(uint64_t addr, uint64_t bytes, std::mt19937_64& rng) {
  std::vector<uint8_t> v(bytes);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  write(addr, v);
}

void Mirror::fill_values(uint64_t addr, uint64_t bytes, uint32_t size, const std::function<uint32_t()>& value) {
  std::vector<uint8_t> v(bytes);
  for (uint64_t i = 0; i + size <= bytes; i += size) {
    const uint32_t x = value();
    std::memcpy(&v[i], &x, size);  // little-endian: the low `size` bytes
  }
  write(addr, v);
}

Descriptor Mirror::gemm(const Shape& s, std::mt19937_64& rng) {
  Descriptor d;
  d.opcode = static_cast<uint8_t>(spec::Opcode::kGemm);
  using spec::OutMode;
  d.precision = static_cast<uint8_t>(s.bf16 ? spec::Precision::kBf16 : spec::Precision::kInt8);
  d.out_mode = static_cast<uint8_t>(s.bf16 ? (s.bf16_out ? OutMode::kBf16 : OutMode::kFp32)
                                           : (s.int8 ? OutMode::kInt8 : OutMode::kInt32));
  d.flags = (s.bias ? spec::desc::FLAG_BIAS : 0) | (s.acc ? spec::desc::FLAG_ACCUMULATE : 0) |
            (s.fold ? spec::desc::FLAG_FOLD : 0) | (s.bf16 && s.relu ? spec::desc::FLAG_RELU : 0);
  d.m = s.m, d.n = s.n, d.k = s.k;
  const uint64_t al = spec::kAlignBytes;
  d.lda = static_cast<uint32_t>(up(uint64_t{s.k} * d.in_bytes()) + s.pad_a * al);
  d.ldb = static_cast<uint32_t>(up(uint64_t{s.n} * d.in_bytes()) + s.pad_b * al);
  d.ldc = static_cast<uint32_t>(up(uint64_t{s.n} * d.out_bytes()) + s.pad_c * al);
  d.ldcin = static_cast<uint32_t>(up(4ull * s.n) + s.pad_cin * al);
  d.a_addr = alloc(uint64_t{s.m} * d.lda);
  d.b_addr = alloc(uint64_t{s.k} * d.ldb);
  d.c_addr = alloc(uint64_t{s.m} * d.ldc);
  const double spread = std::sqrt(double(s.k));  // of a bf16 sum of K products near 1
  auto operands = [&](uint64_t addr, uint64_t bytes) {
    if (s.bf16) fill_values(addr, bytes, 2, [&] { return uint32_t{random_bf16(rng, s.specials)}; });
    else fill(addr, bytes, rng);
  };
  auto values32 = [&](uint64_t addr, uint64_t bytes) {
    if (s.bf16) fill_values(addr, bytes, 4, [&] { return random_fp32(rng, spread); });
    else fill(addr, bytes, rng);
  };
  operands(d.a_addr, uint64_t{s.m} * d.lda);
  operands(d.b_addr, uint64_t{s.k} * d.ldb);
  fill(d.c_addr, uint64_t{s.m} * d.ldc, rng);  // stale bytes around C must survive
  if (s.acc) {
    d.cin_addr = alloc(uint64_t{s.m} * d.ldcin);
    values32(d.cin_addr, uint64_t{s.m} * d.ldcin);
  }
  if (s.bias) {
    d.bias_addr = alloc(4ull * s.n);
    values32(d.bias_addr, 4ull * s.n);
  }
  if (s.int8 && !s.bf16) {
    d.mult_addr = alloc(4ull * s.n);
    d.shift_addr = alloc(s.n);
    std::vector<uint8_t> mult(4ull * s.n), shift(s.n);
    const int base = static_cast<int>(std::floor(std::log2(40.0 / (5461.0 * std::sqrt(double(s.k))))));
    std::uniform_int_distribution<int32_t> mul(1 << 30, std::numeric_limits<int32_t>::max());
    std::uniform_int_distribution<int> jitter(-2, 2), zp(-20, 20);
    for (uint32_t n = 0; n < s.n; ++n) {
      const int32_t m = mul(rng);
      std::memcpy(&mult[4ull * n], &m, 4);
      shift[n] = static_cast<uint8_t>(std::clamp(base + jitter(rng), spec::kShiftMin, spec::kShiftMax));
    }
    write(d.mult_addr, mult);
    write(d.shift_addr, shift);
    d.out_zp = static_cast<int8_t>(zp(rng));
    d.act_min = s.relu ? d.out_zp : -128;
    d.act_max = 127;
  }
  d.tag = static_cast<uint32_t>(rng());
  return d;
}

Fault Mirror::run(const std::vector<Descriptor>& descs) {
  ++runs_;
  // The golden model, in order, up to the first fault (where the engine halts).
  Fault want;
  for (const auto& d : descs) {
    want = execute(d, 0, host_, cfg_);
    if (want) break;
  }
  Fault got;
  const driver::Counters before = dev_.counters();
  try {
    dev_.wait(dev_.submit(descs, driver::BoundsCheck::kOff));  // bad descriptors are the point of some cases
  } catch (const driver::EngineFault& e) {
    got = {e.code, e.addr};
    INFO(e.what());
  }
  INFO("device " << dev_.properties().spec << ": golden fault " << describe(want) << ", device fault "
                 << describe(got));
  REQUIRE(got.code == want.code);
  if (want.code == spec::ErrorCode::kAlign || want.code == spec::ErrorCode::kStride ||
      want.code == spec::ErrorCode::kAddr || want.code == spec::ErrorCode::kParam)
    if (want.addr != 0) CHECK(got.addr == want.addr);  // value-based addresses (not the ring slot's)
  if (want) {
    // A GEMM that faults mid-way may have written some of its tiles (docs/ENGINE.md); the
    // scoreboard has checked that those writes stayed inside C. Take the device's bytes.
    for (const auto& [addr, buf] : bufs_) {
      std::vector<uint8_t> dev(buf.size());
      dev_.read(buf, 0, dev);
      host_.write(addr, dev);
    }
    if (auto sb = dev_.backend().scoreboard()) {
      INFO("scoreboard: " << sb->detail);
      CHECK(sb->ok);
    }
    return want;
  }

  // The scoreboard first: it names the first wrong write (descriptor, element, tile).
  if (auto sb = dev_.backend().scoreboard(); sb && !sb->ok) FAIL("scoreboard: " << sb->detail);
  // Every byte of every buffer, so a write outside C is caught as well as a wrong one.
  for (const auto& [addr, buf] : bufs_) {
    std::vector<uint8_t> dev(buf.size()), host(buf.size());
    dev_.read(buf, 0, dev);
    host_.read(addr, host);
    if (dev != host) {
      size_t i = 0;
      while (dev[i] == host[i]) ++i;
      FAIL(fmt::format("buffer at {:#x}: first difference at +{:#x}: device {:#04x}, golden model {:#04x}", addr, i,
                       dev[i], host[i]));
    }
  }
  if (auto sb = dev_.backend().scoreboard()) {
    INFO("scoreboard: " << sb->detail);
    CHECK(sb->ok);
  }
  check_counted_actions(descs, dev_.counters() - before);
  return {};
}

void Mirror::check_counted_actions(const std::vector<Descriptor>& descs, const driver::Counters& got) const {
  // The closed form and the timing model's simulation, summed over the descriptors; the actions do
  // not depend on the memory model, the cycles do.
  ActionCounts closed, timing;
  uint64_t cycles = 0, stalls = 0, read_bytes = 0, write_bytes = 0;
  for (const auto& d : descs) {
    closed += count_actions(d, cfg_);
    const TimingEstimate e = estimate(d, cfg_, mem_);
    timing += e.actions;
    cycles += e.cycles;
    stalls += e.stall_cycles;
    read_bytes += e.read_bytes;
    write_bytes += e.write_bytes;
  }
  const ActionCounts device{got.steps, got.tiles, got.descs, got.spad_read_bytes};
  INFO("device " << dev_.properties().spec << ": counted actions " << describe(device) << "; golden model "
                 << describe(closed) << "; timing model " << describe(timing));
  CHECK(device == closed);
  CHECK(timing == closed);
  // Bytes over AXI: whole beats read, strobed bytes written.
  CHECK(got.read_bytes == read_bytes);
  CHECK(got.write_bytes == write_bytes);
  // The busy counter against the timing model, which steps the RTL's state machines and counts a
  // descriptor alone on a fresh device to the cycle: checked exactly there. After other work, state
  // that the model starts afresh carries over on the device (the memory's bandwidth credit, the
  // loaders' slots): a few cycles a descriptor, either way (at most 6 seen).
  const bool fresh = runs_ == 1 && descs.size() == 1;
  const double slack = fresh ? 0.0 : 0.005 * double(cycles) + 16.0 * double(descs.size());
  INFO("busy cycles " << got.busy_cycles << ", timing model " << cycles << "; stall cycles " << got.stall_cycles
                       << ", timing model " << stalls << (fresh ? " (fresh device)" : ""));
  CHECK(std::abs(double(got.busy_cycles) - double(cycles)) <= slack);
  if (fresh) CHECK(got.stall_cycles == stalls);
}

std::string rtl(const std::string& preset) {
  const char* only = std::getenv("TESSERA_PRESET");
  return "rtl?preset=" + (only ? std::string(only) : preset);
}

Shape random_shape(std::mt19937_64& rng, uint32_t max_mn, uint32_t max_k, bool bf16) {
  std::uniform_int_distribution<uint32_t> mn(1, max_mn), k(1, max_k), coin(0, 1), pad(0, 3);
  Shape s;
  s.m = mn(rng), s.n = mn(rng), s.k = k(rng);
  s.int8 = coin(rng), s.bias = coin(rng), s.acc = coin(rng), s.relu = s.int8 && coin(rng);
  if (bf16) s.bf16 = true, s.bf16_out = s.int8, s.int8 = false, s.relu = coin(rng), s.specials = coin(rng);
  if (coin(rng)) s.pad_a = pad(rng), s.pad_b = pad(rng), s.pad_c = pad(rng), s.pad_cin = pad(rng);
  return s;
}

}  // namespace tessera::test
