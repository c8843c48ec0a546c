#include "cuda_kernels.hpp"

#include <cuda_bf16.h>

namespace tessera::cuda {

namespace {

// Every kernel here runs kThreads threads per block (block_reduce relies on it) and one block per
// row, the blocks striding over the rows when there are more than kMaxBlocks.
constexpr int kThreads = 256;
constexpr uint32_t kMaxBlocks = 1u << 16;

uint32_t blocks_for(uint64_t rows) { return rows < kMaxBlocks ? static_cast<uint32_t>(rows) : kMaxBlocks; }

// The reduction of v over the block with op; every thread gets the result. Every thread of the
// block must call it (the row loops below are uniform over a block).
template <class T, class Op>
__device__ T block_reduce(T v, Op op) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, one block");
  __shared__ T partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial may still be read by a previous reduction
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < kThreads / 32; ++w) v = op(v, partial[w]);
  return v;
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

__device__ float gelu_tanh(float v) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

__global__ void pack_int8_kernel(const float* src, uint64_t so, uint64_t si, uint32_t outer, uint32_t inner,
                                 uint32_t padded_outer, int8_t* dst, uint32_t ld, float* scale) {
  for (uint64_t o = blockIdx.x; o < padded_outer; o += gridDim.x) {
    int8_t* out = dst + o * ld;
    if (o >= outer) {  // the same for the whole block: no thread skips a block_reduce
      for (uint32_t i = threadIdx.x; i < ld; i += blockDim.x) out[i] = 0;
      continue;
    }
    const float* in = src + o * so;
    float peak = 0;
    for (uint32_t i = threadIdx.x; i < inner; i += blockDim.x) peak = fmaxf(peak, fabsf(in[i * si]));
    peak = block_reduce(peak, Max{});
    // As the host: the scale maps the largest magnitude to 127; round half away from zero.
    const float s = peak > 0 ? __fdiv_rn(peak, 127.0f) : 1.0f, inv = __fdiv_rn(1.0f, s);
    if (threadIdx.x == 0) scale[o] = s;
    for (uint32_t i = threadIdx.x; i < ld; i += blockDim.x)
      out[i] = i < inner ? static_cast<int8_t>(fminf(fmaxf(roundf(__fmul_rn(in[i * si], inv)), -127.0f), 127.0f)) : 0;
  }
}

__global__ void pack_int8_with_scales_kernel(const float* src, uint64_t so, uint64_t si, uint32_t outer,
                                             uint32_t inner, uint32_t padded_outer, int8_t* dst, uint32_t ld,
                                             const float* inner_scale, float* scale) {
  for (uint64_t o = blockIdx.x; o < padded_outer; o += gridDim.x) {
    int8_t* out = dst + o * ld;
    if (threadIdx.x == 0 && o < outer) scale[o] = 1.0f;
    for (uint32_t i = threadIdx.x; i < ld; i += blockDim.x) {
      if (o >= outer || i >= inner) {
        out[i] = 0;
        continue;
      }
      const float inv = __fdiv_rn(1.0f, inner_scale[i]);  // as pack_int8 and the host: v * (1 / s)
      out[i] = static_cast<int8_t>(fminf(fmaxf(roundf(__fmul_rn(src[o * so + i * si], inv)), -127.0f), 127.0f));
    }
  }
}

__global__ void scale_columns_kernel(float* x, uint64_t ld, uint32_t rows, uint32_t cols, const float* col_scale) {
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x)
    for (uint32_t j = threadIdx.x; j < cols; j += blockDim.x) x[r * ld + j] = __fmul_rn(x[r * ld + j], col_scale[j]);
}

__global__ void pack_bf16_kernel(const float* src, uint64_t so, uint64_t si, uint32_t outer, uint32_t inner,
                                 uint32_t padded_outer, __nv_bfloat16* dst, uint32_t ld) {
  for (uint64_t o = blockIdx.x; o < padded_outer; o += gridDim.x)
    for (uint32_t i = threadIdx.x; i < ld; i += blockDim.x)
      dst[o * ld + i] = __float2bfloat16_rn(o < outer && i < inner ? src[o * so + i * si] : 0.0f);
}

__global__ void dequantize_kernel(const int32_t* acc, uint32_t ld_acc, const float* row_scale, const float* col_scale,
                                  const float* bias, bool gelu, float* c, uint64_t ldc, uint32_t m, uint32_t n) {
  for (uint64_t r = blockIdx.x; r < m; r += gridDim.x)
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) {
      // Explicit roundings, so that no multiply-add is fused: the same bits as the host.
      float v = __fmul_rn(__fmul_rn(static_cast<float>(acc[r * ld_acc + j]), row_scale[r]), col_scale[j]);
      if (bias) v = __fadd_rn(v, bias[j]);
      c[r * ldc + j] = gelu ? gelu_tanh(v) : v;
    }
}

__global__ void bias_gelu_kernel(float* c, uint64_t ldc, uint32_t m, uint32_t n, const float* bias, bool gelu) {
  for (uint64_t r = blockIdx.x; r < m; r += gridDim.x) {
    float* row = c + r * ldc;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) {
      float v = row[j];
      if (bias) v = __fadd_rn(v, bias[j]);
      row[j] = gelu ? gelu_tanh(v) : v;
    }
  }
}

