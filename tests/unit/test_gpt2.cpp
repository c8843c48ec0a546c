// GPT-2 models: configuration, loading and saving in the Hugging Face layout, bad checkpoints,
// and the CPU forward pass against an independent double-precision reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "tessera/backends/accel_backend.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/io/gpt2.hpp"
#include "tessera/model/bf16_numerics.hpp"
#include "tessera/model/float_formats.hpp"
#include "tessera/runtime/quantize.hpp"
#include "tessera/runtime/transformer.hpp"
#include "seed.hpp"
#include "test_backends.hpp"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

// Straight from the definition, in double, sharing no code with forward().
std::vector<double> reference_logits(const Gpt2Model& m, const std::vector<int32_t>& tokens) {
  const auto& c = m.cfg;
  const size_t T = tokens.size(), E = c.width, H = c.heads, D = E / H;
  std::vector<std::vector<double>> x(T, std::vector<double>(E));
  for (size_t t = 0; t < T; ++t)
    for (size_t e = 0; e < E; ++e) x[t][e] = double(m.wte[size_t(tokens[t]) * E + e]) + m.wpe[t * E + e];
  auto norm = [&](const std::vector<double>& v, const LayerNormWeights& w) {
    double mean = 0, var = 0;
    for (double a : v) mean += a;
    mean /= double(v.size());
    for (double a : v) var += (a - mean) * (a - mean);
    var /= double(v.size());
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = (v[i] - mean) / std::sqrt(var + c.eps) * w.w[i] + w.b[i];
    return out;
  };
  auto lin = [](const std::vector<double>& v, const Linear& l) {
    std::vector<double> out(l.out);
    for (size_t o = 0; o < l.out; ++o) {
      double s = l.b[o];
      for (size_t i = 0; i < l.in; ++i) s += v[i] * l.w[i * l.out + o];
      out[o] = s;
    }
    return out;
  };
  for (const auto& b : m.blocks) {
    std::vector<std::vector<double>> qkv(T);
    for (size_t t = 0; t < T; ++t) qkv[t] = lin(norm(x[t], b.ln_1), b.c_attn);
    std::vector<std::vector<double>> att(T, std::vector<double>(E, 0.0));
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < T; ++i) {
        std::vector<double> p(i + 1);
        double peak = -1e300, sum = 0;
        for (size_t j = 0; j <= i; ++j) {
          double s = 0;
          for (size_t d = 0; d < D; ++d) s += qkv[i][h * D + d] * qkv[j][E + h * D + d];
          p[j] = s / std::sqrt(double(D));
          peak = std::max(peak, p[j]);
        }
        for (auto& a : p) sum += a = std::exp(a - peak);
        for (size_t j = 0; j <= i; ++j)
          for (size_t d = 0; d < D; ++d) att[i][h * D + d] += p[j] / sum * qkv[j][2 * E + h * D + d];
      }
    for (size_t t = 0; t < T; ++t) {
      const auto proj = lin(att[t], b.attn_proj);
      for (size_t e = 0; e < E; ++e) x[t][e] += proj[e];
      auto f = lin(norm(x[t], b.ln_2), b.c_fc);
      for (auto& a : f) a = 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
      const auto down = lin(f, b.mlp_proj);
      for (size_t e = 0; e < E; ++e) x[t][e] += down[e];
    }
  }
  std::vector<double> logits(T * c.vocab);
  for (size_t t = 0; t < T; ++t) {
    const auto h = norm(x[t], m.ln_f);
    for (size_t v = 0; v < c.vocab; ++v) {
      double s = 0;
      for (size_t e = 0; e < E; ++e) s += h[e] * m.wte[v * E + e];
      logits[t * c.vocab + v] = s;
    }
  }
  return logits;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tessera-gpt2-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(reinterpret_cast<uintptr_t>(this)));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("GPT-2 config from config.json", "[unit][gpt2]") {
  const auto c = Gpt2Config::from_json(
      {{"n_embd", 768}, {"n_head", 12}, {"n_layer", 12}, {"n_ctx", 1024}, {"vocab_size", 50257}}, "config.json");
  CHECK(c.head_dim() == 64);
  CHECK(c.positions == 1024);
  CHECK(c.eps == 1e-5f);
  CHECK_THROWS_WITH(Gpt2Config::from_json({{"n_embd", 100}, {"n_head", 3}, {"n_layer", 1}, {"n_positions", 8},
                                           {"vocab_size", 10}},
                                          "c"),
                    Catch::Contains("n_head = 3 does not divide n_embd = 100"));
  CHECK_THROWS_WITH(Gpt2Config::from_json({{"n_embd", 64}, {"n_layer", 1}, {"n_positions", 8}, {"vocab_size", 10}}, "c"),
                    Catch::Contains("'n_head' is missing"));
  CHECK_THROWS_AS(Gpt2Config::from_json({{"n_embd", -4}, {"n_head", 1}, {"n_layer", 1}, {"n_positions", 8},
                                         {"vocab_size", 10}},
                                        "c"),
                  ModelError);
}

