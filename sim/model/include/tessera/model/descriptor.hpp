// A GEMM/NOP descriptor as a value type, and its 128-byte wire form (layout from the spec).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "tessera/model/spec.hpp"

namespace tessera {

struct Descriptor {
  // opcode, out_mode and precision are raw: a descriptor read from memory may hold illegal values.
  uint8_t opcode = static_cast<uint8_t>(spec::Opcode::kGemm);
  uint8_t out_mode = static_cast<uint8_t>(spec::OutMode::kInt32);
  uint8_t precision = static_cast<uint8_t>(spec::Precision::kInt8);
  uint32_t flags = 0;  // spec::desc::FLAG_* bits of word 0
  uint32_t m = 0, n = 0, k = 0;
  uint64_t a_addr = 0, b_addr = 0, c_addr = 0, cin_addr = 0;
  uint64_t bias_addr = 0, mult_addr = 0, shift_addr = 0;
  uint32_t lda = 0, ldb = 0, ldc = 0, ldcin = 0;
  int8_t out_zp = 0, act_min = -128, act_max = 127;
  uint32_t tag = 0;

  bool has(uint32_t flag) const { return (flags & flag) != 0; }
  bool int8_out() const { return out_mode == static_cast<uint8_t>(spec::OutMode::kInt8); }
  bool bf16() const { return precision == static_cast<uint8_t>(spec::Precision::kBf16); }
  // Bytes per element of A and B, and of C.
  uint32_t in_bytes() const { return bf16() ? 2 : 1; }
  uint32_t out_bytes() const {
    return int8_out() ? 1 : out_mode == static_cast<uint8_t>(spec::OutMode::kBf16) ? 2 : 4;
  }
};

using DescriptorBytes = std::array<uint8_t, spec::kDescBytes>;

DescriptorBytes encode(const Descriptor& d);
Descriptor decode(std::span<const uint8_t, spec::kDescBytes> bytes);

}  // namespace tessera
