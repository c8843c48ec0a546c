// The device HAL: one API over interchangeable backends, chosen by a device spec string
// (DESIGN.md): model[:i][?opts], rtl[:i][?opts], xdma:/dev/xdma0.
//
// A Device owns a descriptor ring in device memory and an allocator for the rest of it. Work is
// submitted as descriptors; a Fence is the completion count to wait for. Waits are bounded: a
// stuck engine becomes a DeviceError that reports the engine's state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/model/descriptor.hpp"
#include "tessera/model/engine_config.hpp"
#include "tessera/model/timing.hpp"

namespace tessera::driver {

class TraceRecorder;

// Bad input from the caller: an unknown device, a malformed option, a bad buffer use (exit 2).
class UsageError : public std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// An allocation larger than the free device memory (a request too big for this device: exit 2).
class OutOfMemory : public UsageError {
  using UsageError::UsageError;
};

// The device failed: an engine error, a timeout, a simulator that died (exit 1).
class DeviceError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The watchdog fired: the engine made no progress (no completion, no bus traffic) for too long.
class WatchdogTimeout : public DeviceError {
  using DeviceError::DeviceError;
};

// The engine halted with an error code (ERR_CODE, ERR_ADDR, ERR_DESC).
class EngineFault : public DeviceError {
 public:
  EngineFault(const std::string& what, spec::ErrorCode code, uint64_t addr, uint32_t ring_index)
      : DeviceError(what), code(code), addr(addr), ring_index(ring_index) {}
  spec::ErrorCode code;
  uint64_t addr;
  uint32_t ring_index;
};

struct DeviceSpec {
  std::string kind;  // model | rtl | xdma
  int index = 0;
  std::string path;  // xdma: the device node prefix
  std::map<std::string, std::string> options;

  static DeviceSpec parse(const std::string& text);  // throws UsageError
  std::string str() const;
  std::string option(const std::string& key, const std::string& fallback) const;
  // A simulated device's preset: preset=, else the default engine with the precision asked for
  // (`default`, int8 only, or `default-bf16` with precision=bf16).
  std::string preset() const;
};

// Why a device without BF16 cannot take BF16 work, naming its preset's twin with BF16 where it has one.
std::string no_bf16_reason(const DeviceSpec& spec);

// A cosimulation scoreboard's running verdict (rtl backend).
struct ScoreboardStatus {
  bool ok = true;           // no wrong write and no AXI rule broken so far
  uint64_t mismatches = 0;  // wrong bytes so far
  std::string detail;
};

// The register-level view a backend gives the driver.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual uint32_t csr_read(uint32_t offset) = 0;
  virtual void csr_write(uint32_t offset, uint32_t value) = 0;
  virtual void mem_write(uint64_t addr, std::span<const uint8_t> bytes) = 0;
  virtual void mem_read(uint64_t addr, std::span<uint8_t> bytes) = 0;
  virtual uint64_t mem_size() const = 0;
  // Lets the device run until its interrupt line is high or `max_cycles` pass (simulators), or
  // blocks for the interrupt that long (hardware); returns whether it is high.
  virtual bool wait_irq(uint64_t max_cycles) = 0;
  // Lets the device run `cycles` without looking at the interrupt (polled completion).
  virtual void advance(uint64_t cycles) = 0;
  // Device clock cycles elapsed (simulated time for model and rtl; wall time at the nominal clock
  // for hardware).
  virtual uint64_t cycles() = 0;
  // The cosimulation scoreboard's verdict so far, where the backend has one.
  virtual std::optional<ScoreboardStatus> scoreboard() { return std::nullopt; }
  // Gives up on the device from another thread (a health check past its deadline): a call that is
  // blocked returns with a DeviceError, and so does every later one.
  virtual void abort() = 0;
};

struct Properties {
  std::string spec;
  uint32_t id = 0, version = 0;
  uint32_t rows = 0, cols = 0, k_max = 0, axi_bytes = 0, max_reads = 0, addr_bits = 0, align = 0;
  uint64_t mem_bytes = 0;
  bool fold = false;   // the FOLD dataflow for small M (CFG_ARRAY.FOLD)
  bool bf16 = false;   // the BF16 precision (CFG_ARRAY.BF16)
  std::string precision = "int8";  // what the runtime computes in here: the device option precision=int8|bf16
  std::string preset;  // the named preset these parameters match, if any
  EngineConfig engine() const;
};

struct Counters {
  uint64_t busy_cycles = 0, stall_cycles = 0, macs = 0, read_bytes = 0, write_bytes = 0;
  // Counted actions, for the energy model.
  uint64_t steps = 0, tiles = 0, descs = 0, spad_read_bytes = 0;
  uint32_t completed = 0;
  Counters operator-(const Counters& o) const;
};