TEST_CASE("random weights: seeded, and with the statistics asked for", "[unit][gpt2]") {
  const Gpt2Config cfg{.vocab = 1000, .positions = 64, .width = 96, .heads = 4, .layers = 3};
  const Gpt2Model a = Gpt2Model::random(cfg, 7), b = Gpt2Model::random(cfg, 7), c = Gpt2Model::random(cfg, 8);
  CHECK(a.wte == b.wte);
  CHECK(a.blocks[2].mlp_proj.w == b.blocks[2].mlp_proj.w);
  CHECK(a.wte != c.wte);
  CHECK(a.blocks[0].c_attn.w != a.blocks[1].c_attn.w);  // every tensor its own stream
  auto moments = [](const std::vector<float>& v) {
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += double(x) * x;
    const double mean = sum / double(v.size());
    return std::pair{mean, std::sqrt(sq / double(v.size()) - mean * mean)};
  };
  const auto [wte_mean, wte_std] = moments(a.wte);  // 96000 draws: the std within 1%
  CHECK(std::abs(wte_mean) < 0.002);
  CHECK(wte_std == Approx(0.14).epsilon(0.01));
  const auto [ln_mean, ln_std] = moments(a.blocks[1].ln_1.w);
  CHECK(ln_mean == Approx(1.0).epsilon(0.05));
  CHECK(ln_std == Approx(0.1).epsilon(0.3));
  CHECK(moments(a.blocks[0].attn_proj.w).second == Approx(0.02 / std::sqrt(6.0)).epsilon(0.03));
  CHECK(a.blocks[0].c_fc.out == 4 * cfg.width);
}

TEST_CASE("the tiny model and the CPU forward pass match a double-precision reference", "[unit][gpt2]") {
  const Gpt2Model m = Gpt2Model::tiny(7);
  CHECK(m.cfg.width == 128);
  CHECK(m.parameters() == 512u * 128 + 256u * 128 + 2 * (12u * 128 * 128 + 13u * 128) + 2 * 128);
  CHECK(m.parameters() == m.cfg.parameters());
  std::vector<int32_t> tokens = {1, 17, 300, 42, 511, 0, 9, 256, 33, 100, 7, 7};
  CpuBackend cpu;
  const auto logits = forward(m, tokens, 1, static_cast<uint32_t>(tokens.size()), cpu);
  const auto want = reference_logits(m, tokens);
  REQUIRE(logits.size() == want.size());
  const double err = rel_l2(logits, want);
  INFO("relative L2 error " << err);
  CHECK(err < 1e-5);
  double spread = 0;
  for (double w : want) spread = std::max(spread, std::abs(w));
  CHECK(spread > 1.0);  // logits with a realistic spread, not a flat distribution

  // A batch is its sequences side by side (BLAS may block a taller product differently, so not
  // bit for bit).
  std::vector<int32_t> two = tokens;
  two.insert(two.end(), tokens.rbegin(), tokens.rend());
  const auto both = forward(m, two, 2, static_cast<uint32_t>(tokens.size()), cpu);
  CHECK(compare_logits(std::span(both).first(logits.size()), logits, m.cfg.vocab).rel_l2 < 1e-6);
}

TEST_CASE("bad token input is rejected with the reason", "[unit][gpt2]") {
  const Gpt2Model m = Gpt2Model::tiny();
  CpuBackend cpu;
  const std::vector<int32_t> bad = {1, 512};
  CHECK_THROWS_WITH(forward(m, bad, 1, 2, cpu), Catch::Contains("outside the vocabulary"));
  const std::vector<int32_t> neg = {-1};
  CHECK_THROWS_AS(forward(m, neg, 1, 1, cpu), std::invalid_argument);
  const std::vector<int32_t> long_seq(257, 1);
  CHECK_THROWS_WITH(forward(m, long_seq, 1, 257, cpu), Catch::Contains("more than the model's 256 positions"));
  CHECK_THROWS_AS(forward(m, bad, 2, 2, cpu), std::invalid_argument);
}

