#include "tessera/backends/cpu_backend.hpp"

#include <cblas.h>

#include <algorithm>

namespace tessera {

void CpuBackend::matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                        bool b_transposed) {
  ++stats_.gemms;
  stats_.macs += uint64_t{m} * n * k;
  if (m == 1) {  // a decode step: c = a B, as B^T a (sgemm would pack all of B first)
    cblas_sgemv(CblasRowMajor, b_transposed ? CblasNoTrans : CblasTrans, static_cast<int>(b_transposed ? n : k),
                static_cast<int>(b_transposed ? k : n), 1.0f, b, static_cast<int>(b_transposed ? k : n), a, 1, 0.0f, c,
                1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(k), b,
              static_cast<int>(b_transposed ? k : n), 0.0f, c, static_cast<int>(n));
}

void CpuBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  ++stats_.gemms;
  stats_.macs += uint64_t{m} * w.out * w.in;
  // The bias goes in first so that one sgemm with beta = 1 adds the product to it.
  for (uint32_t r = 0; r < m; ++r) std::copy(w.b.begin(), w.b.end(), y + uint64_t{r} * w.out);
  if (m == 1) {  // a decode step: y += W^T x
    cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(w.in), static_cast<int>(w.out), 1.0f, w.w.data(),
                static_cast<int>(w.out), x, 1, 1.0f, y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(w.out),
              static_cast<int>(w.in), 1.0f, x, static_cast<int>(w.in), w.w.data(), static_cast<int>(w.out), 1.0f,
              y, static_cast<int>(w.out));
}

}  // namespace tessera
