#include <algorithm>
#include <array>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "tessera/driver/device.hpp"
#include "tessera/driver/trace.hpp"

namespace tessera::driver {

namespace csr = spec::csr;

namespace detail {

// The allocator's state. Buffers share it with the Device, so a Buffer destroyed after its Device
// finds `open` false and leaves it alone.
struct Heap {
  std::map<uint64_t, uint64_t> free, used;  // address -> size; free blocks coalesced
  bool open = true;

  void release(uint64_t addr) {
    const auto it = used.find(addr);
    if (!open || it == used.end()) return;
    uint64_t start = addr, size = it->second;
    used.erase(it);
    auto next = free.lower_bound(start);
    if (next != free.end() && start + size == next->first) {
      size += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free.erase(prev);
      }
    }
    free[start] = size;
  }

  // The allocated block that holds [addr, addr + len), if one does.
  bool holds(uint64_t addr, uint64_t len) const {
    auto it = used.upper_bound(addr);
    if (it == used.begin()) return false;
    --it;
    return addr - it->first <= it->second && len <= it->second - (addr - it->first);
  }
};

}  // namespace detail

EngineConfig Properties::engine() const {
  EngineConfig c;
  c.rows = rows;
  c.cols = cols;
  c.k_max = k_max;
  c.axi_bytes = axi_bytes;
  c.max_reads = max_reads;
  c.addr_bits = addr_bits;
  c.fold = fold;
  c.bf16 = bf16;
  return c;
}

Counters Counters::operator-(const Counters& o) const {
  return {.busy_cycles = busy_cycles - o.busy_cycles,
          .stall_cycles = stall_cycles - o.stall_cycles,
          .macs = macs - o.macs,
          .read_bytes = read_bytes - o.read_bytes,
          .write_bytes = write_bytes - o.write_bytes,
          .steps = steps - o.steps,
          .tiles = tiles - o.tiles,
          .descs = descs - o.descs,
          .spad_read_bytes = spad_read_bytes - o.spad_read_bytes,
          .completed = completed - o.completed};
}

Buffer::Buffer(Buffer&& o) noexcept : heap_(std::move(o.heap_)), addr_(o.addr_), size_(o.size_) {}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    heap_ = std::move(o.heap_);
    addr_ = o.addr_;
    size_ = o.size_;
  }
  return *this;
}
Buffer::~Buffer() { reset(); }
void Buffer::reset() {
  if (heap_) heap_->release(addr_);
  heap_.reset();
}

std::string no_bf16_reason(const DeviceSpec& spec) {
  // A simulated int8-only preset has a twin with BF16: name it.
  const std::string twin = spec.kind == "xdma" ? "" : spec.preset() + "-bf16";
  const bool has_twin = std::any_of(spec::kPresets.begin(), spec::kPresets.end(),
                                    [&](const spec::Preset& p) { return p.name == twin; });
  return fmt::format("the engine has no BF16 (CFG_ARRAY.BF16 clear){}",
                     has_twin ? fmt::format("; preset={} is the same engine with BF16", twin) : "");
}