TEST_CASE("checkpoints round-trip in the Hugging Face layout", "[unit][gpt2]") {
  TempDir dir;
  const Gpt2Model m = Gpt2Model::tiny(3);
  m.save(dir.path / "f32");
  const Gpt2Model back = Gpt2Model::load(dir.path / "f32");
  CHECK(back.cfg.vocab == m.cfg.vocab);
  CHECK(back.wte == m.wte);
  CHECK(back.blocks[1].mlp_proj.w == m.blocks[1].mlp_proj.w);
  CHECK(back.ln_f.b == m.ln_f.b);

  m.save(dir.path / "bf16", DType::kBF16);
  const Gpt2Model half = Gpt2Model::load(dir.path / "bf16");
  CHECK(std::abs(half.wte[5] - m.wte[5]) <= std::abs(m.wte[5]) / 128);

  // GPT2LMHeadModel checkpoints carry a "transformer." prefix (and extra buffers, ignored).
  const SafetensorsFile f = SafetensorsFile::open(dir.path / "f32" / "model.safetensors");
  std::vector<NamedTensor> prefixed;
  for (const auto& [name, info] : f.tensors()) prefixed.push_back({"transformer." + name, DType::kF32, info.shape, f.load_f32(name)});
  prefixed.push_back({"lm_head.weight", DType::kF32, {m.cfg.vocab, m.cfg.width}, m.wte});
  fs::create_directories(dir.path / "hf");
  fs::copy_file(dir.path / "f32" / "config.json", dir.path / "hf" / "config.json");
  write_safetensors(dir.path / "hf" / "model.safetensors", prefixed);
  CHECK(Gpt2Model::load(dir.path / "hf").blocks[0].c_attn.w == m.blocks[0].c_attn.w);
}

TEST_CASE("bad checkpoints are ModelErrors naming the problem", "[unit][gpt2]") {
  TempDir dir;
  const Gpt2Model m = Gpt2Model::tiny(3);
  m.save(dir.path / "good");
  CHECK_THROWS_WITH(Gpt2Model::load(dir.path / "nowhere"), Catch::Contains("does not exist"));

  fs::create_directories(dir.path / "noweights");
  fs::copy_file(dir.path / "good" / "config.json", dir.path / "noweights" / "config.json");
  CHECK_THROWS_AS(Gpt2Model::load(dir.path / "noweights"), ModelError);

  // A missing tensor, and a tensor of the wrong shape.
  const SafetensorsFile f = SafetensorsFile::open(dir.path / "good" / "model.safetensors");
  std::vector<NamedTensor> all;
  for (const auto& [name, info] : f.tensors()) all.push_back({name, DType::kF32, info.shape, f.load_f32(name)});
  for (const auto& [label, edit, needle] :
       std::vector<std::tuple<std::string, std::function<void(std::vector<NamedTensor>&)>, std::string>>{
           {"missing", [](auto& t) { std::erase_if(t, [](const NamedTensor& n) { return n.name == "h.1.mlp.c_fc.bias"; }); },
            "h.1.mlp.c_fc.bias"},
           {"shape", [](auto& t) {
              for (auto& n : t)
                if (n.name == "h.0.ln_1.weight") {
                  n.shape = {64, 2};
                }
            },
            "h.0.ln_1.weight"}}) {
    const fs::path d = dir.path / label;
    fs::create_directories(d);
    fs::copy_file(dir.path / "good" / "config.json", d / "config.json");
    auto tensors = all;
    edit(tensors);
    write_safetensors(d / "model.safetensors", tensors);
    CHECK_THROWS_WITH(Gpt2Model::load(d), Catch::Contains(needle));
  }

  // A config whose heads do not divide the width.
  const fs::path d = dir.path / "heads";
  fs::create_directories(d);
  fs::copy_file(dir.path / "good" / "model.safetensors", d / "model.safetensors");
  auto cfg = m.cfg.to_json();
  cfg["n_head"] = 3;
  std::ofstream(d / "config.json") << cfg.dump();
  CHECK_THROWS_WITH(Gpt2Model::load(d), Catch::Contains("does not divide"));
}

TEST_CASE("logit comparison", "[unit][gpt2]") {
  const std::vector<float> ref = {1, 2, 3, 0, 5, 1}, same = ref, off = {1, 2, 3, 6, 5, 1};
  const auto a = compare_logits(same, ref, 3);
  CHECK(a.max_abs_err == 0);
  CHECK(a.cosine == Approx(1.0));
  CHECK(a.top1_agreement == 1.0);
  const auto b = compare_logits(off, ref, 3);
  CHECK(b.max_abs_err == 6);
  CHECK(b.top1_agreement == 0.5);
  CHECK(b.cosine < 1.0);
}