// How long a wait may take before it becomes a DeviceError that describes the engine's state.
struct WaitOptions {
  uint64_t max_idle_cycles = 1'000'000;  // cycles with neither a completion nor bus traffic
  double timeout_s = 0;                  // wall-clock bound on the whole wait; 0: none
};

namespace detail {
struct Heap;
}

// A simulated device (model, rtl) as it will be when opened, without starting it: the engine its
// preset and options make (dataflow=classic: no FOLD), its memory system, and the memory free for
// buffers (all of it but the descriptor ring). Throws UsageError for a bad spec or an xdma one (a
// card says what it is only when opened).
struct SimulatedDevice {
  EngineConfig engine;
  MemoryModelConfig memory;
  uint64_t free_bytes = 0;
};
SimulatedDevice describe_simulated(const DeviceSpec& spec);

// A block of device memory; returned to the allocator when destroyed. It may outlive its Device
// (then destroying it does nothing), and a moved-from Buffer is empty: using either is a
// UsageError, never a stray access.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  uint64_t addr() const { return addr_; }
  uint64_t size() const { return size_; }
  explicit operator bool() const { return heap_ != nullptr; }
  void reset();  // frees the memory now

 private:
  friend class Device;
  Buffer(std::shared_ptr<detail::Heap> heap, uint64_t addr, uint64_t size)
      : heap_(std::move(heap)), addr_(addr), size_(size) {}
  std::shared_ptr<detail::Heap> heap_;
  uint64_t addr_ = 0, size_ = 0;
};

// Whether submit() checks that a descriptor's operands lie in allocated buffers. Only tests that
// make the engine meet bad addresses on purpose turn it off.
enum class BoundsCheck { kOn, kOff };

class Device {
 public:
  static constexpr uint32_t kRingEntries = 256;

  // Opens, identifies and resets the engine. Options the driver itself reads:
  // completion=irq|poll (default irq).
  explicit Device(const DeviceSpec& spec);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Properties& properties() const { return props_; }
  const DeviceSpec& spec() const { return spec_; }
  Backend& backend() { return *backend_; }

  // `align` 0 means the engine's alignment; a power of two otherwise. Throws OutOfMemory saying
  // how much is free.
  Buffer alloc(uint64_t bytes, uint64_t align = 0);
  void write(const Buffer& buf, uint64_t offset, std::span<const uint8_t> bytes);
  void read(const Buffer& buf, uint64_t offset, std::span<uint8_t> bytes);
  uint64_t free_bytes() const;

  // Queues descriptors (the last one raises the interrupt), waiting while the ring is full, and
  // returns the completion count that marks them done. With BoundsCheck::kOn, a GEMM whose
  // operands are not inside allocated buffers is a UsageError and nothing is queued.
  uint32_t submit(std::span<const Descriptor> descs, BoundsCheck check = BoundsCheck::kOn);
  // Waits until COMPLETED reaches `fence`; throws EngineFault naming the engine's error, or a
  // DeviceError with the engine's state when the watchdog or the timeout fires.
  void wait(uint32_t fence, const WaitOptions& opts = {});

  // From now on, records every copy, submission and completed wait into `recorder` (trace.hpp);
  // nullptr stops. Fences and cycles in the trace count from this call.
  void capture(std::shared_ptr<TraceRecorder> recorder);
  // Descriptors submitted since the device was opened (the fence of the last one).
  uint32_t submitted() const { return submitted_; }

  Counters counters();
  // Drains and resets the engine, then sets the ring up again: the way back from an error.
  void soft_reset();
  std::string state();  // STATUS, head, tail, completed, error registers, counters, as one line

 private:
  void set_up_ring();  // the ring registers, IRQ_ENABLE and ENABLE, with the queue empty
  void check_engine_error();
  void wait_for(uint32_t fence, const WaitOptions& opts);
  void check_access(const Buffer& buf, const char* what, uint64_t offset, uint64_t len) const;
  void check_bounds(const Descriptor& d, size_t index) const;

  DeviceSpec spec_;
  std::unique_ptr<Backend> backend_;
  Properties props_;
  bool polled_ = false;
  uint64_t ring_addr_ = 0;
  uint32_t tail_ = 0, submitted_ = 0;
  std::shared_ptr<detail::Heap> heap_;
  std::shared_ptr<TraceRecorder> recorder_;
  uint32_t capture_fence_ = 0;  // submitted_ when capture began
  uint64_t capture_busy_ = 0;   // the busy counter then
};

std::unique_ptr<Backend> make_model_backend(const DeviceSpec& spec);
std::unique_ptr<Backend> make_rtl_backend(const DeviceSpec& spec);
// The presets the rtl backend's simulator has (tessera-sim --presets): a build for the default test
// tier verilates small and default only. Throws DeviceError where the simulator cannot be run.
std::vector<std::string> rtl_presets();
std::unique_ptr<Backend> make_xdma_backend(const DeviceSpec& spec);

}  // namespace tessera::driver
