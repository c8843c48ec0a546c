// Checks every byte the engine writes over AXI against the golden model.
//
// It mirrors the host's memory writes into a shadow image and watches the CSR writes: when the
// doorbell (RING_TAIL) moves, it runs the new descriptors through the golden model on the shadow
// and keeps, per descriptor, the bytes of C the engine must write. The engine executes in order,
// so each AXI write belongs to the oldest descriptor not yet fully written.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "tessera/model/golden.hpp"
#include "tessera/platform/platform.hpp"

namespace tessera {

class Scoreboard {
 public:
  Scoreboard(const EngineConfig& cfg, uint64_t mem_bytes);

  void host_write(uint64_t addr, std::span<const uint8_t> bytes);
  void csr_write(uint32_t offset, uint32_t value);
  // One AXI write beat: `strb` bit i enables byte i of `data` at beat_addr + i.
  void axi_write(uint64_t beat_addr, std::span<const uint8_t> data, uint64_t strb);
  // The memory model answered with an error on purpose: the engine will halt inside the current
  // descriptor, so its remaining writes cannot be predicted.
  void injected_error();
  void protocol_error(const std::string& what);

  ScoreboardReport report() const { return report_; }

 private:
  struct Expected {
    uint64_t seq = 0;
    uint32_t ring_index = 0;
    uint64_t desc_addr = 0;
    Descriptor d;
    bool checked = true;          // false: an error ends it early, writes are not predicted
    std::vector<uint8_t> out;     // M x N x element bytes, row-major
    uint64_t remaining = 0;
  };

  void doorbell(uint32_t tail);
  bool in_c(const Expected& e, uint64_t addr, uint64_t& offset) const;
  void mismatch(const std::string& text);

  EngineConfig cfg_;
  Memory shadow_;
  uint64_t ring_base_ = 0;
  uint32_t ring_size_ = 0, tail_ = 0;
  uint64_t seq_ = 0;
  bool halted_ = false;
  std::deque<Expected> queue_;
  std::vector<Expected> flushed_;  // descriptors cut short by soft reset: their writes may trail
  ScoreboardReport report_;
};

}  // namespace tessera
