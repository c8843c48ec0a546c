#include "tessera/engine_model.hpp"

namespace tessera {

namespace csr = spec::csr;

EngineModel::EngineModel(const EngineConfig& cfg, uint64_t mem_bytes, const MemoryModelConfig& mem)
    : cfg_(cfg), mem_cfg_(mem), mem_(mem_bytes) {}

uint32_t EngineModel::csr_read(uint32_t offset) {
  switch (offset) {
    case csr::ID: return spec::kEngineId;
    case csr::VERSION: return (spec::kVersionMajor << 16) | spec::kVersionMinor;
    case csr::CFG_ARRAY: return cfg_.rows | (cfg_.cols << 8);
    case csr::CFG_MEM: return cfg_.k_max | (cfg_.axi_bytes << 16) | (cfg_.max_reads << 24);
    case csr::CFG_ADDR: return cfg_.addr_bits | (spec::kAlignBytes << 8);
    case csr::SCRATCH: return scratch_;
    case csr::CTRL: return ctrl_enable_;
    case csr::STATUS: return halted_ ? csr::STATUS_HALTED_MASK : 0;  // never busy between calls
    case csr::IRQ_STATUS: return irq_status_;
    case csr::IRQ_ENABLE: return irq_enable_;
    case csr::ERR_CODE: return static_cast<uint32_t>(error_.code);
    case csr::ERR_ADDR_LO: return static_cast<uint32_t>(error_.addr);
    case csr::ERR_ADDR_HI: return static_cast<uint32_t>(error_.addr >> 32);
    case csr::ERR_DESC: return err_desc_;
    case csr::RING_BASE_LO: return static_cast<uint32_t>(ring_base_);
    case csr::RING_BASE_HI: return static_cast<uint32_t>(ring_base_ >> 32);
    case csr::RING_SIZE: return ring_size_;
    case csr::RING_HEAD: return head_;
    case csr::RING_TAIL: return tail_;
    case csr::COMPLETED: return completed_;
    case csr::LAST_TAG: return last_tag_;
    default: break;
  }
  if (offset >= csr::CNT_BUSY_LO && offset < csr::CNT_BUSY_LO + 8 * 5) {
    const uint64_t v = counters_[(offset - csr::CNT_BUSY_LO) / 8];
    if (offset % 8 == 0) {
      counter_hi_ = static_cast<uint32_t>(v >> 32);
      return static_cast<uint32_t>(v);
    }
    return counter_hi_;
  }
  return 0;
}

void EngineModel::csr_write(uint32_t offset, uint32_t value) {
  switch (offset) {
    case csr::SCRATCH: scratch_ = value; break;
    case csr::CTRL:
      ctrl_enable_ = value & csr::CTRL_ENABLE_MASK;
      if (value & csr::CTRL_SOFT_RESET_MASK) {
        head_ = tail_ = completed_ = last_tag_ = err_desc_ = irq_status_ = counter_hi_ = 0;
        halted_ = false;
        error_ = {};
        for (auto& c : counters_) c = 0;
      }
      break;
    case csr::IRQ_STATUS: irq_status_ &= ~value; break;
    case csr::IRQ_ENABLE: irq_enable_ = value & 3; break;
    case csr::RING_BASE_LO: ring_base_ = (ring_base_ & ~0xffffffffull) | value; break;
    case csr::RING_BASE_HI: ring_base_ = (ring_base_ & 0xffffffffull) | (uint64_t{value} << 32); break;
    case csr::RING_SIZE: ring_size_ = value; break;
    case csr::RING_TAIL: tail_ = value; break;
    default: break;
  }
  run_queue();
}

void EngineModel::halt(const Fault& f) {
  halted_ = true;
  error_ = f;
  err_desc_ = head_;
  irq_status_ |= csr::IRQ_STATUS_ERROR_MASK;
}

void EngineModel::run_queue() {
  while (ctrl_enable_ && !halted_ && head_ != tail_) {
    if (ring_size_ == 0 || (ring_size_ & (ring_size_ - 1)) || ring_size_ > spec::kRingMaxEntries) {
      halt({spec::ErrorCode::kRing, ring_size_});
      return;
    }
    if (ring_base_ % spec::kDescBytes || (ring_base_ >> cfg_.addr_bits) != 0) {
      halt({spec::ErrorCode::kRing, ring_base_});
      return;
    }
    if (tail_ >= ring_size_) {
      halt({spec::ErrorCode::kRing, tail_});
      return;
    }
    const uint64_t desc_addr = ring_base_ + uint64_t{head_} * spec::kDescBytes;
    if (!mem_.contains(desc_addr, spec::kDescBytes)) {
      halt({spec::ErrorCode::kAxiRd, desc_addr});
      return;
    }
    const Descriptor d = decode(std::span<const uint8_t, spec::kDescBytes>(mem_.data() + desc_addr, spec::kDescBytes));
    if (const Fault f = execute(d, desc_addr, mem_, cfg_)) {
      halt(f);
      return;
    }
    const TimingEstimate t = estimate(d, cfg_, mem_cfg_);  // a NOP: its fetch
    cycles_ += t.cycles;
    counters_[0] += t.cycles;
    counters_[1] += t.stall_cycles;
    if (static_cast<spec::Opcode>(d.opcode) == spec::Opcode::kGemm) counters_[2] += uint64_t{d.m} * d.n * d.k;
    counters_[3] += t.read_bytes;
    counters_[4] += t.write_bytes;
    head_ = (head_ + 1) & (ring_size_ - 1);
    ++completed_;
    last_tag_ = d.tag;
    if (d.has(spec::desc::FLAG_IRQ)) irq_status_ |= csr::IRQ_STATUS_DONE_MASK;
  }
}

}  // namespace tessera