namespace {

// The tiny model's logits (2 x 32 tokens) on an accelerator model device against fp32 on the CPU;
// `macs` and `bf16_macs` get what the device did.
Numerics tiny_on_accelerator(const std::string& spec, uint64_t& macs, uint64_t& bf16_macs) {
  const Gpt2Model m = Gpt2Model::tiny(11);
  std::vector<int32_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % m.cfg.vocab);
  CpuBackend cpu;
  const auto ref = forward(m, tokens, 2, 32, cpu);
  driver::Device dev(driver::DeviceSpec::parse(spec));
  AccelBackend accel(dev);
  const Numerics n = compare_logits(forward(m, tokens, 2, 32, accel), ref, m.cfg.vocab);
  macs = accel.stats().macs, bf16_macs = accel.stats().activity.bf16_macs;
  return n;
}

}  // namespace

TEST_CASE("int8 on the accelerator model meets the numerics targets on the tiny model", "[unit][gpt2][accel]") {
  uint64_t macs = 0, bf16_macs = 0;
  const Numerics n = tiny_on_accelerator("model", macs, bf16_macs);
  INFO("cosine " << n.cosine << ", top-1 " << n.top1_agreement << ", rel L2 " << n.rel_l2);
  CHECK(n.cosine >= 0.995);
  CHECK(n.top1_agreement >= 0.95);
  CHECK(n.rel_l2 > 0);  // int8, not fp32 in disguise
  CHECK(macs > 0);
  CHECK(bf16_macs == 0);
}

TEST_CASE("bf16 on the accelerator model meets the numerics targets on the tiny model", "[unit][gpt2][accel][bf16]") {
  uint64_t macs = 0, bf16_macs = 0;
  const Numerics n = tiny_on_accelerator("model?precision=bf16", macs, bf16_macs);
  INFO("cosine " << n.cosine << ", top-1 " << n.top1_agreement << ", rel L2 " << n.rel_l2);
  CHECK(n.cosine >= 0.9999);
  CHECK(n.top1_agreement == 1.0);
  CHECK(n.rel_l2 > 0);  // bf16 operands, not fp32 in disguise
  CHECK(bf16_macs == macs);
}

