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

// v quantized with inv = 1 / scale as pack_int8 and the host do it: round half away from zero, clamp.
__device__ int8_t to_int8(float v, float inv) {
  return static_cast<int8_t>(fminf(fmaxf(roundf(__fmul_rn(v, inv)), -127.0f), 127.0f));
}
__device__ float int8_scale(float peak) { return peak > 0 ? __fdiv_rn(peak, 127.0f) : 1.0f; }
__device__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

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

// A row's mean and 1 / sqrt(variance + eps), by the whole block, with double sums as the host does
// them (in another order).
struct RowNorm {
  float mean, inv;
};
__device__ RowNorm row_norm(const float* in, uint32_t cols, float eps) {
  double sum = 0;
  for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x) sum += in[c];
  const double mean = block_reduce(sum, Sum{}) / cols;
  double var = 0;
  for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double d = __dsub_rn(in[c], mean);
    var = __dadd_rn(var, __dmul_rn(d, d));  // rounded as written, in every kernel that inlines it
  }
  var = block_reduce(var, Sum{}) / cols;
  return {static_cast<float>(mean), static_cast<float>(1.0 / sqrt(var + eps))};
}
// Column c of the normalized row, rounded step by step as the host's expression is (no fused
// multiply-add).
__device__ float normalized(const float* in, uint32_t c, RowNorm n, const float* gamma, const float* beta) {
  return __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(in[c], n.mean), n.inv), gamma[c]), beta[c]);
}

__global__ void layer_norm_kernel(const float* x, float* y, uint32_t rows, uint32_t cols, const float* gamma,
                                  const float* beta, float eps) {
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * cols;
    const RowNorm n = row_norm(in, cols, eps);
    for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x) y[r * cols + c] = normalized(in, c, n, gamma, beta);
  }
}

// layer_norm_kernel's rows packed as pack_int8_kernel (int8) or pack_bf16_kernel would pack them,
// the normalized values computed twice (for the peak, then for the packing) rather than stored.
__global__ void layer_norm_pack_kernel(const float* x, uint32_t rows, uint32_t cols, const float* gamma,
                                       const float* beta, float eps, bool int8, uint32_t padded_rows, void* dst,
                                       uint32_t ld, float* scale) {
  for (uint64_t r = blockIdx.x; r < padded_rows; r += gridDim.x) {
    int8_t* out8 = static_cast<int8_t*>(dst) + r * ld;
    __nv_bfloat16* out16 = static_cast<__nv_bfloat16*>(dst) + r * ld;
    if (r >= rows) {  // the same for the whole block
      for (uint32_t i = threadIdx.x; i < ld; i += blockDim.x)
        if (int8)
          out8[i] = 0;
        else
          out16[i] = __float2bfloat16_rn(0.0f);
      continue;
    }
    const float* in = x + r * cols;
    const RowNorm n = row_norm(in, cols, eps);
    if (!int8) {
      for (uint32_t i = threadIdx.x; i < ld; i += blockDim.x)
        out16[i] = __float2bfloat16_rn(i < cols ? normalized(in, i, n, gamma, beta) : 0.0f);
      continue;
    }
    float peak = 0;
    for (uint32_t i = threadIdx.x; i < cols; i += blockDim.x) peak = fmaxf(peak, fabsf(normalized(in, i, n, gamma, beta)));
    const float s = int8_scale(block_reduce(peak, Max{})), inv = __fdiv_rn(1.0f, s);
    if (threadIdx.x == 0) scale[r] = s;
    for (uint32_t i = threadIdx.x; i < ld; i += blockDim.x)
      out8[i] = i < cols ? to_int8(normalized(in, i, n, gamma, beta), inv) : 0;
  }
}

__global__ void embed_kernel(const int32_t* tokens, const float* wte, const float* wpe, uint32_t past_given,
                             const uint32_t* past_dev, uint32_t rows, uint32_t per_sequence, uint32_t width, float* x) {
  const uint32_t past = past_dev ? *past_dev : past_given;
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* word = wte + uint64_t(tokens[r]) * width;
    const float* position = wpe + uint64_t{past + static_cast<uint32_t>(r % per_sequence)} * width;
    for (uint32_t c = threadIdx.x; c < width; c += blockDim.x) x[r * width + c] = __fadd_rn(word[c], position[c]);
  }
}

