#include "tessera/io/gpt2.hpp"

#include <cmath>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessera {

namespace fs = std::filesystem;

void Gpt2Config::validate(const std::string& where) const {
  if (vocab == 0 || positions == 0 || width == 0 || heads == 0 || layers == 0)
    throw ModelError(fmt::format("{}: vocab_size, n_positions, n_embd, n_head and n_layer must be positive", where));
  if (width % heads)
    throw ModelError(fmt::format("{}: n_head = {} does not divide n_embd = {}", where, heads, width));
  // Far above any GPT-2 family model, and low enough that every size derived from them (4E columns
  // in 32 bits, all the layers' parameters in 64) fits.
  constexpr uint32_t kMaxWidth = 1u << 16, kMaxLayers = 1u << 16;
  if (width > kMaxWidth || layers > kMaxLayers)
    throw ModelError(fmt::format("{}: n_embd = {} or n_layer = {} is beyond the limit of {} and {}", where, width,
                                 layers, kMaxWidth, kMaxLayers));
  if (!(eps > 0) || !std::isfinite(eps))
    throw ModelError(fmt::format("{}: layer_norm_epsilon = {} is not a positive number", where, eps));
}

Gpt2Config Gpt2Config::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw ModelError(fmt::format("{}: not a JSON object", where));
  auto get = [&](std::initializer_list<const char*> keys) -> uint32_t {
    for (const char* k : keys) {
      if (!j.contains(k)) continue;
      const auto& v = j.at(k);
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 30))
        throw ModelError(fmt::format("{}: '{}' is not a positive integer", where, k));
      return v.get<uint32_t>();
    }
    throw ModelError(fmt::format("{}: '{}' is missing", where, *keys.begin()));
  };
  Gpt2Config c;
  c.width = get({"n_embd"});
  c.heads = get({"n_head"});
  c.layers = get({"n_layer"});
  c.positions = get({"n_positions", "n_ctx"});
  c.vocab = get({"vocab_size"});
  if (j.contains("layer_norm_epsilon")) {
    if (!j.at("layer_norm_epsilon").is_number())
      throw ModelError(fmt::format("{}: 'layer_norm_epsilon' is not a number", where));
    c.eps = j.at("layer_norm_epsilon").get<float>();
  }
  c.validate(where);
  return c;
}

nlohmann::json Gpt2Config::to_json() const {
  return {{"model_type", "gpt2"}, {"n_embd", width},     {"n_head", heads},
          {"n_layer", layers},    {"n_positions", positions}, {"vocab_size", vocab},
          {"layer_norm_epsilon", eps}, {"activation_function", "gelu_new"}};
}

Gpt2Model Gpt2Model::random(const Gpt2Config& cfg, uint64_t seed) {
  cfg.validate("model configuration");
  std::mt19937_64 rng(seed);
  auto normal = [&](size_t n, float mean, float std) {
    std::normal_distribution<float> d(mean, std);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  };
  const uint32_t E = cfg.width;
  const float proj_std = 0.02f / std::sqrt(2.0f * cfg.layers);
  auto linear = [&](uint32_t in, uint32_t out, float std) {
    return Linear{in, out, normal(size_t{in} * out, 0, std), normal(out, 0, 0.02f)};
  };
  auto layer_norm = [&] { return LayerNormWeights{normal(E, 1.0f, 0.1f), normal(E, 0, 0.02f)}; };
  Gpt2Model m;
  m.cfg = cfg;
  m.wte = normal(size_t{cfg.vocab} * E, 0, 0.14f);
  m.wpe = normal(size_t{cfg.positions} * E, 0, 0.02f);
  for (uint32_t l = 0; l < cfg.layers; ++l) {
    Gpt2Block b;
    b.ln_1 = layer_norm();
    b.c_attn = linear(E, 3 * E, 0.02f);
    b.attn_proj = linear(E, E, proj_std);
    b.ln_2 = layer_norm();
    b.c_fc = linear(E, 4 * E, 0.02f);
    b.mlp_proj = linear(4 * E, E, proj_std);
    m.blocks.push_back(std::move(b));
  }
  m.ln_f = layer_norm();
  return m;
}