Device::Device(const DeviceSpec& spec) : spec_(spec), heap_(std::make_shared<detail::Heap>()) {
  const std::string completion = spec.option("completion", "irq");
  if (completion != "irq" && completion != "poll")
    throw UsageError(fmt::format("device '{}': completion={} is not irq or poll", spec.str(), completion));
  polled_ = completion == "poll";
  const std::string dataflow = spec.option("dataflow", "auto");
  if (dataflow != "auto" && dataflow != "classic")
    throw UsageError(fmt::format("device '{}': dataflow={} is not auto or classic", spec.str(), dataflow));
  const std::string precision = spec.option("precision", "int8");
  if (precision != "int8" && precision != "bf16")
    throw UsageError(fmt::format("device '{}': precision={} is not int8 or bf16", spec.str(), precision));
  const std::string reset = spec.option("reset", "soft");
  if (reset != "soft" && reset != "none")
    throw UsageError(fmt::format("device '{}': reset={} is not soft or none", spec.str(), reset));
  if (spec.kind == "model")
    backend_ = make_model_backend(spec);
  else if (spec.kind == "rtl")
    backend_ = make_rtl_backend(spec);
  else
    backend_ = make_xdma_backend(spec);

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
  // dataflow=classic: use the engine as if it had no FOLD (to compare the two)
  props_.fold = (arr & csr::CFG_ARRAY_FOLD_MASK) != 0 && dataflow == "auto";
  props_.bf16 = (arr & csr::CFG_ARRAY_BF16_MASK) != 0;
  props_.precision = precision;
  if (precision == "bf16" && !props_.bf16)
    throw UsageError(fmt::format("device '{}': precision=bf16, but {}", spec.str(), no_bf16_reason(spec)));
  props_.k_max = mem & 0xffff;
  props_.axi_bytes = (mem >> 16) & 0xff;
  props_.max_reads = mem >> 24;
  props_.addr_bits = addr & 0xff;
  props_.align = (addr >> 8) & 0xffff;
  props_.mem_bytes = backend_->mem_size();
  for (const auto& p : spec::kPresets)
    if (p.rows == props_.rows && p.cols == props_.cols && p.k_max == props_.k_max &&
        p.axi_data_bits == props_.axi_bytes * 8 && (p.bf16 != 0) == props_.bf16)
      props_.preset = std::string(p.name);
  if (props_.rows == 0 || props_.cols == 0 || props_.axi_bytes == 0 || props_.align == 0 ||
      (props_.align & (props_.align - 1)))
    throw DeviceError(fmt::format("{}: configuration registers are implausible (CFG_ARRAY {:#x}, CFG_MEM {:#x}, "
                                  "CFG_ADDR {:#x})",
                                  spec.str(), arr, mem, addr));

  ring_addr_ = 0;
  const uint64_t ring_bytes = uint64_t{kRingEntries} * spec::kDescBytes;
  if (props_.mem_bytes <= ring_bytes) throw DeviceError(fmt::format("{}: device memory too small", spec.str()));
  heap_->free[ring_bytes] = props_.mem_bytes - ring_bytes;
  if (reset == "soft") {
    soft_reset();
  } else {
    // The engine as it powered on: nothing queued, run or completed yet (fences count from 0).
    const uint32_t status = backend_->csr_read(csr::STATUS), head = backend_->csr_read(csr::RING_HEAD),
                   tail = backend_->csr_read(csr::RING_TAIL), completed = backend_->csr_read(csr::COMPLETED);
    if (status || head || tail || completed)
      throw DeviceError(fmt::format("{}: reset=none, but the engine is not as after power-on (STATUS {:#x}, "
                                    "RING_HEAD {}, RING_TAIL {}, COMPLETED {}); open it without reset=none",
                                    spec.str(), status, head, tail, completed));
    set_up_ring();
  }
}

Device::~Device() { heap_->open = false; }

void Device::soft_reset() {
  backend_->csr_write(csr::CTRL, csr::CTRL_SOFT_RESET_MASK);
  for (int i = 0; backend_->csr_read(csr::STATUS) & csr::STATUS_RESETTING_MASK; ++i) {
    if (i > 1000) throw DeviceError(fmt::format("{}: soft reset did not finish; {}", spec_.str(), state()));
    backend_->advance(100);
    if (i > 10) std::this_thread::sleep_for(std::chrono::microseconds(100));  // hardware resets in real time
  }
  set_up_ring();
}

void Device::set_up_ring() {
  tail_ = submitted_ = 0;
  backend_->csr_write(csr::RING_BASE_LO, static_cast<uint32_t>(ring_addr_));
  backend_->csr_write(csr::RING_BASE_HI, static_cast<uint32_t>(ring_addr_ >> 32));
  backend_->csr_write(csr::RING_SIZE, kRingEntries);
  backend_->csr_write(csr::IRQ_ENABLE, csr::IRQ_STATUS_DONE_MASK | csr::IRQ_STATUS_ERROR_MASK);
  backend_->csr_write(csr::CTRL, csr::CTRL_ENABLE_MASK);
}

uint64_t Device::free_bytes() const {
  uint64_t f = 0;
  for (const auto& [a, s] : heap_->free) f += s;
  return f;
}

Buffer Device::alloc(uint64_t bytes, uint64_t align) {
  if (align == 0) align = props_.align;
  if (align & (align - 1)) throw UsageError(fmt::format("alignment {} is not a power of two", align));
  align = std::max<uint64_t>(align, props_.align);
  if (bytes == 0) bytes = 1;
  if (bytes > props_.mem_bytes)
    throw OutOfMemory(fmt::format("{}: {} bytes is more than the device's {} bytes of memory", spec_.str(), bytes,
                                  props_.mem_bytes));
  bytes = (bytes + props_.align - 1) / props_.align * props_.align;
  auto& free = heap_->free;
  for (auto it = free.begin(); it != free.end(); ++it) {
    const uint64_t start = (it->first + align - 1) / align * align;
    if (start - it->first + bytes > it->second) continue;
    const uint64_t block = it->first, size = it->second;
    free.erase(it);
    if (start > block) free[block] = start - block;
    if (start + bytes < block + size) free[start + bytes] = block + size - start - bytes;
    heap_->used[start] = bytes;
    return Buffer(heap_, start, bytes);
  }
  throw OutOfMemory(fmt::format("{}: out of device memory allocating {} bytes ({} bytes free in {} blocks)",
                                spec_.str(), bytes, free_bytes(), free.size()));
}

