// The CUDA backend on a real GPU, in each precision: its GEMMs against host references of the same
// numerics (int8 bit for bit), its kernels against the host's ops, at small odd sizes and at
// GPT-2-small's (attention over 300 and 1024 tokens with 12 heads of 64; LayerNorm over 768
// columns; the linear layers for 1, 16 and 128 tokens), resident stages (one against op by op, two
// feeding each other GPU to GPU, one sharded over two backends on the same GPU, resident and op by
// op), and whole forward passes against fp32 on the CPU and, for int8, against the accelerator. Exits 77 (ctest: skipped) with the reason when there is no usable
// GPU, or 1 where TESSERA_REQUIRE_GPU is set (and not 0); it never passes by doing nothing.
//
// Targets against the fp32 CPU reference: fp32 within 1e-4 relative L2; bf16 and int8 a cosine of
// at least 0.995. int8 GEMMs and linear layers also bit for bit against the host's int8 path.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "seed.hpp"
#include "tessera/backends/accel_backend.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/cuda_backend.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/backends/host_ops.hpp"
#include "tessera/runtime/quantize.hpp"
#include "tessera/runtime/transformer.hpp"

using namespace tessera;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << std::endl;
  failures += !ok;
}

std::vector<float> random_values(size_t n, std::mt19937& rng, float spread = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, spread);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// How far got is from want, as a run's numerics report measures it (one row of want.size() values).
Numerics distance(const std::vector<float>& got, const std::vector<float>& want) {
  return compare_logits(got, want, static_cast<uint32_t>(want.size()));
}
double rel_l2(const std::vector<float>& got, const std::vector<float>& want) { return distance(got, want).rel_l2; }

size_t differing(const std::vector<float>& got, const std::vector<float>& want) {
  size_t n = 0;
  for (size_t i = 0; i < want.size(); ++i) n += got[i] != want[i];
  return n;
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// The precision's target against fp32 on the CPU: fp32 within 1e-4 relative L2, bf16 and int8 a
// cosine of at least 0.995. Prints both figures.
void against_cpu(GpuPrecision p, const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  if (got.size() != want.size() || want.empty())
    return expect(false, fmt::format("{}: {} values, expected {}", what, got.size(), want.size()));
  const Numerics n = distance(got, want);
  const double r = n.rel_l2, c = n.cosine;
  const bool ok = all_finite(got) && (p == GpuPrecision::kFp32 ? r <= 1e-4 : c >= 0.995);
  expect(ok, fmt::format("{} against fp32 on the CPU: relative L2 {:.3g}, cosine {:.7f} (target: {})", what, r, c,
                         p == GpuPrecision::kFp32 ? "relative L2 <= 1e-4" : "cosine >= 0.995"));
}

Linear random_linear(uint32_t in, uint32_t out, std::mt19937& rng) {
  return Linear{in, out, random_values(uint64_t{in} * out, rng, 0.02f), random_values(out, rng, 0.02f)};
}

bool gpu_required() {
  const char* v = std::getenv("TESSERA_REQUIRE_GPU");
  return v && *v && std::string(v) != "0";
}

}  // namespace

