// GPU rows where no GPU is present: the matrix products computed on the host in fp32 (the numbers
// a GPU's fp32 GEMMs give, up to summation order) and their time projected from the named GPU's
// published peaks with a roofline: max(2 m n k / peak FLOP/s, bytes / memory bandwidth). Reports
// label these times projected; they are never shown as measured.
#pragma once

#include <string>
#include <string_view>

#include "tessera/transformer.hpp"

namespace tessera {

struct GpuPeaks {
  std::string_view name;        // as in a device spec: cuda:0?gpu=h100
  std::string_view description;
  double fp32_flops;            // dense, non-tensor-core FP32
  double memory_bytes_per_s;    // HBM bandwidth
};

// NVIDIA's published figures (datasheets; dense, no sparsity).
const GpuPeaks& gpu_peaks(std::string_view name);  // throws std::invalid_argument listing the known ones

class ProjectedGpuBackend final : public MatmulBackend {
 public:
  ProjectedGpuBackend(std::string spec, const GpuPeaks& peaks) : spec_(std::move(spec)), peaks_(peaks) {}
  std::string name() const override { return spec_; }
  MatmulStats stats() const override { return stats_; }
  const GpuPeaks& peaks() const { return peaks_; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override;
  void linear(const float* x, uint32_t m, const Linear& w, float* y) override;

 private:
  void account(uint32_t m, uint32_t n, uint32_t k);
  std::string spec_;
  const GpuPeaks& peaks_;
  CpuBackend cpu_;
  MatmulStats stats_;
};

}  // namespace tessera