__global__ void add_into_kernel(float* x, const float* y, uint64_t n) {
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x)
    x[i] = __fadd_rn(x[i], y[i]);
}

__global__ void add_partials_kernel(float* x, const float* first, const float* rest, uint32_t rest_count, uint64_t n,
                                    const float* bias, uint32_t width) {
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    float sum = first[i];
    for (uint32_t k = 0; k < rest_count; ++k) sum = __fadd_rn(sum, rest[uint64_t{k} * n + i]);
    float v = __fadd_rn(x[i], sum);
    if (bias) v = __fadd_rn(v, bias[i % width]);
    x[i] = v;
  }
}


// x[0, n) quantized into out by the whole block, as pack_int8 quantizes a row; returns its scale.
// Each thread reads and writes the elements i = threadIdx.x + k * blockDim.x.
__device__ float block_quantize(const float* x, uint32_t n, int8_t* out) {
  float peak = 0;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) peak = fmaxf(peak, fabsf(x[i]));
  const float scale = int8_scale(block_reduce(peak, Max{})), inv = __fdiv_rn(1.0f, scale);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = to_int8(x[i], inv);
  return scale;
}

// Row r of the cache's keys (which = 0) or values (1) for sequence s, head h, position l.
__device__ uint64_t kv_row(const KvView& c, uint32_t s, uint32_t h, uint32_t l) {
  return (uint64_t{s} * c.heads + h) * c.capacity + l;
}

// One block per (sequence, token, head, keys or values): that row into the cache.
__global__ void kv_append_kernel(const float* qkv, uint32_t tokens, uint32_t past_given, const uint32_t* past_dev,
                                 KvView c) {
  const uint32_t past = past_dev ? *past_dev : past_given, D = c.head_dim, HD = c.heads * D;
  const uint64_t rows = uint64_t{c.batch} * tokens * c.heads * 2;
  for (uint64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const uint32_t which = i % 2, h = (i / 2) % c.heads;
    const uint64_t st = i / 2 / c.heads;  // sequence * tokens + token
    const uint32_t s = static_cast<uint32_t>(st / tokens), t = static_cast<uint32_t>(st % tokens);
    const float* src = qkv + st * 3 * HD + (which + 1) * HD + uint64_t{h} * D;
    const uint64_t row = kv_row(c, s, h, past + t);
    void* base = which ? c.v : c.k;
    if (c.kind == KvKind::kFp32) {
      for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) static_cast<float*>(base)[row * D + d] = src[d];
    } else if (c.kind == KvKind::kBf16) {
      for (uint32_t d = threadIdx.x; d < D; d += blockDim.x)
        static_cast<__nv_bfloat16*>(base)[row * D + d] = __float2bfloat16_rn(src[d]);
    } else {
      const float scale = block_quantize(src, D, static_cast<int8_t*>(base) + row * D);
      if (threadIdx.x == 0) (which ? c.v_scale : c.k_scale)[row] = scale;
    }
  }
}

// The query of one token and head into q (and q8), in the precision of the products, by the whole
// block; returns int8's scale (1 for the others). Starts and ends with a barrier.
__device__ float load_query(const float* src, const KvView& c, float* q, int8_t* q8) {
  __syncthreads();  // the previous item's reads of q are done
  for (uint32_t d = threadIdx.x; d < c.head_dim; d += blockDim.x)
    q[d] = c.kind == KvKind::kBf16 ? round_bf16(src[d]) : src[d];
  const float q_scale = c.kind == KvKind::kInt8 ? block_quantize(q, c.head_dim, q8) : 1.0f;
  __syncthreads();
  return q_scale;
}

