// Fuzzes config.json (Gpt2Config::load, host/io/gpt2.cpp). A bad config must be a ModelError; a
// config that loads must describe a model whose sizes the runtime can compute with.
#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "tessera/io/gpt2.hpp"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir dir("config");
  dir.write("config.json", {data, size});
  try {
    const Gpt2Config c = Gpt2Config::load(dir.path());
    if (c.width == 0 || c.heads == 0 || c.layers == 0 || c.vocab == 0 || c.positions == 0 || c.width % c.heads)
      fuzz::broken("a config that validate() should have refused loaded");
    // The runtime computes 4E (the MLP width) and 3E (c_attn) in 32 bits.
    if (uint64_t{c.width} * 4 > std::numeric_limits<uint32_t>::max()) fuzz::broken("4 * n_embd overflows 32 bits");
    // Saving and loading again gives the same configuration.
    const Gpt2Config again = Gpt2Config::from_json(c.to_json(), "round trip");
    if (again.width != c.width || again.heads != c.heads || again.layers != c.layers || again.vocab != c.vocab ||
        again.positions != c.positions || again.eps != c.eps)
      fuzz::broken("the config does not survive to_json and from_json");
  } catch (const ModelError&) {
  }
  return 0;
}
