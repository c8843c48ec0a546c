// Choosing the next token: greedy, temperature, top-k and top-p.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "seed.hpp"
#include "tessera/runtime/sampling.hpp"

using namespace tessera;

TEST_CASE("sampling: greedy takes the largest logit, the lowest id among equals", "[unit][sampling]") {
  Sampler greedy({}, 1);
  CHECK(greedy.next(std::vector<float>{0.1f, 3.0f, -2.0f, 3.0f}) == 1);
  Sampler top1({.temperature = 5.0, .top_k = 1}, 1);
  CHECK(top1.next(std::vector<float>{0.1f, 2.0f, 2.5f}) == 2);
}

TEST_CASE("sampling: frequencies follow softmax(logits / T) within top-k and top-p", "[unit][sampling]") {
  const uint64_t seed = test_seed();
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f, -30.0f};
  auto counts = [&](SamplingParams p, int n) {
    Sampler s(p, seed);
    std::map<int32_t, int> c;
    for (int i = 0; i < n; ++i) ++c[s.next(logits)];
    return c;
  };
  const int n = 20000;
  // T = 1: p = e^(2, 1, 0, -1) / sum = 0.644, 0.237, 0.087, 0.032.
  auto c = counts({.temperature = 1.0}, n);
  CHECK(c[0] / double(n) == Approx(0.644).margin(0.02));
  CHECK(c[1] / double(n) == Approx(0.237).margin(0.02));
  CHECK(c[2] / double(n) == Approx(0.087).margin(0.015));
  CHECK(c.count(4) == 0);
  // top-k 2 renormalizes over ids 0 and 1: 0.731, 0.269.
  c = counts({.temperature = 1.0, .top_k = 2}, n);
  CHECK(c.size() == 2);
  CHECK(c[0] / double(n) == Approx(0.731).margin(0.02));
  // top-p 0.85: ids 0 and 1 reach 0.881, so id 2 and the rest are never drawn.
  c = counts({.temperature = 1.0, .top_p = 0.85}, n);
  CHECK((c.size() == 2 && c.count(0) && c.count(1)));
  // A high temperature flattens: id 3 comes up far more often than at T = 1.
  CHECK(counts({.temperature = 10.0}, n)[3] > 3 * counts({.temperature = 1.0}, n)[3]);
  // The same seed draws the same tokens.
  CHECK(counts({.temperature = 1.0}, 500) == counts({.temperature = 1.0}, 500));
}

TEST_CASE("sampling: parameters out of range are refused", "[unit][sampling]") {
  CHECK_THROWS_WITH(Sampler({.temperature = -0.5}, 1), Catch::Contains("--temperature"));
  CHECK_THROWS_WITH(Sampler({.temperature = 1.0, .top_p = 0.0}, 1), Catch::Contains("--top-p"));
  CHECK_THROWS_WITH(Sampler({.temperature = 1.0, .top_p = 1.5}, 1), Catch::Contains("--top-p"));
}
