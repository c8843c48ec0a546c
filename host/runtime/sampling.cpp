#include "tessera/runtime/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace tessera {

void SamplingParams::check() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    throw std::invalid_argument(fmt::format("--temperature {}: must be 0 (greedy) or more", temperature));
  if (!(top_p > 0 && top_p <= 1)) throw std::invalid_argument(fmt::format("--top-p {}: must be in (0, 1]", top_p));
}

int32_t Sampler::next(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("no logits to sample from");
  // NaN would break the orderings below: the device computed garbage.
  if (std::any_of(logits.begin(), logits.end(), [](float l) { return std::isnan(l); }))
    throw std::runtime_error("the logits have NaN in them");
  // Ties go to the lowest id, so greedy decoding is the same wherever it runs.
  const auto argmax = [&] { return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()); };
  if (params_.temperature == 0 || params_.top_k == 1) return argmax();
  // Candidates by falling logit (lower id first among equals).
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = params_.top_k ? std::min<size_t>(params_.top_k, order.size()) : order.size();
  const auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), by_logit);
  order.resize(k);
  std::vector<double> p(k);
  const double peak = logits[order[0]];
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp((logits[order[i]] - peak) / params_.temperature);
  // The nucleus: the most likely tokens until their probability reaches top_p.
  size_t keep = k;
  if (params_.top_p < 1) {
    double mass = 0;
    for (keep = 0; keep < k && mass < params_.top_p * sum;) mass += p[keep++];
  }
  const double total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  const double u = double(rng_() >> 11) * 0x1.0p-53 * total;  // uniform in [0, total)
  double at = 0;
  for (size_t i = 0; i < keep; ++i)
    if ((at += p[i]) > u) return order[i];
  return order[keep - 1];
}

}  // namespace tessera
