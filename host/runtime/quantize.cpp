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

// Each row of x[rows, cols] in int8 with its own scale; the int8 values as doubles, in which every
// integer sum of up to 2^37 products of |v| <= 127 is exact.
std::vector<double> quantize_rows(const float* x, uint32_t rows, uint32_t cols, std::vector<float>& scale) {
  std::vector<double> q(uint64_t{rows} * cols);
  scale.resize(rows);
  for (uint32_t r = 0; r < rows; ++r) scale[r] = quantize_row(x + uint64_t{r} * cols, cols, &q[uint64_t{r} * cols]);
  return q;
}

// c[m, n] = a[m, k] b[n, k]^T or a[m, k] b[k, n] in exact integer sums of int8 values.
std::vector<double> integer_product(const std::vector<double>& a, const std::vector<double>& b, uint32_t m, uint32_t n,
                                   uint32_t k, bool b_transposed) {
  std::vector<double> c(uint64_t{m} * n);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, a.data(), static_cast<int>(k), b.data(),
              static_cast<int>(b_transposed ? k : n), 0.0, c.data(), static_cast<int>(n));
  return c;
}

float as_int32(double v) { return static_cast<float>(static_cast<int32_t>(v)); }

}  // namespace

void int8_scores_reference(const float* q, const float* k, float* scores, uint32_t T, uint32_t L, uint32_t D) {
  std::vector<float> q_scale, k_scale;
  const auto qq = quantize_rows(q, T, D, q_scale), kq = quantize_rows(k, L, D, k_scale);
  const auto acc = integer_product(qq, kq, T, L, D, true);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t l = 0; l < L; ++l)
      scores[uint64_t{t} * L + l] = as_int32(acc[uint64_t{t} * L + l]) * k_scale[l] * q_scale[t];
}

void int8_mix_reference(const float* p, const float* v, float* out, uint32_t T, uint32_t L, uint32_t D) {
  std::vector<float> v_scale, p_scale;
  const auto vq = quantize_rows(v, L, D, v_scale);
  std::vector<float> pv(uint64_t{T} * L);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t l = 0; l < L; ++l) pv[uint64_t{t} * L + l] = p[uint64_t{t} * L + l] * v_scale[l];
  const auto pq = quantize_rows(pv.data(), T, L, p_scale);
  const auto acc = integer_product(pq, vq, T, D, L, false);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t d = 0; d < D; ++d) out[uint64_t{t} * D + d] = as_int32(acc[uint64_t{t} * D + d]) * p_scale[t];
}

void int8_matmul_reference(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                           bool b_transposed) {
  std::vector<float> row_scale, col_scale(n, 0.0f);
  const std::vector<double> qa = quantize_rows(a, m, k, row_scale);
  std::vector<double> qb(uint64_t{k} * n);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t col = 0; col < n; ++col)
      col_scale[col] = std::max(col_scale[col], std::abs(at(b, r, col, k, n, b_transposed)));
  for (auto& s : col_scale) s = int8_scale(s);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t col = 0; col < n; ++col)
      qb[uint64_t{r} * n + col] = to_int8(at(b, r, col, k, n, b_transposed), 1.0f / col_scale[col]);
  const std::vector<double> acc = integer_product(qa, qb, m, n, k, false);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t col = 0; col < n; ++col)
      c[uint64_t{r} * n + col] = as_int32(acc[uint64_t{r} * n + col]) * row_scale[r] * col_scale[col];
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