namespace {

// Every tensor of the model under its Hugging Face name, for loading and saving alike.
template <class Model, class Fn>
void for_each_tensor(Model& m, Fn&& fn) {
  const uint64_t E = m.cfg.width;
  fn("wte.weight", m.wte, std::vector<uint64_t>{m.cfg.vocab, E});
  fn("wpe.weight", m.wpe, std::vector<uint64_t>{m.cfg.positions, E});
  for (uint32_t i = 0; i < m.cfg.layers; ++i) {
    auto& b = m.blocks[i];
    const std::string h = fmt::format("h.{}.", i);
    auto linear = [&](const std::string& name, auto& lin) {
      fn(h + name + ".weight", lin.w, std::vector<uint64_t>{lin.in, lin.out});
      fn(h + name + ".bias", lin.b, std::vector<uint64_t>{lin.out});
    };
    auto norm = [&](const std::string& name, auto& ln) {
      fn(h + name + ".weight", ln.w, std::vector<uint64_t>{E});
      fn(h + name + ".bias", ln.b, std::vector<uint64_t>{E});
    };
    norm("ln_1", b.ln_1);
    linear("attn.c_attn", b.c_attn);
    linear("attn.c_proj", b.attn_proj);
    norm("ln_2", b.ln_2);
    linear("mlp.c_fc", b.c_fc);
    linear("mlp.c_proj", b.mlp_proj);
  }
  fn("ln_f.weight", m.ln_f.w, std::vector<uint64_t>{E});
  fn("ln_f.bias", m.ln_f.b, std::vector<uint64_t>{E});
}

}  // namespace

Gpt2Config Gpt2Config::load(const fs::path& dir) {
  const fs::path config = dir / "config.json";
  if (!fs::is_directory(dir)) throw ModelError(fmt::format("model directory '{}' does not exist", dir.string()));
  std::ifstream in(config);
  if (!in) throw ModelError(fmt::format("{}: cannot read it (a model directory needs config.json)", config.string()));
  try {
    return from_json(nlohmann::json::parse(in), config.string());
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", config.string(), e.what()));
  }
}

Gpt2Model Gpt2Model::load(const fs::path& dir) {
  Gpt2Model m;
  m.cfg = Gpt2Config::load(dir);
  const fs::path weights = dir / "model.safetensors";
  const uint32_t E = m.cfg.width;
  const SafetensorsFile file = SafetensorsFile::open(weights);
  // Refuse a config that names more weights than the file holds (at 2 bytes each, F16 or BF16)
  // before allocating anything for them.
  const uint64_t needed = 2 * m.cfg.parameters();
  uint64_t held = 0;
  for (const auto& [name, t] : file.tensors()) held += t.end - t.begin;
  if (needed > held)
    throw ModelError(fmt::format("{}: holds {} bytes of tensors, but the {} layers of width {} in config.json need at "
                                 "least {}",
                                 weights.string(), held, m.cfg.layers, E, needed));
  m.blocks.resize(m.cfg.layers);
  for (auto& b : m.blocks) {
    b.c_attn = {E, 3 * E, {}, {}};
    b.attn_proj = {E, E, {}, {}};
    b.c_fc = {E, 4 * E, {}, {}};
    b.mlp_proj = {4 * E, E, {}, {}};
  }
  // Checkpoints saved from GPT2LMHeadModel prefix the names with "transformer.".
  const bool prefixed = !file.contains("wte.weight") && file.contains("transformer.wte.weight");
  for_each_tensor(m, [&](const std::string& name, std::vector<float>& dst, const std::vector<uint64_t>& shape) {
    dst = file.load_f32(prefixed ? "transformer." + name : name, shape);
  });
  return m;
}

void Gpt2Model::save(const fs::path& dir, DType dtype) const {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << cfg.to_json().dump(2) << "\n";
  std::vector<NamedTensor> tensors;
  for_each_tensor(*this, [&](const std::string& name, const std::vector<float>& v, const std::vector<uint64_t>& shape) {
    tensors.push_back({name, dtype, shape, v});
  });
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
}

uint64_t Gpt2Config::parameters() const {
  const uint64_t E = width;
  return (uint64_t{vocab} + positions + 2) * E + uint64_t{layers} * (12 * E * E + 13 * E);
}

uint64_t Gpt2Model::parameters() const {
  uint64_t n = 0;
  for_each_tensor(*this, [&](const std::string&, const std::vector<float>& v, const std::vector<uint64_t>&) {
    n += v.size();
  });
  return n;
}

}  // namespace tessera
