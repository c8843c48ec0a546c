#include "tessera/model/golden.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "tessera/model/bf16_numerics.hpp"
#include "tessera/model/numerics.hpp"

namespace tessera {

using spec::ErrorCode;
namespace D = spec::desc;

std::string describe(const Fault& f) {
  return fmt::format("{} at {:#x}", spec::to_string(f.code), f.addr);
}

Fault validate(const Descriptor& d, uint64_t desc_addr, const EngineConfig& cfg) {
  const auto op = static_cast<spec::Opcode>(d.opcode);
  if (op != spec::Opcode::kGemm && op != spec::Opcode::kNop) return {ErrorCode::kOpcode, desc_addr};
  if (op == spec::Opcode::kNop) return {};
  const bool bf16 = d.bf16();
  if (d.precision != static_cast<uint8_t>(spec::Precision::kInt8) && !(bf16 && cfg.bf16))
    return {ErrorCode::kPrecision, desc_addr};
  const bool fold = d.has(D::FLAG_FOLD);
  // Each precision has its two output modes; RELU is the float modes' (int8 clamps instead).
  const bool mode_ok = bf16 ? d.out_mode >= static_cast<uint8_t>(spec::OutMode::kFp32)
                            : d.out_mode <= static_cast<uint8_t>(spec::OutMode::kInt8);
  if (!mode_ok || (d.has(D::FLAG_RELU) && !bf16) ||
      (fold && (!cfg.fold || bf16 || d.int8_out() || d.has(D::FLAG_BIAS) || d.has(D::FLAG_ACCUMULATE))))
    return {ErrorCode::kMode, desc_addr};
  if (d.m == 0 || d.n == 0 || d.k == 0 || d.m > spec::kDimMax || d.n > spec::kDimMax ||
      d.k > (bf16 ? cfg.k_max / 2 : cfg.k_max) || (fold && (d.m > cfg.rows / 2 || d.k > cfg.k_max / 2)))
    return {ErrorCode::kDim, desc_addr};
  if (d.int8_out() && d.act_min > d.act_max) return {ErrorCode::kParam, desc_addr};

  const bool acc = d.has(D::FLAG_ACCUMULATE), bias = d.has(D::FLAG_BIAS), q = d.int8_out();
  // Every used address and stride, in the order the engine checks them.
  const struct {
    uint64_t value;
    bool used, is_addr;
  } items[] = {
      {d.a_addr, true, true},         {d.lda, true, false},       {d.b_addr, true, true},
      {d.ldb, true, false},           {d.c_addr, true, true},     {d.ldc, true, false},
      {d.cin_addr, acc, true},        {d.ldcin, acc, false},      {d.bias_addr, bias, true},
      {d.mult_addr, q, true},         {d.shift_addr, q, true},
  };
  for (const auto& it : items)
    if (it.used && it.value % spec::kAlignBytes != 0) return {ErrorCode::kAlign, it.value};
  if (d.lda < uint64_t{d.k} * d.in_bytes()) return {ErrorCode::kStride, d.lda};
  if (d.ldb < uint64_t{d.n} * d.in_bytes()) return {ErrorCode::kStride, d.ldb};
  if (d.ldc < uint64_t{d.n} * d.out_bytes()) return {ErrorCode::kStride, d.ldc};
  if (acc && d.ldcin < uint64_t{d.n} * 4) return {ErrorCode::kStride, d.ldcin};
  const uint64_t limit = cfg.addr_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << cfg.addr_bits);
  for (const auto& it : items)
    if (it.used && it.is_addr && it.value >= limit) return {ErrorCode::kAddr, it.value};
  return {};
}

