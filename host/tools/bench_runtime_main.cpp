// tessera-bench-runtime: the host runtime's benchmark figures (docs/PERFORMANCE.md), printed, with
// nothing asserted:
//  - the cpu backend (OpenBLAS) against a plain reference (the same forward pass with naive
//    triple-loop matrix products), tokens per second, on the tiny model and a GPT-2-small layer;
//  - the tiny model in int8 on a device (default rtl): wall time and simulated cycles per second;
//  - utilization per op type on GPT-2-small shapes (one layer, 128 tokens) on the model backend;
//  - instead, with --gpu: GEMM throughput on GPU 0 at GPT-2-small's linear shapes in each precision,
//    against the GPU's published peak.
//
//   tessera-bench-runtime [--device rtl] [--skip-device] | --gpu
#include <algorithm>
#include <cctype>
#include <chrono>
#include <iostream>
#include <map>
#include <random>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "tessera/backends/accel_backend.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/cuda_backend.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/runtime/transformer.hpp"

namespace po = boost::program_options;
using namespace tessera;

namespace {

using Clock = std::chrono::steady_clock;

// Matrix products as three plain loops, the baseline the BLAS backend is measured against.
class PlainBackend final : public MatmulBackend {
 public:
  std::string name() const override { return "plain"; }
  MatmulStats stats() const override { return {}; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override {
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j) {
        float s = 0;
        for (uint32_t p = 0; p < k; ++p) s += a[uint64_t{i} * k + p] * (t ? b[uint64_t{j} * k + p] : b[uint64_t{p} * n + j]);
        c[uint64_t{i} * n + j] = s;
      }
  }
};

std::vector<int32_t> tokens_for(const Gpt2Config& cfg, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 7919 + 13) % cfg.vocab);
  return t;
}

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void cpu_vs_plain(const std::string& label, const Gpt2Model& m, uint32_t batch, uint32_t seq) {
  const auto tokens = tokens_for(m.cfg, uint64_t{batch} * seq);
  CpuBackend cpu;
  PlainBackend plain;
  std::vector<float> a, b;
  forward(m, tokens, batch, seq, cpu);  // warm-up: BLAS threads, page faults
  const double t_cpu = seconds_of([&] { a = forward(m, tokens, batch, seq, cpu); });
  const double t_plain = seconds_of([&] { b = forward(m, tokens, batch, seq, plain); });
  const double n = double(tokens.size());
  fmt::print("{:<34} {:>9} tokens  cpu {:>10.0f} tokens/s  plain {:>9.0f} tokens/s  ratio {:>6.1f}x  (rel L2 {:.1e})\n",
             label, tokens.size(), n / t_cpu, n / t_plain, t_plain / t_cpu,
             compare_logits(a, b, m.cfg.vocab).rel_l2);
}