// The scaled score of the query against the key in the cache's row `row`.
__device__ float score_at(const KvView& c, uint64_t row, const float* q, const int8_t* q8, float q_scale, float scale) {
  const uint32_t D = c.head_dim;
  float score = 0;
  if (c.kind == KvKind::kFp32) {
    const float* k = static_cast<const float*>(c.k) + row * D;
    for (uint32_t d = 0; d < D; ++d) score = fmaf(q[d], k[d], score);
  } else if (c.kind == KvKind::kBf16) {
    const __nv_bfloat16* k = static_cast<const __nv_bfloat16*>(c.k) + row * D;
    for (uint32_t d = 0; d < D; ++d) score = fmaf(q[d], __bfloat162float(k[d]), score);
  } else {
    const int8_t* k = static_cast<const int8_t*>(c.k) + row * D;
    int32_t acc = 0;
    for (uint32_t d = 0; d < D; ++d) acc += int32_t{q8[d]} * int32_t{k[d]};
    score = __fmul_rn(__fmul_rn(static_cast<float>(acc), c.k_scale[row]), q_scale);
  }
  return __fmul_rn(score, scale);
}

// The softmax of scores[0, L) of sequence s and head h, in place, by the whole block, each thread
// on the positions l = threadIdx.x + k * blockDim.x (those it wrote, where it wrote them): the
// scores less their peak, exponentiated, over their sum, as the mix takes them (bf16: rounded;
// int8: the values' scales folded in, then quantized into p8). Returns int8's scale of p (1 for
// the others). Ends with a barrier.
__device__ float softmax_row(float* scores, uint32_t L, const KvView& c, uint32_t s, uint32_t h, int8_t* p8) {
  float peak = -INFINITY;
  for (uint32_t l = threadIdx.x; l < L; l += blockDim.x) peak = fmaxf(peak, scores[l]);
  peak = block_reduce(peak, Max{});
  float sum = 0;
  for (uint32_t l = threadIdx.x; l < L; l += blockDim.x) sum += scores[l] = expf(scores[l] - peak);
  sum = block_reduce(sum, Sum{});
  for (uint32_t l = threadIdx.x; l < L; l += blockDim.x) {
    float p = __fdiv_rn(scores[l], sum);
    if (c.kind == KvKind::kBf16) p = round_bf16(p);
    if (c.kind == KvKind::kInt8) p = __fmul_rn(p, c.v_scale[kv_row(c, s, h, l)]);  // the values' scales folded in
    scores[l] = p;
  }
  const float p_scale = c.kind == KvKind::kInt8 ? block_quantize(scores, L, p8) : 1.0f;
  __syncthreads();
  return p_scale;
}

// The mix of the values at positions [l0, l1) of sequence s and head h with p (int8: p8), by the
// whole block: groups of head_dim threads (head_dim <= blockDim.x), each group over every
// groups-th position, then the groups' sums added. Thread d < head_dim gets column d's sums (f for
// fp32 and bf16, n for int8).
__device__ void mix_range(const KvView& c, uint32_t s, uint32_t h, const float* p, const int8_t* p8, uint32_t l0,
                          uint32_t l1, float& f, int32_t& n) {
  __shared__ float partial_f[kThreads];
  __shared__ int32_t partial_i[kThreads];
  const uint32_t D = c.head_dim, groups = blockDim.x / D, g = threadIdx.x / D, d = threadIdx.x % D;
  float acc_f = 0;
  int32_t acc_i = 0;
  if (g < groups)
    for (uint32_t l = l0 + g; l < l1; l += groups) {
      const uint64_t at = kv_row(c, s, h, l) * D + d;
      if (c.kind == KvKind::kFp32)
        acc_f = fmaf(p[l], static_cast<const float*>(c.v)[at], acc_f);
      else if (c.kind == KvKind::kBf16)
        acc_f = fmaf(p[l], __bfloat162float(static_cast<const __nv_bfloat16*>(c.v)[at]), acc_f);
      else
        acc_i += int32_t{p8[l]} * int32_t{static_cast<const int8_t*>(c.v)[at]};
    }
  __syncthreads();  // the partials of a previous call are read
  partial_f[threadIdx.x] = acc_f;
  partial_i[threadIdx.x] = acc_i;
  __syncthreads();
  f = 0, n = 0;
  if (threadIdx.x < D)
    for (uint32_t k = 0; k < groups; ++k) f += partial_f[k * D + threadIdx.x], n += partial_i[k * D + threadIdx.x];
}

