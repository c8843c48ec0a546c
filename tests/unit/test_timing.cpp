// The timing model's own laws: skipping quiet cycles is exact, bytes are the engine's, a NOP costs
// its fetch, and no GEMM beats the array. Agreement with the RTL is checked by the cosim test
// model_vs_rtl_cycles (tests/cosim/model_vs_rtl.py).
#include <bit>
#include <random>

#include <catch2/catch.hpp>

#include "seed.hpp"
#include "tessera/driver/gemm_job.hpp"
#include "tessera/model/timing.hpp"

using namespace tessera;

namespace {

// Where tessera gemm puts its operands: right after the descriptor ring.
constexpr uint64_t kBase = uint64_t{driver::Device::kRingEntries} * spec::kDescBytes;

Descriptor gemm(uint32_t m, uint32_t n, uint32_t k, bool int8_out = false, bool bias = false, bool acc = false,
                bool fold = false) {
  GemmProblem p;
  p.req = {.m = m, .n = n, .k = k, .int8_out = int8_out, .bias = bias, .accumulate = acc, .fold = fold, .seed = 1};
  return gemm_descriptor(p, kBase);
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

TEST_CASE("timing model: skipping quiet cycles gives the cycle-by-cycle result", "[unit][timing]") {
  std::mt19937_64 rng(test_seed());
  auto pick = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  for (int i = 0; i < 60; ++i) {
    const auto& preset = spec::kPresets[pick(0, static_cast<uint32_t>(spec::kPresets.size()) - 1)];
    const auto cfg = EngineConfig::from_preset(preset);
    const uint32_t m = pick(0, 3) ? pick(1, 80) : 1, n = pick(0, 3) ? pick(1, 150) : 1;
    const uint32_t k = pick(0, 3) ? pick(1, 400) : pick(1, 3);
    const bool fold = m <= cfg.rows / 2 && pick(0, 2) == 0;  // FOLD: plain int32 only
    const Descriptor d = fold ? gemm(m, n, k, false, false, false, true) : gemm(m, n, k, pick(0, 1), pick(0, 1), pick(0, 1));
    MemoryModelConfig mem;
    mem.latency = pick(1, 150);
    mem.bytes_per_cycle = pick(0, 1) ? 0 : pick(1, cfg.axi_bytes + 8);
    mem.max_reads = pick(1, 20);
    mem.max_writes = pick(1, 20);
    mem.w_first = pick(0, 1);
    INFO(preset.name << " " << m << "x" << n << "x" << k << " flags " << d.flags << " mode " << int(d.out_mode)
                     << " latency " << mem.latency << " bytes/cycle " << mem.bytes_per_cycle << " reads "
                     << mem.max_reads << " writes " << mem.max_writes << " w_first " << mem.w_first);
    const TimingEstimate fast = estimate(d, cfg, mem), slow = detail::estimate_every_cycle(d, cfg, mem);
    CHECK(fast.cycles == slow.cycles);
    CHECK(fast.stall_cycles == slow.stall_cycles);
    CHECK(fast.read_bytes == slow.read_bytes);
    CHECK(fast.write_bytes == slow.write_bytes);
    // The simulation's tiles are the tile schedule's closed form.
    CHECK(fast.actions == slow.actions);
    CHECK(fast.actions == count_actions(d, cfg));
  }
}

TEST_CASE("counted actions: worked cases on the default preset", "[unit][timing]") {
  const auto cfg = EngineConfig::from_preset(EngineConfig::preset("default"));  // 16 x 16
  // 37x45x70, INT8 with BIAS: 3 row blocks x 3 column blocks, 70 steps each; a step reads 16 A
  // and 16 B bytes, a row read out its bias (64 B), multipliers (64 B) and shifts (16 B).
  ActionCounts a = count_actions(gemm(37, 45, 70, true, true), cfg);
  CHECK(a.tiles == 9);
  CHECK(a.steps == 630);
  CHECK(a.descs == 1);
  CHECK(a.spad_read_bytes == 630 * 32 + 9 * 16 * 144);
  // ACCUMULATE, int32: a row read out its C_in row (64 B).
  a = count_actions(gemm(16, 16, 5, false, false, true), cfg);
  CHECK(a.spad_read_bytes == 5 * 32 + 16 * 64);
  // FOLD, 8x40x100: one row block against 32-column blocks, two of them; a step reads 16 A bytes and
  // 32 B bytes.
  a = count_actions(gemm(8, 40, 100, false, false, false, true), cfg);
  CHECK(a.tiles == 2);
  CHECK(a.steps == 200);
  CHECK(a.spad_read_bytes == 200 * 48);
  // A NOP is its fetch.
  Descriptor nop;
  nop.opcode = static_cast<uint8_t>(spec::Opcode::kNop);
  CHECK(count_actions(nop, cfg) == ActionCounts{.descs = 1});
}

TEST_CASE("timing model: bytes read and written are the engine's", "[unit][timing]") {
  for (const auto& preset : spec::kPresets) {
    const auto cfg = EngineConfig::from_preset(preset);
    const uint64_t R = cfg.rows, C = cfg.cols, beat = cfg.axi_bytes, seg4 = std::max<uint64_t>(1, C * 4 / beat);
    for (const auto& [m, n, k] : {std::array<uint32_t, 3>{1, 1, 1}, {17, 33, 5}, {70, 90, 200}, {100, 40, 3000}}) {
      for (const bool q : {false, true}) {
        const Descriptor d = gemm(m, n, k, q, q, q);
        const TimingEstimate t = estimate(d, cfg, MemoryModelConfig{});
        const uint64_t mb = ceil_div(m, R), nb = ceil_div(n, C);
        // The descriptor; per column block K rows of B and the tables; per tile its A rows and
        // C_in rows, except that A without C_in is loaded once where its row blocks fit in an A bank
        // (2 k_max bytes) at a pitch of ceil(K / beat) beats rounded up to a power of two. Every read
        // is whole beats.
        const uint64_t bank_beats = 2 * cfg.k_max / beat, pitch = std::bit_ceil(ceil_div(k, beat));
        const uint64_t a_loads = (!q && mb * pitch <= bank_beats) ? 1 : nb;
        const uint64_t beats = spec::kDescBytes / beat + nb * (k + (q ? 2 * seg4 + 1 : 0)) +
                               a_loads * m * (ceil_div(k, beat) + (q ? seg4 : 0));
        INFO(preset.name << " " << m << "x" << n << "x" << k << (q ? " int8+bias+acc" : ""));
        CHECK(t.read_bytes == beats * beat);
        CHECK(t.write_bytes == uint64_t{m} * n * (q ? 1 : 4));
        CHECK(t.cycles >= mb * nb * std::max<uint64_t>({k, R, C}));  // never faster than the array
      }
    }
  }
}

TEST_CASE("timing model: FOLD reads each B row once per 2C columns", "[unit][timing]") {
  for (const auto& preset : spec::kPresets) {
    const auto cfg = EngineConfig::from_preset(preset);
    const uint64_t C = cfg.cols, beat = cfg.axi_bytes;
    for (const auto& [m, n, k] : {std::array<uint32_t, 3>{1, 1, 1}, {1, 33, 5}, {2, 90, 200}}) {
      const Descriptor d = gemm(m, n, k, false, false, false, true), classic = gemm(m, n, k);
      const TimingEstimate t = estimate(d, cfg, MemoryModelConfig{});
      const uint64_t beats = spec::kDescBytes / beat + ceil_div(n, 2 * C) * k + m * ceil_div(k, beat);
      INFO(preset.name << " " << m << "x" << n << "x" << k);
      CHECK(t.read_bytes == beats * beat);
      CHECK(t.write_bytes == uint64_t{m} * n * 4);
      CHECK(t.cycles >= ceil_div(n, 2 * C) * std::max<uint64_t>({k, cfg.rows, cfg.cols}));
      if (n > C && k >= 100) CHECK(t.cycles < estimate(classic, cfg, MemoryModelConfig{}).cycles);
    }
  }
}

TEST_CASE("timing model: a NOP costs its fetch", "[unit][timing]") {
  for (const auto& preset : spec::kPresets) {
    const auto cfg = EngineConfig::from_preset(preset);
    Descriptor nop;
    nop.opcode = static_cast<uint8_t>(spec::Opcode::kNop);
    MemoryModelConfig mem;
    mem.latency = 50;
    // Request, address, `latency` to the first beat, the beats, decode, check, complete.
    CHECK(estimate(nop, cfg, mem).cycles == 1 + 1 + 50 + spec::kDescBytes / cfg.axi_bytes + 3);
    CHECK(estimate(nop, cfg, mem).read_bytes == spec::kDescBytes);
  }
}

TEST_CASE("timing model: slower memory never makes a GEMM faster", "[unit][timing]") {
  const auto cfg = EngineConfig::from_preset(EngineConfig::preset("default"));
  const Descriptor d = gemm(128, 256, 256, true, true, true);
  uint64_t prev = 0;
  for (const uint32_t latency : {1u, 16u, 64u, 120u, 400u}) {
    MemoryModelConfig mem;
    mem.latency = latency;
    const uint64_t c = estimate(d, cfg, mem).cycles;
    CHECK(c >= prev);
    prev = c;
  }
  MemoryModelConfig narrow;
  narrow.bytes_per_cycle = 4;
  CHECK(estimate(d, cfg, narrow).cycles > estimate(d, cfg, MemoryModelConfig{}).cycles);
}
