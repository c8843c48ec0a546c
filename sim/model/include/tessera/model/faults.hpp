// Faults a simulated device can be told to have (device option fault=...), so that the health
// checks can be shown to catch each class:
//
//   stuck:ROW,COL,BIT[,VALUE]  bit BIT of PE (ROW, COL)'s result register stuck at VALUE (default 1)
//   flip:RATE                  each bit of data the engine reads flips with probability RATE
//   slverr:ADDR                a bus burst touching byte ADDR gets an AXI error response
//   hang                       the memory stops answering reads: the engine stops completing work
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace tessera {

struct FaultConfig {
  enum class Kind { kNone, kStuck, kFlip, kSlverr, kHang };
  Kind kind = Kind::kNone;
  uint32_t row = 0, col = 0, bit = 0;  // stuck
  bool value = true;                   // stuck
  double rate = 0;                     // flip
  uint64_t addr = 0;                   // slverr

  // Throws std::invalid_argument naming what is wrong.
  static FaultConfig parse(std::string_view text);
  std::string str() const;
  explicit operator bool() const { return kind != Kind::kNone; }

  // The stuck bit applied to one finished sum of the PE.
  uint32_t force(uint32_t v) const { return value ? v | (1u << bit) : v & ~(1u << bit); }
};

// Bit flips at a given rate: the number of good bits before the next flip is drawn from the
// geometric distribution, so the cost is per flip, not per bit.
class BitFlipper {
 public:
  // rate in [0, 0.5]; 0 disables.
  BitFlipper(double rate, uint64_t seed) : enabled_(rate > 0), rng_(seed), gap_(enabled_ ? rate : 0.5) {
    next_ = enabled_ ? draw() : 0;
  }
  // Flips bits of bytes[0, n) as the stream of bits read so far dictates; returns flips made.
  uint64_t apply(uint8_t* bytes, uint64_t n) {
    if (!enabled_) return 0;
    uint64_t flips = 0;
    const uint64_t bits = n * 8;
    uint64_t at = 0;
    while (next_ < bits - at) {
      at += next_;
      bytes[at / 8] ^= static_cast<uint8_t>(1u << (at % 8));
      ++flips;
      ++at;
      next_ = draw();
    }
    next_ -= bits - at;
    return flips;
  }

 private:
  uint64_t draw() { return gap_(rng_); }
  bool enabled_ = false;
  std::mt19937_64 rng_;
  std::geometric_distribution<uint64_t> gap_;
  uint64_t next_ = 0;
};

}  // namespace tessera
