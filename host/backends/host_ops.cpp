#include "tessera/backends/host_ops.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace tessera {

void layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w, float eps) {
  for (uint32_t r = 0; r < rows; ++r) {
    const float* in = x + uint64_t{r} * cols;
    float* out = y + uint64_t{r} * cols;
    double mean = 0, var = 0;
    for (uint32_t c = 0; c < cols; ++c) mean += in[c];
    mean /= cols;
    for (uint32_t c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(var / cols + eps));
    for (uint32_t c = 0; c < cols; ++c) out[c] = (in[c] - static_cast<float>(mean)) * inv * w.w[c] + w.b[c];
  }
}

void gelu_tanh(float* x, size_t n) {
  const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

void softmax_causal(float* scores, uint32_t rows, uint32_t cols, uint32_t offset) {
  for (uint32_t r = 0; r < rows; ++r) {
    float* s = scores + uint64_t{r} * cols;
    const uint32_t visible = std::min(cols, offset + r + 1);
    const float peak = *std::max_element(s, s + visible);
    float sum = 0;
    for (uint32_t c = 0; c < visible; ++c) sum += s[c] = std::exp(s[c] - peak);
    for (uint32_t c = 0; c < visible; ++c) s[c] /= sum;
    std::fill(s + visible, s + cols, 0.0f);
  }
}

void attention_with_host_softmax(MatmulBackend& b, const float* qkv, float* out, uint32_t T, KvCache& cache,
                                 double* host_seconds) {
  const uint32_t H = cache.heads, D = cache.head_dim, W = 3 * H * D, past = cache.length, L = past + T;
  if (L > cache.capacity)
    throw std::invalid_argument(fmt::format("the KV cache holds {} positions; {} more do not fit after {}",
                                            cache.capacity, T, past));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> scores(uint64_t{T} * L), q(uint64_t{T} * D), k(q.size()), v(q.size()), o(q.size());
  for (uint32_t seq_i = 0; seq_i < cache.batch; ++seq_i)
    for (uint32_t head = 0; head < H; ++head) {
      for (uint32_t t = 0; t < T; ++t) {
        const float* row = &qkv[(uint64_t{seq_i} * T + t) * W + uint64_t{head} * D];
        std::copy(row, row + D, &q[uint64_t{t} * D]);
        std::copy(row + H * D, row + H * D + D, &k[uint64_t{t} * D]);
        std::copy(row + 2 * H * D, row + 2 * H * D + D, &v[uint64_t{t} * D]);
      }
      b.kv_store(cache, seq_i, head, k.data(), v.data(), T);
      b.kv_scores(cache, seq_i, head, q.data(), T, scores.data());
      const double t0 = thread_cpu_seconds();
      for (auto& sc : scores) sc *= scale;
      softmax_causal(scores.data(), T, L, past);
      *host_seconds += thread_cpu_seconds() - t0;
      b.kv_mix(cache, seq_i, head, scores.data(), T, o.data());
      for (uint32_t t = 0; t < T; ++t)
        std::copy(&o[uint64_t{t} * D], &o[uint64_t{t} * D] + D, &out[(uint64_t{seq_i} * T + t) * H * D + head * D]);
    }
  cache.length = L;
}

}  // namespace tessera
