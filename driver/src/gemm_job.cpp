#include "tessera/driver/gemm_job.hpp"
#include "tessera/model/golden.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace tessera {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Where each operand sits: offsets from a base, with aligned row pitches.
struct Layout {
  uint64_t lda, ldb, ldc, ldcin, a, b, c, cin, bias, mult, shift, total;
  Layout(const GemmProblem& p) {
    const auto& r = p.req;
    const uint64_t al = spec::kAlignBytes;
    lda = align_up(uint64_t{r.k} * p.in_bytes(), al) + r.pad;
    ldb = align_up(uint64_t{r.n} * p.in_bytes(), al) + r.pad;
    ldc = align_up(uint64_t{r.n} * p.out_bytes(), al) + r.pad;
    ldcin = align_up(uint64_t{r.n} * 4, al) + r.pad;
    a = 0;
    b = a + align_up(r.m * lda, al);
    c = b + align_up(uint64_t{r.k} * ldb, al);
    cin = c + align_up(r.m * ldc, al);
    bias = cin + (r.accumulate ? align_up(r.m * ldcin, al) : 0);
    mult = bias + align_up(4ull * r.n, al);
    shift = mult + align_up(4ull * r.n, al);
    total = shift + align_up(r.n, al);
  }
};

Descriptor describe(const GemmProblem& p, const Layout& l, uint64_t base) {
  Descriptor d;
  d.opcode = static_cast<uint8_t>(spec::Opcode::kGemm);
  using spec::OutMode;
  d.precision = static_cast<uint8_t>(p.req.bf16 ? spec::Precision::kBf16 : spec::Precision::kInt8);
  d.out_mode = static_cast<uint8_t>(p.req.bf16 ? (p.req.bf16_out ? OutMode::kBf16 : OutMode::kFp32)
                                               : (p.req.int8_out ? OutMode::kInt8 : OutMode::kInt32));
  d.flags = (p.req.bias ? spec::desc::FLAG_BIAS : 0) | (p.req.accumulate ? spec::desc::FLAG_ACCUMULATE : 0) |
            (p.req.fold ? spec::desc::FLAG_FOLD : 0) | (p.req.bf16 && p.req.relu ? spec::desc::FLAG_RELU : 0);
  d.m = p.req.m;
  d.n = p.req.n;
  d.k = p.req.k;
  d.a_addr = base + l.a;
  d.b_addr = base + l.b;
  d.c_addr = base + l.c;
  d.cin_addr = base + l.cin;
  d.bias_addr = base + l.bias;
  d.mult_addr = base + l.mult;
  d.shift_addr = base + l.shift;
  d.lda = static_cast<uint32_t>(l.lda);
  d.ldb = static_cast<uint32_t>(l.ldb);
  d.ldc = static_cast<uint32_t>(l.ldc);
  d.ldcin = static_cast<uint32_t>(l.ldcin);
  d.out_zp = p.out_zp;
  d.act_min = p.act_min;
  d.act_max = p.act_max;
  d.tag = static_cast<uint32_t>(p.req.seed);
  return d;
}

// Every operand at its place in one image (the device buffer, or the golden model's memory).
std::vector<uint8_t> image(const GemmProblem& p, const Layout& l) {
  std::vector<uint8_t> img(l.total, 0);
  const auto& r = p.req;
  const void* a = r.bf16 ? static_cast<const void*>(p.a_bf16.data()) : p.a.data();
  const void* b = r.bf16 ? static_cast<const void*>(p.b_bf16.data()) : p.b.data();
  const uint64_t a_row = uint64_t{r.k} * p.in_bytes(), b_row = uint64_t{r.n} * p.in_bytes();
  for (uint32_t m = 0; m < r.m; ++m)
    std::memcpy(&img[l.a + m * l.lda], static_cast<const uint8_t*>(a) + m * a_row, a_row);
  for (uint32_t k = 0; k < r.k; ++k)
    std::memcpy(&img[l.b + k * l.ldb], static_cast<const uint8_t*>(b) + k * b_row, b_row);
  if (r.accumulate)
    for (uint32_t m = 0; m < r.m; ++m) std::memcpy(&img[l.cin + m * l.ldcin], &p.cin[uint64_t{m} * r.n], 4ull * r.n);
  if (r.bias) std::memcpy(&img[l.bias], p.bias.data(), 4ull * r.n);
  if (r.int8_out && !r.bf16) {
    std::memcpy(&img[l.mult], p.mult.data(), 4ull * r.n);
    std::memcpy(&img[l.shift], p.shift.data(), r.n);
  }
  return img;
}

