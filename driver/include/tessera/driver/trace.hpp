// Trace capture and replay: what the driver did to a device, recorded so that it can be played on
// any backend with every output checked, like the trace tests of production accelerator flows.
//
// A trace is a directory with trace.json (the device it was captured on and the events in order)
// and data.bin (the bytes of every load and of every expected output, each with its CRC-32):
//   load    a host-to-device copy: address and bytes;
//   submit  descriptors as the driver wrote them into the ring (ending with a RING_TAIL doorbell
//           write);
//   wait    a fence the driver waited for, with the engine's busy cycles since capture began;
//   check   a device-to-host copy: address and the bytes the device returned.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/model/descriptor.hpp"

namespace tessera::driver {

class Device;

class TraceRecorder {
 public:
  // Creates `dir` (which must be empty or new) and starts data.bin; throws UsageError.
  explicit TraceRecorder(const std::string& dir);
  void load(uint64_t addr, std::span<const uint8_t> bytes);
  void submit(std::span<const Descriptor> descs);
  void wait(uint32_t fence, uint64_t busy_cycles);
  void check(uint64_t addr, std::span<const uint8_t> bytes);
  // Writes trace.json, naming the device the trace was captured on. Throws UsageError on an I/O
  // error.
  void finish(const Device& device);

 private:
  nlohmann::ordered_json blob(uint64_t addr, std::span<const uint8_t> bytes);
  std::string dir_;
  std::ofstream data_;
  uint64_t offset_ = 0;
  nlohmann::ordered_json events_ = nlohmann::ordered_json::array();
};

struct ReplayReport {
  std::string device, captured_on;
  uint64_t loads = 0, descriptors = 0, waits = 0, checks = 0, bytes_checked = 0, bytes_wrong = 0;
  uint64_t recorded_cycles = 0, replayed_cycles = 0;  // busy cycles at the last wait
  // The first byte that differs: its address, what was expected and what came back, the GEMM
  // output element it belongs to, and the check event it was found in.
  std::optional<std::string> first_mismatch;
  bool ok() const { return bytes_wrong == 0; }
};

// Plays the trace in `dir` on `device` (opened fresh) and checks every output. A malformed or
// corrupted trace, or one that does not fit the device's memory, is a UsageError; a device that
// fails is a DeviceError or EngineFault.
ReplayReport replay(const std::string& dir, Device& device);

}  // namespace tessera::driver
