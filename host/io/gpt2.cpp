#include "tessera/io/gpt2.hpp"

#include <atomic>
#include <cmath>
#include <fstream>
#include <random>
#include <thread>

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

namespace {

// n normal draws (Box-Muller on the two halves of each 64-bit draw) from a stream of their own.
void fill_normal(std::vector<float>& v, size_t n, float mean, float std, uint64_t seed, uint64_t stream) {
  std::seed_seq seq{seed, stream};
  std::mt19937_64 rng(seq);
  v.resize(n);
  constexpr double kTwoPi = 2 * M_PI, kUnit = 1.0 / (1u << 24);
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t bits = rng();
    const double u1 = (double((bits >> 40) & 0xFFFFFF) + 1) * kUnit, u2 = double((bits >> 16) & 0xFFFFFF) * kUnit;
    const double r = std::sqrt(-2 * std::log(u1));
    v[i] = mean + std * static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n) v[i + 1] = mean + std * static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

}  // namespace

Gpt2Model Gpt2Model::random(const Gpt2Config& cfg, uint64_t seed) {
  cfg.validate("model configuration");
  // Every tensor draws from its own stream (the seed and its place in the model), so they fill in
  // parallel and the weights do not depend on the threads: GPT-2 small's 124M in well under a second.
  struct Fill {
    std::vector<float>* v;
    size_t n;
    float mean, std;
  };
  std::vector<Fill> fills;
  const uint32_t E = cfg.width;
  const float proj_std = 0.02f / std::sqrt(2.0f * cfg.layers);
  auto linear = [&](Linear& l, uint32_t in, uint32_t out, float std) {
    l.in = in;
    l.out = out;
    fills.push_back({&l.w, size_t{in} * out, 0, std});
    fills.push_back({&l.b, out, 0, 0.02f});
  };
  auto layer_norm = [&](LayerNormWeights& w) {
    fills.push_back({&w.w, E, 1.0f, 0.1f});
    fills.push_back({&w.b, E, 0, 0.02f});
  };
  Gpt2Model m;
  m.cfg = cfg;
  m.blocks.resize(cfg.layers);
  fills.push_back({&m.wte, size_t{cfg.vocab} * E, 0, 0.14f});
  fills.push_back({&m.wpe, size_t{cfg.positions} * E, 0, 0.02f});
  for (Gpt2Block& b : m.blocks) {
    layer_norm(b.ln_1);
    linear(b.c_attn, E, 3 * E, 0.02f);
    linear(b.attn_proj, E, E, proj_std);
    layer_norm(b.ln_2);
    linear(b.c_fc, E, 4 * E, 0.02f);
    linear(b.mlp_proj, 4 * E, E, proj_std);
  }
  layer_norm(m.ln_f);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < fills.size();) fill_normal(*fills[i].v, fills[i].n, fills[i].mean, fills[i].std, seed, i);
  };
  {
    std::vector<std::jthread> helpers(std::max(1u, std::thread::hardware_concurrency()) - 1);
    for (auto& t : helpers) t = std::jthread(work);
    work();
  }  // joined
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
