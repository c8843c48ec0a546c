// The seed of a randomized test: TESSERA_SEED if set, else a fresh one; always printed so a
// failure can be rerun.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

inline uint64_t test_seed() {
  uint64_t seed;
  if (const char* s = std::getenv("TESSERA_SEED")) {
    seed = std::stoull(s, nullptr, 0);
  } else {
    seed = std::random_device{}();
  }
  std::cout << "seed: " << seed << " (rerun with TESSERA_SEED=" << seed << ")" << std::endl;
  return seed;
}
