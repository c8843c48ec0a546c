// One GEMM on a device (int8, or bf16 with fp32 accumulation), with random operands from a seed,
// checked byte for byte against the golden model. Used by `tessera gemm`, the health checks, the benchmarks and the tests.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tessera/driver/device.hpp"

namespace tessera {

struct GemmRequest {
  uint32_t m = 64, n = 64, k = 64;
  bool int8_out = false, bias = false, relu = false, accumulate = false;
  bool fold = false;  // the FOLD dataflow (M <= R/2, K <= k_max/2, int32 output, no bias or C_in)
  // BF16 precision: bf16 A and B, fp32 C_in and bias, fp32 output or (bf16_out) bf16
  bool bf16 = false, bf16_out = false;
  bool specials = false;  // bf16: operands also zeros, subnormals, extremes, infinities and NaNs
  uint64_t seed = 1;
  uint32_t pad = 0;  // extra bytes on every row pitch (a multiple of the engine's alignment)
};

// Row-major host operands; strides are the engine's aligned row pitches.
struct GemmProblem {
  GemmRequest req;
  std::vector<int8_t> a, b, shift;        // int8
  std::vector<uint16_t> a_bf16, b_bf16;   // bf16 bit patterns
  std::vector<int32_t> bias, mult, cin;   // int32, or fp32 bit patterns with bf16
  int8_t out_zp = 0, act_min = -128, act_max = 127;

  static GemmProblem random(const GemmRequest& req);
  uint32_t in_bytes() const { return req.bf16 ? 2 : 1; }
  uint32_t out_bytes() const { return req.bf16 ? (req.bf16_out ? 2 : 4) : (req.int8_out ? 1 : 4); }
};

struct GemmOutcome {
  std::vector<uint8_t> c;         // M x N elements, packed (by output mode)
  std::vector<uint8_t> expected;  // the golden model's C, packed the same way
  bool bit_exact = false;         // device output equals the golden model's, and the scoreboard
                                  // saw no wrong write during this GEMM
  std::string mismatch;           // the first difference, if any
  driver::Counters counters;      // counter deltas for this GEMM
  double seconds = 0;             // wall time from submit to completion
  std::optional<driver::ScoreboardStatus> scoreboard;  // rtl only: the verdict so far
};

// A random bf16 bit pattern: mostly values of either sign within a few octaves of 1 (where sums
// cancel and round); with `specials`, one in eight is a zero, a subnormal (read as zero), a value
// near either end of the range (products overflow or flush), an infinity or a NaN.
uint16_t random_bf16(std::mt19937_64& rng, bool specials);
// A random fp32 bit pattern for C_in and bias: normal, of standard deviation `spread`.
uint32_t random_fp32(std::mt19937_64& rng, double spread);

// The descriptor run_gemm submits for `p` when its buffer sits at device address `base`
// (only p.req and the requantization parameters matter, not the operands).
Descriptor gemm_descriptor(const GemmProblem& p, uint64_t base);

// The golden model's result for `p`, packed like GemmOutcome::c.
std::vector<uint8_t> golden_gemm(const GemmProblem& p, const EngineConfig& cfg);

// Allocates, uploads, runs and checks. Throws driver::DeviceError on a device failure.
GemmOutcome run_gemm(driver::Device& dev, const GemmProblem& p, const driver::WaitOptions& wait = {});

}  // namespace tessera