__global__ void softmax_causal_kernel(float* scores, uint32_t rows, uint32_t cols, uint32_t offset, float scale) {
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint32_t visible = offset + r + 1 < cols ? static_cast<uint32_t>(offset + r + 1) : cols;
    float* s = scores + r * cols;
    float peak = -INFINITY;
    for (uint32_t c = threadIdx.x; c < visible; c += blockDim.x) peak = fmaxf(peak, s[c] = __fmul_rn(s[c], scale));
    peak = block_reduce(peak, Max{});
    float sum = 0;
    for (uint32_t c = threadIdx.x; c < visible; c += blockDim.x) sum += s[c] = expf(s[c] - peak);
    sum = block_reduce(sum, Sum{});
    for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x) s[c] = c < visible ? __fdiv_rn(s[c], sum) : 0.0f;
  }
}

__global__ void layer_norm_kernel(const float* x, float* y, uint32_t rows, uint32_t cols, const float* gamma,
                                  const float* beta, float eps) {
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    // Double sums, as the host does them (in another order).
    double sum = 0;
    for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x) sum += in[c];
    const double mean = block_reduce(sum, Sum{}) / cols;
    double var = 0;
    for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x) var += (in[c] - mean) * (in[c] - mean);
    var = block_reduce(var, Sum{}) / cols;
    const float inv = static_cast<float>(1.0 / sqrt(var + eps)), m = static_cast<float>(mean);
    // Rounded step by step as the host's expression is (no fused multiply-add).
    for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x)
      out[c] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(in[c], m), inv), gamma[c]), beta[c]);
  }
}

// The error of the launch just made; one left over from before is cleared first (every runtime
// call of the backend checks its own result, so such an error has been dealt with already).
void clear_error() { (void)cudaGetLastError(); }

}  // namespace

cudaError_t pack_int8(const float* src, uint64_t so, uint64_t si, uint32_t outer, uint32_t inner, uint32_t padded_outer,
                      int8_t* dst, uint32_t ld, float* scale, cudaStream_t stream) {
  if (padded_outer == 0 || ld == 0) return cudaSuccess;  // a grid of no blocks is a launch error
  clear_error();
  pack_int8_kernel<<<blocks_for(padded_outer), kThreads, 0, stream>>>(src, so, si, outer, inner, padded_outer, dst,
                                                                       ld, scale);
  return cudaGetLastError();
}

cudaError_t pack_int8_with_scales(const float* src, uint64_t so, uint64_t si, uint32_t outer, uint32_t inner,
                                  uint32_t padded_outer, int8_t* dst, uint32_t ld, const float* inner_scale,
                                  float* scale, cudaStream_t stream) {
  if (padded_outer == 0 || ld == 0) return cudaSuccess;
  clear_error();
  pack_int8_with_scales_kernel<<<blocks_for(padded_outer), kThreads, 0, stream>>>(src, so, si, outer, inner,
                                                                                   padded_outer, dst, ld, inner_scale,
                                                                                   scale);
  return cudaGetLastError();
}

cudaError_t scale_columns(float* x, uint64_t ld, uint32_t rows, uint32_t cols, const float* col_scale,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  clear_error();
  scale_columns_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, ld, rows, cols, col_scale);
  return cudaGetLastError();
}

cudaError_t pack_bf16(const float* src, uint64_t so, uint64_t si, uint32_t outer, uint32_t inner, uint32_t padded_outer,
                      uint16_t* dst, uint32_t ld, cudaStream_t stream) {
  if (padded_outer == 0 || ld == 0) return cudaSuccess;
  clear_error();
  pack_bf16_kernel<<<blocks_for(padded_outer), kThreads, 0, stream>>>(src, so, si, outer, inner, padded_outer,
                                                                       reinterpret_cast<__nv_bfloat16*>(dst), ld);
  return cudaGetLastError();
}

cudaError_t dequantize(const int32_t* acc, uint32_t ld_acc, const float* row_scale, const float* col_scale,
                       const float* bias, bool gelu, float* c, uint64_t ldc, uint32_t m, uint32_t n,
                       cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  clear_error();
  dequantize_kernel<<<blocks_for(m), kThreads, 0, stream>>>(acc, ld_acc, row_scale, col_scale, bias, gelu, c, ldc, m,
                                                             n);
  return cudaGetLastError();
}

cudaError_t bias_gelu(float* c, uint64_t ldc, uint32_t m, uint32_t n, const float* bias, bool gelu,
                      cudaStream_t stream) {
  if (m == 0 || n == 0 || (!bias && !gelu)) return cudaSuccess;
  clear_error();
  bias_gelu_kernel<<<blocks_for(m), kThreads, 0, stream>>>(c, ldc, m, n, bias, gelu);
  return cudaGetLastError();
}

cudaError_t softmax_causal(float* scores, uint32_t rows, uint32_t cols, uint32_t offset, float scale,
                           cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  clear_error();
  softmax_causal_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(scores, rows, cols, offset, scale);
  return cudaGetLastError();
}

cudaError_t layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const float* gamma, const float* beta,
                       float eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  clear_error();
  layer_norm_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, y, rows, cols, gamma, beta, eps);
  return cudaGetLastError();
}

}  // namespace tessera::cuda
