// Symmetric int8 quantization shared by every int8 path of the runtime (the accelerator, the cuda
// backend's int8 GEMMs and their projection), so that they agree bit for bit on the operands:
// the left operand per row (per token), the right one per column (per output channel), each scaled
// so that its largest magnitude maps to 127; products accumulate exactly in int32 and come back as
// float(acc) * row_scale * col_scale. The attention core's products over a KV cache scale its keys
// and values per position instead (below).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tessera {

// The scale of a vector whose largest magnitude is max_abs (1 for an all-zero one, which stays zero).
inline float int8_scale(float max_abs) { return max_abs > 0 ? max_abs / 127.0f : 1.0f; }

// v / scale rounded half away from zero and clamped to [-127, 127]; inv_scale = 1.0f / scale.
inline int8_t to_int8(float v, float inv_scale) {
  return static_cast<int8_t>(std::clamp(std::lround(v * inv_scale), -127L, 127L));
}

// x[0, n) in int8 into out, scaled by its own largest magnitude; returns the scale. How every int8
// path quantizes a row of activations (and the accelerator a cached key or value).
template <class Out>
float quantize_row(const float* x, uint32_t n, Out* out) {
  float peak = 0;
  for (uint32_t i = 0; i < n; ++i) peak = std::max(peak, std::abs(x[i]));
  const float scale = int8_scale(peak);
  for (uint32_t i = 0; i < n; ++i) out[i] = static_cast<Out>(to_int8(x[i], 1.0f / scale));
  return scale;
}

// c[m, n] = a[m, k] * b ([k, n], or [n, k] when b_transposed) as an int8 path computes it, with the
// integer products summed exactly: the reference the int8 backends are checked against.
void int8_matmul_reference(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                           bool b_transposed);

// The attention core's two products as the accelerator computes them over its int8 KV cache, which
// holds a scale per position (so that appending a position leaves the others as they are).
// scores[T, L] = q[T, D] k[L, D]^T: q per row, k per position; the product is k q^T on the engine,
// so each score is float(acc) * k_scale * q_scale.
void int8_scores_reference(const float* q, const float* k, float* scores, uint32_t T, uint32_t L, uint32_t D);
// out[T, D] = p[T, L] v[L, D]: the values per position, their scales folded into p's columns, and
// those products per row.
void int8_mix_reference(const float* p, const float* v, float* out, uint32_t T, uint32_t L, uint32_t D);

// a and b rounded to bfloat16 (nearest even) and multiplied in fp32: what a bf16 GEMM with fp32
// accumulation gives, up to summation order.
void bf16_matmul_reference(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                           bool b_transposed);

}  // namespace tessera