namespace {

// The bytes the engine reads for a matrix of `rows` rows of `row_bytes` at `stride`, rounded out
// to whole beats as the RTL fetches them. Returns the first address outside memory, if any.
bool outside(const Memory& mem, uint64_t addr, uint64_t rows, uint64_t stride, uint64_t row_bytes,
             uint32_t beat, uint64_t& bad) {
  const uint64_t last_row = addr + (rows - 1) * stride;
  const uint64_t end = (last_row + row_bytes + beat - 1) / beat * beat;
  if (mem.contains(addr, end - addr)) return false;
  bad = std::max<uint64_t>(addr, mem.size() / beat * beat);
  return true;
}

// The BF16 precision on a checked descriptor: each PE's sum is exact in block floating point and
// rounded once (bf16_numerics.hpp); then the epilogue adds C_in, then the bias, each rounded,
// applies RELU and rounds to the output mode.
void execute_bf16(const Descriptor& d, Memory& mem, const EngineConfig& cfg, const FaultConfig& stuck) {
  using numerics::kFixedBitsA, numerics::kFixedBitsB;
  const bool acc = d.has(D::FLAG_ACCUMULATE), bias = d.has(D::FLAG_BIAS), relu = d.has(D::FLAG_RELU);
  const bool bf16_out = d.out_mode == static_cast<uint8_t>(spec::OutMode::kBf16);
  const uint64_t kn = uint64_t{d.k} * d.n;
  // B: each column's block and its fixed-point operands (as doubles: every partial sum below is an
  // integer under 2^53, so the double sums are exact), and whether any B operand is infinite.
  std::vector<uint16_t> b(kn), a(d.k);
  for (uint32_t k = 0; k < d.k; ++k)
    for (uint32_t n = 0; n < d.n; ++n) b[uint64_t{k} * d.n + n] = mem.load<uint16_t>(d.b_addr + uint64_t{k} * d.ldb + 2ull * n);
  std::vector<numerics::Bf16Block> bb(d.n);
  bool b_inf = false;
  for (uint64_t i = 0; i < kn; ++i) bb[i % d.n].add(b[i]), b_inf |= numerics::bf16_is_inf(b[i]);
  std::vector<double> bf(kn), af(d.k), sums(d.n);
  for (uint64_t i = 0; i < kn; ++i) bf[i] = numerics::bf16_fixed(b[i], bb[i % d.n].exp, kFixedBitsB);
  std::vector<uint32_t> row(d.n);
  for (uint32_t m = 0; m < d.m; ++m) {
    numerics::Bf16Block ba;
    bool a_inf = false;
    for (uint32_t k = 0; k < d.k; ++k) {
      ba.add(a[k] = mem.load<uint16_t>(d.a_addr + uint64_t{m} * d.lda + 2ull * k));
      a_inf |= numerics::bf16_is_inf(a[k]);
    }
    for (uint32_t k = 0; k < d.k; ++k) af[k] = numerics::bf16_fixed(a[k], ba.exp, kFixedBitsA);
    std::fill(sums.begin(), sums.end(), 0.0);
    for (uint32_t k = 0; k < d.k; ++k) {
      if (af[k] == 0) continue;
      const double* bk = &bf[uint64_t{k} * d.n];
      for (uint32_t n = 0; n < d.n; ++n) sums[n] += af[k] * bk[n];
    }
    const bool as_stuck = stuck.kind == FaultConfig::Kind::kStuck && m % cfg.rows == stuck.row;
    for (uint32_t n = 0; n < d.n; ++n) {
      numerics::Bf16Sum sum{.s = static_cast<int64_t>(sums[n]), .ea = ba.exp, .eb = bb[n].exp, .nan = ba.nan || bb[n].nan, .specials = {}};
      if (a_inf || b_inf)
        for (uint32_t k = 0; k < d.k; ++k) sum.specials.add(a[k], b[uint64_t{k} * d.n + n]);
      // As for int8, PE (m % R, n % C) has the stuck bit, here in the low 32 bits of its sum.
      if (as_stuck && n % cfg.cols == stuck.col) sum = sum.with_low_bits(stuck.force(static_cast<uint32_t>(sum.s)));
      row[n] = sum.fp32();
    }
    for (uint32_t n = 0; n < d.n; ++n) {
      uint32_t v = row[n];
      if (acc) v = numerics::fp32_add(v, mem.load<uint32_t>(d.cin_addr + uint64_t{m} * d.ldcin + 4ull * n));
      if (bias) v = numerics::fp32_add(v, mem.load<uint32_t>(d.bias_addr + 4ull * n));
      if (relu) v = numerics::fp32_relu(v);
      const uint64_t out = d.c_addr + uint64_t{m} * d.ldc + uint64_t{n} * d.out_bytes();
      if (bf16_out)
        mem.store<uint16_t>(out, numerics::fp32_to_bf16(v));
      else
        mem.store<uint32_t>(out, v);
    }
  }
}

}  // namespace

