// A GEMM/NOP descriptor as a value type, and its 128-byte wire form (layout from the spec).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "tessera/model/spec.hpp"

namespace tessera {

struct Descriptor {
  // opcode and out_mode are raw bytes: a descriptor read from memory may hold illegal values.
  uint8_t opcode = static_cast<uint8_t>(spec::Opcode::kGemm);
  uint8_t out_mode = static_cast<uint8_t>(spec::OutMode::kInt32);
  uint32_t flags = 0;  // spec::desc::FLAG_* bits of word 0
  uint32_t m = 0, n = 0, k = 0;
  uint64_t a_addr = 0, b_addr = 0, c_addr = 0, cin_addr = 0;
  uint64_t bias_addr = 0, mult_addr = 0, shift_addr = 0;
  uint32_t lda = 0, ldb = 0, ldc = 0, ldcin = 0;
  int8_t out_zp = 0, act_min = -128, act_max = 127;
  uint32_t tag = 0;

  bool has(uint32_t flag) const { return (flags & flag) != 0; }
  bool int8_out() const { return out_mode == static_cast<uint8_t>(spec::OutMode::kInt8); }
  uint32_t out_bytes() const { return int8_out() ? 1 : 4; }
};

using DescriptorBytes = std::array<uint8_t, spec::kDescBytes>;

DescriptorBytes encode(const Descriptor& d);
Descriptor decode(std::span<const uint8_t, spec::kDescBytes> bytes);

}  // namespace tessera
