// The cuda backend's own kernels (cuda_kernels.cu), launched on a stream. Matrices are row-major
// with a leading dimension; a "view" element (o, i) of a source is src[o * so + i * si], which
// covers a matrix, its transpose, and one head's columns of a wider activation.
//
// Each function launches one kernel (none where there is nothing to do) and returns what
// cudaGetLastError says right after that launch, so that a launch that fails is reported under its
// own kernel's name, not the next one's. An error left over from an earlier, already handled
// runtime call is cleared before the launch. Errors of the kernel's execution show up later, at the
// stream's synchronization. Any number of rows works: the kernels stride over rows when there are
// more than one grid holds.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace tessera::cuda {

// dst[o][i] (leading dimension ld >= inner; rows o >= outer and columns i >= inner zero-filled up
// to padded_outer x ld) = the view's element quantized to int8 per row o, with scale[o], exactly as
// quantize.hpp does it on the host. scale[o] is written for o < outer only.
[[nodiscard]] cudaError_t pack_int8(const float* src, uint64_t so, uint64_t si, uint32_t outer, uint32_t inner,
                                    uint32_t padded_outer, int8_t* dst, uint32_t ld, float* scale, cudaStream_t stream);

// dst[o][i] as pack_int8 lays it out, but each element quantized with a given scale per column i,
// inner_scale[i] (from an earlier pack_int8 of the rows the columns are); scale[o] = 1 for o < outer.
[[nodiscard]] cudaError_t pack_int8_with_scales(const float* src, uint64_t so, uint64_t si, uint32_t outer,
                                                uint32_t inner, uint32_t padded_outer, int8_t* dst, uint32_t ld,
                                                const float* inner_scale, float* scale, cudaStream_t stream);

// x[r][j] (ld) *= col_scale[j], one rounding, for r < rows and j < cols.
[[nodiscard]] cudaError_t scale_columns(float* x, uint64_t ld, uint32_t rows, uint32_t cols, const float* col_scale,
                                        cudaStream_t stream);

// The same view rounded to bfloat16 (nearest even), zero-padded the same way.
[[nodiscard]] cudaError_t pack_bf16(const float* src, uint64_t so, uint64_t si, uint32_t outer, uint32_t inner,
                                    uint32_t padded_outer, uint16_t* dst, uint32_t ld, cudaStream_t stream);

// c[r][j] (ldc) = float(acc[r][j]) * row_scale[r] * col_scale[j], then + bias[j] when bias is set,
// then GELU when gelu; acc has leading dimension ld_acc.
[[nodiscard]] cudaError_t dequantize(const int32_t* acc, uint32_t ld_acc, const float* row_scale,
                                     const float* col_scale, const float* bias, bool gelu, float* c, uint64_t ldc,
                                     uint32_t m, uint32_t n, cudaStream_t stream);

// c[r][j] (ldc) += bias[j] when bias is set, then GELU (tanh form) when gelu.
[[nodiscard]] cudaError_t bias_gelu(float* c, uint64_t ldc, uint32_t m, uint32_t n, const float* bias, bool gelu,
                                    cudaStream_t stream);

// Each row r of scores[rows, cols] (the query at position offset + r) scaled by `scale`, then
// softmax over keys 0 .. offset + r; later ones 0.
[[nodiscard]] cudaError_t softmax_causal(float* scores, uint32_t rows, uint32_t cols, uint32_t offset, float scale,
                                         cudaStream_t stream);

// y = (x - mean) / sqrt(var + eps) * gamma + beta per row of x[rows, cols].
[[nodiscard]] cudaError_t layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const float* gamma,
                                     const float* beta, float eps, cudaStream_t stream);

}  // namespace tessera::cuda