Fault execute(const Descriptor& d, uint64_t desc_addr, Memory& mem, const EngineConfig& cfg,
              const FaultConfig& stuck) {
  if (Fault f = validate(d, desc_addr, cfg)) return f;
  if (static_cast<spec::Opcode>(d.opcode) == spec::Opcode::kNop) return {};

  const bool acc = d.has(D::FLAG_ACCUMULATE), bias = d.has(D::FLAG_BIAS), q = d.int8_out();
  const uint32_t beat = cfg.axi_bytes;
  uint64_t bad = 0;
  const uint32_t in = d.in_bytes();
  if (outside(mem, d.a_addr, d.m, d.lda, uint64_t{in} * d.k, beat, bad) ||
      outside(mem, d.b_addr, d.k, d.ldb, uint64_t{in} * d.n, beat, bad) ||
      (acc && outside(mem, d.cin_addr, d.m, d.ldcin, uint64_t{4} * d.n, beat, bad)) ||
      (bias && outside(mem, d.bias_addr, 1, 0, uint64_t{4} * d.n, beat, bad)) ||
      (q && (outside(mem, d.mult_addr, 1, 0, uint64_t{4} * d.n, beat, bad) ||
             outside(mem, d.shift_addr, 1, 0, d.n, beat, bad))))
    return {ErrorCode::kAxiRd, bad};
  if (q)
    for (uint32_t n = 0; n < d.n; ++n) {
      const int s = mem.load<int8_t>(d.shift_addr + n);
      if (s < spec::kShiftMin || s > spec::kShiftMax) return {ErrorCode::kParam, d.shift_addr + n};
    }
  if (outside(mem, d.c_addr, d.m, d.ldc, uint64_t{d.out_bytes()} * d.n, 1, bad)) return {ErrorCode::kAxiWr, bad};
  if (d.bf16()) {
    execute_bf16(d, mem, cfg, stuck);
    return {};
  }

  std::vector<int32_t> row(d.n);
  for (uint32_t m = 0; m < d.m; ++m) {
    // |a*b| <= 2^14 and K <= 2^16, so the product sum cannot overflow int32 before the adds below.
    std::fill(row.begin(), row.end(), 0);
    const int8_t* a = reinterpret_cast<const int8_t*>(mem.data() + d.a_addr + uint64_t{m} * d.lda);
    for (uint32_t k = 0; k < d.k; ++k) {
      const int32_t av = a[k];
      if (av == 0) continue;
      const int8_t* b = reinterpret_cast<const int8_t*>(mem.data() + d.b_addr + uint64_t{k} * d.ldb);
      for (uint32_t n = 0; n < d.n; ++n) row[n] += av * b[n];
    }
    if (stuck.kind == FaultConfig::Kind::kStuck && m % cfg.rows == stuck.row)  // PE (m % R, n % C) sums C[m][n]
      for (uint32_t n = stuck.col; n < d.n; n += cfg.cols)
        row[n] = static_cast<int32_t>(stuck.force(static_cast<uint32_t>(row[n])));
    for (uint32_t n = 0; n < d.n; ++n) {
      int32_t v = row[n];
      if (acc) v = numerics::wrap_add(v, mem.load<int32_t>(d.cin_addr + uint64_t{m} * d.ldcin + 4ull * n));
      if (bias) v = numerics::wrap_add(v, mem.load<int32_t>(d.bias_addr + 4ull * n));
      const uint64_t out = d.c_addr + uint64_t{m} * d.ldc + uint64_t{n} * d.out_bytes();
      if (q)
        mem.store<int8_t>(out, numerics::requantize(v, mem.load<int32_t>(d.mult_addr + 4ull * n),
                                                    mem.load<int8_t>(d.shift_addr + n), d.out_zp,
                                                    d.act_min, d.act_max));
      else
        mem.store<int32_t>(out, v);
    }
  }
  return {};
}

std::string describe(const ActionCounts& a) {
  return fmt::format("steps {} tiles {} descs {} spad_read_bytes {}", a.steps, a.tiles, a.descs, a.spad_read_bytes);
}

ActionCounts count_actions(const Descriptor& d, const EngineConfig& cfg) {
  if (static_cast<spec::Opcode>(d.opcode) != spec::Opcode::kGemm) return actions_of_tiles(0, d, cfg);
  const uint64_t r = cfg.rows, block_cols = d.has(spec::desc::FLAG_FOLD) ? 2 * cfg.cols : cfg.cols;
  return actions_of_tiles((d.m + r - 1) / r * ((d.n + block_cols - 1) / block_cols), d, cfg);
}

ActionCounts actions_of_tiles(uint64_t tiles, const Descriptor& d, const EngineConfig& cfg) {
  const uint64_t r = cfg.rows, c = cfg.cols, block_cols = d.has(spec::desc::FLAG_FOLD) ? 2 * c : c;
  const uint64_t row_bytes = (d.has(spec::desc::FLAG_ACCUMULATE) ? 4 * c : 0) +
                             (d.has(spec::desc::FLAG_BIAS) ? 4 * c : 0) + (d.int8_out() ? 5 * c : 0);
  ActionCounts a;
  a.descs = 1;
  a.tiles = tiles;
  a.steps = tiles * d.k;
  a.spad_read_bytes = a.steps * (r + block_cols) * d.in_bytes() + tiles * r * row_bytes;
  return a;
}

}  // namespace tessera
