// GPU rows where no GPU is present: the work computed on the host with the numerics of the GPU's
// precision (fp32; bf16 operands with fp32 accumulation; int8 quantized as in quantize.hpp) and
// its time projected from the named GPU's published peaks with a roofline: for a GEMM,
// max(2 m n k / peak op/s, bytes / memory bandwidth). Reports label these times projected; they are
// never shown as measured.
#pragma once

#include <string>
#include <string_view>

#include "tessera/backends/cpu_backend.hpp"

namespace tessera {

// What a GPU's GEMMs take as operands: fp32 (SGEMM), bf16 (fp32 accumulation) or int8 (int32
// accumulation, the accelerator's quantization).
enum class GpuPrecision { kFp32, kBf16, kInt8 };
std::string_view to_string(GpuPrecision p);
GpuPrecision parse_gpu_precision(std::string_view text);  // throws std::invalid_argument
uint32_t operand_bytes(GpuPrecision p);                   // 4, 2, 1

struct GpuPeaks {
  std::string_view name;        // as in a device spec: cuda:0?gpu=h100
  std::string_view description;
  double fp32_flops;            // dense, non-tensor-core FP32
  double bf16_flops;            // dense tensor-core BF16
  double int8_ops;              // dense tensor-core INT8
  double memory_bytes_per_s;    // HBM bandwidth
  double board_watts;           // maximum board power (TDP): a projection's energy is this over its time
  double memory_bytes;          // its memory as published (80 GB: 80e9), what the planner fits a projected GPU's share into
  std::string_view cuda_name;   // a pattern (ECMAScript regex) of the names the CUDA runtime gives it
  double peak(GpuPrecision p) const;
};

// NVIDIA's published figures (datasheets; dense, no sparsity).
const GpuPeaks& gpu_peaks(std::string_view name);  // throws std::invalid_argument listing the known ones
// The peaks of the GPU the CUDA runtime calls `cuda_name` ("NVIDIA H100 80GB HBM3"), or nullptr for
// one the table does not know (its roofline and projections are then not given, never guessed).
const GpuPeaks* detect_gpu_peaks(std::string_view cuda_name);
std::string known_gpus();  // the table's names, comma-separated

// The projections (the backend's, and the planner's): a GEMM's roofline time, operands in the
// GEMM's precision and results in fp32; an element-wise op reading and writing each fp32 value once.
double projected_gemm_seconds(const GpuPeaks& peaks, GpuPrecision p, uint32_t m, uint32_t n, uint32_t k);
double projected_elementwise_seconds(const GpuPeaks& peaks, uint64_t values);

// A GPU's roofline for a whole test of `tessera bench` on a GPT-2 model: the least time its peaks
// allow. A prefill of `tokens` tokens of `batch` sequences (the last token's logits):
// max(FLOPs / peak, weight bytes / bandwidth). `steps` decode steps from an empty cache, each
// max(FLOPs / peak, (weight bytes + the KV cache's bytes read) / bandwidth). Weights and KV cache in
// the precision's operand bytes; attention FLOPs causal (each query against the keys up to its own).
double roofline_prefill_seconds(const Gpt2Config& cfg, const GpuPeaks& peaks, GpuPrecision p, uint32_t batch,
                                uint32_t tokens);
double roofline_decode_seconds(const Gpt2Config& cfg, const GpuPeaks& peaks, GpuPrecision p, uint32_t batch,
                               uint32_t steps);

class ProjectedGpuBackend final : public MatmulBackend {
 public:
  ProjectedGpuBackend(std::string spec, const GpuPeaks& peaks, GpuPrecision precision = GpuPrecision::kFp32)
      : spec_(std::move(spec)), peaks_(peaks), precision_(precision) {}
  std::string name() const override { return spec_; }
  MatmulStats stats() const override { return stats_; }
  const GpuPeaks& peaks() const { return peaks_; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override;
  // A GPU runs these too (the cuda backend's kernels); projected as memory-bound, reading and
  // writing each fp32 value once.
  bool runs_other_ops() const override { return true; }
  bool timed_by_wall_clock() const override { return false; }
  using MatmulBackend::attention;
  void attention(const float* qkv, float* out, uint32_t tokens, KvCache& cache) override;
  // In int8, the accelerator's products over its KV cache (int8_scores_reference, int8_mix_reference).
  void kv_scores(KvCache& cache, uint32_t seq, uint32_t head, const float* q, uint32_t tokens, float* scores) override;
  void kv_mix(KvCache& cache, uint32_t seq, uint32_t head, const float* p, uint32_t tokens, float* out) override;
  void linear_gelu(const float* x, uint32_t m, const Linear& w, float* y) override;
  void layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w, float eps) override;

 private:
  void account_gemm(uint32_t m, uint32_t n, uint32_t k);
  void elementwise(uint64_t values) { stats_.projected_seconds += projected_elementwise_seconds(peaks_, values); }
  std::string spec_;
  const GpuPeaks& peaks_;
  GpuPrecision precision_;
  CpuBackend cpu_;
  MatmulStats stats_;
};

}  // namespace tessera
