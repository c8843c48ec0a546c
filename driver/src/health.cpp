#include "tessera/driver/health.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "tessera/driver/gemm_job.hpp"
#include "tessera/model/bf16_numerics.hpp"
#include "tessera/model/faults.hpp"

namespace tessera::driver {

namespace csr = spec::csr;
using Clock = std::chrono::steady_clock;

std::string_view to_string(Level level) {
  switch (level) {
    case Level::kQuick: return "quick";
    case Level::kStandard: return "standard";
    case Level::kStress: return "stress";
  }
  return "?";
}

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kSkip: return "skip";
    case Verdict::kIncomplete: return "incomplete";
  }
  return "?";
}

Level parse_level(std::string_view text) {
  for (Level l : {Level::kQuick, Level::kStandard, Level::kStress})
    if (to_string(l) == text) return l;
  throw UsageError(fmt::format("unknown level '{}' (levels: quick, standard, stress)", text));
}

Verdict overall(const std::vector<CheckResult>& tests, bool strict) {
  auto any = [&](Verdict v) {
    return std::any_of(tests.begin(), tests.end(), [&](const CheckResult& t) { return t.result == v; });
  };
  if (tests.empty() || any(Verdict::kFail) || (strict && any(Verdict::kSkip))) return Verdict::kFail;
  if (any(Verdict::kIncomplete)) return Verdict::kIncomplete;
  return Verdict::kPass;
}

namespace {

// Fixed data for the known-answer checks, so that they mean the same on every run and device.
constexpr uint64_t kKnownAnswerSeed = 0x7e55e1a;
constexpr size_t kMemChunk = 4u << 20;

struct Outcome {
  Verdict result;
  std::string detail;
};
Outcome pass(std::string detail) { return {Verdict::kPass, std::move(detail)}; }
Outcome fail(std::string detail) { return {Verdict::kFail, std::move(detail)}; }

// What the checks share. Owned jointly by the runner and the check's thread, so that a thread
// left behind after a time limit never outlives what it uses.
struct Context {
  DeviceSpec spec;
  HealthOptions opts;
  std::shared_ptr<Device> dev;
  Clock::time_point deadline;

