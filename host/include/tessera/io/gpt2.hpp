// GPT-2 family models: configuration, weights in the Hugging Face layout, and the built-in tiny
// model with seeded random weights (the default, so nothing needs downloading).
//
// Weights keep Hugging Face's Conv1D orientation: a linear layer is y = x W + b with W stored
// [in, out] row-major, so c_attn is [E, 3E], c_fc [E, 4E], the projections [E, E] and [4E, E].
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/io/safetensors.hpp"

namespace tessera {

struct Gpt2Config {
  uint32_t vocab = 512, positions = 256, width = 128, heads = 4, layers = 2;
  float eps = 1e-5f;

  uint32_t head_dim() const { return width / heads; }
  // From a Hugging Face config.json (n_embd, n_head, n_layer, n_positions or n_ctx, vocab_size,
  // layer_norm_epsilon); ModelError names a missing key or an inconsistent value.
  static Gpt2Config from_json(const nlohmann::json& j, const std::string& where);
  static Gpt2Config load(const std::filesystem::path& dir);  // DIR/config.json
  nlohmann::json to_json() const;
  void validate(const std::string& where) const;  // heads divide the width, sizes non-zero
  // The parameters a model of this shape has: embeddings, 12 E^2 + 13 E per layer, the final LayerNorm.
  uint64_t parameters() const;
};

// One linear layer, y = x W + b: W [in, out] row-major.
struct Linear {
  uint32_t in = 0, out = 0;
  std::vector<float> w, b;
};

struct LayerNormWeights {
  std::vector<float> w, b;
};

struct Gpt2Block {
  LayerNormWeights ln_1, ln_2;
  Linear c_attn;     // E -> 3E: q, k, v side by side, heads within each
  Linear attn_proj;  // E -> E
  Linear c_fc;       // E -> 4E
  Linear mlp_proj;   // 4E -> E
};

struct Gpt2Model {
  Gpt2Config cfg;
  std::vector<float> wte;  // [vocab, E]; also the output projection (tied)
  std::vector<float> wpe;  // [positions, E]
  std::vector<Gpt2Block> blocks;
  LayerNormWeights ln_f;

  // Seeded random weights with GPT-2's shapes and roughly its statistics, so that logits have a
  // realistic spread (embeddings std 0.14, layer weights std 0.02 with projections scaled down by
  // sqrt(2 * layers), LayerNorm gains near 1).
  static Gpt2Model random(const Gpt2Config& cfg, uint64_t seed);
  static Gpt2Model tiny(uint64_t seed = 1) { return random(Gpt2Config{}, seed); }

  // A directory with config.json and model.safetensors (names h.{i}.ln_1.weight, ...; an optional
  // "transformer." prefix; F32, F16 or BF16). Throws ModelError for anything missing or wrong.
  static Gpt2Model load(const std::filesystem::path& dir);
  void save(const std::filesystem::path& dir, DType dtype = DType::kF32) const;

  uint64_t parameters() const;
};

}  // namespace tessera
