// The pipe protocol between the driver's `rtl` backend and tessera-sim, the process that runs one
// SystemC platform (SystemC elaborates once per process, and each simulation wants a core).
// Little-endian fixed-size headers, each followed by `len` payload bytes.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
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

// Moves exactly n bytes over a pipe, retrying short transfers and EINTR; false when the other end
// has gone (EOF or an error).
inline bool read_all(int fd, void* dst, size_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

inline bool write_all(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  while (n) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace tessera::simproto
