#include "tessera/backends/matmul_backend.hpp"

#include "tessera/backends/host_ops.hpp"

#include <algorithm>

namespace tessera {

// What a backend that runs only matrix products does for the rest: the host runs it.

void MatmulBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  matmul(x, w.w.data(), y, m, w.out, w.in, false);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < w.out; ++c) y[uint64_t{r} * w.out + c] += w.b[c];
}

std::unique_ptr<KvCache> MatmulBackend::make_kv_cache(uint32_t batch, uint32_t heads, uint32_t head_dim,
                                                      uint32_t capacity) {
  return std::make_unique<KvCache>(batch, heads, head_dim, capacity);
}

void MatmulBackend::kv_store(KvCache& cache, uint32_t seq, uint32_t head, const float* k, const float* v,
                             uint32_t tokens) {
  const uint64_t at = uint64_t{cache.length} * cache.head_dim, n = uint64_t{tokens} * cache.head_dim;
  std::copy(k, k + n, cache.keys(seq, head) + at);
  std::copy(v, v + n, cache.values(seq, head) + at);
}

void MatmulBackend::kv_scores(KvCache& cache, uint32_t seq, uint32_t head, const float* q, uint32_t tokens,
                              float* scores) {
  matmul(q, cache.keys(seq, head), scores, tokens, cache.length + tokens, cache.head_dim, true);
}

void MatmulBackend::kv_mix(KvCache& cache, uint32_t seq, uint32_t head, const float* p, uint32_t tokens, float* out) {
  matmul(p, cache.values(seq, head), out, tokens, cache.head_dim, cache.length + tokens, false);
}

void MatmulBackend::attention(const float* qkv, float* out, uint32_t tokens, KvCache& cache) {
  double host_seconds = 0;
  attention_with_host_softmax(*this, qkv, out, tokens, cache, &host_seconds);
}

void MatmulBackend::attention(const float* qkv, float* out, uint32_t batch, uint32_t seq, uint32_t heads,
                              uint32_t head_dim) {
  const auto cache = make_kv_cache(batch, heads, head_dim, seq);
  attention(qkv, out, seq, *cache);
}

void MatmulBackend::linear_gelu(const float* x, uint32_t m, const Linear& w, float* y) {
  linear(x, m, w, y);
  gelu_tanh(y, uint64_t{m} * w.out);
}

void MatmulBackend::layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w,
                               float eps) {
  tessera::layer_norm(x, y, rows, cols, w, eps);
}

}  // namespace tessera