// One block per (sequence, head, token): the token's query against the positions it sees, the
// softmax, and the mix of the values. Dynamic shared memory: the scores (float[capacity]), the
// query (float[head_dim]), and for int8 the quantized p (int8[capacity]) and q (int8[head_dim]).
__global__ void attention_kernel(const float* qkv, float* out, uint32_t tokens, uint32_t past_given,
                                 const uint32_t* past_dev, KvView c, float scale) {
  extern __shared__ float shared[];
  float* scores = shared;
  float* q = scores + c.capacity;
  int8_t* p8 = reinterpret_cast<int8_t*>(q + c.head_dim);
  int8_t* q8 = p8 + c.capacity;
  const uint32_t past = past_dev ? *past_dev : past_given, D = c.head_dim, HD = c.heads * D;
  const uint64_t items = uint64_t{c.batch} * c.heads * tokens;
  for (uint64_t i = blockIdx.x; i < items; i += gridDim.x) {
    const uint32_t t = i % tokens, h = (i / tokens) % c.heads, s = static_cast<uint32_t>(i / tokens / c.heads);
    const uint32_t L = past + t + 1;  // positions this token sees
    const float q_scale = load_query(qkv + (uint64_t{s} * tokens + t) * 3 * HD + uint64_t{h} * D, c, q, q8);
    for (uint32_t l = threadIdx.x; l < L; l += blockDim.x) scores[l] = score_at(c, kv_row(c, s, h, l), q, q8, q_scale, scale);
    const float p_scale = softmax_row(scores, L, c, s, h, p8);
    float f;
    int32_t n;
    mix_range(c, s, h, scores, p8, 0, L, f, n);
    if (threadIdx.x < D)
      out[(uint64_t{s} * tokens + t) * HD + uint64_t{h} * D + threadIdx.x] =
          c.kind == KvKind::kInt8 ? __fmul_rn(static_cast<float>(n), p_scale) : f;
  }
}

// Decode over a long cache, split over its positions (flash-decoding's split, with the softmax
// between): one token of each sequence, item = sequence * heads + head, chunks of kSplitChunk
// positions, the scratch of the cache (KvView::split). The scores and the int8 sums are those of
// attention_kernel, bit for bit; fp32 and bf16 sums add in another order.
__host__ __device__ uint32_t split_chunks(uint32_t capacity) { return (capacity + kSplitChunk - 1) / kSplitChunk; }

// Work item i of the split kernels: its sequence s, head h, item (s * heads + h) and positions
// [l0, l1) of the L the token sees (none where l0 >= L).
struct SplitWork {
  __device__ SplitWork(uint64_t i, const KvView& c, uint32_t L) {
    const uint32_t chunks = split_chunks(c.capacity), chunk = i % chunks;
    item = i / chunks, h = item % c.heads, s = static_cast<uint32_t>(item / c.heads);
    l0 = chunk * kSplitChunk, l1 = min(L, l0 + kSplitChunk);
  }
  uint64_t item;
  uint32_t s, h, l0, l1;
};

// The scores of each (item, chunk): a thread per position.
__global__ void split_scores_kernel(const float* qkv, uint32_t past_given, const uint32_t* past_dev, KvView c,
                                    float scale) {
  __shared__ float q[kThreads];
  __shared__ int8_t q8[kThreads];
  const uint32_t L = (past_dev ? *past_dev : past_given) + 1, D = c.head_dim, HD = c.heads * D;
  const uint64_t work = uint64_t{c.batch} * c.heads * split_chunks(c.capacity);
  for (uint64_t i = blockIdx.x; i < work; i += gridDim.x) {
    const SplitWork w(i, c, L);
    if (w.l0 >= L) continue;  // the same for the whole block
    const float q_scale = load_query(qkv + uint64_t{w.s} * 3 * HD + uint64_t{w.h} * D, c, q, q8);
    for (uint32_t l = w.l0 + threadIdx.x; l < w.l1; l += blockDim.x)
      c.split.scores[w.item * c.capacity + l] = score_at(c, kv_row(c, w.s, w.h, l), q, q8, q_scale, scale);
  }
}