std::vector<uint8_t> unpack_c(const GemmProblem& p, const Layout& l, const uint8_t* img) {
  const uint64_t row = uint64_t{p.req.n} * p.out_bytes();
  std::vector<uint8_t> c(row * p.req.m);
  for (uint32_t m = 0; m < p.req.m; ++m) std::memcpy(&c[m * row], img + l.c + m * l.ldc, row);
  return c;
}

}  // namespace

Descriptor gemm_descriptor(const GemmProblem& p, uint64_t base) { return describe(p, Layout(p), base); }

uint16_t random_bf16(std::mt19937_64& rng, bool specials) {
  const auto sign = static_cast<uint16_t>((rng() & 1) << 15), frac = static_cast<uint16_t>(rng() & 0x7f);
  if (specials && rng() % 8 == 0) {
    switch (rng() % 6) {
      case 0: return sign;                                                           // +-0
      case 1: return sign | frac | 1;                                                // subnormal
      case 2: return sign | static_cast<uint16_t>((200 + rng() % 54) << 7) | frac;   // up to 2^126
      case 3: return sign | static_cast<uint16_t>((1 + rng() % 54) << 7) | frac;     // down to 2^-126
      case 4: return sign | 0x7f80;                                                  // +-inf
      default: return sign | 0x7f80 | frac | 0x40;                                   // NaN
    }
  }
  return sign | static_cast<uint16_t>((120 + rng() % 16) << 7) | frac;
}

uint32_t random_fp32(std::mt19937_64& rng, double spread) {
  std::normal_distribution<float> normal(0.0f, static_cast<float>(spread));
  return std::bit_cast<uint32_t>(normal(rng));
}

GemmProblem GemmProblem::random(const GemmRequest& req) {
  GemmProblem p;
  p.req = req;
  std::mt19937_64 rng(req.seed);
  if (req.bf16) {
    p.a_bf16.resize(uint64_t{req.m} * req.k);
    p.b_bf16.resize(uint64_t{req.k} * req.n);
    for (auto& v : p.a_bf16) v = random_bf16(rng, req.specials);
    for (auto& v : p.b_bf16) v = random_bf16(rng, req.specials);
    const double spread = std::sqrt(double(req.k));
    if (req.accumulate) {
      p.cin.resize(uint64_t{req.m} * req.n);
      for (auto& v : p.cin) v = static_cast<int32_t>(random_fp32(rng, spread));
    }
    if (req.bias) {
      p.bias.resize(req.n);
      for (auto& v : p.bias) v = static_cast<int32_t>(random_fp32(rng, spread));
    }
    return p;
  }
  std::uniform_int_distribution<int> i8(-128, 127);
  p.a.resize(uint64_t{req.m} * req.k);
  p.b.resize(uint64_t{req.k} * req.n);
  for (auto& v : p.a) v = static_cast<int8_t>(i8(rng));
  for (auto& v : p.b) v = static_cast<int8_t>(i8(rng));
  if (req.accumulate) {
    std::uniform_int_distribution<int32_t> big(-(1 << 24), 1 << 24);
    p.cin.resize(uint64_t{req.m} * req.n);
    for (auto& v : p.cin) v = big(rng);
  }
  if (req.bias) {
    std::uniform_int_distribution<int32_t> b(-(1 << 20), 1 << 20);
    p.bias.resize(req.n);
    for (auto& v : p.bias) v = b(rng);
  }
  if (req.int8_out) {
    // Scale so outputs spread over the int8 range: the accumulator's spread is about
    // 128^2 / 3 * sqrt(K); aim for a spread of ~40 and jitter the shift per column.
    const double spread = 128.0 * 128.0 / 3.0 * std::sqrt(double(req.k));
    const int base = static_cast<int>(std::floor(std::log2(40.0 / spread)));
    std::uniform_int_distribution<int32_t> mult(1 << 30, std::numeric_limits<int32_t>::max());
    std::uniform_int_distribution<int> jitter(-1, 1), zp(-10, 10);
    p.mult.resize(req.n);
    p.shift.resize(req.n);
    for (auto& v : p.mult) v = mult(rng);
    for (auto& v : p.shift) v = static_cast<int8_t>(std::clamp(base + jitter(rng), spec::kShiftMin, spec::kShiftMax));
    p.out_zp = static_cast<int8_t>(zp(rng));
    p.act_min = req.relu ? p.out_zp : -128;
  }
  return p;
}