TEST_CASE("the accelerator's bf16 products are the engine's arithmetic on bf16-rounded operands",
          "[unit][gpt2][accel][bf16]") {
  // K = 3000 is above k_max / 2: two parts, the second adding the first's sums as its C_in (one
  // rounding), which the reference does the same way.
  driver::Device dev(driver::DeviceSpec::parse("model?preset=small-bf16&precision=bf16"));
  AccelBackend accel(dev);
  const uint32_t half = dev.properties().k_max / 2;
  for (const auto& [m, n, k] : {std::array<uint32_t, 3>{37, 53, 71}, {3, 20, 3000}}) {
    std::vector<float> a(uint64_t{m} * k), b(uint64_t{k} * n), got(uint64_t{m} * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = 3.0f * std::sin(1.3f * float(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.7f * float(i)) * (i % 5 ? 1.0f : 0.0f);
    accel.matmul(a.data(), b.data(), got.data(), m, n, k, false);
    const uint32_t parts = (k + half - 1) / half, per = ((k + parts - 1) / parts + 31) / 32 * 32;  // 64-byte aligned
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    std::transform(a.begin(), a.end(), a16.begin(), float_to_bf16);
    std::transform(b.begin(), b.end(), b16.begin(), float_to_bf16);
    for (uint32_t r = 0; r < m; ++r)
      for (uint32_t c = 0; c < n; ++c) {
        uint32_t sum = 0;
        for (uint32_t k0 = 0; k0 < k; k0 += per) {
          const uint32_t part = numerics::bf16_dot(&a16[uint64_t{r} * k + k0], 1, &b16[uint64_t{k0} * n + c], n,
                                                   std::min(k, k0 + per) - k0).fp32();
          sum = k0 == 0 ? part : numerics::fp32_add(part, sum);
        }
        INFO(m << "x" << n << "x" << k << " C[" << r << "][" << c << "]");
        REQUIRE(std::bit_cast<uint32_t>(got[uint64_t{r} * n + c]) == sum);
      }
  }
}

TEST_CASE("decode-sized products on the FOLD dataflow equal the classic ones", "[unit][gpt2][accel]") {
  // M = 1 and 3 take FOLD (where the timing model says so), K = 3000 above FOLD's k_max/2 in two
  // split-K parts summed on the host; the int32 sums, and so the results, are the classic ones.
  std::mt19937_64 rng(test_seed());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  driver::Device folding(driver::DeviceSpec::parse("model")), classic(driver::DeviceSpec::parse("model?dataflow=classic"));
  REQUIRE(folding.properties().fold);
  REQUIRE_FALSE(classic.properties().fold);
  for (const auto& [m, n, k] : {std::array<uint32_t, 3>{1, 100, 3000}, {3, 200, 64}, {8, 40, 700}}) {
    std::vector<float> a(uint64_t{m} * k), b(uint64_t{k} * n), got(uint64_t{m} * n), want(got.size());
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    AccelBackend fa(folding), ca(classic);
    fa.matmul(a.data(), b.data(), got.data(), m, n, k, false);
    ca.matmul(a.data(), b.data(), want.data(), m, n, k, false);
    INFO(m << "x" << n << "x" << k);
    CHECK(got == want);
    // FOLD halves the B reads: fewer cycles on every shape here
    CHECK(fa.stats().cycles < ca.stats().cycles);
    CHECK(fa.stats().gemms == (k > folding.properties().k_max / 2 ? 2u : 1u));
  }
}

TEST_CASE("sharded and pipelined runs equal the single-device run", "[unit][gpt2][pipeline]") {
  const Gpt2Model m = Gpt2Model::tiny(5);
  std::vector<int32_t> tokens(4 * 16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 101 + 3) % m.cfg.vocab);
  CpuBackend one;
  const auto ref = forward(m, tokens, 4, 16, one);

  // Stage 0 shards layer 0 over three CPU workers (heads 0 | 1-2 | 3, uneven MLP columns); stage 1
  // runs layer 1 and shards the output projection over two.
  CpuBackend a, b, c, d, e;
  StageShards s0{0, 0, {{&a, 0, 1, 0, 100}, {&b, 1, 2, 100, 300}, {&c, 3, 1, 400, 112}}};
  StageShards s1{1, 1, {{&d, 0, 2, 0, 256, 0, 200}, {&e, 2, 2, 256, 256, 200, 312}}};
  Pipeline p(m, {s0, s1});
  const auto got = p.forward(tokens, 4, 16, 2);
  const Numerics n = compare_logits(got, ref, m.cfg.vocab);
  INFO("relative L2 " << n.rel_l2);
  CHECK(n.rel_l2 < 1e-6);
  CHECK(n.top1_agreement == 1.0);
  CHECK(p.forward(tokens, 4, 16, 2) == got);  // partial sums are added in a fixed order

  // Every multiply-accumulate of the model is logged once, on the device that did it.
  uint64_t macs = 0;
  for (const auto& op : p.log()) macs += op.cost.macs;
  const uint64_t E = 128, T = 16, rows = 4 * T;
  const uint64_t per_pass = 2 * (rows * 12 * E * E + 4 * 4 * (T * T * 32 * 2)) + rows * 512 * E;
  CHECK(macs == 2 * per_pass);  // two forward passes
  CHECK_THROWS_AS(p.forward(tokens, 4, 16, 5), std::invalid_argument);
}

TEST_CASE("int8 shards on two model devices meet the numerics targets", "[unit][gpt2][pipeline][accel]") {
  const Gpt2Model m = Gpt2Model::tiny(13);
  std::vector<int32_t> tokens(2 * 24);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 53 + 11) % m.cfg.vocab);
  CpuBackend cpu;
  const auto ref = forward(m, tokens, 2, 24, cpu);
  driver::Device d0(driver::DeviceSpec::parse("model:0?preset=small")), d1(driver::DeviceSpec::parse("model:1"));
  AccelBackend a0(d0), a1(d1);
  Pipeline p(m, {StageShards{0, 1, {{&a0, 0, 1, 0, 128, 0, 128}, {&a1, 1, 3, 128, 384, 128, 384}}}});
  const Numerics n = compare_logits(p.forward(tokens, 2, 24), ref, m.cfg.vocab);
  INFO("cosine " << n.cosine << ", top-1 " << n.top1_agreement);
  CHECK(n.cosine >= 0.995);
  CHECK(n.top1_agreement >= 0.95);
  CHECK(a0.stats().cycles > 0);
  CHECK(a1.stats().cycles > 0);
}

TEST_CASE("a device failing in a later stage stops the pipeline with its error", "[unit][gpt2][pipeline]") {
  const Gpt2Model m = Gpt2Model::tiny(2);
  std::vector<int32_t> tokens(4 * 8, 1);
  CpuBackend a;
  test::FaultyBackend f("failing", {.dies_at_product = 7, .memory_free = {}});
  Pipeline p(m, {StageShards{0, 0, {{&a, 0, 4, 0, 512}}}, StageShards{1, 1, {{&f, 0, 4, 0, 512, 0, 512}}}});
  CHECK_THROWS_WITH(p.forward(tokens, 4, 8, 4), Catch::Contains("the device died"));
}

