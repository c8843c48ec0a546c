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

// y = (x - mean) / sqrt(var + eps) * gamma + beta per row of x[rows, cols].
[[nodiscard]] cudaError_t layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const float* gamma,
                                     const float* beta, float eps, cudaStream_t stream);

// layer_norm's output packed as a GEMM's left operand, as pack_int8 (int8) or pack_bf16 (else)
// would pack it (the same bits), without writing it out: the LayerNorm with the int8 per-token
// quantization fused in. dst [padded_rows][ld] (int8, or bf16 as uint16), rows >= rows and
// columns >= cols zero; scale[r] for r < rows (int8).
[[nodiscard]] cudaError_t layer_norm_pack(const float* x, uint32_t rows, uint32_t cols, const float* gamma,
                                          const float* beta, float eps, bool int8, uint32_t padded_rows, void* dst,
                                          uint32_t ld, float* scale, cudaStream_t stream);

// x[r][c] = wte[tokens[r]][c] + wpe[past + r % tokens_per_sequence][c] for r < rows, c < width:
// the embedding, past as kv_append's (below).
[[nodiscard]] cudaError_t embed(const int32_t* tokens, const float* wte, const float* wpe, uint32_t past,
                                const uint32_t* past_on_device, uint32_t rows, uint32_t tokens_per_sequence,
                                uint32_t width, float* x, cudaStream_t stream);

// x[i] += y[i] for i < n (the residual stream and a projection's output).
[[nodiscard]] cudaError_t add_into(float* x, const float* y, uint64_t n, cudaStream_t stream);

// x[i] = (x[i] + (first[i] + rest[0][i] + ... + rest[rest_count - 1][i])) + bias[i % width] for
// i < n, the sums in that order (bias skipped where null): a row-parallel projection's partial sums
// of a stage's shards added in shard order, then its bias, as the host adds them. rest is
// [rest_count][n].
[[nodiscard]] cudaError_t add_partials(float* x, const float* first, const float* rest, uint32_t rest_count,
                                       uint64_t n, const float* bias, uint32_t width, cudaStream_t stream);

// A KV cache on the device, for one layer of one shard: `batch` sequences x `heads` heads x
// `capacity` positions x head_dim, keys and values, in the precision of the ops (`kind`): fp32,
// bf16 (rounded to nearest even at append), or int8 with a scale per position (each position's
// head_dim values quantized once at append, as the accelerator's cache holds them).
//
// A cache of kSplitFromPositions positions or more has scratch for a decode step split over its
// positions (attention, below): its scores and p ([batch * heads][capacity], p quantized for
// int8), int8's scale of p per row, and the sums of each chunk of kSplitChunk positions
// ([batch * heads][chunks][head_dim], int32 for int8).
enum class KvKind { kFp32, kBf16, kInt8 };
constexpr uint32_t kSplitFromPositions = 256, kSplitChunk = 256;
struct SplitScratch {
  float* scores = nullptr;
  int8_t* p8 = nullptr;
  float* p_scale = nullptr;
  void* partial = nullptr;
};
struct KvView {
  KvKind kind = KvKind::kFp32;
  void *k = nullptr, *v = nullptr;                // [batch][heads][capacity][head_dim]
  float *k_scale = nullptr, *v_scale = nullptr;   // int8: [batch][heads][capacity]
  uint32_t batch = 0, heads = 0, head_dim = 0, capacity = 0;
  SplitScratch split;                             // none below kSplitFromPositions
};
// The bytes of that scratch for such a cache (0 below kSplitFromPositions), and its parts in an
// allocation of that many bytes at `base`.
uint64_t split_scratch_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity);
SplitScratch split_scratch_at(void* base, uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity);

// The keys and values of `tokens` new tokens of each sequence, from qkv[batch * tokens, 3 * heads *
// head_dim] (q, k and v blocks side by side), into the cache at positions past onwards. `past` is
// read from device memory where past_on_device is set (a graph replays with the position of the
// step), else `past` is used.
[[nodiscard]] cudaError_t kv_append(const float* qkv, uint32_t tokens, uint32_t past, const uint32_t* past_on_device,
                                    const KvView& cache, cudaStream_t stream);

// The attention core over the cache for those tokens, every sequence, head and token in one
// launch: out[batch * tokens, heads * head_dim] = softmax(q k^T * scale, causal) v, each token
// seeing positions 0 .. past + its own. In the cache's precision as the GEMM paths compute it: fp32;
// q and p rounded to bf16 against bf16 keys and values, fp32 sums; int8 as the accelerator does
// (int8_scores_reference, int8_mix_reference: q per row, p with the values' scales folded in per
// row, integer sums, float(acc) * scales). past as kv_append's. capacity <= kMaxAttentionPositions.
// A decode step (tokens = 1) over a cache with split scratch runs split over its positions, in four
// launches (scores, softmax, the mix of each chunk, the chunks added), so that a long context
// keeps the whole GPU busy with one sequence; its scores and int8 sums are the same bits as the
// one launch's, its fp32 and bf16 sums are added in another order.
constexpr uint32_t kMaxAttentionPositions = 8192;
[[nodiscard]] cudaError_t attention(const float* qkv, float* out, uint32_t tokens, uint32_t past,
                                    const uint32_t* past_on_device, const KvView& cache, float scale,
                                    cudaStream_t stream);

}  // namespace tessera::cuda
