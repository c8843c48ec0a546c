// The memory system the engine sees, and the timing model of the engine.
#pragma once

#include <cstdint>
#include <optional>

#include "tessera/model/descriptor.hpp"
#include "tessera/model/golden.hpp"

namespace tessera {

struct MemoryModelConfig {
  uint32_t latency = 64;          // cycles from address accepted to first data / to write response
  uint32_t bytes_per_cycle = 0;   // data bandwidth per direction; 0 = the full bus width
  uint32_t max_reads = 64;        // read bursts the memory accepts before it stalls AR
  uint32_t max_writes = 16;       // write bursts likewise
  std::optional<uint64_t> slverr_addr;  // a burst touching this byte gets SLVERR
  // Write data taken before its burst's address, as AXI allows a slave to (the platform's memory
  // holds up to 16 beats so); by default it is taken after.
  bool w_first = false;
};

}  // namespace tessera

namespace tessera {

// What one descriptor costs on the engine, as the timing model estimates it.
struct TimingEstimate {
  uint64_t cycles = 0;        // from fetch of the descriptor to its completion
  uint64_t stall_cycles = 0;  // busy cycles in which the array waited for memory
  uint64_t read_bytes = 0;    // whole beats, as the engine reads them
  uint64_t write_bytes = 0;   // strobed bytes
  ActionCounts actions;        // the STEPS, TILES, DESCS and SPAD_RD_BYTES counters
};

// The timing model of the engine: a cycle-level simulation of its control path (docs/ENGINE.md,
// "Cycle model"). `d` must be valid; a NOP costs its fetch. `cycles` is what the engine's busy
// counter counts for `d` alone on an idle engine with the platform's memory model.
TimingEstimate estimate(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem);

namespace detail {
// The same simulation without skipping quiet cycles; for tests that skipping changes nothing.
TimingEstimate estimate_every_cycle(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem);
}  // namespace detail

// The stall-free cycle count of the classic output-stationary dataflow:
// ceil(M/R) * ceil(N/C) * (K + R + C - 2).
uint64_t output_stationary_cycles(uint32_t m, uint32_t n, uint32_t k, const EngineConfig& cfg);

}  // namespace tessera
