// The pipe protocol between the driver's `rtl` backend and tessera-sim, the process that runs one
// SystemC platform (SystemC elaborates once per process, and each simulation wants a core).
// Little-endian fixed-size headers, each followed by `len` payload bytes.
#pragma once

#include <cstdint>

namespace tessera::simproto {

inline constexpr uint32_t kMagic = 0x54534d31;  // "TSM1"

enum class Op : uint32_t {
  kHello = 1,       // -> v0 = magic, v1 = memory bytes
  kCsrRead = 2,     // a = offset -> v0 = value
  kCsrWrite = 3,    // a = offset, b = value
  kMemWrite = 4,    // a = address, payload = bytes
  kMemRead = 5,     // a = address, b = length -> payload
  kRunUntilIrq = 6, // a = max cycles -> v0 = irq (0/1), v1 = cycles now
  kRun = 7,         // a = cycles -> v1 = cycles now
  kCycles = 8,      // -> v1 = cycles now
  kScoreboard = 9,  // -> payload = JSON report
  kShutdown = 10,
};

struct Request {
  Op op;
  uint32_t reserved;
  uint64_t a, b;
  uint64_t len;
};

struct Response {
  uint32_t status;  // 0 ok; otherwise payload is an error message
  uint32_t reserved;
  uint64_t v0, v1;
  uint64_t len;
};

}  // namespace tessera::simproto