// The linear layers of GPT-2 small at m tokens on GPU 0, in each precision: the median over 20 calls
// of the backend's compute phase (the GEMM with its packing and epilogue; weights resident,
// activations' transfers left out), as TFLOP/s and as a fraction of the GPU's published dense peak
// for that precision. Returns false where there is no GPU.
bool gpu_gemms() {
  std::string why_not;
  const auto gpus = list_gpus(why_not);
  if (gpus.empty()) {
    fmt::print("GPU GEMMs: not run: {}\n", why_not);
    return false;
  }
  const GpuPeaks* peaks = detect_gpu_peaks(gpus[0].name);  // where the table knows it
  fmt::print("GEMM throughput on cuda:0 ({}), compute phase, median of 20 calls{}:\n", gpus[0].name,
             peaks ? fmt::format(", against the {}", peaks->description) : "");
  struct Shape {
    const char* op;
    uint32_t in, out;
  };
  const Shape shapes[] = {{"qkv", 768, 2304}, {"attn_proj", 768, 768}, {"mlp_up", 768, 3072},
                          {"mlp_down", 3072, 768}, {"logits", 768, 50257}};
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (GpuPrecision precision : {GpuPrecision::kFp32, GpuPrecision::kBf16, GpuPrecision::kInt8}) {
    auto gpu = make_cuda_backend(0, precision, "cuda:0", why_not);
    if (!gpu) throw std::runtime_error(why_not);
    for (const Shape& sh : shapes) {
      Linear w{sh.in, sh.out, std::vector<float>(uint64_t{sh.in} * sh.out), std::vector<float>(sh.out)};
      for (float& v : w.w) v = dist(rng);
      for (uint32_t m : {1u, 16u, 128u, 1024u, 8192u}) {
        std::vector<float> x(uint64_t{m} * sh.in), y(uint64_t{m} * sh.out);
        for (float& v : x) v = dist(rng);
        gpu->linear(x.data(), m, w, y.data());  // warm-up: weights resident, kernels loaded
        gpu->take_phases();
        std::vector<double> times;
        for (int rep = 0; rep < 20; ++rep) {
          gpu->linear(x.data(), m, w, y.data());
          double t = 0;
          for (const Phase& ph : gpu->take_phases()) t += ph.track == "compute" ? ph.seconds : 0;
          times.push_back(t);
        }
        std::nth_element(times.begin(), times.begin() + 10, times.end());
        const double tflops = 2.0 * m * sh.in * sh.out / times[10] / 1e12;
        fmt::print("  {:<5} {:<10} m {:>5}  {:>8.1f} us  {:>8.2f} TFLOP/s{}\n", to_string(precision), sh.op, m,
                   times[10] * 1e6, tflops,
                   peaks ? fmt::format("  {:5.1f}% of peak", 100 * tflops * 1e12 / peaks->peak(precision)) : "");
      }
      gpu->release(w);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "rtl";
  po::options_description opts("tessera-bench-runtime: the host runtime's benchmark figures");
  opts.add_options()("help,h", "this text")("device", po::value(&device)->default_value(device),
                                            "device for the tiny model in int8")("skip-device", "no device run")(
      "gpu", "GEMM throughput on GPU 0 instead");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "tessera-bench-runtime: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  try {
    if (vm.count("gpu")) return gpu_gemms() ? 0 : 1;
    fmt::print("cpu backend (OpenBLAS sgemm) against plain triple-loop matrix products, same forward pass:\n");
    const Gpt2Model tiny = Gpt2Model::tiny(1);
    cpu_vs_plain("tiny model, 8 x 128 tokens", tiny, 8, 128);
    Gpt2Config small;
    small.layers = 1;
    small.width = 768;
    small.heads = 12;
    small.vocab = 50257;
    small.positions = 1024;
    const Gpt2Model layer = Gpt2Model::random(small, 1);
    cpu_vs_plain("GPT-2-small layer + logits, 1 x 32", layer, 1, 32);

    if (!vm.count("skip-device")) {
      driver::Device dev(driver::DeviceSpec::parse(device));
      AccelBackend accel(dev);
      const auto tokens = tokens_for(tiny.cfg, 32);
      const double t = seconds_of([&] { forward(tiny, tokens, 1, 32, accel); });
      fmt::print("\ntiny model, 32 tokens, int8 on {}: {:.2f} s wall, {} cycles ({:.0f} simulated cycles/s), {} MACs\n",
                 dev.properties().spec, t, accel.stats().cycles, accel.stats().cycles / t, accel.stats().macs);
    }

    fmt::print("\nutilization per op on GPT-2-small shapes (one layer, 128 tokens, model backend, default preset):\n");
    driver::Device model_dev(driver::DeviceSpec::parse("model"));
    AccelBackend accel(model_dev);
    const auto& cfg = model_dev.properties();
    Pipeline p(layer, {StageShards{0, 0, {{&accel, 0, small.heads, 0, 4 * small.width, 0, small.vocab}}}});
    const auto tokens = tokens_for(small, 128);
    const double t = seconds_of([&] { p.forward(tokens, 1, 128); });
    std::map<std::string, MatmulStats> by_op;
    for (const auto& r : p.log())
      if (r.device != "host") by_op[r.op] += r.cost;
    for (const auto& [op, c] : by_op)
      fmt::print("  {:<10} {:>12} MACs {:>10} cycles  utilization {:.3f}\n", op, c.macs, c.cycles,
                 double(c.macs) / double(c.cycles * cfg.rows * cfg.cols));
    fmt::print("  wall time of the layer with its logits on the model backend: {:.2f} s\n", t);
  } catch (const std::exception& e) {
    std::cerr << "tessera-bench-runtime: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
