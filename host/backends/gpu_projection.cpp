#include "tessera/backends/gpu_projection.hpp"

#include <algorithm>
#include <array>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "tessera/runtime/quantize.hpp"

namespace tessera {

namespace {

// Dense (no sparsity) rates from NVIDIA's datasheets; `cuda_name` matches what the CUDA runtime
// calls the card (cudaDeviceProp::name), searched case-blind.
constexpr std::array kGpus = {
    GpuPeaks{"h100", "NVIDIA H100 SXM5 (67 TFLOP/s FP32, 989 TFLOP/s BF16, 1979 TOP/s INT8, 3.35 TB/s HBM3, 700 W)", 67e12,
             989.4e12, 1978.9e12, 3.35e12, 700, 80e9, "H100.*(SXM|HBM3)"},
    GpuPeaks{"h100-pcie", "NVIDIA H100 PCIe (51 TFLOP/s FP32, 756 TFLOP/s BF16, 1513 TOP/s INT8, 2.0 TB/s HBM2e, 350 W)",
             51.2e12, 756.5e12, 1513e12, 2.0e12, 350, 80e9, "H100.*PCIe"},
    GpuPeaks{"h100-nvl", "NVIDIA H100 NVL (60 TFLOP/s FP32, 835 TFLOP/s BF16, 1671 TOP/s INT8, 3.9 TB/s HBM3, 400 W)",
             60e12, 835e12, 1671e12, 3.9e12, 400, 94e9, "H100 NVL"},
    GpuPeaks{"h200", "NVIDIA H200 SXM (67 TFLOP/s FP32, 989 TFLOP/s BF16, 1979 TOP/s INT8, 4.8 TB/s HBM3e, 700 W)", 67e12,
             989.4e12, 1978.9e12, 4.8e12, 700, 141e9, "(^|[^G])H200(?! NVL)"},
    GpuPeaks{"a100", "NVIDIA A100 SXM 80 GB (19.5 TFLOP/s FP32, 312 TFLOP/s BF16, 624 TOP/s INT8, 2.04 TB/s HBM2e, 400 W)",
             19.5e12, 312e12, 624e12, 2.039e12, 400, 80e9, "A100.SXM4.80GB"},
    GpuPeaks{"a100-pcie", "NVIDIA A100 PCIe 80 GB (19.5 TFLOP/s FP32, 312 TFLOP/s BF16, 624 TOP/s INT8, 1.94 TB/s HBM2e, "
             "300 W)", 19.5e12, 312e12, 624e12, 1.935e12, 300, 80e9, "A100 80GB PCIe"},
    GpuPeaks{"l40s", "NVIDIA L40S (91.6 TFLOP/s FP32, 362 TFLOP/s BF16, 733 TOP/s INT8, 864 GB/s GDDR6, 350 W)", 91.6e12,
             362.05e12, 733e12, 864e9, 350, 48e9, "L40S"},
    GpuPeaks{"l4", "NVIDIA L4 (30.3 TFLOP/s FP32, 121 TFLOP/s BF16, 242 TOP/s INT8, 300 GB/s GDDR6, 72 W)", 30.3e12,
             121e12, 242.5e12, 300e9, 72, 24e9, "NVIDIA L4$"},
};

}  // namespace

std::string_view to_string(GpuPrecision p) {
  switch (p) {
    case GpuPrecision::kBf16: return "bf16";
    case GpuPrecision::kInt8: return "int8";
    default: return "fp32";
  }
}

GpuPrecision parse_gpu_precision(std::string_view text) {
  for (GpuPrecision p : {GpuPrecision::kFp32, GpuPrecision::kBf16, GpuPrecision::kInt8})
    if (text == to_string(p)) return p;
  throw std::invalid_argument(fmt::format("unknown GPU precision '{}' (fp32, bf16 or int8)", text));
}

uint32_t operand_bytes(GpuPrecision p) { return p == GpuPrecision::kFp32 ? 4 : p == GpuPrecision::kBf16 ? 2 : 1; }

double GpuPeaks::peak(GpuPrecision p) const {
  return p == GpuPrecision::kFp32 ? fp32_flops : p == GpuPrecision::kBf16 ? bf16_flops : int8_ops;
}

const GpuPeaks& gpu_peaks(std::string_view name) {
  for (const auto& g : kGpus)
    if (g.name == name) return g;
  throw std::invalid_argument(fmt::format("unknown GPU '{}' for a projection (known: {})", name, known_gpus()));
}

const GpuPeaks* detect_gpu_peaks(std::string_view cuda_name) {
  for (const auto& g : kGpus)
    if (std::regex_search(std::string(cuda_name), std::regex(std::string(g.cuda_name), std::regex::icase))) return &g;
  return nullptr;
}

std::string known_gpus() {
  std::string known;
  for (const auto& g : kGpus) known += (known.empty() ? "" : ", ") + std::string(g.name);
  return known;
}

void ProjectedGpuBackend::matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) {
  switch (precision_) {
    case GpuPrecision::kFp32: cpu_.matmul(a, b, c, m, n, k, t); break;
    case GpuPrecision::kBf16: bf16_matmul_reference(a, b, c, m, n, k, t); break;
    case GpuPrecision::kInt8: int8_matmul_reference(a, b, c, m, n, k, t); break;
  }
  account_gemm(m, n, k);
}

