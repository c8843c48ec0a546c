#include "tessera/gpu_projection.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera {

namespace {

constexpr std::array kGpus = {
    GpuPeaks{"h100", "NVIDIA H100 SXM5 (67 TFLOP/s FP32, 3.35 TB/s HBM3)", 67e12, 3.35e12},
    GpuPeaks{"h200", "NVIDIA H200 SXM (67 TFLOP/s FP32, 4.8 TB/s HBM3e)", 67e12, 4.8e12},
    GpuPeaks{"a100", "NVIDIA A100 SXM 80 GB (19.5 TFLOP/s FP32, 2.04 TB/s HBM2e)", 19.5e12, 2.039e12},
};

}  // namespace

const GpuPeaks& gpu_peaks(std::string_view name) {
  for (const auto& g : kGpus)
    if (g.name == name) return g;
  std::string known;
  for (const auto& g : kGpus) known += (known.empty() ? "" : ", ") + std::string(g.name);
  throw std::invalid_argument(fmt::format("unknown GPU '{}' for a projection (known: {})", name, known));
}

void ProjectedGpuBackend::account(uint32_t m, uint32_t n, uint32_t k) {
  const double flops = 2.0 * m * n * k, bytes = 4.0 * (double(m) * k + double(k) * n + double(m) * n);
  ++stats_.gemms;
  stats_.macs += uint64_t{m} * n * k;
  stats_.read_bytes += 4 * (uint64_t{m} * k + uint64_t{k} * n);
  stats_.write_bytes += 4 * uint64_t{m} * n;
  stats_.projected_seconds += std::max(flops / peaks_.fp32_flops, bytes / peaks_.memory_bytes_per_s);
}

void ProjectedGpuBackend::matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) {
  cpu_.matmul(a, b, c, m, n, k, t);
  account(m, n, k);
}

void ProjectedGpuBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  cpu_.linear(x, m, w, y);
  account(m, w.out, w.in);
}

}  // namespace tessera
