#include "tessera/runtime/quantize.hpp"

#include <cblas.h>

#include <vector>

#include "tessera/model/float_formats.hpp"

namespace tessera {

namespace {

// Element (r, c) of b as stored.
float at(const float* b, uint32_t r, uint32_t c, uint32_t k, uint32_t n, bool transposed) {
  return transposed ? b[uint64_t{c} * k + r] : b[uint64_t{r} * n + c];
}

}  // namespace

void int8_matmul_reference(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                           bool b_transposed) {
  // The int8 values as doubles: every integer sum of up to 2^37 products of |v| <= 127 is exact.
  std::vector<double> qa(uint64_t{m} * k), qb(uint64_t{k} * n);
  std::vector<float> row_scale(m), col_scale(n, 0.0f);
  for (uint32_t r = 0; r < m; ++r) {
    const float* x = a + uint64_t{r} * k;
    float peak = 0;
    for (uint32_t i = 0; i < k; ++i) peak = std::max(peak, std::abs(x[i]));
    row_scale[r] = int8_scale(peak);
    for (uint32_t i = 0; i < k; ++i) qa[uint64_t{r} * k + i] = to_int8(x[i], 1.0f / row_scale[r]);
  }
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t col = 0; col < n; ++col)
      col_scale[col] = std::max(col_scale[col], std::abs(at(b, r, col, k, n, b_transposed)));
  for (auto& s : col_scale) s = int8_scale(s);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t col = 0; col < n; ++col)
      qb[uint64_t{r} * n + col] = to_int8(at(b, r, col, k, n, b_transposed), 1.0f / col_scale[col]);
  std::vector<double> acc(uint64_t{m} * n);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0, qa.data(), static_cast<int>(k), qb.data(), static_cast<int>(n), 0.0, acc.data(), static_cast<int>(n));
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t col = 0; col < n; ++col)
      c[uint64_t{r} * n + col] =
          static_cast<float>(static_cast<int32_t>(acc[uint64_t{r} * n + col])) * row_scale[r] * col_scale[col];
}

void bf16_matmul_reference(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                           bool b_transposed) {
  auto round = [](const float* src, size_t count) {
    std::vector<float> out(src, src + count);
    for (float& v : out) v = bf16_to_float(float_to_bf16(v));
    return out;
  };
  const std::vector<float> ra = round(a, uint64_t{m} * k), rb = round(b, uint64_t{k} * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, ra.data(), static_cast<int>(k), rb.data(),
              static_cast<int>(b_transposed ? k : n), 0.0f, c, static_cast<int>(n));
}

}  // namespace tessera