int main() {
  const uint64_t seed = test_seed();
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));

  // scripts/gpu-check sets TESSERA_REQUIRE_GPU: there, no GPU is a failure, not a skip.
  std::string why_not;
  const std::vector<GpuInfo> gpus = list_gpus(why_not);
  if (gpus.empty()) {
    std::cout << (gpu_required() ? "FAIL: a GPU is required here: " : "SKIP: ") << why_not << std::endl;
    return gpu_required() ? 1 : 77;
  }
  for (const GpuInfo& g : gpus)
    std::cout << fmt::format("GPU {}: {}, {:.1f} GiB, compute capability {}.{}", g.index, g.name,
                             double(g.memory_bytes) / double(1ull << 30), g.cc_major, g.cc_minor)
              << std::endl;

  const Gpt2Model model = Gpt2Model::tiny(3);
  std::vector<int32_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 31 + 7) % model.cfg.vocab);
  CpuBackend cpu;
  const std::vector<float> fp32_logits = forward(model, tokens, 2, 32, cpu);

  // A GPT-2-small-shaped model (two layers, a smaller vocabulary) for the sharded stage.
  const Gpt2Config small_cfg{4096, 1024, 768, 12, 2};
  const Gpt2Model small = Gpt2Model::random(small_cfg, seed + 1);
  const uint32_t small_batch = 2, small_seq = 128;
  std::vector<int32_t> small_tokens(uint64_t{small_batch} * small_seq);
  for (size_t i = 0; i < small_tokens.size(); ++i) small_tokens[i] = int32_t((i * 131 + 17) % small_cfg.vocab);
  const std::vector<float> small_fp32 = forward(small, small_tokens, small_batch, small_seq, cpu);

  for (GpuPrecision p : {GpuPrecision::kFp32, GpuPrecision::kBf16, GpuPrecision::kInt8}) {
    const std::string tag(to_string(p));
    auto gpu = make_cuda_backend(0, p, "cuda:0?precision=" + tag, why_not);
    if (!gpu) {  // the runtime lists a GPU, so this is a failure
      expect(false, fmt::format("{}: the cuda backend for GPU 0: {}", tag, why_not));
      continue;
    }
    // The host computes what this precision should give.
    ProjectedGpuBackend ref("reference", gpu_peaks("h200"), p);
    // GEMMs differ from the reference only in summation order (int8: not at all); attention also
    // carries the softmax's last-bit differences through the rounding of its probabilities.
    const double tol = p == GpuPrecision::kInt8 ? 0 : 1e-5;
    const double attention_tol = p == GpuPrecision::kFp32 ? 1e-5 : p == GpuPrecision::kBf16 ? 1e-3 : 1e-2;

    for (bool t : {false, true}) {
      const uint32_t m = 37, n = 53, k = 71;
      const auto a = random_values(uint64_t{m} * k, rng), b = random_values(uint64_t{k} * n, rng);
      std::vector<float> want(uint64_t{m} * n), got(want.size());
      ref.matmul(a.data(), b.data(), want.data(), m, n, k, t);
      gpu->matmul(a.data(), b.data(), got.data(), m, n, k, t);
      const std::string what = fmt::format("{}: matmul {}x{}x{}{}", tag, m, n, k, t ? " with B transposed" : "");
      if (p == GpuPrecision::kInt8)
        expect(differing(got, want) == 0, fmt::format("{}: {} of {} values differ from the host's int8 path (want 0)",
                                                      what, differing(got, want), want.size()));
      else
        expect(rel_l2(got, want) < tol, fmt::format("{}: relative L2 {:.3g}", what, rel_l2(got, want)));
    }
    {
      // Empty sizes: nothing to do (m = 0), or an empty sum (k = 0) that gives zeros.
      std::vector<float> a(8, 1.0f), b(8, 1.0f), c(3 * 5, 42.0f);
      gpu->matmul(a.data(), b.data(), c.data(), 0, 5, 1, false);
      expect(differing(c, std::vector<float>(c.size(), 42.0f)) == 0, tag + ": matmul with m = 0 writes nothing");
      gpu->matmul(a.data(), b.data(), c.data(), 3, 5, 0, false);
      expect(differing(c, std::vector<float>(c.size(), 0.0f)) == 0, tag + ": matmul with k = 0 gives zeros");
    }
    {
      const Linear& w = model.blocks[0].c_fc;
      const uint32_t m = 19;
      const auto x = random_values(uint64_t{m} * w.in, rng);
      std::vector<float> want(uint64_t{m} * w.out), got(want.size());
      ref.linear(x.data(), m, w, want.data());
      gpu->linear(x.data(), m, w, got.data());
      if (p == GpuPrecision::kInt8)
        expect(differing(got, want) == 0, fmt::format("{}: linear: {} values differ from the host's int8 path",
                                                      tag, differing(got, want)));
      else
        expect(rel_l2(got, want) < tol, fmt::format("{}: linear: relative L2 {:.3g}", tag, rel_l2(got, want)));
      gelu_tanh(want.data(), want.size());
      gpu->linear_gelu(x.data(), m, w, got.data());
      expect(rel_l2(got, want) < 1e-5,
             fmt::format("{}: linear with GELU: relative L2 {:.3g}", tag, rel_l2(got, want)));
    }
    {
      const uint32_t batch = 2, T = 29, H = 3, D = 32;
      const auto qkv = random_values(uint64_t{batch} * T * 3 * H * D, rng, 2.0f);
      std::vector<float> want(uint64_t{batch} * T * H * D), got(want.size());
      ref.attention(qkv.data(), want.data(), batch, T, H, D);  // products as this precision, the rest on the host
      gpu->attention(qkv.data(), got.data(), batch, T, H, D);
      expect(rel_l2(got, want) < attention_tol, fmt::format("{}: attention {} sequences x {} tokens x {} heads: relative L2 {:.3g}",
                                                  tag, batch, T, H, rel_l2(got, want)));
    }
    // With a KV cache in GPU memory: a prefill, then decode steps of one, against the host attending
    // over the same cache contents; the worst relative L2 of the decode steps.
    auto cache_decode = [&](uint32_t batch, uint32_t T, uint32_t prompt, uint32_t H, uint32_t D) {
      const uint32_t W = 3 * H * D;
      const auto qkv = random_values(uint64_t{batch} * T * W, rng, 2.0f);
      const auto gpu_cache = gpu->make_kv_cache(batch, H, D, T);
      const auto host_cache = ref.make_kv_cache(batch, H, D, T);
      double worst = 0;
      for (uint32_t t0 = 0; t0 < T;) {
        const uint32_t n = t0 == 0 ? prompt : 1;
        std::vector<float> part;
        for (uint32_t b = 0; b < batch; ++b)
          part.insert(part.end(), qkv.begin() + (uint64_t{b} * T + t0) * W, qkv.begin() + (uint64_t{b} * T + t0 + n) * W);
        std::vector<float> want(uint64_t{batch} * n * H * D), got(want.size());
        ref.attention(part.data(), want.data(), n, *host_cache);
        gpu->attention(part.data(), got.data(), n, *gpu_cache);
        worst = std::max(worst, rel_l2(got, want));
        t0 += n;
      }
      return gpu_cache->length == T ? worst : INFINITY;
    };
    for (auto [T, prompt, H, D] : {std::array<uint32_t, 4>{29, 20, 3, 32}, {600, 560, 12, 64}}) {
      // 600 positions: decode split over them (kSplitFromPositions).
      const double worst = cache_decode(2, T, prompt, H, D);
      expect(worst < attention_tol,
             fmt::format("{}: attention with a KV cache of {} positions, {} heads of {}: a prefill of {} then {} decode "
                         "steps: worst relative L2 {:.3g}", tag, T, H, D, prompt, T - prompt, worst));
    }
    {
      const auto x = random_values(uint64_t{41} * model.cfg.width, rng, 3.0f);
      std::vector<float> want(x.size()), got(x.size());
      layer_norm(x.data(), want.data(), 41, model.cfg.width, model.blocks[0].ln_1, model.cfg.eps);
      gpu->layer_norm(x.data(), got.data(), 41, model.cfg.width, model.blocks[0].ln_1, model.cfg.eps);
      expect(rel_l2(got, want) < 1e-6, fmt::format("{}: layer norm: relative L2 {:.3g}", tag, rel_l2(got, want)));
    }

    // GPT-2-small's linear layers for 1, 16 and 128 tokens.
    {
      std::vector<Linear> layers;
      for (auto [in, out] : {std::pair<uint32_t, uint32_t>{768, 2304}, {768, 3072}, {3072, 768}})
        layers.push_back(random_linear(in, out, rng));
      for (const Linear& w : layers)
        for (uint32_t m : {1u, 16u, 128u}) {
          const auto x = random_values(uint64_t{m} * w.in, rng);
          std::vector<float> want(uint64_t{m} * w.out), got(want.size()), same(want.size());
          cpu.linear(x.data(), m, w, want.data());
          gpu->linear(x.data(), m, w, got.data());
          const std::string what = fmt::format("{}: linear {} -> {} for {} tokens", tag, w.in, w.out, m);
          against_cpu(p, got, want, what);
          ref.linear(x.data(), m, w, same.data());
          if (p == GpuPrecision::kInt8)
            expect(differing(got, same) == 0, fmt::format("{}: {} of {} values differ from the host's int8 path (want 0)",
                                                          what, differing(got, same), same.size()));
          else
            expect(rel_l2(got, same) < tol, fmt::format("{}: relative L2 {:.3g} against the host's {} path (target < {})",
                                                        what, rel_l2(got, same), tag, tol));
        }
      {
        const Linear& w = layers[1];
        const uint32_t m = 16;
        const auto x = random_values(uint64_t{m} * w.in, rng);
        std::vector<float> want(uint64_t{m} * w.out), got(want.size());
        cpu.linear(x.data(), m, w, want.data());
        gelu_tanh(want.data(), want.size());
        gpu->linear_gelu(x.data(), m, w, got.data());
        against_cpu(p, got, want, fmt::format("{}: linear with GELU {} -> {} for {} tokens", tag, w.in, w.out, m));
      }
      for (const Linear& w : layers) gpu->release(w);  // before the layers go (their addresses are the keys)
    }

    // Attention at GPT-2-small's sizes: 12 heads of 64, over 300 and 1024 tokens.
    for (auto [batch, T] : {std::pair<uint32_t, uint32_t>{2, 300}, {1, 1024}}) {
      const uint32_t H = 12, D = 64;
      const auto qkv = random_values(uint64_t{batch} * T * 3 * H * D, rng);
      std::vector<float> want(uint64_t{batch} * T * H * D), got(want.size()), same(want.size());
      cpu.attention(qkv.data(), want.data(), batch, T, H, D);
      gpu->take_phases();
      gpu->attention(qkv.data(), got.data(), batch, T, H, D);
      const std::vector<Phase> phases = gpu->take_phases();
      const std::string what = fmt::format("{}: attention {} x {} tokens x {} heads of {}", tag, batch, T, H, D);
      against_cpu(p, got, want, what);
      ref.attention(qkv.data(), same.data(), batch, T, H, D);
      expect(rel_l2(got, same) < attention_tol,
             fmt::format("{}: relative L2 {:.3g} against the host with {} products (target < {})", what,
                         rel_l2(got, same), tag, attention_tol));
      // One upload, one compute, one download, end to end, each with a length.
      bool phases_ok = phases.size() == 3;
      std::string shown;
      for (size_t i = 0; i < phases.size(); ++i) {
        const Phase& ph = phases[i];
        shown += fmt::format(" {}/{} {:.3f} ms", ph.track, ph.name, ph.seconds * 1e3);
        phases_ok = phases_ok && ph.seconds >= 0 && (i == 0 || ph.start >= phases[i - 1].start);
      }
      phases_ok = phases_ok && phases[0].track == "dma" && phases[1].track == "compute" && phases[2].track == "dma" &&
                  phases[1].seconds > 0;
      expect(phases_ok, fmt::format("{}: phases{}", what, shown));
    }

    // LayerNorm over GPT-2-small's 768 columns.
    {
      const uint32_t rows = 300, cols = 768;
      const LayerNormWeights w{random_values(cols, rng, 0.1f, 1.0f), random_values(cols, rng, 0.1f)};
      const auto x = random_values(uint64_t{rows} * cols, rng, 3.0f, 0.5f);
      std::vector<float> want(x.size()), got(x.size());
      layer_norm(x.data(), want.data(), rows, cols, w, 1e-5f);
      gpu->layer_norm(x.data(), got.data(), rows, cols, w, 1e-5f);
      // fp32 in every precision, in double sums as on the host.
      expect(all_finite(got) && rel_l2(got, want) <= 1e-5,
             fmt::format("{}: layer norm {} x {}: relative L2 {:.3g} against the CPU (target <= 1e-5)", tag, rows, cols,
                         rel_l2(got, want)));
      gpu->release(w);
    }

    // The tiny model end to end against fp32 on the CPU: exact for fp32 up to summation order,
    // within the accelerator's targets for bf16 and int8.
    const std::vector<float> logits = forward(model, tokens, 2, 32, *gpu);
    const Numerics num = compare_logits(logits, fp32_logits, model.cfg.vocab);
    const std::string figures = fmt::format("relative L2 {:.3g}, cosine {:.6f}, top-1 {:.3f}", num.rel_l2, num.cosine,
                                            num.top1_agreement);
    if (p == GpuPrecision::kFp32)
      expect(num.rel_l2 < 1e-4 && num.top1_agreement == 1.0, tag + ": tiny model against the CPU: " + figures);
    else
      expect(num.cosine >= 0.995 && num.top1_agreement >= 0.95, tag + ": tiny model against fp32 on the CPU: " + figures);
    if (p == GpuPrecision::kInt8) {
      // The apples-to-apples row: the same quantization as the accelerator's.
      driver::Device dev(driver::DeviceSpec::parse("model"));
      AccelBackend accel(dev);
      const Numerics vs = compare_logits(logits, forward(model, tokens, 2, 32, accel), model.cfg.vocab);
      expect(vs.rel_l2 < 1e-2 && vs.top1_agreement >= 0.95,
             fmt::format("int8: tiny model against the accelerator (model device): relative L2 {:.3g}, top-1 {:.3f}",
                         vs.rel_l2, vs.top1_agreement));
    }
    expect(gpu->stats().macs > 0, tag + ": the GPU counted its MACs");

    // The GPT-2-small-shaped model on one backend (LayerNorm on the GPU too), twice: the pipeline
    // releases what it gave the backend, and the second run uploads it again.
    for (int run = 1; run <= 2; ++run) {
      const std::vector<float> got = forward(small, small_tokens, small_batch, small_seq, *gpu);
      const Numerics n = compare_logits(got, small_fp32, small_cfg.vocab);
      against_cpu(p, got, small_fp32,
                  fmt::format("{}: 2 layers of GPT-2 small, {} x {} tokens, on one backend (run {}; top-1 {:.3f})", tag,
                              small_batch, small_seq, run, n.top1_agreement));
    }

    // Generation through a pipeline: a prefill of 16 tokens and 24 decode steps in two microbatches,
    // every step's logits side by side, the ops of its records and its notes.
    const uint32_t gen_batch = 4, prompt = 16, steps = 24;
    struct Generated {
      std::vector<float> logits;
      std::vector<std::string> ops, notes;
    };
    auto generate = [&](std::vector<StageShards> stages, bool per_op, uint32_t capacity = 0) {
      Generated g;
      Pipeline pipe(small, std::move(stages));
      pipe.profile_ops = per_op;
      pipe.start(gen_batch, capacity ? capacity : prompt + steps, 2);
      g.logits = pipe.step(std::vector<int32_t>(small_tokens.begin(), small_tokens.begin() + gen_batch * prompt), prompt,
                           true);
      for (uint32_t i = 0; i < steps; ++i) {
        std::vector<int32_t> next(gen_batch);
        for (uint32_t b = 0; b < gen_batch; ++b) next[b] = int32_t((i * 97 + b * 13 + 5) % small_cfg.vocab);
        const std::vector<float> l = pipe.step(next, 1, true);
        g.logits.insert(g.logits.end(), l.begin(), l.end());
      }
      for (const OpRecord& r : pipe.log()) g.ops.push_back(r.op);
      g.notes = pipe.notes();
      return g;
    };
    auto only_stages = [](const Generated& g) {
      return !g.ops.empty() && std::all_of(g.ops.begin(), g.ops.end(), [](const std::string& op) { return op == "stage"; });
    };
    auto whole_on = [&](MatmulBackend* b, uint32_t first, uint32_t last) {
      Shard sh{b, 0, small_cfg.heads, 0, 4 * small_cfg.width, 0, small_cfg.vocab};
      sh.gpu = 0;
      return StageShards{first, last, {sh}};
    };

    // The same model as one resident stage (the default: weights, activations and KV caches on the
    // GPU, decode in a CUDA graph per microbatch from its second step) and op by op (profile_ops):
    // the same kernels in the same order, so every step's logits are the same bits.
    const Generated resident = generate({whole_on(gpu.get(), 0, small_cfg.layers - 1)}, false);
    {
      const Generated per_op = generate({whole_on(gpu.get(), 0, small_cfg.layers - 1)}, true);
      expect(only_stages(resident) && std::count(per_op.ops.begin(), per_op.ops.end(), "qkv") > 0,
             fmt::format("{}: the resident stage ran as one op a step ({} records), --profile-ops op by op ({})", tag,
                         resident.ops.size(), per_op.ops.size()));
      expect(resident.notes.empty(),
             fmt::format("{}: decode ran in CUDA graphs{}", tag, resident.notes.empty() ? "" : ": " + resident.notes[0]));
      expect(all_finite(resident.logits) && differing(resident.logits, per_op.logits) == 0,
             fmt::format("{}: resident stage against op by op, prefill and {} decode steps: {} of {} logits differ "
                         "(relative L2 {:.3g})",
                         tag, steps, differing(resident.logits, per_op.logits), per_op.logits.size(),
                         rel_l2(resident.logits, per_op.logits)));
      // Caches of 300 positions: decode split over them (in the graphs too), the same bits both ways.
      const Generated long_resident = generate({whole_on(gpu.get(), 0, small_cfg.layers - 1)}, false, 300);
      const Generated long_per_op = generate({whole_on(gpu.get(), 0, small_cfg.layers - 1)}, true, 300);
      expect(long_resident.notes.empty() && all_finite(long_resident.logits) &&
                 differing(long_resident.logits, long_per_op.logits) == 0,
             fmt::format("{}: with caches of 300 positions (decode split over them), resident against op by op: {} of {} "
                         "logits differ{}", tag, differing(long_resident.logits, long_per_op.logits),
                         long_per_op.logits.size(), long_resident.notes.empty() ? "" : " (" + long_resident.notes[0] + ")"));
      // A KV cache that cannot fit: bad input, before anything runs, naming the device and the shortfall.
      Pipeline pipe(small, {whole_on(gpu.get(), 0, small_cfg.layers - 1)});
      try {
        pipe.start(1u << 20, small_cfg.positions);
        expect(false, tag + ": a KV cache of a million sequences was refused");
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        expect(what.find("MiB short") != std::string::npos && what.find(gpu->name()) != std::string::npos,
               fmt::format("{}: a KV cache of a million sequences refused: {}", tag, what));
      }
    }

    // Two backends on GPU 0 (standing in for two GPUs: the code is the same, the copies stay on one).
    std::string why_a, why_b;
    auto a = make_cuda_backend(0, p, "cuda:0?precision=" + tag + "#a", why_a);
    auto b = make_cuda_backend(0, p, "cuda:0?precision=" + tag + "#b", why_b);
    if (!a || !b) {
      expect(false, fmt::format("{}: two cuda backends on GPU 0: {}{}", tag, why_a, why_b));
      continue;
    }

    // Two resident stages, a layer each: the first leaves the residual stream in the second's memory
    // on the GPU. The same kernels as one stage: the same bits.
    {
      const Generated fed = generate({whole_on(a.get(), 0, 0), whole_on(b.get(), 1, small_cfg.layers - 1)}, false);
      expect(only_stages(fed) && fed.notes.empty() && differing(fed.logits, resident.logits) == 0,
             fmt::format("{}: two resident stages, GPU to GPU, against one: {} of {} logits differ{}", tag,
                         differing(fed.logits, resident.logits), resident.logits.size(),
                         fed.notes.empty() ? "" : " (" + fed.notes[0] + ")"));
    }

    // One stage sharded over the two backends, unevenly: 5 and 7 heads, 1196 and 1876 MLP columns
    // and 1700 and 2396 vocabulary rows, none of them multiples of 16, so that resident weights get
    // padded. Resident: the partial sums go to the first shard, which adds them in shard order, and
    // back; op by op (profile_ops), each shard on a thread of its own and the sums on the host.
    {
      Shard sa{a.get(), 0, 5, 0, 1196, 0, 1700};
      Shard sb{b.get(), 5, 7, 1196, 1876, 1700, 2396};
      sa.gpu = sb.gpu = 0;
      for (bool per_op : {true, false}) {
        const std::string how = per_op ? "op by op" : "resident";
        std::vector<float> got;
        {
          Pipeline pipe(small, {StageShards{0, small_cfg.layers - 1, {sa, sb}}});
          pipe.profile_ops = per_op;
          got = pipe.forward(small_tokens, small_batch, small_seq, 2);
        }
        const Numerics n = compare_logits(got, small_fp32, small_cfg.vocab);
        against_cpu(p, got, small_fp32,
                    fmt::format("{}: 2 layers of GPT-2 small sharded over two backends on GPU 0, {} (top-1 {:.3f})",
                                tag, how, n.top1_agreement));
      }
      expect(a->stats().gemms > 0 && b->stats().gemms > 0,
             fmt::format("{}: both shards ran on the GPU ({} and {} GEMMs)", tag, a->stats().gemms, b->stats().gemms));
      const Generated sharded = generate({StageShards{0, small_cfg.layers - 1, {sa, sb}}}, false);
      expect(only_stages(sharded) && sharded.notes.empty(),
             fmt::format("{}: the sharded stage ran resident, a record a shard and step ({}), decode in CUDA graphs{}",
                         tag, sharded.ops.size(), sharded.notes.empty() ? "" : ": " + sharded.notes[0]));
      // The partial sums add in another order than one GEMM's: close, not the same bits.
      const Numerics vs = distance(sharded.logits, resident.logits);
      expect(all_finite(sharded.logits) && (p == GpuPrecision::kFp32 ? vs.rel_l2 <= 1e-4 : vs.cosine >= 0.995),
             fmt::format("{}: sharded resident generation against the whole stage's: relative L2 {:.3g}, cosine {:.7f}",
                         tag, vs.rel_l2, vs.cosine));
    }
  }
  std::cout << failures << " failed" << std::endl;
  return failures ? 1 : 0;
}