void Device::check_access(const Buffer& buf, const char* what, uint64_t offset, uint64_t len) const {
  if (!buf) throw UsageError(fmt::format("{} an empty buffer (freed or moved from)", what));
  if (buf.heap_ != heap_) throw UsageError(fmt::format("{} a buffer that belongs to another device", what));
  if (offset > buf.size() || len > buf.size() - offset)
    throw UsageError(fmt::format("{} a {}-byte buffer: {} bytes at offset {} run past its end", what, buf.size(), len,
                                 offset));
}

void Device::write(const Buffer& buf, uint64_t offset, std::span<const uint8_t> bytes) {
  check_access(buf, "write to", offset, bytes.size());
  backend_->mem_write(buf.addr() + offset, bytes);
  if (recorder_) recorder_->load(buf.addr() + offset, bytes);
}

void Device::read(const Buffer& buf, uint64_t offset, std::span<uint8_t> bytes) {
  check_access(buf, "read from", offset, bytes.size());
  backend_->mem_read(buf.addr() + offset, bytes);
  if (recorder_) recorder_->check(buf.addr() + offset, bytes);
}

void Device::check_bounds(const Descriptor& d, size_t index) const {
  if (static_cast<spec::Opcode>(d.opcode) != spec::Opcode::kGemm || d.m == 0 || d.n == 0 || d.k == 0) return;
  const uint64_t ob = d.out_bytes();
  const struct {
    const char* name;
    bool used;
    uint64_t addr, rows, stride, row_bytes;
  } regions[] = {
      {"A", true, d.a_addr, d.m, d.lda, d.k},
      {"B", true, d.b_addr, d.k, d.ldb, d.n},
      {"C", true, d.c_addr, d.m, d.ldc, d.n * ob},
      {"C_in", d.has(spec::desc::FLAG_ACCUMULATE), d.cin_addr, d.m, d.ldcin, 4ull * d.n},
      {"bias", d.has(spec::desc::FLAG_BIAS), d.bias_addr, 1, 0, 4ull * d.n},
      {"mult", d.int8_out(), d.mult_addr, 1, 0, 4ull * d.n},
      {"shift", d.int8_out(), d.shift_addr, 1, 0, d.n},
  };
  for (const auto& r : regions) {
    if (!r.used) continue;
    const uint64_t len = (r.rows - 1) * r.stride + r.row_bytes;
    if (!heap_->holds(r.addr, len))
      throw UsageError(fmt::format("{}: descriptor {} (tag {}): {} at [{:#x}, {:#x}) is not inside one allocated "
                                   "buffer (freed, never allocated, or too small for the shape and stride)",
                                   spec_.str(), index, d.tag, r.name, r.addr, r.addr + len));
  }
}

uint32_t Device::submit(std::span<const Descriptor> descs, BoundsCheck check) {
  if (check == BoundsCheck::kOn)
    for (size_t i = 0; i < descs.size(); ++i) check_bounds(descs[i], i);
  for (size_t i = 0; i < descs.size(); ++i) {
    // One slot stays empty so a full ring is distinguishable from an empty one.
    while (((tail_ + 1) & (kRingEntries - 1)) == backend_->csr_read(csr::RING_HEAD)) {
      backend_->csr_write(csr::RING_TAIL, tail_);
      wait_for(submitted_ - (kRingEntries - 2), {});
    }
    Descriptor d = descs[i];
    if (i + 1 == descs.size()) d.flags |= spec::desc::FLAG_IRQ;
    const DescriptorBytes bytes = encode(d);
    backend_->mem_write(ring_addr_ + uint64_t{tail_} * spec::kDescBytes, bytes);
    tail_ = (tail_ + 1) & (kRingEntries - 1);
    ++submitted_;
  }
  backend_->csr_write(csr::RING_TAIL, tail_);
  if (recorder_) recorder_->submit(descs);
  return submitted_;
}

