// Fuzzes loading a model directory (Gpt2Model::load, host/io/gpt2.cpp): config.json and
// model.safetensors together, so that the sizes the config names meet the tensors the file holds.
// The input is config.json, a NUL byte, then model.safetensors. Whatever the config claims, loading
// must allocate no more than the file backs, and a bad model must be a ModelError.
#include <algorithm>
#include <cstdint>

#include "fuzz_util.hpp"
#include "tessera/io/gpt2.hpp"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir dir("model");
  const uint8_t* nul = std::find(data, data + size, uint8_t{0});
  dir.write("config.json", {data, static_cast<size_t>(nul - data)});
  if (nul == data + size)
    dir.remove("model.safetensors");
  else
    dir.write("model.safetensors", {nul + 1, static_cast<size_t>(data + size - nul - 1)});
  try {
    const Gpt2Model m = Gpt2Model::load(dir.path());
    const uint64_t E = m.cfg.width;
    if (m.blocks.size() != m.cfg.layers || m.wte.size() != uint64_t{m.cfg.vocab} * E ||
        m.wpe.size() != uint64_t{m.cfg.positions} * E || m.ln_f.w.size() != E)
      fuzz::broken("a loaded model's tensors do not have the config's sizes");
    for (const Gpt2Block& b : m.blocks)
      if (b.c_attn.w.size() != E * 3 * E || b.c_fc.w.size() != E * 4 * E || b.mlp_proj.w.size() != 4 * E * E ||
          b.attn_proj.b.size() != E)
        fuzz::broken("a loaded layer's tensors do not have the config's sizes");
  } catch (const ModelError&) {
  }
  return 0;
}