TEST_CASE("projected GPU times follow the roofline of the named GPU", "[unit][gpt2][gpu]") {
  ProjectedGpuBackend h100("cuda:0", gpu_peaks("h100"));
  std::vector<float> a(1024 * 1024, 1.0f), b(a), c(a.size());
  h100.matmul(a.data(), b.data(), c.data(), 1024, 1024, 1024, false);
  CHECK(c[5] == 1024.0f);  // the values are real
  CHECK(h100.stats().projected_seconds == Approx(2.0 * 1024 * 1024 * 1024 / 67e12));  // compute-bound
  ProjectedGpuBackend a100("cuda:1", gpu_peaks("a100"));
  std::vector<float> x(4096, 1.0f), w(4096 * 4096, 0.5f), y(4096);
  a100.matmul(x.data(), w.data(), y.data(), 1, 4096, 4096, false);
  CHECK(a100.stats().projected_seconds == Approx(4.0 * (4096 + 4096.0 * 4096 + 4096) / 2.039e12));  // memory-bound
  CHECK_THROWS_WITH(gpu_peaks("tpu"), Catch::Contains("h100"));
}

TEST_CASE("a GPU that is there is held to its own peaks, found from its CUDA name", "[unit][gpt2][gpu]") {
  // The names the CUDA runtime gives these cards.
  const std::pair<const char*, const char*> known[] = {
      {"NVIDIA H100 80GB HBM3", "h100"}, {"NVIDIA H100 PCIe", "h100-pcie"}, {"NVIDIA H100 NVL", "h100-nvl"},
      {"NVIDIA H200", "h200"},           {"NVIDIA A100-SXM4-80GB", "a100"}, {"NVIDIA A100 80GB PCIe", "a100-pcie"},
      {"NVIDIA L40S", "l40s"},           {"NVIDIA L4", "l4"}};
  for (const auto& [cuda_name, peaks] : known) {
    INFO(cuda_name);
    const GpuPeaks* p = detect_gpu_peaks(cuda_name);
    REQUIRE(p != nullptr);
    CHECK(p->name == peaks);
    CHECK(&gpu_peaks(peaks) == p);
  }
  // Cards whose figures differ from every entry are unknown, not taken for their neighbours.
  for (const char* other : {"NVIDIA GH200 480GB", "NVIDIA H200 NVL", "NVIDIA A100-SXM4-40GB", "NVIDIA L40",
                            "NVIDIA GeForce RTX 4090", ""}) {
    INFO(other);
    CHECK(detect_gpu_peaks(other) == nullptr);
  }
  CHECK(gpu_peaks("h100-pcie").memory_bytes_per_s < gpu_peaks("h100").memory_bytes_per_s);
  CHECK(gpu_peaks("l4").board_watts == 72);
}

TEST_CASE("a bench test's GPU roofline: weights and KV cache over bandwidth, FLOPs over peak", "[unit][gpt2][gpu]") {
  Gpt2Config small;  // GPT-2 small
  small.layers = 12, small.width = 768, small.heads = 12, small.vocab = 50257, small.positions = 1024;
  const GpuPeaks& h100 = gpu_peaks("h100");
  // Decode at batch 1 in bf16 reads every weight once a step: 124.3M values, 2 bytes each, and the
  // cache's keys and values of the positions so far.
  const double weights = 12.0 * 768 * 768 * 12 + 768.0 * 50257;
  CHECK(roofline_decode_seconds(small, h100, GpuPrecision::kBf16, 1, 1) ==
        Approx((weights + 2.0 * 12 * 768) * 2 / 3.35e12));
  CHECK(1.0 / roofline_decode_seconds(small, h100, GpuPrecision::kBf16, 1, 1) > 13000);  // tokens/s
  CHECK(roofline_decode_seconds(small, h100, GpuPrecision::kBf16, 1, 2) ==
        Approx((2 * weights + 2.0 * 12 * 768 * (1 + 2)) * 2 / 3.35e12));
  // int8 reads half the bytes of bf16; fp32 twice.
  CHECK(roofline_decode_seconds(small, h100, GpuPrecision::kInt8, 1, 32) ==
        Approx(roofline_decode_seconds(small, h100, GpuPrecision::kBf16, 1, 32) / 2));
  // A long prefill is compute-bound: its FLOPs over the peak.
  const double T = 512, flops = 2 * T * 12 * 768.0 * 768 * 12 + 2 * 768.0 * 50257 + 4 * 12 * 768 * T * (T + 1) / 2;
  CHECK(roofline_prefill_seconds(small, h100, GpuPrecision::kBf16, 1, 512) == Approx(flops / 989.4e12));
  // A one-token prefill is memory-bound, like a decode step without a cache.
  CHECK(roofline_prefill_seconds(small, h100, GpuPrecision::kBf16, 1, 1) == Approx(weights * 2 / 3.35e12));
}

