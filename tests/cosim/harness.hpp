// Cosimulation harness: every buffer lives both on the device and in a host mirror of its memory.
// The golden model runs the same descriptors on the mirror; afterwards every byte of every buffer
// must agree, and the platform's scoreboard (rtl) must have seen no wrong write.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "tessera/driver/device.hpp"
#include "tessera/model/golden.hpp"
#include "tessera/model/timing.hpp"

namespace tessera::test {

struct Shape {
  uint32_t m = 16, n = 16, k = 16;
  bool int8 = false, bias = false, acc = false, relu = false, fold = false;
  // BF16 precision: fp32 output, or bf16 with bf16_out; operands near 1, with specials also zeros,
  // subnormals, range extremes, infinities and NaNs (random_bf16)
  bool bf16 = false, bf16_out = false, specials = false;
  uint32_t pad_a = 0, pad_b = 0, pad_c = 0, pad_cin = 0;  // extra row pitch, in alignment units
};

class Mirror {
 public:
  explicit Mirror(const std::string& spec);

  driver::Device& device() { return dev_; }
  const EngineConfig& config() const { return cfg_; }
  const MemoryModelConfig& memory() const { return mem_; }
  Memory& host() { return host_; }

  uint64_t alloc(uint64_t bytes);
  void write(uint64_t addr, std::span<const uint8_t> bytes);
  void fill(uint64_t addr, uint64_t bytes, std::mt19937_64& rng);
  // `bytes` of values of `size` bytes each (bf16 operands, fp32 C_in and bias)
  void fill_values(uint64_t addr, uint64_t bytes, uint32_t size, const std::function<uint32_t()>& value);

  // Buffers with random contents for one GEMM; shifts are drawn so outputs spread over int8.
  Descriptor gemm(const Shape& s, std::mt19937_64& rng);

  // Runs `descs` on the golden model and the device and compares. Returns the fault both agree on
  // (none when the descriptors are good).
  Fault run(const std::vector<Descriptor>& descs);

 private:
  // The action counters the engine counted for `descs` against the golden model's closed form and
  // the timing model; its busy cycles against the timing model's.
  void check_counted_actions(const std::vector<Descriptor>& descs, const driver::Counters& got) const;

  driver::Device dev_;
  EngineConfig cfg_;
  MemoryModelConfig mem_;  // the device's memory system, as the timing model takes it
  Memory host_;
  std::map<uint64_t, driver::Buffer> bufs_;
  size_t runs_ = 0;  // calls of run(), the current one included
};

// The RTL device of `preset`, or of TESSERA_PRESET where that is set (scripts/regress runs each
// test on each preset).
std::string rtl(const std::string& preset);

// A random shape that stays within the engine's limits and a test's cycle budget; `bf16`: of the
// BF16 precision (K at most k_max / 2 is the caller's to keep).
Shape random_shape(std::mt19937_64& rng, uint32_t max_mn, uint32_t max_k, bool bf16 = false);

}  // namespace tessera::test
