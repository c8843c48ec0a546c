// The CUDA backend on a real GPU, in each precision: its GEMMs against host references of the same
// numerics (int8 bit for bit), its kernels against the host's ops, and whole forward passes against
// fp32 on the CPU and, for int8, against the accelerator. Exits 77 (ctest: skipped) with the reason
// when there is no usable GPU; it never passes by doing nothing.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>

#include <fmt/format.h>

#include "tessera/accel_backend.hpp"
#include "tessera/cuda_backend.hpp"
#include "tessera/gpu_projection.hpp"
#include "tessera/quantize.hpp"
#include "tessera/transformer.hpp"

using namespace tessera;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  failures += !ok;
}

std::vector<float> random_values(size_t n, std::mt19937& rng, float spread = 1.0f) {
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += double(got[i] - want[i]) * (got[i] - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

size_t differing(const std::vector<float>& got, const std::vector<float>& want) {
  size_t n = 0;
  for (size_t i = 0; i < want.size(); ++i) n += got[i] != want[i];
  return n;
}

}  // namespace

int main() {
  const uint32_t seed = 20261202;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  const Gpt2Model model = Gpt2Model::tiny(3);
  std::vector<int32_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 31 + 7) % model.cfg.vocab);
  CpuBackend cpu;
  const std::vector<float> fp32_logits = forward(model, tokens, 2, 32, cpu);

  for (GpuPrecision p : {GpuPrecision::kFp32, GpuPrecision::kBf16, GpuPrecision::kInt8}) {
    const std::string tag(to_string(p));
    std::string why_not;
    auto gpu = make_cuda_backend(0, p, "cuda:0?precision=" + tag, why_not);
    if (!gpu) {
      // scripts/gpu-check sets TESSERA_REQUIRE_GPU: there, no GPU is a failure, not a skip.
      const bool required = std::getenv("TESSERA_REQUIRE_GPU") != nullptr;
      std::cout << (required ? "FAIL: a GPU is required here: " : "SKIP: ") << why_not << "\n";
      return required ? 1 : 77;
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
    {
      const auto x = random_values(uint64_t{41} * model.cfg.width, rng, 3.0f);
      std::vector<float> want(x.size()), got(x.size());
      layer_norm(x.data(), want.data(), 41, model.cfg.width, model.blocks[0].ln_1, model.cfg.eps);
      gpu->layer_norm(x.data(), got.data(), 41, model.cfg.width, model.blocks[0].ln_1, model.cfg.eps);
      expect(rel_l2(got, want) < 1e-6, fmt::format("{}: layer norm: relative L2 {:.3g}", tag, rel_l2(got, want)));
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
  }
  std::cout << failures << " failed\n";
  return failures ? 1 : 0;
}