  Device& device() { return *dev; }
  const Properties& props() const { return dev->properties(); }
  // Waits end with a diagnosis before the check's hard limit does.
  WaitOptions wait() const {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    WaitOptions w;
    w.timeout_s = std::max(0.5, left - 1.0);
    return w;
  }
};

using CheckFn = std::function<Outcome(Context&)>;

struct Check {
  std::string name;
  Level level;
  double timeout_s;
  CheckFn run;
};

std::string shape_name(const GemmRequest& r) {
  std::string s = fmt::format("{}x{}x{} {}", r.m, r.n, r.k,
                              r.bf16 ? (r.bf16_out ? "bf16->bf16" : "bf16->fp32") : r.int8_out ? "int8" : "int32");
  if (r.bias) s += "+bias";
  if (r.relu) s += "+relu";
  if (r.accumulate) s += "+accumulate";
  if (r.pad) s += fmt::format(" (pitch +{})", r.pad);
  return s;
}

// For 32-bit output, the stuck bit of PE (r, c)'s result register that explains every value it
// gave, if one does: each bit and value is tried on the PE's true sums (before C_in and bias are
// added, as the register holds them; with BF16 only where there are none, as a float add is not
// undone by a subtraction).
std::string stuck_bit(const GemmProblem& p, const GemmOutcome& o, uint32_t r, uint32_t c, uint32_t R, uint32_t C) {
  const uint32_t M = p.req.m, N = p.req.n, K = p.req.k;
  if (p.req.bf16 && (p.req.accumulate || p.req.bias)) return "";
  // {the PE's true sum, what came out} per element; BF16's sum is the fixed-point one, whose low 32
  // bits the register holds beside the rest (bf16_numerics.hpp)
  std::vector<std::pair<uint32_t, uint32_t>> sums;
  std::vector<numerics::Bf16Sum> bf16_sums;
  for (uint32_t m = r; m < M; m += R)
    for (uint32_t n = c; n < N; n += C) {
      uint32_t sum = 0, got = 0;
      if (p.req.bf16) {
        bf16_sums.push_back(numerics::bf16_dot(&p.a_bf16[uint64_t{m} * K], 1, &p.b_bf16[n], N, K));
        sum = static_cast<uint32_t>(bf16_sums.back().s);
      } else {
        for (uint32_t k = 0; k < K; ++k) sum += static_cast<uint32_t>(p.a[uint64_t{m} * K + k] * p.b[uint64_t{k} * N + n]);
      }
      std::memcpy(&got, &o.c[(uint64_t{m} * N + n) * 4], 4);
      if (p.req.accumulate) got -= static_cast<uint32_t>(p.cin[uint64_t{m} * N + n]);
      if (p.req.bias) got -= static_cast<uint32_t>(p.bias[n]);
      sums.emplace_back(sum, got);
    }
  // what the register's forced bits give out
  auto out = [&](size_t i, uint32_t forced) { return p.req.bf16 ? bf16_sums[i].with_low_bits(forced).fp32() : forced; };
  for (uint32_t bit = 0; bit < 32; ++bit)
    for (bool value : {true, false}) {
      FaultConfig f;
      f.kind = FaultConfig::Kind::kStuck;
      f.bit = bit;
      f.value = value;
      bool explains = true;
      for (size_t i = 0; i < sums.size() && explains; ++i) explains = out(i, f.force(sums[i].first)) == sums[i].second;
      if (explains)
        return fmt::format("; bit {} of its result register is stuck at {} (that explains every sum it gave)", bit,
                           value ? 1 : 0);
    }
  return "";
}

// Explains wrong output. PE (m % R, n % C) computes C[m][n] in every tile, so wrong elements
// that all belong to one PE, across more than one tile, point at that PE; anything else is data
// corrupted on its way in or out.
std::string diagnose(const GemmProblem& p, const GemmOutcome& o, const Properties& props) {
  const uint32_t es = p.out_bytes(), M = p.req.m, N = p.req.n, R = props.rows, C = props.cols;
  auto element = [&](const std::vector<uint8_t>& v, uint64_t i) {
    uint32_t x = 0;
    std::memcpy(&x, &v[i * es], es);
    return x;
  };
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> by_pe;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> by_tile;
  uint64_t wrong = 0, first = UINT64_MAX;
  for (uint64_t i = 0; i < uint64_t{M} * N; ++i) {
    if (element(o.c, i) == element(o.expected, i)) continue;
    const uint32_t m = static_cast<uint32_t>(i / N), n = static_cast<uint32_t>(i % N);
    ++wrong;
    ++by_pe[{m % R, n % C}];
    ++by_tile[{m / R, n / C}];
    first = std::min(first, i);
  }
  if (wrong == 0) return o.mismatch;  // the scoreboard disagreed though the output is right
  const auto fm = first / N, fn = first % N;
  // a float as its value and bits (bf16: the top half of an fp32)
  auto as_float = [&](uint32_t bits) {
    const uint32_t f32 = es == 2 ? bits << 16 : bits;
    return fmt::format("{} ({:#0{}x})", std::bit_cast<float>(f32), bits, 2 + 2 * es);
  };
  const std::string first_text =
      p.req.bf16 ? fmt::format("C[{}][{}] = {} instead of {}", fm, fn, as_float(element(o.c, first)),
                               as_float(element(o.expected, first)))
      : es == 4  ? fmt::format("C[{}][{}] = {} instead of {}", fm, fn, static_cast<int32_t>(element(o.c, first)),
                               static_cast<int32_t>(element(o.expected, first)))
                 : fmt::format("C[{}][{}] = {} instead of {}", fm, fn, static_cast<int8_t>(element(o.c, first)),
                               static_cast<int8_t>(element(o.expected, first)));
  if (by_pe.size() == 1 && by_tile.size() > 1) {
    const auto [r, c] = by_pe.begin()->first;
    std::string text = fmt::format(
        "faulty PE at row {}, column {}: all {} wrong elements of C are its sums (C[m][n] with m % {} = {} and "
        "n % {} = {}), in {} tiles; first {}",
        r, c, wrong, R, r, C, c, by_tile.size(), first_text);
    if (es == 4) text += stuck_bit(p, o, r, c, R, C);
    return text;
  }
  if (by_pe.size() == 1) {
    const auto [r, c] = by_pe.begin()->first;
    return fmt::format("{} wrong element{} of C, all from PE at row {}, column {} but in one tile only: a faulty PE "
                       "or corrupted data, too few to tell; first {}",
                       wrong, wrong == 1 ? "" : "s", r, c, first_text);
  }
  return fmt::format("corrupted results: {} of {} elements of C wrong, spread over {} PEs and {} tiles (not one PE: "
                     "data corrupted on its way through the engine); first {}",
                     wrong, uint64_t{M} * N, by_pe.size(), by_tile.size(), first_text);
}

// Runs one GEMM; returns an empty string when it is bit-exact, else the diagnosis.
std::string gemm_error(Context& ctx, const GemmProblem& p, GemmOutcome* out = nullptr) {
  GemmOutcome o = run_gemm(ctx.device(), p, ctx.wait());
  std::string err;
  if (!o.bit_exact) err = fmt::format("{}: {}", shape_name(p.req), diagnose(p, o, ctx.props()));
  if (out) *out = std::move(o);
  return err;
}

// ---- quick -----------------------------------------------------------------------------------

Outcome check_open(Context& ctx) {
  if (!ctx.dev) ctx.dev = std::make_shared<Device>(ctx.spec);
  const auto& p = ctx.props();
  return pass(fmt::format("{}x{} array, {} MiB of device memory", p.rows, p.cols, p.mem_bytes >> 20));
}

Outcome check_identity(Context& ctx) {
  Backend& b = ctx.device().backend();
  const uint32_t id = b.csr_read(csr::ID), version = b.csr_read(csr::VERSION);
  if (id != spec::kEngineId) return fail(fmt::format("ID reads {:#010x}, expected {:#010x}", id, spec::kEngineId));
  if ((version >> 16) != spec::kVersionMajor)
    return fail(fmt::format("engine version {}.{}; this driver speaks version {}.x", version >> 16, version & 0xffff,
                            spec::kVersionMajor));
  return pass(fmt::format("ID {:#010x}, version {}.{}", id, version >> 16, version & 0xffff));
}

Outcome check_config(Context& ctx) {
  const auto& p = ctx.props();
  std::vector<std::string> bad;
  if (p.align != spec::kAlignBytes) bad.push_back(fmt::format("alignment {} (spec: {})", p.align, spec::kAlignBytes));
  if (p.k_max == 0) bad.push_back("k_max 0");
  if (p.axi_bytes < 4 || (p.axi_bytes & (p.axi_bytes - 1))) bad.push_back(fmt::format("AXI width {} bytes", p.axi_bytes));
  if (p.max_reads == 0) bad.push_back("0 reads in flight");
  if (p.addr_bits < 12 || p.addr_bits > 64) bad.push_back(fmt::format("{} address bits", p.addr_bits));
  // A simulated device was asked for a preset: its registers must say the same.
  if (ctx.spec.kind != "xdma") {
    const std::string want = ctx.spec.preset();
    if (p.preset != want) bad.push_back(fmt::format("preset '{}' requested, registers describe '{}'", want, p.preset));
  }
  const std::string what = fmt::format("{}x{} array, {}, k_max {}, {}-bit AXI, {} reads in flight, {}-bit addresses, "
                                       "{}-byte alignment: {}",
                                       p.rows, p.cols, p.bf16 ? "int8 and bf16" : "int8 only", p.k_max,
                                       p.axi_bytes * 8, p.max_reads, p.addr_bits, p.align,
                                       p.preset.empty() ? "no preset (a custom build)" : "preset " + p.preset);
  if (!bad.empty()) {
    std::string list;
    for (const auto& s : bad) list += (list.empty() ? "" : "; ") + s;
    return fail(list + " (" + what + ")");
  }
  return pass(what);
}

Outcome check_scratch(Context& ctx) {
  Backend& b = ctx.device().backend();
  std::vector<uint32_t> patterns = {0, 0xffffffff, 0xa5a5a5a5, 0x5a5a5a5a};
  for (uint32_t i = 0; i < 32; ++i) {
    patterns.push_back(1u << i);
    patterns.push_back(~(1u << i));
  }
  const uint32_t saved = b.csr_read(csr::SCRATCH);
  for (uint32_t v : patterns) {
    b.csr_write(csr::SCRATCH, v);
    if (const uint32_t r = b.csr_read(csr::SCRATCH); r != v)
      return fail(fmt::format("SCRATCH: wrote {:#010x}, read {:#010x} (bits {:#010x} differ)", v, r, v ^ r));
  }
  b.csr_write(csr::SCRATCH, saved);
  return pass(fmt::format("{} patterns written and read back (walking ones and zeros)", patterns.size()));
}

Outcome check_error_registers(Context& ctx) {
  Backend& b = ctx.device().backend();
  const uint32_t status = b.csr_read(csr::STATUS), code = b.csr_read(csr::ERR_CODE), irq = b.csr_read(csr::IRQ_STATUS);
  const uint64_t addr = b.csr_read(csr::ERR_ADDR_LO) | (uint64_t{b.csr_read(csr::ERR_ADDR_HI)} << 32);
  const uint32_t head = b.csr_read(csr::RING_HEAD), tail = b.csr_read(csr::RING_TAIL);
  if (status & (csr::STATUS_HALTED_MASK | csr::STATUS_RESETTING_MASK) || code || addr || (irq & csr::IRQ_STATUS_ERROR_MASK) ||
      head != tail)
    return fail(fmt::format("after a soft reset: STATUS {:#x}, ERR_CODE {} ({}), ERR_ADDR {:#x}, IRQ_STATUS {:#x}, "
                            "head {} tail {}",
                            status, code, spec::to_string(static_cast<spec::ErrorCode>(code)), addr, irq, head, tail));
  return pass("STATUS idle, ERR_CODE NONE, ERR_ADDR 0, no error interrupt, ring empty");
}

Outcome check_known_answer(Context& ctx) {
  const auto& p = ctx.props();
  GemmRequest req{.m = 2 * p.rows + 1, .n = 2 * p.cols + 1, .k = std::min<uint32_t>(33, p.k_max)};
  GemmProblem prob = GemmProblem::random(req);
  // Patterned operands: every PE sees both signs and the extremes.
  for (uint32_t m = 0; m < req.m; ++m)
    for (uint32_t k = 0; k < req.k; ++k) prob.a[uint64_t{m} * req.k + k] = static_cast<int8_t>((m * 37 + k * 11) % 256 - 128);
  for (uint32_t k = 0; k < req.k; ++k)
    for (uint32_t n = 0; n < req.n; ++n) prob.b[uint64_t{k} * req.n + n] = static_cast<int8_t>((k * 53 + n * 7) % 256 - 128);
  GemmOutcome o;
  if (auto err = gemm_error(ctx, prob, &o); !err.empty()) return fail(err);
  return pass(fmt::format("{}: bit-exact in {} cycles", shape_name(req), o.counters.busy_cycles));
}

// The BF16 datapath's known answer: patterned operands over both signs and many exponents, with
// a zero, a subnormal (read as zero), an infinity and a NaN at fixed places, so the PEs' float
// steps, the specials' paths and the epilogue's bf16 rounding all show. Where the engine was not
// built with BF16, there is nothing to check.
Outcome check_known_answer_bf16(Context& ctx) {
  const auto& p = ctx.props();
  if (!p.bf16) return {Verdict::kSkip, "the engine has no BF16 precision (CFG_ARRAY.BF16 clear)"};
  GemmRequest req{.m = 2 * p.rows + 1, .n = 2 * p.cols + 1, .k = std::min<uint32_t>(33, p.k_max / 2), .bf16 = true};
  GemmProblem prob = GemmProblem::random(req);
  auto pattern = [](uint32_t i, uint32_t j) {
    const uint32_t e = 119 + (i * 5 + j * 3) % 17, f = (i * 37 + j * 11) % 128;  // 2^-8 .. 2^8
    return static_cast<uint16_t>(((i + j) % 2) << 15 | e << 7 | f);
  };
  for (uint32_t m = 0; m < req.m; ++m)
    for (uint32_t k = 0; k < req.k; ++k) prob.a_bf16[uint64_t{m} * req.k + k] = pattern(m, k);
  for (uint32_t k = 0; k < req.k; ++k)
    for (uint32_t n = 0; n < req.n; ++n) prob.b_bf16[uint64_t{k} * req.n + n] = pattern(k + 3, n);
  prob.a_bf16[0] = 0x0000;                 // zero
  prob.a_bf16[req.k + 1] = 0x0001;         // subnormal
  prob.a_bf16[2 * req.k + 2] = 0x7f80;     // inf: row 2 becomes infinite or NaN
  prob.b_bf16[3 * req.n + 3] = 0xffc0;     // NaN: column 3
  GemmOutcome o;
  if (auto err = gemm_error(ctx, prob, &o); !err.empty()) return fail(err);
  return pass(fmt::format("{}: bit-exact in {} cycles", shape_name(req), o.counters.busy_cycles));
}

// ---- standard: memory ------------------------------------------------------------------------

// Writes pattern(word index) to every 8-byte word of device memory, then reads it all back.
Outcome memory_pass(Context& ctx, const char* what, const std::function<uint64_t(uint64_t)>& pattern) {
  Backend& b = ctx.device().backend();
  const uint64_t size = b.mem_size() / 8 * 8;
  std::vector<uint64_t> chunk(kMemChunk / 8), back(kMemChunk / 8);
  auto bytes = [](std::vector<uint64_t>& v, uint64_t n) { return std::span<uint8_t>(reinterpret_cast<uint8_t*>(v.data()), n); };
  for (uint64_t at = 0; at < size; at += kMemChunk) {
    const uint64_t n = std::min<uint64_t>(kMemChunk, size - at);
    for (uint64_t i = 0; i < n / 8; ++i) chunk[i] = pattern(at / 8 + i);
    b.mem_write(at, bytes(chunk, n));
  }
  uint64_t bad = 0, first = 0, got = 0, want = 0;
  for (uint64_t at = 0; at < size; at += kMemChunk) {
    const uint64_t n = std::min<uint64_t>(kMemChunk, size - at);
    b.mem_read(at, bytes(back, n));
    for (uint64_t i = 0; i < n / 8; ++i) {
      const uint64_t w = pattern(at / 8 + i);
      if (back[i] == w) continue;
      if (bad++ == 0) {
        first = at + i * 8;
        got = back[i];
        want = w;
      }
    }
  }
  if (bad)
    return fail(fmt::format("{}: {} of {} words wrong; first at {:#x}: wrote {:#018x}, read {:#018x}", what, bad,
                            size / 8, first, want, got));
  return pass("");
}

Outcome check_memory_data_bus(Context& ctx) {
  Backend& b = ctx.device().backend();
  const uint64_t size = b.mem_size() / 8 * 8;
  for (uint64_t addr : {uint64_t{0}, size / 2, size - 8})
    for (int inv = 0; inv < 2; ++inv)
      for (uint32_t bit = 0; bit < 64; ++bit) {
        const uint64_t w = inv ? ~(uint64_t{1} << bit) : uint64_t{1} << bit;
        uint64_t r = 0;
        b.mem_write(addr, std::span(reinterpret_cast<const uint8_t*>(&w), 8));
        b.mem_read(addr, std::span(reinterpret_cast<uint8_t*>(&r), 8));
        if (r != w)
          return fail(fmt::format("walking {} at {:#x}: wrote {:#018x}, read {:#018x}", inv ? "zeros" : "ones", addr, w, r));
      }
  return pass("walking ones and zeros over 64 data bits at the start, middle and end of memory");
}

Outcome check_memory_address_bus(Context& ctx) {
  // Each address line alone: a marker at offset 2^i must not show up at any other 2^j (or 0).
  Backend& b = ctx.device().backend();
  const uint64_t size = b.mem_size();
  std::vector<uint64_t> offsets = {0};
  for (uint64_t o = 8; o < size && o + 8 <= size; o <<= 1) offsets.push_back(o);
  auto put = [&](uint64_t a, uint64_t v) { b.mem_write(a, std::span(reinterpret_cast<const uint8_t*>(&v), 8)); };
  auto get = [&](uint64_t a) {
    uint64_t v = 0;
    b.mem_read(a, std::span(reinterpret_cast<uint8_t*>(&v), 8));
    return v;
  };
  constexpr uint64_t kBase = 0xaaaaaaaaaaaaaaaa, kMark = 0x5555555555555555;
  for (uint64_t o : offsets) put(o, kBase);
  for (uint64_t o : offsets) {
    put(o, kMark);
    for (uint64_t q : offsets)
      if (q != o && get(q) != kBase)
        return fail(fmt::format("writing {:#x} also changed {:#x}: address lines shorted or stuck", o, q));
    put(o, kBase);
  }
  return pass(fmt::format("{} address lines, no aliasing", offsets.size() - 1));
}

Outcome check_memory_address_in_address(Context& ctx) {
  if (auto o = memory_pass(ctx, "address in address", [](uint64_t i) { return i * 8; }); o.result != Verdict::kPass)
    return o;
  if (auto o = memory_pass(ctx, "inverted address", [](uint64_t i) { return ~(i * 8); }); o.result != Verdict::kPass)
    return o;
  return pass(fmt::format("every word of {} MiB held its own address, then its inverse",
                          ctx.device().backend().mem_size() >> 20));
}

Outcome check_memory_walking_ones(Context& ctx) {
  if (auto o = memory_pass(ctx, "walking ones", [](uint64_t i) { return uint64_t{1} << (i % 64); });
      o.result != Verdict::kPass)
    return o;
  if (auto o = memory_pass(ctx, "walking zeros", [](uint64_t i) { return ~(uint64_t{1} << (i % 64)); });
      o.result != Verdict::kPass)
    return o;
  return pass(fmt::format("walking ones, then walking zeros, over all {} MiB", ctx.device().backend().mem_size() >> 20));
}

// ---- standard: DMA, GEMMs, counters, throughput ----------------------------------------------

Outcome check_dma_host(Context& ctx) {
  // Host <-> device copies of odd sizes at odd offsets, with guard bytes around each that must
  // survive: a DMA that writes too much or too little shows up here.
  Device& dev = ctx.device();
  constexpr uint64_t kGuard = 256, kMax = (1u << 20) + 7;
  Buffer buf = dev.alloc(kMax + 64 + 2 * kGuard);
  std::mt19937_64 rng(ctx.opts.seed);
  uint64_t copies = 0, bytes = 0;
  for (uint64_t size : std::initializer_list<uint64_t>{1, 2, 3, 63, 64, 65, 4095, 4096, 4097, 65549, kMax})
    for (uint64_t offset : std::initializer_list<uint64_t>{0, 1, 7, 63}) {
      std::vector<uint8_t> window(size + 2 * kGuard, 0xc3), data(size), back(size + 2 * kGuard);
      for (auto& v : data) v = static_cast<uint8_t>(rng());
      dev.write(buf, offset, window);
      dev.write(buf, offset + kGuard, data);
      dev.read(buf, offset, back);
      for (uint64_t i = 0; i < back.size(); ++i) {
        const bool in = i >= kGuard && i < kGuard + size;
        const uint8_t want = in ? data[i - kGuard] : 0xc3;
        if (back[i] != want)
          return fail(fmt::format("{}-byte copy at offset {}: byte {} {} reads {:#04x}, expected {:#04x}", size,
                                  offset + kGuard, in ? i - kGuard : i,
                                  in ? "of the data" : (i < kGuard ? "of the guard before" : "of the guard after"),
                                  back[i], want));
      }
      ++copies;
      bytes += size;
    }
  return pass(fmt::format("{} copies each way, {} bytes, sizes 1 B to 1 MiB, offsets 0-63, guards intact", copies,
                          bytes));
}

Outcome check_dma_engine(Context& ctx) {
  // A GEMM with B = I copies A through the engine's read path into C through its write path.
  const auto& p = ctx.props();
  std::mt19937_64 rng(ctx.opts.seed);
  const uint32_t kk = std::min<uint32_t>(200, p.k_max);
  const struct {
    uint32_t m, k, pad;
  } cases[] = {{1, 1, 0}, {p.rows, std::min<uint32_t>(64, p.k_max), 0}, {3 * p.rows + 1, kk, 64}, {2 * p.rows, kk, 4096}};
  uint64_t moved = 0;
  for (const auto& c : cases) {
    GemmRequest req{.m = c.m, .n = c.k, .k = c.k, .seed = rng(), .pad = c.pad};
    GemmProblem prob = GemmProblem::random(req);
    std::fill(prob.b.begin(), prob.b.end(), int8_t{0});
    for (uint32_t i = 0; i < c.k; ++i) prob.b[uint64_t{i} * c.k + i] = 1;
    if (auto err = gemm_error(ctx, prob); !err.empty()) return fail("copy through the engine, " + err);
    moved += uint64_t{c.m} * c.k * 5;
  }
  return pass(fmt::format("{} copies through the engine (B = identity), {} bytes moved, pitches padded up to 4 KiB: "
                          "bit-exact",
                          std::size(cases), moved));
}

Outcome check_gemm_modes(Context& ctx) {
  const auto& p = ctx.props();
  // Three row blocks and three column blocks, the last ones partial: every PE, full and partial tiles.
  const uint32_t M = 2 * p.rows + 3, N = 2 * p.cols + 5, K = std::min<uint32_t>(67, p.k_max);
  std::vector<GemmRequest> cases;
  for (bool q : {false, true})
    for (bool bias : {false, true})
      for (bool acc : {false, true})
        for (bool relu : {false, true}) {
          if (relu && !q) continue;  // ReLU is a clamp of the int8 output
          cases.push_back({.m = M, .n = N, .k = K, .int8_out = q, .bias = bias, .relu = relu, .accumulate = acc});
        }
  std::vector<std::string> errors;
  uint64_t seed = kKnownAnswerSeed;
  for (auto& req : cases) {
    req.seed = seed++;
    if (auto err = gemm_error(ctx, GemmProblem::random(req)); !err.empty()) errors.push_back(err);
  }
  // The longest sum the engine takes, from extreme operands: no overflow, no lost carry.
  GemmRequest deep{.m = p.rows + 1, .n = p.cols + 1, .k = p.k_max, .seed = seed};
  GemmProblem prob = GemmProblem::random(deep);
  for (auto& v : prob.a) v = (v & 1) ? int8_t{-128} : int8_t{127};
  for (auto& v : prob.b) v = (v & 2) ? int8_t{-128} : int8_t{127};
  if (auto err = gemm_error(ctx, prob); !err.empty()) errors.push_back(err);
  const size_t total = cases.size() + 1;
  if (!errors.empty()) {
    std::string text = fmt::format("{} of {} GEMMs wrong; {}", errors.size(), total, errors.front());
    if (errors.size() > 1) text += fmt::format(" (and {} more)", errors.size() - 1);
    return fail(text);
  }
  return pass(fmt::format("{} GEMMs bit-exact: int32 and int8, with and without bias, ReLU and accumulate on "
                          "{}x{}x{}, and {}x{}x{} with extreme operands",
                          total, M, N, K, deep.m, deep.n, deep.k));
}

Outcome check_counters(Context& ctx) {
  const auto& p = ctx.props();
  GemmRequest req{.m = 3 * p.rows + 1, .n = 2 * p.cols + 1, .k = std::min<uint32_t>(100, p.k_max), .int8_out = true,
                  .bias = true, .seed = kKnownAnswerSeed};
  GemmOutcome o;
  if (auto err = gemm_error(ctx, GemmProblem::random(req), &o); !err.empty()) return fail(err);
  const Counters& c = o.counters;
  const uint64_t macs = uint64_t{req.m} * req.n * req.k;
  const uint64_t ideal = (macs + uint64_t{p.rows} * p.cols - 1) / (uint64_t{p.rows} * p.cols);
  const uint64_t min_read = uint64_t{req.m} * req.k + uint64_t{req.k} * req.n + 9ull * req.n;
  std::vector<std::string> bad;
  if (c.macs != macs) bad.push_back(fmt::format("MACs counted {} != M*N*K = {}", c.macs, macs));
  if (c.write_bytes != uint64_t{req.m} * req.n)
    bad.push_back(fmt::format("bytes written {} != M*N = {}", c.write_bytes, uint64_t{req.m} * req.n));
  if (c.read_bytes < min_read) bad.push_back(fmt::format("bytes read {} < the operands' {}", c.read_bytes, min_read));
  if (c.busy_cycles < ideal) bad.push_back(fmt::format("busy cycles {} < the ideal {}", c.busy_cycles, ideal));
  if (c.stall_cycles > c.busy_cycles) bad.push_back(fmt::format("stall cycles {} > busy {}", c.stall_cycles, c.busy_cycles));
  if (c.completed != 1) bad.push_back(fmt::format("completions {} != 1", c.completed));
  if (!bad.empty()) {
    std::string list;
    for (const auto& s : bad) list += (list.empty() ? "" : "; ") + s;
    return fail(shape_name(req) + ": " + list);
  }
  return pass(fmt::format("{}: MACs {} = M*N*K, {} bytes written, {} read, {} busy cycles (ideal {}), {} stalled",
                          shape_name(req), c.macs, c.write_bytes, c.read_bytes, c.busy_cycles, ideal, c.stall_cycles));
}

Outcome check_throughput(Context& ctx) {
  // Many tiny descriptors, GEMMs and NOPs alternating, through two laps of the ring. GEMM i
  // multiplies the bytes at slot(i) and slot(i) + al into an int32 at slot(i) + 2 al.
  Device& dev = ctx.device();
  const uint32_t count = 2 * Device::kRingEntries + 64;
  const uint64_t al = spec::kAlignBytes, slot = 3 * al;
  Buffer buf = dev.alloc(count * slot);
  std::vector<uint8_t> img(buf.size(), 0);
  std::mt19937_64 rng(ctx.opts.seed);
  std::vector<Descriptor> descs(count);
  std::vector<int32_t> want(count, 0);
  for (uint32_t i = 0; i < count; ++i) {
    Descriptor& d = descs[i];
    d.tag = 0x1000 + i;
    d.opcode = static_cast<uint8_t>(i % 2 ? spec::Opcode::kNop : spec::Opcode::kGemm);
    if (i % 2) continue;
    const uint64_t at = i * slot;
    const auto a = static_cast<int8_t>(rng()), b = static_cast<int8_t>(rng());
    img[at] = static_cast<uint8_t>(a);
    img[at + al] = static_cast<uint8_t>(b);
    want[i] = a * b;
    d.m = d.n = d.k = 1;
    d.a_addr = buf.addr() + at;
    d.b_addr = buf.addr() + at + al;
    d.c_addr = buf.addr() + at + 2 * al;
    d.lda = d.ldb = d.ldc = static_cast<uint32_t>(al);
  }
  dev.write(buf, 0, img);
  const Counters before = dev.counters();
  const auto t0 = Clock::now();
  dev.wait(dev.submit(descs), ctx.wait());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const Counters c = dev.counters() - before;
  const uint32_t last_tag = dev.backend().csr_read(csr::LAST_TAG);
  if (c.completed != count) return fail(fmt::format("{} descriptors queued, COMPLETED moved by {}", count, c.completed));
  if (last_tag != descs.back().tag) return fail(fmt::format("LAST_TAG {:#x}, expected {:#x}", last_tag, descs.back().tag));
  dev.read(buf, 0, img);
  for (uint32_t i = 0; i < count; i += 2) {
    int32_t got;
    std::memcpy(&got, &img[i * slot + 2 * al], 4);
    if (got != want[i])
      return fail(fmt::format("1x1x1 GEMM #{} (tag {:#x}) wrote {}, expected {}", i, descs[i].tag, got, want[i]));
  }
  return pass(fmt::format("{} descriptors (1x1x1 GEMMs and NOPs, two laps of the ring) in {:.3f} s: {:.0f} per "
                          "second, {:.0f} device cycles each",
                          count, secs, count / std::max(secs, 1e-9), double(c.busy_cycles) / count));
}

// ---- stress ----------------------------------------------------------------------------------

Outcome check_stress(Context& ctx) {
  const auto& p = ctx.props();
  std::mt19937_64 rng(ctx.opts.seed);
  auto pick = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  const auto t0 = Clock::now();
  const auto stop = t0 + std::chrono::duration<double>(ctx.opts.stress_seconds);
  uint64_t done = 0, macs = 0;
  while (ctx.opts.stress_count ? done < ctx.opts.stress_count : Clock::now() < stop) {
    GemmRequest req{.m = pick(1, 4 * p.rows + 7), .n = pick(1, 4 * p.cols + 7), .k = pick(1, std::min(p.k_max, 300u)),
                    .int8_out = pick(0, 1) == 1, .bias = pick(0, 1) == 1, .accumulate = pick(0, 1) == 1, .seed = rng()};
    req.relu = req.int8_out && pick(0, 1) == 1;
    if (auto err = gemm_error(ctx, GemmProblem::random(req)); !err.empty())
      return fail(fmt::format("GEMM #{} (its data seed {}): {}", done + 1, req.seed, err));
    ++done;
    macs += uint64_t{req.m} * req.n * req.k;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  return pass(fmt::format("{} random GEMMs ({} MACs) in {:.1f} s, all bit-exact", done, macs, secs));
}

// ---- every level -----------------------------------------------------------------------------

Outcome check_scoreboard(Context& ctx) {
  const auto sb = ctx.device().backend().scoreboard();
  if (!sb->ok) return fail("cosimulation scoreboard: " + sb->detail);
  return pass("cosimulation scoreboard: " + sb->detail);
}

Outcome check_error_state(Context& ctx) {
  Backend& b = ctx.device().backend();
  const uint32_t status = b.csr_read(csr::STATUS), code = b.csr_read(csr::ERR_CODE);
  if ((status & csr::STATUS_HALTED_MASK) || code)
    return fail(fmt::format("the engine has recorded error {} ({})", spec::to_string(static_cast<spec::ErrorCode>(code)),
                            ctx.device().state()));
  return pass("no error recorded by the engine");
}

std::vector<Check> checks_for(const DeviceSpec& spec, const HealthOptions& o) {
  const double stress_limit = o.stress_count ? std::max(120.0, double(o.stress_count) * 5) : o.stress_seconds + 120;
  std::vector<Check> all = {
      {"open", Level::kQuick, 60, check_open},
      {"identity", Level::kQuick, 10, check_identity},
      {"config_registers", Level::kQuick, 10, check_config},
      {"scratch_register", Level::kQuick, 10, check_scratch},
      {"error_registers", Level::kQuick, 10, check_error_registers},
      {"gemm_known_answer", Level::kQuick, 60, check_known_answer},
      {"gemm_known_answer_bf16", Level::kQuick, 60, check_known_answer_bf16},
      {"memory_data_bus", Level::kStandard, 60, check_memory_data_bus},
      {"memory_address_bus", Level::kStandard, 60, check_memory_address_bus},
      {"memory_address_in_address", Level::kStandard, 600, check_memory_address_in_address},
      {"memory_walking_ones", Level::kStandard, 600, check_memory_walking_ones},
      {"dma_host_copies", Level::kStandard, 120, check_dma_host},
      {"dma_engine_copies", Level::kStandard, 300, check_dma_engine},
      {"gemm_modes", Level::kStandard, 600, check_gemm_modes},
      {"performance_counters", Level::kStandard, 120, check_counters},
      {"descriptor_throughput", Level::kStandard, 300, check_throughput},
      {"stress_random_gemms", Level::kStress, stress_limit, check_stress},
      {"error_state", Level::kQuick, 10, check_error_state},
  };
  if (spec.kind == "rtl" && spec.option("scoreboard", "1") != "0")
    all.push_back({"cosim_scoreboard", Level::kQuick, 10, check_scoreboard});
  std::vector<Check> out;
  for (auto& c : all)
    if (c.level <= o.level) out.push_back(std::move(c));
  return out;
}

std::string describe_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const EngineFault& f) {
    std::string what;
    switch (f.code) {
      case spec::ErrorCode::kAxiRd: what = "bus error: a read of device memory got an error response"; break;
      case spec::ErrorCode::kAxiWr: what = "bus error: a write to device memory got an error response"; break;
      default: what = "the engine rejected a descriptor the driver built correctly"; break;
    }
    return fmt::format("{} ({} at {:#x}, ring slot {}): {}", what, spec::to_string(f.code), f.addr, f.ring_index,
                       f.what());
  } catch (const WatchdogTimeout& w) {
    return std::string("engine hung: ") + w.what();
  } catch (const DeviceError& d) {
    return std::string("device error: ") + d.what();
  } catch (const std::exception& x) {
    return fmt::format("unexpected error: {}", x.what());
  }
}

}  // namespace

