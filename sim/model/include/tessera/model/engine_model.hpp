// The engine as a register-level model: the same CSRs, ring, errors and counters as the RTL, with
// descriptors executed by the golden model and timed by the timing model. This is the `model`
// backend: fast enough for whole transformer layers, and the reference for cosimulation.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "tessera/model/faults.hpp"
#include "tessera/model/golden.hpp"
#include "tessera/model/memory.hpp"
#include "tessera/model/timing.hpp"

namespace tessera {

class EngineModel {
 public:
  // `fault` makes it a defective device (faults.hpp); `seed` drives random faults.
  EngineModel(const EngineConfig& cfg, uint64_t mem_bytes, const MemoryModelConfig& mem = {},
              const FaultConfig& fault = {}, uint64_t seed = 1);

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
  // Where the engine would read for `d` (whole rows; the descriptor itself excluded).
  struct Span {
    uint64_t addr, len;
  };
  std::vector<Span> read_spans(const Descriptor& d) const;
  Fault bus_fault(const Descriptor& d) const;  // fault=slverr
  struct Undo {
    uint64_t addr;
    std::vector<uint8_t> bytes;
  };
  std::vector<Undo> flip_reads(const Descriptor& d);  // fault=flip
  void undo_flips(const Descriptor& d, const std::vector<Undo>& undo, bool c_written);

  EngineConfig cfg_;
  MemoryModelConfig mem_cfg_;
  FaultConfig fault_;
  BitFlipper flipper_;
  bool resetting_ = false;  // fault=hang: a reset that waits for reads that never return
  Memory mem_;
  // The timing model is a function of the descriptor and the two configurations alone, and a
  // transformer's decode steps repeat their descriptors: each one is timed once (tag cleared).
  TimingEstimate timed(const Descriptor& d);
  std::map<DescriptorBytes, TimingEstimate> timings_;
  uint64_t cycles_ = 0;
  uint32_t scratch_ = 0, ctrl_enable_ = 0, irq_status_ = 0, irq_enable_ = 0;
  uint64_t ring_base_ = 0;
  uint32_t ring_size_ = 0, head_ = 0, tail_ = 0, completed_ = 0, last_tag_ = 0;
  bool halted_ = false;
  Fault error_;
  uint32_t err_desc_ = 0;
  uint64_t& counter(spec::Counter c) { return counters_[static_cast<size_t>(c)]; }
  std::array<uint64_t, spec::kNumCounters> counters_{};  // in spec::Counter order
  uint32_t counter_hi_ = 0;
};

}  // namespace tessera
