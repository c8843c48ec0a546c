// The engine as a register-level model: the same CSRs, ring, errors and counters as the RTL, with
// descriptors executed by the golden model and timed by the timing model. This is the `model`
// backend: fast enough for whole transformer layers, and the reference for cosimulation.
#pragma once

#include <cstdint>

#include "tessera/golden.hpp"
#include "tessera/memory.hpp"
#include "tessera/timing.hpp"

namespace tessera {

class EngineModel {
 public:
  EngineModel(const EngineConfig& cfg, uint64_t mem_bytes, const MemoryModelConfig& mem = {});

  const EngineConfig& config() const { return cfg_; }
  Memory& memory() { return mem_; }
  const Memory& memory() const { return mem_; }

  uint32_t csr_read(uint32_t offset);
  void csr_write(uint32_t offset, uint32_t value);

  // Simulated cycles so far: the estimated cycles of every descriptor run.
  uint64_t cycles() const { return cycles_; }
  bool irq() const { return (irq_status_ & irq_enable_) != 0; }

 private:
  void run_queue();
  void halt(const Fault& f);

  EngineConfig cfg_;
  MemoryModelConfig mem_cfg_;
  Memory mem_;
  uint64_t cycles_ = 0;
  uint32_t scratch_ = 0, ctrl_enable_ = 0, irq_status_ = 0, irq_enable_ = 0;
  uint64_t ring_base_ = 0;
  uint32_t ring_size_ = 0, head_ = 0, tail_ = 0, completed_ = 0, last_tag_ = 0;
  bool halted_ = false;
  Fault error_;
  uint32_t err_desc_ = 0;
  uint64_t counters_[5] = {};  // busy, stall, macs, read bytes, write bytes
  uint32_t counter_hi_ = 0;
};

}  // namespace tessera
