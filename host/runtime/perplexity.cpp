#include "tessera/runtime/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera {

double token_nll(std::span<const float> logits, int32_t target) {
  const double peak = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - peak);
  return std::log(sum) + peak - double(logits[target]);
}

void check_windows(const Gpt2Config& cfg, size_t tokens, uint32_t window, uint32_t stride) {
  if (tokens < 2) throw std::invalid_argument(fmt::format("{} tokens: perplexity needs two at least", tokens));
  if (window < 2 || window > cfg.positions)
    throw std::invalid_argument(fmt::format("a window of {} tokens: it takes 2 to {} (the model's positions)", window,
                                            cfg.positions));
  if (stride == 0 || stride > window)
    throw std::invalid_argument(fmt::format("a stride of {}: it takes 1 to the window, {}", stride, window));
}

Perplexity perplexity(Pipeline& pipeline, const Gpt2Config& cfg, std::span<const int32_t> ids, uint32_t window,
                      uint32_t stride) {
  check_windows(cfg, ids.size(), window, stride);
  Perplexity p;
  double total = 0;
  for (size_t begin = 0, scored_to = 1;; begin += stride) {  // tokens before scored_to are scored
    const size_t end = std::min(begin + window, ids.size());
    const auto n = static_cast<uint32_t>(end - begin);
    const std::vector<float> logits = pipeline.forward(ids.subspan(begin, n), 1, n);
    // Position i of the window predicts token begin + i + 1. (With a stride of the whole window, a
    // window's first token has no context in it, and is not scored.)
    for (size_t t = std::max(scored_to, begin + 1); t < end; ++t) {
      const size_t i = t - 1 - begin;
      total += token_nll(std::span(logits).subspan(i * cfg.vocab, cfg.vocab), ids[t]);
      ++p.tokens;
    }
    scored_to = end;
    ++p.windows;
    if (end == ids.size()) break;
  }
  p.nll = total / double(p.tokens);
  p.perplexity = std::exp(p.nll);
  return p;
}

}  // namespace tessera
