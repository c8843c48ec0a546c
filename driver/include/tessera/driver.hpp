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

#include "tessera/descriptor.hpp"
#include "tessera/golden.hpp"

namespace tessera::driver {

// Bad input from the caller: an unknown device, a malformed option, a bad buffer use (exit 2).
class UsageError : public std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The device failed: an engine error, a timeout, a simulator that died (exit 1).
class DeviceError : public std::runtime_error {
  using std::runtime_error::runtime_error;
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
  // blocks for the interrupt (hardware); returns whether it is high.
  virtual bool wait_irq(uint64_t max_cycles) = 0;
  // Device clock cycles elapsed (simulated time for model and rtl).
  virtual uint64_t cycles() = 0;
  // Cosimulation scoreboard verdict, where the backend has one: {ok, text}.
  virtual std::optional<std::pair<bool, std::string>> scoreboard() { return std::nullopt; }
};

struct Properties {
  std::string spec;
  uint32_t id = 0, version = 0;
  uint32_t rows = 0, cols = 0, k_max = 0, axi_bytes = 0, max_reads = 0, addr_bits = 0, align = 0;
  uint64_t mem_bytes = 0;
  std::string preset;  // the named preset these parameters match, if any
  EngineConfig engine() const;
};

struct Counters {
  uint64_t busy_cycles = 0, stall_cycles = 0, macs = 0, read_bytes = 0, write_bytes = 0;
  uint32_t completed = 0;
};

class Device;

// A block of device memory; returned to the allocator when destroyed.
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
  explicit operator bool() const { return dev_ != nullptr; }

 private:
  friend class Device;
  Buffer(Device* dev, uint64_t addr, uint64_t size) : dev_(dev), addr_(addr), size_(size) {}
  Device* dev_ = nullptr;
  uint64_t addr_ = 0, size_ = 0;
};

class Device {
 public:
  static constexpr uint32_t kRingEntries = 256;

  explicit Device(const DeviceSpec& spec);  // opens, identifies and resets the engine
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Properties& properties() const { return props_; }
  Backend& backend() { return *backend_; }

  Buffer alloc(uint64_t bytes, uint64_t align = 0);  // align 0: the engine's alignment
  void write(const Buffer& buf, uint64_t offset, std::span<const uint8_t> bytes);
  void read(const Buffer& buf, uint64_t offset, std::span<uint8_t> bytes);

  // Queues descriptors (the last one raises the interrupt) and returns the completion count that
  // marks them done.
  uint32_t submit(std::span<const Descriptor> descs);
  // Waits until COMPLETED reaches `fence`; throws EngineFault naming the engine's error or, after
  // `max_idle_cycles` with neither a completion nor bus traffic, a DeviceError with its state.
  void wait(uint32_t fence, uint64_t max_idle_cycles = 1'000'000);

  Counters counters();
  // Drains and resets the engine, then sets the ring up again: the way back from an error.
  void soft_reset();
  std::string state();  // STATUS, head, tail, completed, error registers, as one line

 private:
  friend class Buffer;
  void release(uint64_t addr);
  void check_engine_error();

  DeviceSpec spec_;
  std::unique_ptr<Backend> backend_;
  Properties props_;
  uint64_t ring_addr_ = 0;
  uint32_t tail_ = 0, submitted_ = 0;
  std::map<uint64_t, uint64_t> free_;  // address -> size, coalesced
  std::map<uint64_t, uint64_t> used_;
};

std::unique_ptr<Backend> make_model_backend(const DeviceSpec& spec);
std::unique_ptr<Backend> make_rtl_backend(const DeviceSpec& spec);

}  // namespace tessera::driver
