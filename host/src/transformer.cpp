#include "tessera/transformer.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera {

void MatmulBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  matmul(x, w.w.data(), y, m, w.out, w.in, false);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < w.out; ++c) y[uint64_t{r} * w.out + c] += w.b[c];
}

void CpuBackend::matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                        bool b_transposed) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(k), b,
              static_cast<int>(b_transposed ? k : n), 0.0f, c, static_cast<int>(n));
}

void CpuBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  // The bias goes in first so that one sgemm with beta = 1 adds the product to it.
  for (uint32_t r = 0; r < m; ++r) std::copy(w.b.begin(), w.b.end(), y + uint64_t{r} * w.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(w.out),
              static_cast<int>(w.in), 1.0f, x, static_cast<int>(w.in), w.w.data(), static_cast<int>(w.out), 1.0f,
              y, static_cast<int>(w.out));
}

void check_tokens(const Gpt2Config& cfg, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq) {
  if (batch == 0 || seq == 0) throw std::invalid_argument("batch and sequence length must be positive");
  if (tokens.size() != uint64_t{batch} * seq)
    throw std::invalid_argument(
        fmt::format("{} token ids for a batch of {} sequences of {} tokens", tokens.size(), batch, seq));
  if (seq > cfg.positions)
    throw std::invalid_argument(
        fmt::format("{} tokens in a sequence, more than the model's {} positions", seq, cfg.positions));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= cfg.vocab)
      throw std::invalid_argument(
          fmt::format("token id {} (at {}) is outside the vocabulary [0, {})", tokens[i], i, cfg.vocab));
}

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

void softmax_causal(float* scores, uint32_t rows, uint32_t cols, uint32_t offset) {
  // Row r is the query at position offset + r; it sees keys 0 .. offset + r.
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

std::vector<float> forward(const Gpt2Model& model, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq,
                           MatmulBackend& backend) {
  const Gpt2Config& cfg = model.cfg;
  check_tokens(cfg, tokens, batch, seq);
  const uint32_t E = cfg.width, H = cfg.heads, D = cfg.head_dim(), T = seq;
  const uint64_t rows = uint64_t{batch} * T;
  std::vector<float> x(rows * E), h(rows * E), qkv(rows * 3 * E), att(rows * E), tmp(rows * E),
      mlp(rows * 4 * E), scores(uint64_t{T} * T), q(uint64_t{T} * D), k(uint64_t{T} * D), v(uint64_t{T} * D),
      o(uint64_t{T} * D);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t pos = r % T, tok = static_cast<uint64_t>(tokens[r]);
    for (uint32_t c = 0; c < E; ++c) x[r * E + c] = model.wte[tok * E + c] + model.wpe[pos * E + c];
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (const Gpt2Block& b : model.blocks) {
    layer_norm(x.data(), h.data(), static_cast<uint32_t>(rows), E, b.ln_1, cfg.eps);
    backend.linear(h.data(), static_cast<uint32_t>(rows), b.c_attn, qkv.data());
    for (uint32_t s = 0; s < batch; ++s)
      for (uint32_t head = 0; head < H; ++head) {
        // Gather this head's q, k, v rows (q | k | v side by side, heads within each).
        for (uint32_t t = 0; t < T; ++t) {
          const float* row = &qkv[(uint64_t{s} * T + t) * 3 * E + uint64_t{head} * D];
          std::copy(row, row + D, &q[uint64_t{t} * D]);
          std::copy(row + E, row + E + D, &k[uint64_t{t} * D]);
          std::copy(row + 2 * E, row + 2 * E + D, &v[uint64_t{t} * D]);
        }
        backend.matmul(q.data(), k.data(), scores.data(), T, T, D, true);
        for (auto& sc : scores) sc *= scale;
        softmax_causal(scores.data(), T, T, 0);
        backend.matmul(scores.data(), v.data(), o.data(), T, D, T, false);
        for (uint32_t t = 0; t < T; ++t)
          std::copy(&o[uint64_t{t} * D], &o[uint64_t{t} * D] + D, &att[(uint64_t{s} * T + t) * E + uint64_t{head} * D]);
      }
    backend.linear(att.data(), static_cast<uint32_t>(rows), b.attn_proj, tmp.data());
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
    layer_norm(x.data(), h.data(), static_cast<uint32_t>(rows), E, b.ln_2, cfg.eps);
    backend.linear(h.data(), static_cast<uint32_t>(rows), b.c_fc, mlp.data());
    gelu_tanh(mlp.data(), mlp.size());
    backend.linear(mlp.data(), static_cast<uint32_t>(rows), b.mlp_proj, tmp.data());
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
  }
  layer_norm(x.data(), h.data(), static_cast<uint32_t>(rows), E, model.ln_f, cfg.eps);
  std::vector<float> logits(rows * cfg.vocab);
  backend.matmul(h.data(), model.wte.data(), logits.data(), static_cast<uint32_t>(rows), cfg.vocab, E, true);
  return logits;
}

Numerics compare_logits(std::span<const float> got, std::span<const float> ref, uint32_t vocab) {
  if (got.size() != ref.size() || vocab == 0 || ref.size() % vocab)
    throw std::invalid_argument(fmt::format("logits of {} and {} values for a vocabulary of {}", got.size(), ref.size(), vocab));
  Numerics n;
  double diff = 0, norm = 0, dot = 0, norm_got = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    n.max_abs_err = std::max(n.max_abs_err, std::abs(g - r));
    diff += (g - r) * (g - r);
    norm += r * r;
    norm_got += g * g;
    dot += g * r;
  }
  n.rel_l2 = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  n.cosine = norm > 0 && norm_got > 0 ? dot / std::sqrt(norm * norm_got) : (diff == 0 ? 1.0 : 0.0);
  const size_t rows = ref.size() / vocab;
  size_t agree = 0;
  for (size_t r = 0; r < rows; ++r) {
    const auto g = got.subspan(r * vocab, vocab), f = ref.subspan(r * vocab, vocab);
    agree += std::max_element(g.begin(), g.end()) - g.begin() == std::max_element(f.begin(), f.end()) - f.begin();
  }
  n.top1_agreement = double(agree) / double(rows);
  return n;
}

}  // namespace tessera