std::vector<uint8_t> golden_gemm(const GemmProblem& p, const EngineConfig& cfg) {
  const Layout l(p);
  const std::vector<uint8_t> img = image(p, l);
  Memory mem(l.total + cfg.axi_bytes);
  mem.write(0, img);
  if (const Fault f = execute(describe(p, l, 0), 0, mem, cfg))
    throw std::invalid_argument(fmt::format("the engine cannot run this GEMM: {}", describe(f)));
  return unpack_c(p, l, mem.data());
}

GemmOutcome run_gemm(driver::Device& dev, const GemmProblem& p, const driver::WaitOptions& wait) {
  const Layout l(p);
  const EngineConfig cfg = dev.properties().engine();
  if (p.req.bf16 && !cfg.bf16)
    throw driver::UsageError("this engine has no BF16 precision (CFG_ARRAY.BF16 is clear)");
  const uint32_t k_max = p.req.bf16 ? cfg.k_max / 2 : cfg.k_max;
  if (p.req.k > k_max)
    throw driver::UsageError(fmt::format("K = {} is above this engine's {}k_max = {}", p.req.k,
                                         p.req.bf16 ? "BF16 " : "", k_max));
  if (p.req.pad % spec::kAlignBytes)
    throw driver::UsageError(fmt::format("row pitch padding {} is not a multiple of {}", p.req.pad, spec::kAlignBytes));
  driver::Buffer buf = dev.alloc(l.total);
  dev.write(buf, 0, image(p, l));
  const Descriptor d = describe(p, l, buf.addr());

  GemmOutcome out;
  const driver::Counters before = dev.counters();
  const auto sb_before = dev.backend().scoreboard();
  const auto t0 = std::chrono::steady_clock::now();
  dev.wait(dev.submit(std::span<const Descriptor>(&d, 1)), wait);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.counters = dev.counters() - before;

  std::vector<uint8_t> img(l.total);
  dev.read(buf, 0, img);
  out.c = unpack_c(p, l, img.data());
  out.expected = golden_gemm(p, cfg);
  const std::vector<uint8_t>& want = out.expected;
  out.bit_exact = true;
  const uint32_t es = p.out_bytes();
  for (size_t i = 0; i < want.size(); ++i) {
    if (out.c[i] == want[i]) continue;
    const uint64_t m = i / (uint64_t{p.req.n} * es), n = i % (uint64_t{p.req.n} * es) / es;
    out.bit_exact = false;
    out.mismatch = fmt::format("C[{}][{}] byte {}: device {:#04x}, golden model {:#04x}", m, n, i % es, out.c[i], want[i]);
    break;
  }
  out.scoreboard = dev.backend().scoreboard();
  // The scoreboard counts over the device's life: only what it found during this GEMM counts here.
  if (out.scoreboard && sb_before &&
      (out.scoreboard->mismatches > sb_before->mismatches || (sb_before->ok && !out.scoreboard->ok))) {
    out.bit_exact = false;
    if (out.mismatch.empty()) out.mismatch = "scoreboard: " + out.scoreboard->detail;
  }
  return out;
}

}  // namespace tessera
