// Choosing the next token from a row of logits: greedy (temperature 0), or sampled from
// softmax(logits / temperature) restricted to the top_k most likely tokens and to the smallest set
// whose probability reaches top_p. Seeded, and the same on every machine: the random numbers are
// drawn from a std::mt19937_64 without a library distribution in between.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace tessera {

struct SamplingParams {
  double temperature = 0;  // 0: greedy
  uint32_t top_k = 0;      // 0: no limit
  double top_p = 1;        // 1: no limit
  // Throws std::invalid_argument naming the option for a value out of range.
  void check() const;
};

class Sampler {
 public:
  Sampler(SamplingParams params, uint64_t seed) : params_(params), rng_(seed) { params_.check(); }
  int32_t next(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace tessera
