#include "tessera/model/descriptor.hpp"

#include <cstring>

namespace tessera {
namespace {

using spec::desc::Field;
using Words = std::array<uint32_t, spec::kDescBytes / 4>;

void put(Words& w, Field f, uint64_t v) {
  if (f.bits == 64) {
    w[f.word] = static_cast<uint32_t>(v);
    w[f.word + 1] = static_cast<uint32_t>(v >> 32);
    return;
  }
  const uint32_t mask = f.bits == 32 ? ~0u : ((1u << f.bits) - 1u);
  w[f.word] = (w[f.word] & ~(mask << f.lsb)) | ((static_cast<uint32_t>(v) & mask) << f.lsb);
}

uint64_t get(const Words& w, Field f) {
  if (f.bits == 64) return w[f.word] | (static_cast<uint64_t>(w[f.word + 1]) << 32);
  const uint32_t mask = f.bits == 32 ? ~0u : ((1u << f.bits) - 1u);
  return (w[f.word] >> f.lsb) & mask;
}

}  // namespace

DescriptorBytes encode(const Descriptor& d) {
  namespace D = spec::desc;
  Words w{};
  put(w, D::OPCODE, d.opcode);
  put(w, D::OUT_MODE, d.out_mode);
  put(w, D::PRECISION, d.precision);
  w[0] |= d.flags & 0xffff0000u;
  put(w, D::M, d.m);
  put(w, D::N, d.n);
  put(w, D::K, d.k);
  put(w, D::A_ADDR, d.a_addr);
  put(w, D::B_ADDR, d.b_addr);
  put(w, D::C_ADDR, d.c_addr);
  put(w, D::CIN_ADDR, d.cin_addr);
  put(w, D::BIAS_ADDR, d.bias_addr);
  put(w, D::MULT_ADDR, d.mult_addr);
  put(w, D::SHIFT_ADDR, d.shift_addr);
  put(w, D::LDA, d.lda);
  put(w, D::LDB, d.ldb);
  put(w, D::LDC, d.ldc);
  put(w, D::LDCIN, d.ldcin);
  put(w, D::OUT_ZP, static_cast<uint8_t>(d.out_zp));
  put(w, D::ACT_MIN, static_cast<uint8_t>(d.act_min));
  put(w, D::ACT_MAX, static_cast<uint8_t>(d.act_max));
  put(w, D::TAG, d.tag);
  DescriptorBytes out;
  std::memcpy(out.data(), w.data(), out.size());  // little-endian host
  return out;
}

Descriptor decode(std::span<const uint8_t, spec::kDescBytes> bytes) {
  namespace D = spec::desc;
  Words w;
  std::memcpy(w.data(), bytes.data(), bytes.size());
  Descriptor d;
  d.opcode = static_cast<uint8_t>(get(w, D::OPCODE));
  d.out_mode = static_cast<uint8_t>(get(w, D::OUT_MODE));
  d.precision = static_cast<uint8_t>(get(w, D::PRECISION));
  d.flags = w[0] & 0xffff0000u;
  d.m = static_cast<uint32_t>(get(w, D::M));
  d.n = static_cast<uint32_t>(get(w, D::N));
  d.k = static_cast<uint32_t>(get(w, D::K));
  d.a_addr = get(w, D::A_ADDR);
  d.b_addr = get(w, D::B_ADDR);
  d.c_addr = get(w, D::C_ADDR);
  d.cin_addr = get(w, D::CIN_ADDR);
  d.bias_addr = get(w, D::BIAS_ADDR);
  d.mult_addr = get(w, D::MULT_ADDR);
  d.shift_addr = get(w, D::SHIFT_ADDR);
  d.lda = static_cast<uint32_t>(get(w, D::LDA));
  d.ldb = static_cast<uint32_t>(get(w, D::LDB));
  d.ldc = static_cast<uint32_t>(get(w, D::LDC));
  d.ldcin = static_cast<uint32_t>(get(w, D::LDCIN));
  d.out_zp = static_cast<int8_t>(get(w, D::OUT_ZP));
  d.act_min = static_cast<int8_t>(get(w, D::ACT_MIN));
  d.act_max = static_cast<int8_t>(get(w, D::ACT_MAX));
  d.tag = static_cast<uint32_t>(get(w, D::TAG));
  return d;
}

}  // namespace tessera
