#include <algorithm>

#include "tessera/timing.hpp"

namespace tessera {

namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
}  // namespace

uint64_t output_stationary_cycles(uint32_t m, uint32_t n, uint32_t k, const EngineConfig& cfg) {
  return ceil_div(m, cfg.rows) * ceil_div(n, cfg.cols) * (uint64_t{k} + cfg.rows + cfg.cols - 2);
}

TimingEstimate estimate(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem) {
  const uint64_t R = cfg.rows, C = cfg.cols, K = d.k, beat = cfg.axi_bytes;
  const uint64_t L = mem.latency;
  const uint64_t MB = ceil_div(d.m, R), NB = ceil_div(d.n, C);
  const bool acc = d.has(spec::desc::FLAG_ACCUMULATE), bias = d.has(spec::desc::FLAG_BIAS), q = d.int8_out();
  const uint64_t seg4 = std::max<uint64_t>(1, C * 4 / beat);
  const uint64_t row_beats = ceil_div(K, beat);
  // Sustained read rate in beats per cycle: the bus, the memory's bandwidth, and for short bursts
  // the bursts in flight over the round trip.
  const double bw = mem.bytes_per_cycle ? std::min(1.0, double(mem.bytes_per_cycle) / double(beat)) : 1.0;
  const uint64_t inflight = std::min<uint64_t>(cfg.max_reads, mem.max_reads);
  auto burst_rate = [&](uint64_t beats) {  // beats per cycle for back-to-back bursts of `beats`
    return std::min(bw, double(inflight * beats) / double(L + beats + 1));
  };
  const uint64_t interval = std::max({K, R, C});

  TimingEstimate t;
  const uint64_t fetch = L + spec::kDescBytes / beat + 4;  // descriptor fetch, decode, check
  uint64_t total = fetch;
  uint64_t rd = spec::kDescBytes;
  for (uint64_t nb = 0; nb < NB; ++nb) {
    // Reads for this column block: B rows (one beat each), tables, then A (and C_in) per tile.
    const uint64_t b_beats = K + (q ? seg4 + 1 : 0) + (bias ? seg4 : 0);
    uint64_t a_beats = 0;
    for (uint64_t mb = 0; mb < MB; ++mb) {
      const uint64_t vr = std::min<uint64_t>(R, d.m - mb * R);
      a_beats += vr * row_beats + (acc ? vr * seg4 : 0);
    }
    rd += (b_beats + a_beats) * beat;
    const double load = double(b_beats) / burst_rate(1) + double(a_beats) / burst_rate(row_beats);
    const uint64_t compute = MB * interval;
    if (nb == 0) {
      // Nothing overlaps the first column block's B panel and first A tile.
      const uint64_t first = L + uint64_t(double(b_beats) / burst_rate(1));
      total += first;
      t.stall_cycles += first;
    }
    const uint64_t busy = std::max<uint64_t>(compute, uint64_t(load));
    total += busy;
    t.stall_cycles += busy - compute;
  }
  // Drain: skew and readout of the last tile, the epilogue, the store and its response.
  total += C + 2 + R + 5 + seg4 + 2 + L + 2;
  t.cycles = total;
  t.read_bytes = rd;
  t.write_bytes = uint64_t{d.m} * d.n * d.out_bytes();
  return t;
}

}  // namespace tessera