void Device::capture(std::shared_ptr<TraceRecorder> recorder) {
  recorder_ = std::move(recorder);
  capture_fence_ = submitted_;
  capture_busy_ = counters().busy_cycles;
}

void Device::wait(uint32_t fence, const WaitOptions& opts) {
  wait_for(fence, opts);
  if (recorder_) recorder_->wait(fence - capture_fence_, counters().busy_cycles - capture_busy_);
}

std::string Device::state() {
  const uint32_t status = backend_->csr_read(csr::STATUS);
  std::string flags;
  for (const auto& [mask, name] : {std::pair{csr::STATUS_BUSY_MASK, "BUSY"}, {csr::STATUS_HALTED_MASK, "HALTED"},
                                   {csr::STATUS_RESETTING_MASK, "RESETTING"}})
    if (status & mask) flags += (flags.empty() ? "" : "|") + std::string(name);
  const auto code = static_cast<spec::ErrorCode>(backend_->csr_read(csr::ERR_CODE));
  const uint64_t err_addr =
      backend_->csr_read(csr::ERR_ADDR_LO) | (uint64_t{backend_->csr_read(csr::ERR_ADDR_HI)} << 32);
  const Counters c = counters();
  return fmt::format("engine state: STATUS={:#x} ({}) head={} tail={} completed={} last_tag={} error={} at {:#x} "
                     "(ring slot {}); counters busy={} stall={} macs={} read_bytes={} write_bytes={}; cycle {}",
                     status, flags.empty() ? "idle" : flags, backend_->csr_read(csr::RING_HEAD),
                     backend_->csr_read(csr::RING_TAIL), c.completed, backend_->csr_read(csr::LAST_TAG),
                     spec::to_string(code), err_addr, backend_->csr_read(csr::ERR_DESC), c.busy_cycles,
                     c.stall_cycles, c.macs, c.read_bytes, c.write_bytes, backend_->cycles());
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

void Device::wait_for(uint32_t fence, const WaitOptions& opts) {
  constexpr uint64_t kChunk = 100'000;
  const auto start = std::chrono::steady_clock::now();
  auto done = [&](uint32_t completed) { return static_cast<int32_t>(completed - fence) >= 0; };
  // Progress is a completed descriptor or bus traffic; a long GEMM keeps moving bytes.
  auto progress = [&] {
    return std::array<uint32_t, 3>{backend_->csr_read(csr::COMPLETED), backend_->csr_read(csr::CNT_RD_BYTES_LO),
                                   backend_->csr_read(csr::CNT_WR_BYTES_LO)};
  };
  auto last = progress();
  uint64_t idle = 0;
  int frozen = 0;  // waits in which the device's clock did not move (a model has nothing left to run)
  for (;;) {
    if (done(last[0])) return;
    check_engine_error();
    const uint64_t before = backend_->cycles();
    const uint64_t step = std::min(kChunk, opts.max_idle_cycles);
    if (polled_) {
      backend_->advance(step);
    } else {
      backend_->wait_irq(step);
      backend_->csr_write(csr::IRQ_STATUS, csr::IRQ_STATUS_DONE_MASK);
    }
    const auto now = progress();
    const uint64_t ran = backend_->cycles() - before;
    idle = now == last ? idle + ran : 0;
    frozen = (now == last && ran == 0) ? frozen + 1 : 0;
    last = now;
    if (done(last[0])) return;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (idle >= opts.max_idle_cycles || frozen > 3) {
      check_engine_error();
      throw WatchdogTimeout(fmt::format("{}: watchdog: the engine is stuck, no completion and no bus traffic {} while "
                                    "waiting for completion {}; {}",
                                    spec_.str(), idle ? fmt::format("for {} cycles", idle) : "and no time passing",
                                    fence, state()));
    }
    if (opts.timeout_s > 0 && waited > opts.timeout_s) {
      check_engine_error();
      throw DeviceError(fmt::format("{}: timed out after {:.1f} s waiting for completion {}; {}", spec_.str(), waited,
                                    fence, state()));
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
  c.steps = read64(csr::CNT_STEPS_LO);
  c.tiles = read64(csr::CNT_TILES_LO);
  c.descs = read64(csr::CNT_DESCS_LO);
  c.spad_read_bytes = read64(csr::CNT_SPAD_RD_BYTES_LO);
  c.completed = backend_->csr_read(csr::COMPLETED);
  return c;
}

}  // namespace tessera::driver