// The softmax of each item's scores, in place (int8: quantized into p8, its scale into p_scale).
__global__ void split_softmax_kernel(uint32_t past_given, const uint32_t* past_dev, KvView c) {
  const uint32_t L = (past_dev ? *past_dev : past_given) + 1;
  const uint64_t items = uint64_t{c.batch} * c.heads;
  for (uint64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const uint32_t h = item % c.heads, s = static_cast<uint32_t>(item / c.heads);
    __syncthreads();  // the previous item's reads are done
    const float p_scale =
        softmax_row(c.split.scores + item * c.capacity, L, c, s, h, c.split.p8 + item * c.capacity);
    if (threadIdx.x == 0) c.split.p_scale[item] = p_scale;
  }
}

// Each (item, chunk)'s sums of the mix, per column, into split.partial (float, or int32 for int8).
__global__ void split_mix_kernel(uint32_t past_given, const uint32_t* past_dev, KvView c) {
  const uint32_t L = (past_dev ? *past_dev : past_given) + 1, D = c.head_dim;
  const uint64_t work = uint64_t{c.batch} * c.heads * split_chunks(c.capacity);
  for (uint64_t i = blockIdx.x; i < work; i += gridDim.x) {
    const SplitWork w(i, c, L);
    if (w.l0 >= L) continue;  // the same for the whole block
    float f;
    int32_t n;
    mix_range(c, w.s, w.h, c.split.scores + w.item * c.capacity, c.split.p8 + w.item * c.capacity, w.l0, w.l1, f, n);
    if (threadIdx.x < D) {
      if (c.kind == KvKind::kInt8)
        static_cast<int32_t*>(c.split.partial)[i * D + threadIdx.x] = n;
      else
        static_cast<float*>(c.split.partial)[i * D + threadIdx.x] = f;
    }
  }
}

// Each item's output: its chunks' sums added in chunk order (int8: exactly, then scaled).
__global__ void split_combine_kernel(float* out, uint32_t past_given, const uint32_t* past_dev, KvView c) {
  const uint32_t L = (past_dev ? *past_dev : past_given) + 1, D = c.head_dim;
  const uint32_t chunks = split_chunks(c.capacity), used = split_chunks(L);
  const uint64_t items = uint64_t{c.batch} * c.heads;
  for (uint64_t item = blockIdx.x; item < items; item += gridDim.x) {
    if (threadIdx.x >= D) continue;
    float f = 0;
    int32_t n = 0;
    for (uint32_t k = 0; k < used; ++k) {
      const uint64_t at = (item * chunks + k) * D + threadIdx.x;
      if (c.kind == KvKind::kInt8)
        n += static_cast<const int32_t*>(c.split.partial)[at];
      else
        f += static_cast<const float*>(c.split.partial)[at];
    }
    // tokens = 1: the output row of sequence s is s * heads * D, its head h at h * D: item * D.
    out[item * D + threadIdx.x] = c.kind == KvKind::kInt8 ? __fmul_rn(static_cast<float>(n), c.split.p_scale[item]) : f;
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

cudaError_t layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const float* gamma, const float* beta,
                       float eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  clear_error();
  layer_norm_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, y, rows, cols, gamma, beta, eps);
  return cudaGetLastError();
}

cudaError_t embed(const int32_t* tokens, const float* wte, const float* wpe, uint32_t past,
                  const uint32_t* past_on_device, uint32_t rows, uint32_t tokens_per_sequence, uint32_t width, float* x,
                  cudaStream_t stream) {
  if (rows == 0 || width == 0 || tokens_per_sequence == 0) return cudaSuccess;
  clear_error();
  embed_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(tokens, wte, wpe, past, past_on_device, rows,
                                                           tokens_per_sequence, width, x);
  return cudaGetLastError();
}