namespace {
// Operands in the GEMM's precision, results in fp32 (int32 for int8).
uint64_t gemm_read_bytes(GpuPrecision p, uint32_t m, uint32_t n, uint32_t k) {
  return operand_bytes(p) * (uint64_t{m} * k + uint64_t{k} * n);
}
}  // namespace

double projected_gemm_seconds(const GpuPeaks& peaks, GpuPrecision p, uint32_t m, uint32_t n, uint32_t k) {
  const uint64_t bytes = gemm_read_bytes(p, m, n, k) + 4 * uint64_t{m} * n;
  return std::max(2.0 * m * n * k / peaks.peak(p), double(bytes) / peaks.memory_bytes_per_s);
}

double projected_elementwise_seconds(const GpuPeaks& peaks, uint64_t values) {
  return 8.0 * double(values) / peaks.memory_bytes_per_s;
}

namespace {
// The products' weights of a GPT-2 model, the tied output projection included (its logits).
double weight_values(const Gpt2Config& cfg) {
  return 12.0 * cfg.width * cfg.width * cfg.layers + double(cfg.width) * cfg.vocab;
}
}  // namespace

double roofline_prefill_seconds(const Gpt2Config& cfg, const GpuPeaks& peaks, GpuPrecision p, uint32_t batch,
                                uint32_t tokens) {
  const double E = cfg.width, T = tokens, B = batch;
  const double flops = 2.0 * B * T * 12.0 * E * E * cfg.layers  // the layers' products
                       + 2.0 * B * E * cfg.vocab                  // each sequence's last logits
                       + 4.0 * B * cfg.layers * E * T * (T + 1) / 2;  // q k^T and p v, causal
  const double bytes = weight_values(cfg) * operand_bytes(p);
  return std::max(flops / peaks.peak(p), bytes / peaks.memory_bytes_per_s);
}

double roofline_decode_seconds(const Gpt2Config& cfg, const GpuPeaks& peaks, GpuPrecision p, uint32_t batch,
                               uint32_t steps) {
  const double E = cfg.width, B = batch, weights = weight_values(cfg);
  double seconds = 0;
  for (uint32_t s = 0; s < steps; ++s) {
    const double L = s + 1.0;  // positions attended, the new one included
    const double flops = 2.0 * B * weights + 4.0 * B * cfg.layers * E * L;
    const double bytes = (weights + 2.0 * cfg.layers * B * L * E) * operand_bytes(p);
    seconds += std::max(flops / peaks.peak(p), bytes / peaks.memory_bytes_per_s);
  }
  return seconds;
}

void ProjectedGpuBackend::account_gemm(uint32_t m, uint32_t n, uint32_t k) {
  ++stats_.gemms;
  stats_.macs += uint64_t{m} * n * k;
  stats_.read_bytes += gemm_read_bytes(precision_, m, n, k);
  stats_.write_bytes += 4 * uint64_t{m} * n;
  stats_.projected_seconds += projected_gemm_seconds(peaks_, precision_, m, n, k);
}

void ProjectedGpuBackend::attention(const float* qkv, float* out, uint32_t tokens, KvCache& cache) {
  const uint64_t scores = uint64_t{cache.batch} * cache.heads * tokens * (cache.length + tokens);
  MatmulBackend::attention(qkv, out, tokens, cache);
  elementwise(scores);  // the softmax over the scores
}

void ProjectedGpuBackend::kv_scores(KvCache& cache, uint32_t seq, uint32_t head, const float* q, uint32_t tokens,
                                    float* scores) {
  if (precision_ != GpuPrecision::kInt8) return MatmulBackend::kv_scores(cache, seq, head, q, tokens, scores);
  const uint32_t L = cache.length + tokens;
  int8_scores_reference(q, cache.keys(seq, head), scores, tokens, L, cache.head_dim);
  account_gemm(tokens, L, cache.head_dim);
}

void ProjectedGpuBackend::kv_mix(KvCache& cache, uint32_t seq, uint32_t head, const float* p, uint32_t tokens,
                                 float* out) {
  if (precision_ != GpuPrecision::kInt8) return MatmulBackend::kv_mix(cache, seq, head, p, tokens, out);
  const uint32_t L = cache.length + tokens;
  int8_mix_reference(p, cache.values(seq, head), out, tokens, L, cache.head_dim);
  account_gemm(tokens, cache.head_dim, L);
}

void ProjectedGpuBackend::linear_gelu(const float* x, uint32_t m, const Linear& w, float* y) {
  MatmulBackend::linear_gelu(x, m, w, y);
  elementwise(uint64_t{m} * w.out);
}

void ProjectedGpuBackend::layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w,
                                     float eps) {
  MatmulBackend::layer_norm(x, y, rows, cols, w, eps);
  elementwise(uint64_t{rows} * cols);
}

}  // namespace tessera