HealthReport run_health_checks(const DeviceSpec& spec, const HealthOptions& opts, std::shared_ptr<Device> opened) {
  HealthReport report;
  report.device = spec.str();
  report.level = opts.level;
  auto ctx = std::make_shared<Context>();
  ctx->spec = spec;
  ctx->dev = std::move(opened);
  ctx->opts = opts;
  ctx->opts.on_result = nullptr;
  std::string lost;  // why the device cannot be used any more
  for (const Check& check : checks_for(spec, opts)) {
    CheckResult r;
    r.name = check.name;
    const auto t0 = Clock::now();
    if (!lost.empty()) {
      r.result = Verdict::kIncomplete;
      r.detail = "not run: " + lost;
    } else {
      ctx->deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(check.timeout_s));
      auto promise = std::make_shared<std::promise<Outcome>>();
      auto usage = std::make_shared<std::exception_ptr>();
      std::future<Outcome> future = promise->get_future();
      std::thread worker([ctx, promise, usage, fn = check.run] {
        try {
          promise->set_value(fn(*ctx));
        } catch (const OutOfMemory& e) {
          promise->set_value({Verdict::kSkip, fmt::format("the device has too little memory for this check: {}", e.what())});
        } catch (const UsageError&) {
          *usage = std::current_exception();
          promise->set_value(fail("usage error"));
        } catch (...) {
          promise->set_value(fail(describe_exception(std::current_exception())));
        }
      });
      if (future.wait_for(std::chrono::duration<double>(check.timeout_s)) == std::future_status::timeout) {
        // Past the hard limit: give the device up, so a blocked call returns, and move on.
        if (ctx->dev) ctx->dev->backend().abort();
        if (future.wait_for(std::chrono::seconds(10)) == std::future_status::ready)
          worker.join();
        else
          worker.detach();  // it holds its own reference to everything it uses
        r.result = Verdict::kIncomplete;
        r.detail = fmt::format("no result within the hard limit of {:.0f} s; the device was given up on",
                               check.timeout_s);
        lost = fmt::format("the device was given up on after {} ran out of time", check.name);
      } else {
        worker.join();
        if (*usage && check.name == "open") std::rethrow_exception(*usage);  // a bad option in the spec
        const Outcome o = future.get();
        r.result = o.result;
        r.detail = o.detail;
        if (*usage) r.detail = describe_exception(*usage);
      }
    }
    if (lost.empty() && !ctx->dev) lost = "the device could not be opened";
    if (lost.empty() && check.name != "open") {
      // An error the engine recorded fails the check whatever it saw; then back to a clean state.
      try {
        Backend& b = ctx->dev->backend();
        const uint32_t status = b.csr_read(csr::STATUS);
        if ((status & csr::STATUS_HALTED_MASK) && r.result == Verdict::kPass) {
          r.result = Verdict::kFail;
          r.detail = fmt::format("the engine recorded error {} during this check; {}",
                                 spec::to_string(static_cast<spec::ErrorCode>(b.csr_read(csr::ERR_CODE))), r.detail);
        }
        if (r.result != Verdict::kPass || (status & csr::STATUS_HALTED_MASK)) ctx->dev->soft_reset();
      } catch (const std::exception& e) {
        lost = fmt::format("the device did not recover after {} (see there)", check.name);
        r.detail += fmt::format("; the device did not recover: {}", e.what());
        if (r.result == Verdict::kPass) r.result = Verdict::kFail;
      }
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (opts.on_result) opts.on_result(r);
    report.tests.push_back(std::move(r));
  }
  report.result = overall(report.tests, opts.strict);
  return report;
}

}  // namespace tessera::driver
