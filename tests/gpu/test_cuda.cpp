// The CUDA backend on a real GPU: its products and a whole forward pass against the CPU backend.
// Exits 77 (ctest: skipped) with the reason when there is no usable GPU; it never passes by doing
// nothing.
#include <cmath>
#include <iostream>

#include "tessera/cuda_backend.hpp"
#include "tessera/transformer.hpp"

using namespace tessera;

int main() {
  std::string why_not;
  auto gpu = make_cuda_backend(0, why_not);
  if (!gpu) {
    std::cout << "SKIP: " << why_not << "\n";
    return 77;
  }
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
    failures += !ok;
  };
  CpuBackend cpu;
  // Products in both orientations, odd sizes.
  for (bool t : {false, true}) {
    const uint32_t m = 37, n = 53, k = 71;
    std::vector<float> a(m * k), b(k * n), want(m * n), got(m * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(float(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(float(i) * 0.5f);
    cpu.matmul(a.data(), b.data(), want.data(), m, n, k, t);
    gpu->matmul(a.data(), b.data(), got.data(), m, n, k, t);
    double err = 0;
    for (size_t i = 0; i < want.size(); ++i) err = std::max(err, double(std::abs(got[i] - want[i])));
    expect(err < 1e-3, "matmul 37x53x71" + std::string(t ? " with B transposed" : "") + ", max error " + std::to_string(err));
  }
  // The tiny model through the GPU against the CPU.
  const Gpt2Model m = Gpt2Model::tiny(3);
  std::vector<int32_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 31 + 7) % m.cfg.vocab);
  const Numerics n = compare_logits(forward(m, tokens, 2, 32, *gpu), forward(m, tokens, 2, 32, cpu), m.cfg.vocab);
  expect(n.rel_l2 < 1e-4 && n.top1_agreement == 1.0,
         "tiny model on " + gpu->name() + " against the CPU: relative L2 " + std::to_string(n.rel_l2));
  expect(gpu->stats().macs > 0, "the GPU counted its MACs");
  std::cout << failures << " failed\n";
  return failures ? 1 : 0;
}