cudaError_t add_into(float* x, const float* y, uint64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  clear_error();
  add_into_kernel<<<blocks_for((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t layer_norm_pack(const float* x, uint32_t rows, uint32_t cols, const float* gamma, const float* beta,
                            float eps, bool int8, uint32_t padded_rows, void* dst, uint32_t ld, float* scale,
                            cudaStream_t stream) {
  if (padded_rows == 0 || ld == 0) return cudaSuccess;
  clear_error();
  layer_norm_pack_kernel<<<blocks_for(padded_rows), kThreads, 0, stream>>>(x, rows, cols, gamma, beta, eps, int8,
                                                                            padded_rows, dst, ld, scale);
  return cudaGetLastError();
}

cudaError_t add_partials(float* x, const float* first, const float* rest, uint32_t rest_count, uint64_t n,
                         const float* bias, uint32_t width, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (bias && width == 0) return cudaErrorInvalidValue;
  clear_error();
  add_partials_kernel<<<blocks_for((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(x, first, rest, rest_count,
                                                                                         n, bias, width);
  return cudaGetLastError();
}

cudaError_t kv_append(const float* qkv, uint32_t tokens, uint32_t past, const uint32_t* past_on_device,
                      const KvView& cache, cudaStream_t stream) {
  const uint64_t rows = uint64_t{cache.batch} * tokens * cache.heads * 2;
  if (rows == 0 || cache.head_dim == 0) return cudaSuccess;
  clear_error();
  kv_append_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(qkv, tokens, past, past_on_device, cache);
  return cudaGetLastError();
}

cudaError_t attention(const float* qkv, float* out, uint32_t tokens, uint32_t past, const uint32_t* past_on_device,
                      const KvView& cache, float scale, cudaStream_t stream) {
  const uint64_t items = uint64_t{cache.batch} * cache.heads * tokens;
  if (items == 0 || cache.head_dim == 0) return cudaSuccess;
  // The mix gives each output column a thread of its own.
  if (cache.capacity > kMaxAttentionPositions || cache.head_dim > kThreads) return cudaErrorInvalidValue;
  clear_error();
  if (tokens == 1 && cache.split.scores) {
    const uint64_t work = items * split_chunks(cache.capacity);
    split_scores_kernel<<<blocks_for(work), kThreads, 0, stream>>>(qkv, past, past_on_device, cache, scale);
    split_softmax_kernel<<<blocks_for(items), kThreads, 0, stream>>>(past, past_on_device, cache);
    split_mix_kernel<<<blocks_for(work), kThreads, 0, stream>>>(past, past_on_device, cache);
    split_combine_kernel<<<blocks_for(items), kThreads, 0, stream>>>(out, past, past_on_device, cache);
    return cudaGetLastError();
  }
  const size_t shared = (size_t{cache.capacity} + cache.head_dim) * (sizeof(float) + 1);
  attention_kernel<<<blocks_for(items), kThreads, shared, stream>>>(qkv, out, tokens, past, past_on_device, cache,
                                                                     scale);
  return cudaGetLastError();
}

uint64_t split_scratch_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) {
  if (capacity < kSplitFromPositions) return 0;
  const uint64_t items = uint64_t{batch} * heads;
  return items * capacity * (sizeof(float) + 1) + items * sizeof(float) +
         items * split_chunks(capacity) * head_dim * sizeof(float);
}

SplitScratch split_scratch_at(void* base, uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) {
  if (!base || capacity < kSplitFromPositions) return {};
  // The float parts first, then the bytes: each part aligned for its type.
  const uint64_t items = uint64_t{batch} * heads;
  char* at = static_cast<char*>(base);
  SplitScratch s;
  s.scores = reinterpret_cast<float*>(at);
  at += items * capacity * sizeof(float);
  s.p_scale = reinterpret_cast<float*>(at);
  at += items * sizeof(float);
  s.partial = at;
  at += items * split_chunks(capacity) * head_dim * sizeof(float);
  s.p8 = reinterpret_cast<int8_t*>(at);
  return s;
}

}  // namespace tessera::cuda
