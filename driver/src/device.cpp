#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "tessera/driver.hpp"

namespace tessera::driver {

namespace csr = spec::csr;

EngineConfig Properties::engine() const {
  EngineConfig c;
  c.rows = rows;
  c.cols = cols;
  c.k_max = k_max;
  c.axi_bytes = axi_bytes;
  c.max_reads = max_reads;
  c.addr_bits = addr_bits;
  return c;
}

Buffer::Buffer(Buffer&& o) noexcept : dev_(o.dev_), addr_(o.addr_), size_(o.size_) { o.dev_ = nullptr; }
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (dev_) dev_->release(addr_);
    dev_ = o.dev_;
    addr_ = o.addr_;
    size_ = o.size_;
    o.dev_ = nullptr;
  }
  return *this;
}
Buffer::~Buffer() {
  if (dev_) dev_->release(addr_);
}

Device::Device(const DeviceSpec& spec) : spec_(spec) {
  if (spec.kind == "model")
    backend_ = make_model_backend(spec);
  else if (spec.kind == "rtl")
    backend_ = make_rtl_backend(spec);
  else
    throw DeviceError(fmt::format("{}: the xdma backend is not built in this version", spec.str()));

  props_.spec = spec.str();
  props_.id = backend_->csr_read(csr::ID);
  if (props_.id != spec::kEngineId)
    throw DeviceError(fmt::format("{}: ID register reads {:#010x}, not a Tessera engine ({:#010x})", spec.str(),
                                  props_.id, spec::kEngineId));
  props_.version = backend_->csr_read(csr::VERSION);
  const uint32_t arr = backend_->csr_read(csr::CFG_ARRAY), mem = backend_->csr_read(csr::CFG_MEM),
                 addr = backend_->csr_read(csr::CFG_ADDR);
  props_.rows = arr & 0xff;
  props_.cols = (arr >> 8) & 0xff;
  props_.k_max = mem & 0xffff;
  props_.axi_bytes = (mem >> 16) & 0xff;
  props_.max_reads = mem >> 24;
  props_.addr_bits = addr & 0xff;
  props_.align = (addr >> 8) & 0xffff;
  props_.mem_bytes = backend_->mem_size();
  for (const auto& p : spec::kPresets)
    if (p.rows == props_.rows && p.cols == props_.cols && p.k_max == props_.k_max &&
        p.axi_data_bits == props_.axi_bytes * 8)
      props_.preset = std::string(p.name);
  if (props_.rows == 0 || props_.cols == 0 || props_.axi_bytes == 0 || props_.align == 0)
    throw DeviceError(fmt::format("{}: configuration registers are implausible (CFG_ARRAY {:#x}, CFG_MEM {:#x})",
                                  spec.str(), arr, mem));

  ring_addr_ = 0;
  const uint64_t ring_bytes = uint64_t{kRingEntries} * spec::kDescBytes;
  if (props_.mem_bytes <= ring_bytes) throw DeviceError(fmt::format("{}: device memory too small", spec.str()));
  free_[ring_bytes] = props_.mem_bytes - ring_bytes;
  soft_reset();
}

Device::~Device() = default;

void Device::soft_reset() {
  backend_->csr_write(csr::CTRL, csr::CTRL_SOFT_RESET_MASK);
  for (int i = 0; backend_->csr_read(csr::STATUS) & csr::STATUS_RESETTING_MASK; ++i) {
    if (i > 1000) throw DeviceError(fmt::format("{}: soft reset did not finish; {}", spec_.str(), state()));
    backend_->wait_irq(100);
  }
  tail_ = submitted_ = 0;
  backend_->csr_write(csr::RING_BASE_LO, static_cast<uint32_t>(ring_addr_));
  backend_->csr_write(csr::RING_BASE_HI, static_cast<uint32_t>(ring_addr_ >> 32));
  backend_->csr_write(csr::RING_SIZE, kRingEntries);
  backend_->csr_write(csr::IRQ_ENABLE, csr::IRQ_STATUS_DONE_MASK | csr::IRQ_STATUS_ERROR_MASK);
  backend_->csr_write(csr::CTRL, csr::CTRL_ENABLE_MASK);
}

Buffer Device::alloc(uint64_t bytes, uint64_t align) {
  if (align == 0) align = props_.align;
  if (bytes == 0) bytes = 1;
  bytes = (bytes + props_.align - 1) / props_.align * props_.align;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = (it->first + align - 1) / align * align;
    if (start - it->first + bytes > it->second) continue;
    const uint64_t block = it->first, size = it->second;
    free_.erase(it);
    if (start > block) free_[block] = start - block;
    if (start + bytes < block + size) free_[start + bytes] = block + size - start - bytes;
    used_[start] = bytes;
    return Buffer(this, start, bytes);
  }
  throw UsageError(fmt::format("{}: out of device memory allocating {} bytes ({} bytes free in {} blocks)",
                               spec_.str(), bytes, [&] {
                                 uint64_t f = 0;
                                 for (const auto& [a, s] : free_) f += s;
                                 return f;
                               }(), free_.size()));
}

