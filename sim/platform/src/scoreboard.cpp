#include "scoreboard.hpp"

#include <cstring>

#include <fmt/format.h>

namespace tessera {

namespace csr = spec::csr;

Scoreboard::Scoreboard(const EngineConfig& cfg, uint64_t mem_bytes) : cfg_(cfg), shadow_(mem_bytes) {}

void Scoreboard::host_write(uint64_t addr, std::span<const uint8_t> bytes) {
  if (shadow_.contains(addr, bytes.size())) shadow_.write(addr, bytes);
}

void Scoreboard::csr_write(uint32_t offset, uint32_t value) {
  switch (offset) {
    case csr::RING_BASE_LO: ring_base_ = (ring_base_ & ~0xffffffffull) | value; break;
    case csr::RING_BASE_HI: ring_base_ = (ring_base_ & 0xffffffffull) | (uint64_t{value} << 32); break;
    case csr::RING_SIZE: ring_size_ = value; break;
    case csr::RING_TAIL: doorbell(value); break;
    case csr::CTRL:
      if (value & csr::CTRL_SOFT_RESET_MASK) {
        for (auto& e : queue_) flushed_.push_back(std::move(e));
        queue_.clear();
        tail_ = 0;
        halted_ = false;
      }
      break;
    default: break;
  }
}

void Scoreboard::doorbell(uint32_t tail) {
  flushed_.clear();
  if (ring_size_ == 0 || (ring_size_ & (ring_size_ - 1)) || tail >= ring_size_) return;  // ERR_RING
  while (tail_ != tail && !halted_) {
    Expected e;
    e.seq = seq_++;
    e.ring_index = tail_;
    e.desc_addr = ring_base_ + uint64_t{tail_} * spec::kDescBytes;
    tail_ = (tail_ + 1) & (ring_size_ - 1);
    if (!shadow_.contains(e.desc_addr, spec::kDescBytes)) {
      halted_ = true;  // the fetch itself fails
      break;
    }
    e.d = decode(std::span<const uint8_t, spec::kDescBytes>(shadow_.data() + e.desc_addr, spec::kDescBytes));
    const Fault f = execute(e.d, e.desc_addr, shadow_, cfg_);
    if (f) {
      halted_ = true;
      if (f.code == spec::ErrorCode::kParam || f.code == spec::ErrorCode::kAxiRd ||
          f.code == spec::ErrorCode::kAxiWr) {
        e.checked = false;  // detected mid-GEMM: some tiles may be written first
        queue_.push_back(std::move(e));
      }
      break;
    }
    if (static_cast<spec::Opcode>(e.d.opcode) != spec::Opcode::kGemm) continue;
    const uint64_t row_bytes = uint64_t{e.d.n} * e.d.out_bytes();
    e.out.resize(row_bytes * e.d.m);
    for (uint32_t m = 0; m < e.d.m; ++m)
      std::memcpy(e.out.data() + m * row_bytes, shadow_.data() + e.d.c_addr + uint64_t{m} * e.d.ldc, row_bytes);
    e.remaining = e.out.size();
    queue_.push_back(std::move(e));
  }
}

bool Scoreboard::in_c(const Expected& e, uint64_t addr, uint64_t& offset) const {
  if (addr < e.d.c_addr) return false;
  const uint64_t rel = addr - e.d.c_addr, m = rel / e.d.ldc, col = rel % e.d.ldc;
  if (m >= e.d.m || col >= uint64_t{e.d.n} * e.d.out_bytes()) return false;
  offset = m * e.d.n * e.d.out_bytes() + col;
  return true;
}

void Scoreboard::mismatch(const std::string& text) {
  if (report_.mismatches++ == 0) report_.first_mismatch = text;
}

void Scoreboard::axi_write(uint64_t beat_addr, std::span<const uint8_t> data, uint64_t strb) {
  for (size_t i = 0; i < data.size(); ++i) {
    if (!((strb >> i) & 1)) continue;
    const uint64_t addr = beat_addr + i;
    uint64_t off = 0;
    if (queue_.empty() || !in_c(queue_.front(), addr, off)) {
      bool trailing = false;
      for (const auto& f : flushed_) trailing = trailing || in_c(f, addr, off);
      if (!trailing)
        mismatch(fmt::format("unexpected write of {:#04x} to {:#x}: {}", data[i], addr,
                             queue_.empty() ? "no descriptor is in flight"
                                            : fmt::format("outside C of descriptor #{} (ring slot {})",
                                                          queue_.front().seq, queue_.front().ring_index)));
      continue;
    }
    Expected& e = queue_.front();
    if (!e.checked) continue;
    ++report_.bytes_checked;
    if (data[i] != e.out[off]) {
      const uint32_t es = e.d.out_bytes();
      const uint64_t m = off / (uint64_t{e.d.n} * es), n = off % (uint64_t{e.d.n} * es) / es;
      mismatch(fmt::format(
          "write to {:#x}: expected {:#04x}, got {:#04x}; descriptor #{} (ring slot {}, tag {:#x}, "
          "{}x{}x{} {} -> {}), C[{}][{}] byte {}, tile (row block {}, column block {}) of a {}x{} array",
          addr, e.out[off], data[i], e.seq, e.ring_index, e.d.tag, e.d.m, e.d.n, e.d.k,
          spec::to_string(spec::Precision(e.d.precision)), spec::to_string(spec::OutMode(e.d.out_mode)), m, n, off % es, m / cfg_.rows, n / cfg_.cols, cfg_.rows, cfg_.cols));
    }
    if (--e.remaining == 0) {
      ++report_.descriptors_checked;
      queue_.pop_front();
    }
  }
}

void Scoreboard::injected_error() {
  if (!queue_.empty()) queue_.front().checked = false;
  for (size_t i = 1; i < queue_.size(); ++i) flushed_.push_back(queue_[i]);
  if (queue_.size() > 1) queue_.resize(1);
  halted_ = true;
}

void Scoreboard::protocol_error(const std::string& what) {
  if (report_.protocol_error.empty()) report_.protocol_error = what;
}

}  // namespace tessera
