#include "tessera/model/engine_model.hpp"

#include <algorithm>

namespace tessera {

namespace csr = spec::csr;

EngineModel::EngineModel(const EngineConfig& cfg, uint64_t mem_bytes, const MemoryModelConfig& mem,
                         const FaultConfig& fault, uint64_t seed)
    : cfg_(cfg),
      mem_cfg_(mem),
      fault_(fault),
      flipper_(fault.kind == FaultConfig::Kind::kFlip ? fault.rate : 0, seed),
      mem_(mem_bytes) {
  if (fault.kind == FaultConfig::Kind::kSlverr) mem_cfg_.slverr_addr = fault.addr;
}

uint32_t EngineModel::csr_read(uint32_t offset) {
  switch (offset) {
    case csr::ID: return spec::kEngineId;
    case csr::VERSION: return (spec::kVersionMajor << 16) | spec::kVersionMinor;
    case csr::CFG_ARRAY: return cfg_.rows | (cfg_.cols << 8) | (cfg_.fold ? csr::CFG_ARRAY_FOLD_MASK : 0) |
                                 (cfg_.bf16 ? csr::CFG_ARRAY_BF16_MASK : 0);
    case csr::CFG_MEM: return cfg_.k_max | (cfg_.axi_bytes << 16) | (cfg_.max_reads << 24);
    case csr::CFG_ADDR: return cfg_.addr_bits | (spec::kAlignBytes << 8);
    case csr::SCRATCH: return scratch_;
    case csr::CTRL: return ctrl_enable_;
    case csr::STATUS:  // never busy between calls, unless hung
      return (halted_ ? csr::STATUS_HALTED_MASK : 0) | (resetting_ ? csr::STATUS_RESETTING_MASK : 0) |
             (fault_.kind == FaultConfig::Kind::kHang && head_ != tail_ ? csr::STATUS_BUSY_MASK : 0);
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
  if (offset >= csr::CNT_BUSY_LO && offset < csr::CNT_BUSY_LO + 8 * spec::kNumCounters) {
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
        // A hung engine's reset waits for its outstanding reads, which never come.
        if (fault_.kind == FaultConfig::Kind::kHang && head_ != tail_) resetting_ = true;
        if (resetting_) break;
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
  while (ctrl_enable_ && !halted_ && head_ != tail_ && fault_.kind != FaultConfig::Kind::kHang) {
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
    if (mem_cfg_.slverr_addr && *mem_cfg_.slverr_addr - desc_addr < spec::kDescBytes) {
      halt({spec::ErrorCode::kAxiRd, desc_addr});
      return;
    }
    DescriptorBytes raw;
    std::copy_n(mem_.data() + desc_addr, raw.size(), raw.begin());
    flipper_.apply(raw.data(), raw.size());
    const Descriptor d = decode(raw);
    Fault f = validate(d, desc_addr, cfg_);
    if (!f) f = bus_fault(d);
    if (!f) {
      const auto undo = flip_reads(d);
      f = execute(d, desc_addr, mem_, cfg_, fault_);
      undo_flips(d, undo, !f);
    }
    if (f) {
      halt(f);
      return;
    }
    const TimingEstimate t = timed(d);  // a NOP: its fetch
    cycles_ += t.cycles;
    counter(spec::Counter::kBusy) += t.cycles;
    counter(spec::Counter::kStall) += t.stall_cycles;
    if (static_cast<spec::Opcode>(d.opcode) == spec::Opcode::kGemm) counter(spec::Counter::kMacs) += uint64_t{d.m} * d.n * d.k;
    counter(spec::Counter::kRdBytes) += t.read_bytes;
    counter(spec::Counter::kWrBytes) += t.write_bytes;
    counter(spec::Counter::kSteps) += t.actions.steps;
    counter(spec::Counter::kTiles) += t.actions.tiles;
    counter(spec::Counter::kDescs) += t.actions.descs;
    counter(spec::Counter::kSpadRdBytes) += t.actions.spad_read_bytes;
    head_ = (head_ + 1) & (ring_size_ - 1);
    ++completed_;
    last_tag_ = d.tag;
    if (d.has(spec::desc::FLAG_IRQ)) irq_status_ |= csr::IRQ_STATUS_DONE_MASK;
  }
}

TimingEstimate EngineModel::timed(const Descriptor& d) {
  Descriptor key = d;
  key.tag = 0;
  const DescriptorBytes raw = encode(key);
  if (const auto it = timings_.find(raw); it != timings_.end()) return it->second;
  if (timings_.size() >= 4096) timings_.clear();  // a bound for ever-new shapes
  return timings_[raw] = estimate(d, cfg_, mem_cfg_);
}

std::vector<EngineModel::Span> EngineModel::read_spans(const Descriptor& d) const {
  std::vector<Span> out;
  if (static_cast<spec::Opcode>(d.opcode) != spec::Opcode::kGemm) return out;
  auto rows = [&](uint64_t addr, uint64_t n, uint64_t stride, uint64_t bytes) {
    for (uint64_t i = 0; i < n; ++i) out.push_back({addr + i * stride, bytes});
  };
  rows(d.a_addr, d.m, d.lda, d.k);
  rows(d.b_addr, d.k, d.ldb, d.n);
  if (d.has(spec::desc::FLAG_ACCUMULATE)) rows(d.cin_addr, d.m, d.ldcin, 4ull * d.n);
  if (d.has(spec::desc::FLAG_BIAS)) out.push_back({d.bias_addr, 4ull * d.n});
  if (d.int8_out()) {
    out.push_back({d.mult_addr, 4ull * d.n});
    out.push_back({d.shift_addr, d.n});
  }
  return out;
}

Fault EngineModel::bus_fault(const Descriptor& d) const {
  if (!mem_cfg_.slverr_addr || static_cast<spec::Opcode>(d.opcode) != spec::Opcode::kGemm) return {};
  const uint64_t bad = *mem_cfg_.slverr_addr, beat = cfg_.axi_bytes;
  // The RTL reports the failing burst's address; the model, the beat that holds the byte.
  for (const Span& s : read_spans(d))
    if (bad - s.addr / beat * beat < s.len + s.addr % beat) return {spec::ErrorCode::kAxiRd, bad / beat * beat};
  for (uint64_t m = 0; m < d.m; ++m)
    if (bad - (d.c_addr + m * d.ldc) < uint64_t{d.n} * d.out_bytes())
      return {spec::ErrorCode::kAxiWr, bad / beat * beat};
  return {};
}

std::vector<EngineModel::Undo> EngineModel::flip_reads(const Descriptor& d) {
  std::vector<Undo> undo;
  if (fault_.kind != FaultConfig::Kind::kFlip) return undo;
  // The engine sees flipped bits; memory keeps the true ones, so flip, execute, then put them back.
  for (const Span& s : read_spans(d)) {
    if (!mem_.contains(s.addr, s.len)) continue;  // execute() reports the bus error
    std::vector<uint8_t> bytes(mem_.data() + s.addr, mem_.data() + s.addr + s.len);
    if (flipper_.apply(mem_.data() + s.addr, s.len)) undo.push_back({s.addr, std::move(bytes)});
  }
  return undo;
}

void EngineModel::undo_flips(const Descriptor& d, const std::vector<Undo>& undo, bool c_written) {
  // Leave alone what the GEMM wrote (C may be C_in, updated in place).
  auto written = [&](uint64_t a) {
    if (!c_written || a < d.c_addr) return false;
    const uint64_t m = (a - d.c_addr) / d.ldc, col = (a - d.c_addr) % d.ldc;
    return m < d.m && col < uint64_t{d.n} * d.out_bytes();
  };
  for (auto it = undo.rbegin(); it != undo.rend(); ++it)
    for (uint64_t i = 0; i < it->bytes.size(); ++i)
      if (!written(it->addr + i)) mem_.data()[it->addr + i] = it->bytes[i];
}

}  // namespace tessera
