#include "tessera/backends/matmul_backend.hpp"

#include "tessera/backends/host_ops.hpp"

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