void Device::release(uint64_t addr) {
  const auto it = used_.find(addr);
  if (it == used_.end()) return;
  uint64_t start = addr, size = it->second;
  used_.erase(it);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

void Device::write(const Buffer& buf, uint64_t offset, std::span<const uint8_t> bytes) {
  if (!buf || buf.dev_ != this) throw UsageError("write to a buffer that is not allocated on this device");
  if (offset > buf.size() || bytes.size() > buf.size() - offset)
    throw UsageError(fmt::format("write of {} bytes at offset {} runs past the end of a {}-byte buffer",
                                 bytes.size(), offset, buf.size()));
  backend_->mem_write(buf.addr() + offset, bytes);
}

void Device::read(const Buffer& buf, uint64_t offset, std::span<uint8_t> bytes) {
  if (!buf || buf.dev_ != this) throw UsageError("read from a buffer that is not allocated on this device");
  if (offset > buf.size() || bytes.size() > buf.size() - offset)
    throw UsageError(fmt::format("read of {} bytes at offset {} runs past the end of a {}-byte buffer",
                                 bytes.size(), offset, buf.size()));
  backend_->mem_read(buf.addr() + offset, bytes);
}

uint32_t Device::submit(std::span<const Descriptor> descs) {
  for (size_t i = 0; i < descs.size(); ++i) {
    // One slot stays empty so a full ring is distinguishable from an empty one.
    while (((tail_ + 1) & (kRingEntries - 1)) == backend_->csr_read(csr::RING_HEAD)) {
      backend_->csr_write(csr::RING_TAIL, tail_);
      wait(submitted_ - (kRingEntries - 2));
    }
    Descriptor d = descs[i];
    if (i + 1 == descs.size()) d.flags |= spec::desc::FLAG_IRQ;
    const DescriptorBytes bytes = encode(d);
    backend_->mem_write(ring_addr_ + uint64_t{tail_} * spec::kDescBytes, bytes);
    tail_ = (tail_ + 1) & (kRingEntries - 1);
    ++submitted_;
  }
  backend_->csr_write(csr::RING_TAIL, tail_);
  return submitted_;
}

std::string Device::state() {
  return fmt::format("STATUS={:#x} RING_HEAD={} RING_TAIL={} COMPLETED={} ERR_CODE={} ERR_ADDR={:#x} "
                     "CNT_BUSY={} cycle={}",
                     backend_->csr_read(csr::STATUS), backend_->csr_read(csr::RING_HEAD),
                     backend_->csr_read(csr::RING_TAIL), backend_->csr_read(csr::COMPLETED),
                     backend_->csr_read(csr::ERR_CODE),
                     backend_->csr_read(csr::ERR_ADDR_LO) | (uint64_t{backend_->csr_read(csr::ERR_ADDR_HI)} << 32),
                     backend_->csr_read(csr::CNT_BUSY_LO), backend_->cycles());
}

void Device::check_engine_error() {
  if (!(backend_->csr_read(csr::STATUS) & csr::STATUS_HALTED_MASK)) return;
  const auto code = static_cast<spec::ErrorCode>(backend_->csr_read(csr::ERR_CODE));
  const uint64_t addr = backend_->csr_read(csr::ERR_ADDR_LO) | (uint64_t{backend_->csr_read(csr::ERR_ADDR_HI)} << 32);
  const uint32_t slot = backend_->csr_read(csr::ERR_DESC);
  throw EngineFault(fmt::format("{}: engine halted with error {} (code {}) at {:#x}, descriptor in ring slot {}",
                                spec_.str(), spec::to_string(code), static_cast<int>(code), addr, slot),
                    code, addr, slot);
}

void Device::wait(uint32_t fence, uint64_t max_idle_cycles) {
  constexpr uint64_t kChunk = 1'000'000;
  // Progress is a completed descriptor or bus traffic; a long GEMM keeps moving bytes.
  auto progress = [&] {
    return std::array<uint32_t, 3>{backend_->csr_read(csr::COMPLETED), backend_->csr_read(csr::CNT_RD_BYTES_LO),
                                   backend_->csr_read(csr::CNT_WR_BYTES_LO)};
  };
  auto last = progress();
  uint64_t idle = 0;
  int frozen = 0;  // waits in which the device's clock did not move (a model has nothing left to run)
  for (;;) {
    if (static_cast<int32_t>(last[0] - fence) >= 0) return;
    check_engine_error();
    const uint64_t before = backend_->cycles();
    backend_->wait_irq(std::min(kChunk, max_idle_cycles));
    backend_->csr_write(csr::IRQ_STATUS, csr::IRQ_STATUS_DONE_MASK);
    const auto now = progress();
    const uint64_t ran = backend_->cycles() - before;
    idle = now == last ? idle + ran : 0;
    frozen = (now == last && ran == 0) ? frozen + 1 : 0;
    last = now;
    if ((idle >= max_idle_cycles || frozen > 3) && static_cast<int32_t>(last[0] - fence) < 0) {
      check_engine_error();
      throw DeviceError(fmt::format("{}: watchdog: no completion and no bus traffic for {} cycles (waiting for "
                                    "completion {}); {}",
                                    spec_.str(), idle, fence, state()));
    }
  }
}

Counters Device::counters() {
  auto read64 = [&](uint32_t lo) {
    const uint64_t l = backend_->csr_read(lo);
    return l | (uint64_t{backend_->csr_read(lo + 4)} << 32);
  };
  Counters c;
  c.busy_cycles = read64(csr::CNT_BUSY_LO);
  c.stall_cycles = read64(csr::CNT_STALL_LO);
  c.macs = read64(csr::CNT_MACS_LO);
  c.read_bytes = read64(csr::CNT_RD_BYTES_LO);
  c.write_bytes = read64(csr::CNT_WR_BYTES_LO);
  c.completed = backend_->csr_read(csr::COMPLETED);
  return c;
}

}  // namespace tessera::driver
