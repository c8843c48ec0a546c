// The cycle-accurate platform: the Verilated engine inside a SystemC top with an AXI memory model,
// a TLM-2.0 path for CSR accesses, the interrupt line and a scoreboard that checks every byte the
// engine writes against the golden model.
//
// SystemC elaborates once per process (E529), so a process holds at most one Platform.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "tessera/model/faults.hpp"
#include "tessera/model/golden.hpp"
#include "tessera/model/timing.hpp"

namespace tessera {

struct PlatformConfig {
  std::string preset = "default";
  uint64_t mem_bytes = 256ull << 20;
  MemoryModelConfig mem;
  bool scoreboard = true;
  std::string trace_path;  // FST waveform file; empty: none
  FaultConfig fault;        // a defect to simulate (faults.hpp)
  uint64_t seed = 1;        // for random faults
  // The power-on values of flops and memories that no reset sets (Verilator --x-initial unique):
  // drawn from this seed, so that state the reset misses shows; 0: all zeros.
  uint32_t init_seed = 1;
  // Every performance counter's value after the power-on reset (a soft reset still clears them):
  // near 2^32, a test sees each carry into the high word without 2^32 cycles.
  uint64_t counter_start = 0;
};

struct ScoreboardReport {
  uint64_t bytes_checked = 0;
  uint64_t descriptors_checked = 0;
  uint64_t mismatches = 0;
  std::string first_mismatch;  // address, expected and actual bytes, descriptor, tile, row, column
  std::string protocol_error;  // first AXI rule the engine broke, if any
  bool ok() const { return mismatches == 0 && protocol_error.empty(); }
};

class Platform {
 public:
  // Builds and elaborates the platform; throws std::invalid_argument for an unknown preset and
  // std::logic_error if this process already elaborated one.
  static std::unique_ptr<Platform> create(const PlatformConfig& cfg);
  // The presets this build verilated (a build for the default test tier has no large one).
  static std::vector<std::string> presets();
  virtual ~Platform() = default;

  virtual const EngineConfig& engine() const = 0;

  // CSR access through the TLM-2.0 socket; throws std::runtime_error on a bus timeout.
  virtual uint32_t csr_read(uint32_t offset) = 0;
  virtual void csr_write(uint32_t offset, uint32_t value) = 0;

  // Host access to device memory (the PCIe DMA path on a card): takes no simulated time.
  virtual void mem_write(uint64_t addr, std::span<const uint8_t> bytes) = 0;
  virtual void mem_read(uint64_t addr, std::span<uint8_t> bytes) = 0;
  virtual uint64_t mem_size() const = 0;

  // Runs until the interrupt line is high or max_cycles pass; returns whether irq is high.
  virtual bool run_until_irq(uint64_t max_cycles) = 0;
  virtual void run(uint64_t cycles) = 0;
  virtual uint64_t cycles() const = 0;
  virtual bool irq() const = 0;

  virtual ScoreboardReport scoreboard() const = 0;
};

}  // namespace tessera
