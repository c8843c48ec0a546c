// Matrix products on a Tessera device (any driver backend) in the device's precision (its option
// precision=int8|bf16):
//  - int8, quantized as in quantize.hpp (per token, per output channel): the engine multiplies into
//    int32 and the host dequantizes;
//  - bf16: operands rounded to bf16 (nearest even), the engine's fp32 sums as they are; K above the
//    engine's k_max / 2 runs as parts, each adding the previous parts' sums as its C_in.
// Weights are converted and uploaded once and stay resident on the device; so do the KV caches
// (int8 keys and values with a scale per token, or bf16 ones), which the engine reads as operands.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "tessera/driver/device.hpp"
#include "tessera/model/timing.hpp"
#include "tessera/backends/matmul_backend.hpp"

namespace tessera {

class AccelBackend final : public MatmulBackend {
 public:
  explicit AccelBackend(driver::Device& dev) : dev_(dev), bf16_(dev.properties().precision == "bf16") {}
  std::string name() const override { return dev_.properties().spec; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
              bool b_transposed) override;
  void linear(const float* x, uint32_t m, const Linear& w, float* y) override;
  void release(const Linear& w) override { weights_.erase(&w); }
  MatmulStats stats() const override { return stats_; }
  std::optional<uint64_t> memory_free() const override { return dev_.free_bytes(); }
  bool timed_by_wall_clock() const override { return false; }
  uint64_t kv_cache_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) const override;
  std::unique_ptr<KvCache> make_kv_cache(uint32_t batch, uint32_t heads, uint32_t head_dim,
                                         uint32_t capacity) override;
  void kv_store(KvCache& cache, uint32_t seq, uint32_t head, const float* k, const float* v, uint32_t tokens) override;
  void kv_scores(KvCache& cache, uint32_t seq, uint32_t head, const float* q, uint32_t tokens, float* scores) override;
  void kv_mix(KvCache& cache, uint32_t seq, uint32_t head, const float* p, uint32_t tokens, float* out) override;
  std::vector<Phase> take_phases() override { return std::exchange(phases_, {}); }
  // ASIC what-if: also estimate every GEMM with the timing model for this engine configuration
  // (another array, same memory system), into stats().projected_cycles.
  void project(const EngineConfig& cfg, const MemoryModelConfig& mem) {
    projection_ = cfg;
    projection_mem_ = mem;
  }

  // c[m, n] = a[m, k] * b[k, n] as the backend lays it out in device memory: rows `lda` and `ldb`
  // bytes apart, A and B at these addresses.
  struct GemmOperands {
    uint32_t m = 0, n = 0, k = 0;
    uint64_t a_addr = 0, lda = 0, b_addr = 0, ldb = 0;
  };
  // How one GEMM runs: the classic dataflow, or FOLD for small M with K cut into k_parts FOLD GEMMs
  // where it is above FOLD's k_max/2 (split-K: each part writes its own int32 C, summed on the host).
  struct Dataflow {
    bool fold = false;
    uint32_t k_parts = 1;
  };
  using DataflowCache = std::map<std::array<uint32_t, 3>, Dataflow>;
  // The descriptors gemm() submits for `g` on an engine of `cfg` (int8, or bf16), with C at
  // address 0, and into `c_bytes` the bytes C takes. The planner's cost model runs them through the
  // timing model, so that its predictions are the device's own cycles.
  static std::vector<Descriptor> gemm_descriptors(const EngineConfig& cfg, bool bf16, const GemmOperands& g,
                                                  DataflowCache& chosen, uint64_t* c_bytes = nullptr);
  // Every buffer starts on a 4 KB page, where the engine's bursts break: a GEMM's cycles then
  // depend on its shape alone, and the planner can predict them.
  static constexpr uint64_t kBufferAlign = spec::kPageBytes;
  // Leading dimensions in bytes: an operand's rows of `cols` elements, and C's (int32 or fp32).
  static uint64_t operand_ld(uint32_t cols, bool bf16) { return align_ld(uint64_t{cols} * (bf16 ? 2 : 1)); }
  static uint64_t c_ld(uint32_t n) { return align_ld(uint64_t{n} * 4); }
  // A KV cache's keys and values (kv_cache_bytes), and where sequence `seq`'s head `head` starts in each.
  static uint64_t kv_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity, bool bf16) {
    return 2 * operand_ld(head_dim, bf16) * capacity * batch * heads;
  }
  static uint64_t kv_offset(uint32_t seq, uint32_t head, uint32_t heads, uint32_t head_dim, uint32_t capacity,
                            bool bf16) {
    return (uint64_t{seq} * heads + head) * operand_ld(head_dim, bf16) * capacity;
  }

 private:
  static uint64_t align_ld(uint64_t bytes) { return (bytes + spec::kAlignBytes - 1) / spec::kAlignBytes * spec::kAlignBytes; }
  // A matrix of the backend's precision in device memory, `ld` bytes from row to row; int8 with a
  // scale per row (a left-hand operand) or per column (a right-hand one; none means 1).
  struct DeviceMatrix {
    uint64_t addr = 0, ld = 0;
    uint32_t rows = 0, cols = 0;
    const float* scale = nullptr;
  };
  // One the backend owns: a weight, or an operand uploaded for one product.
  struct Operand {
    driver::Buffer buf;
    uint32_t rows = 0, cols = 0;
    uint64_t ld = 0;
    std::vector<float> scale;
    DeviceMatrix matrix() const { return {buf.addr(), ld, rows, cols, scale.empty() ? nullptr : scale.data()}; }
  };
  Operand upload_a(const float* a, uint32_t m, uint32_t k);
  Operand upload_b(const float* b, uint32_t k, uint32_t n, bool transposed);
  // c[a.rows, b.cols] = a * b on the engine, dequantized with both operands' scales (int8).
  void gemm(const DeviceMatrix& a, const DeviceMatrix& b, float* c);
  // Rows of floats in the backend's precision at `ld` bytes apart: int8 with their scales (into
  // `scale`, one per row), or bf16.
  void encode_rows(const float* x, uint32_t rows, uint32_t cols, uint64_t ld, uint8_t* img, float* scale) const;
  // FOLD where `cfg` allows it and the timing model (with the platform's default memory) says it is
  // faster than the classic dataflow; chosen once per shape.
  static Dataflow choose_dataflow(const Descriptor& d, const EngineConfig& cfg, DataflowCache& chosen);
  // bf16: K in parts of at most k_max / 2, chained in place.
  static Dataflow bf16_dataflow(uint32_t k, uint32_t k_max);
  // The descriptors of `d` under `df`; part p writes its C at d.c_addr + p * part_bytes, or with
  // part_bytes 0 all at d.c_addr, each part after the first adding the C before it (ACCUMULATE).
  static std::vector<Descriptor> split(const Descriptor& d, Dataflow df, uint64_t part_bytes);

  driver::Device& dev_;
  const bool bf16_;
  std::map<const Linear*, Operand> weights_;  // resident for the backend's lifetime
  MatmulStats stats_;
  std::vector<Phase> phases_;
  void phase(const char* track, const char* name, std::chrono::steady_clock::time_point start) {
    phases_.push_back({track, name, start,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
  }
  std::optional<EngineConfig> projection_;
  MemoryModelConfig projection_mem_;
  DataflowCache dataflow_, projection_dataflow_;
};

}  // namespace tessera