TEST_CASE("projected GPU rows take their precision's peak, bytes and numerics", "[unit][gpt2][gpu]") {
  const uint32_t m = 64, n = 96, k = 80;
  std::vector<float> a(m * k), b(k * n), fp32(m * n), got(m * n), want(m * n);
  // Positive values: no cancellation to magnify the rounding of the operands.
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1.0f + std::sin(0.37f * float(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1.0f + std::cos(0.11f * float(i));
  CpuBackend cpu;
  cpu.matmul(a.data(), b.data(), fp32.data(), m, n, k, false);
  ProjectedGpuBackend bf16("cuda:0?precision=bf16", gpu_peaks("h200"), GpuPrecision::kBf16);
  bf16.matmul(a.data(), b.data(), got.data(), m, n, k, false);
  const Numerics nb = compare_logits(got, fp32, n);
  INFO("bf16 relative L2 " << nb.rel_l2);
  CHECK(nb.rel_l2 > 1e-5);  // rounded operands, not fp32
  CHECK(nb.rel_l2 < 4e-3);  // each operand within 2^-9 of its value
  CHECK(bf16.stats().read_bytes == 2 * (m * k + k * n));
  ProjectedGpuBackend int8("cuda:0?precision=int8", gpu_peaks("h200"), GpuPrecision::kInt8);
  int8.matmul(a.data(), b.data(), got.data(), m, n, k, false);
  int8_matmul_reference(a.data(), b.data(), want.data(), m, n, k, false);
  CHECK(got == want);
  CHECK(int8.stats().read_bytes == m * k + k * n);
  // Small GEMMs are memory-bound: bytes over the bandwidth.
  CHECK(int8.stats().projected_seconds == Approx((m * k + k * n + 4.0 * m * n) / 4.8e12));
  CHECK(parse_gpu_precision("bf16") == GpuPrecision::kBf16);
  CHECK_THROWS_WITH(parse_gpu_precision("fp8"), Catch::Contains("fp32, bf16 or int8"));
}

TEST_CASE("the accelerator's int8 products equal the shared int8 reference bit for bit", "[unit][gpt2][accel]") {
  driver::Device dev(driver::DeviceSpec::parse("model:0?preset=small"));
  AccelBackend accel(dev);
  for (bool t : {false, true}) {
    const uint32_t m = 37, n = 53, k = 71;
    std::vector<float> a(m * k), b(k * n), got(m * n), want(m * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = 3.0f * std::sin(1.3f * float(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.7f * float(i)) * (i % 5 ? 1.0f : 0.0f);
    accel.matmul(a.data(), b.data(), got.data(), m, n, k, t);
    int8_matmul_reference(a.data(), b.data(), want.data(), m, n, k, t);
    INFO("B transposed: " << t);
    CHECK(got == want);
  }
  SECTION("and so do its products over the KV cache in device memory, position by position") {
    const uint32_t D = 24, prompt = 7, steps = 3;  // a row of 24 bytes, padded to the alignment
    const auto cache = accel.make_kv_cache(1, 2, D, prompt + steps);
    CHECK(cache->bytes() == 2 * 2 * (prompt + steps) * ((D + dev.properties().align - 1) / dev.properties().align *
                                                        dev.properties().align));
    std::vector<float> keys, values;  // what the cache holds, in fp32, for the reference
    for (uint32_t T : {prompt, 1u, 1u, 1u}) {
      const uint32_t L = cache->length + T;
      std::vector<float> q(T * D), k(T * D), v(T * D), p(T * L);
      for (size_t i = 0; i < q.size(); ++i) {
        q[i] = std::sin(0.9f * float(i + L));
        k[i] = 2.0f * std::cos(0.4f * float(i * L));
        v[i] = (i % 7 ? 1.0f : 40.0f) * std::sin(float(i) + 0.1f * float(L));  // outliers in some channels
      }
      for (size_t i = 0; i < p.size(); ++i) p[i] = 0.5f + 0.5f * std::sin(1.7f * float(i));
      keys.insert(keys.end(), k.begin(), k.end());
      values.insert(values.end(), v.begin(), v.end());
      accel.kv_store(*cache, 0, 1, k.data(), v.data(), T);
      std::vector<float> got(T * L), want(T * L), out(T * D), want_out(T * D);
      accel.kv_scores(*cache, 0, 1, q.data(), T, got.data());
      int8_scores_reference(q.data(), keys.data(), want.data(), T, L, D);
      CHECK(got == want);
      accel.kv_mix(*cache, 0, 1, p.data(), T, out.data());
      int8_mix_reference(p.data(), values.data(), want_out.data(), T, L, D);
      CHECK(out == want_out);
      cache->length = L;
    }
  }
  // Zero rows stay zero, and the largest magnitude of each row maps to 127 exactly.
  CHECK(int8_scale(0.0f) == 1.0f);
  CHECK(to_int8(2.54f, 1.0f / int8_scale(2.54f)) == 127);
  CHECK(to_int8(-0.5f, 1.0f) == -1);  // half away from zero
}

namespace {

// The CPU, claiming to run the other ops itself (with the host's code): a stand-in for a GPU.
class AllOnDevice final : public MatmulBackend {
 public:
  std::string name() const override { return "all-on-device"; }
  MatmulStats stats() const override { return cpu_.stats(); }
  bool runs_other_ops() const override { return true; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override {
    cpu_.matmul(a, b, c, m, n, k, t);
  }

 private:
  CpuBackend cpu_;
};

}  // namespace

TEST_CASE("a backend that runs the other ops gets them; the host's share is logged for the others",
          "[unit][gpt2][pipeline]") {
  const Gpt2Model m = Gpt2Model::tiny(4);
  std::vector<int32_t> tokens(2 * 8, 3);
  AllOnDevice gpu;
  CpuBackend cpu;
  Pipeline on_device(m, {StageShards{0, 1, {{&gpu, 0, 4, 0, 512, 0, 512}}}});
  Pipeline on_host(m, {StageShards{0, 1, {{&cpu, 0, 4, 0, 512, 0, 512}}}});
  const auto a = on_device.forward(tokens, 2, 8), b = on_host.forward(tokens, 2, 8);
  CHECK(compare_logits(a, b, m.cfg.vocab).rel_l2 < 1e-6);
  auto count = [](const Pipeline& p, const std::string& device, const std::string& op) {
    return std::count_if(p.log().begin(), p.log().end(), [&](const OpRecord& r) { return r.device == device && r.op == op; });
  };
  CHECK(count(on_device, "all-on-device", "layernorm") == 5);  // two per layer and the final one
  CHECK(count(on_device, "host", "layernorm") == 0);
  CHECK(count(on_device, "host", "softmax") == 0);
  CHECK(count(on_device, "host", "gelu") == 0);
  CHECK(count(on_host, "host", "layernorm") == 5);
  CHECK(count(on_host, "host", "softmax") == 2);
  CHECK(count(on_host, "host", "gelu") == 2);
  for (const OpRecord& r : on_host.log())
    if (r.op == "softmax" || r.op == "gelu") CHECK(r.lane == "cpu");
}

TEST_CASE("bf16 and int8 GPU numerics meet the accelerator's targets on the tiny model", "[unit][gpt2][gpu]") {
  // The GPU test's model and tokens, with the GPU's numerics computed on the host.
  const Gpt2Model m = Gpt2Model::tiny(3);
  std::vector<int32_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 31 + 7) % m.cfg.vocab);
  CpuBackend cpu;
  const auto ref = forward(m, tokens, 2, 32, cpu);
  for (GpuPrecision p : {GpuPrecision::kBf16, GpuPrecision::kInt8}) {
    ProjectedGpuBackend gpu("cuda:0", gpu_peaks("h200"), p);
    const Numerics n = compare_logits(forward(m, tokens, 2, 32, gpu), ref, m.cfg.vocab);
    INFO(to_string(p) << ": cosine " << n.cosine << ", top-1 " << n.top1_agreement << ", rel L2 " << n.rel_l2);
    CHECK(n.cosine >= 0.995);
    CHECK(n.top1_agreement >= 0.95);
    CHECK(n.rel_l2 > 1e-5);
  }
}

TEST_CASE("a pipeline releases the weights it left on its backends", "[unit][gpt2][accel]") {
  const Gpt2Model m = Gpt2Model::tiny(6);
  std::vector<int32_t> tokens(8, 2);
  driver::Device dev(driver::DeviceSpec::parse("model:0?mem_mb=4"));
  AccelBackend accel(dev);
  const uint64_t free_before = dev.free_bytes();
  for (int run = 0; run < 3; ++run) {
    Pipeline p(m, {StageShards{0, 1, {{&accel, 0, 2, 0, 256, 0, 256}}}});  // half a layer: sliced copies
    p.forward(tokens, 1, 8);
    CHECK(dev.free_bytes() < free_before);
  }
  CHECK(dev.free_bytes() == free_before);
}
