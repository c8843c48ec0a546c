// The GPT-2 forward pass, with its matrix products on an interchangeable backend and everything
// else (embeddings, LayerNorm, softmax, GELU, residuals) on the host CPU in fp32.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/gpt2.hpp"

namespace tessera {

// Where the forward pass runs its matrix products.
class MatmulBackend {
 public:
  virtual ~MatmulBackend() = default;
  virtual std::string name() const = 0;
  // c[m, n] = a[m, k] * b, with b [k, n] row-major, or [n, k] when b_transposed.
  virtual void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                      bool b_transposed) = 0;
  // y[m, out] = x[m, in] W + b.
  virtual void linear(const float* x, uint32_t m, const Linear& w, float* y);
};

// fp32 on the host with OpenBLAS.
class CpuBackend final : public MatmulBackend {
 public:
  std::string name() const override { return "cpu"; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
              bool b_transposed) override;
  void linear(const float* x, uint32_t m, const Linear& w, float* y) override;
};

// Token ids for `batch` sequences of `seq` tokens each, row-major; throws std::invalid_argument
// (bad input) for an id outside the vocabulary, more tokens than positions, or a size mismatch.
void check_tokens(const Gpt2Config& cfg, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq);

// Logits [batch * seq, vocab], row-major, for causal language modelling of each sequence.
std::vector<float> forward(const Gpt2Model& model, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq,
                           MatmulBackend& backend);

// How far logits are from a reference run of the same model (DESIGN.md's numerics report).
struct Numerics {
  double max_abs_err = 0, rel_l2 = 0, cosine = 0, top1_agreement = 0;
};
Numerics compare_logits(std::span<const float> got, std::span<const float> ref, uint32_t vocab);

// The host-side operations, exposed for the tests and for the runtime's other backends.
void layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w, float eps);
void gelu_tanh(float* x, size_t n);
void softmax_causal(float* scores, uint32_t rows, uint32_t cols, uint32_t offset);

}  // namespace tessera
