// The reference backend: fp32 products on the host CPU with OpenBLAS.
#pragma once

#include <string>

#include "tessera/backends/matmul_backend.hpp"

namespace tessera {

class CpuBackend final : public MatmulBackend {
 public:
  std::string name() const override { return "cpu"; }
  MatmulStats stats() const override { return stats_; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
              bool b_transposed) override;
  void linear(const float* x, uint32_t m, const Linear& w, float* y) override;

 private:
  MatmulStats stats_;
};
}  // namespace tessera
