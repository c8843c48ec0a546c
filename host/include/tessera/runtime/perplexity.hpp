// Perplexity of a model over a token sequence, with a sliding window: windows of `window` tokens,
// each starting `stride` tokens after the one before, and each token scored once, in the first
// window that reaches it, with the context that window gives it (the scheme Hugging Face documents
// for fixed-length models). The first token has nothing to be predicted from and is not scored,
// nor, with a stride of the whole window, is the first token of each window.
#pragma once

#include <cstdint>
#include <span>

#include "tessera/runtime/transformer.hpp"

namespace tessera {

struct Perplexity {
  double nll = 0;         // mean negative log-likelihood per scored token, in nats
  double perplexity = 0;  // exp(nll)
  uint64_t tokens = 0;    // scored
  uint32_t windows = 0;
};

// std::invalid_argument for fewer than two tokens, a window of fewer than two tokens or more than
// the model's positions, or a stride of 0 or more than the window.
void check_windows(const Gpt2Config& cfg, size_t tokens, uint32_t window, uint32_t stride);
Perplexity perplexity(Pipeline& pipeline, const Gpt2Config& cfg, std::span<const int32_t> ids, uint32_t window,
                      uint32_t stride);

// -log softmax(logits)[target], in double.
double token_nll(std::span<const float> logits, int32_t target);

}  // namespace tessera
