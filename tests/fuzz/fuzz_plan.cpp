// Fuzzes plan strings (Plan::parse, host/runtime/plan.cpp) and what a run does with a parsed plan:
// resolve it against a model's configuration, put it on ranks and print it. Bad plans must be
// std::invalid_argument; a plan that parses prints back to a plan that parses to the same text.
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tessera/runtime/plan.hpp"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte picks the model the plan is resolved against and the number of ranks.
  const uint8_t pick = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  Plan plan;
  try {
    plan = Plan::parse(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::string printed = plan.str();
  try {
    if (Plan::parse(printed).str() != printed) fuzz::broken("a printed plan does not print back the same");
  } catch (const std::invalid_argument&) {
    fuzz::broken("a printed plan does not parse");
  }
  Gpt2Config cfg;  // the tiny model: 2 layers, 4 heads
  if (pick & 1) {  // or GPT-2 small's shape: 12 layers, 12 heads
    cfg.layers = 12;
    cfg.heads = 12;
    cfg.width = 768;
    cfg.vocab = 50257;
    cfg.positions = 1024;
  }
  try {
    plan.resolve(cfg);
    for (const Stage& st : plan.stages) {
      uint32_t heads = 0;
      for (const PlanDevice& d : st.devices) heads += d.heads;
      if (heads != cfg.heads) fuzz::broken("a stage's devices do not share out every head");
    }
  } catch (const std::invalid_argument&) {
  }
  try {
    plan.assign_ranks(1 + (pick >> 1) % 8);
    for (int r = 0; r < 8; ++r) (void)plan.devices_of(r);
  } catch (const std::invalid_argument&) {
  }
  (void)plan.expected_bubble(pick);
  return 0;
}
