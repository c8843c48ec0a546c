#include "tessera/runtime/autoplan.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <regex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/backends/accel_backend.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/cuda_backend.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/backends/host_ops.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/parallel/comm.hpp"
#include "tessera/runtime/energy.hpp"
#include "tessera/runtime/transformer.hpp"

namespace tessera {

// Seconds of measured ops by their arguments: an op's number, then its sizes.
using Measurements = std::map<std::array<uint64_t, 6>, double>;

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double wall_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Seconds per call of fn by the clock `now`, measured now: after a warm-up call, the median of
// `Rounds` rounds, each of calls repeated for `round_seconds` at least; `prepare` (untimed) runs
// before each call.
template <size_t Rounds, class Prepare, class Fn>
double time_per_call(double (*now)(), double round_seconds, Prepare&& prepare, Fn&& fn) {
  prepare();
  fn();
  std::array<double, Rounds> rounds{};
  for (double& r : rounds) {
    int calls = 0;
    double busy = 0;
    const auto t0 = Clock::now();
    do {
      prepare();
      const double t = now();
      fn();
      busy += now() - t;
      ++calls;
    } while (since(t0) < round_seconds);
    r = busy / calls;
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[Rounds / 2];
}

// A device's op, by the wall clock (as the run times it): 3 rounds of 2 ms.
template <class Fn>
double wall_time_per_call(Fn&& fn) {
  return time_per_call<3>(wall_seconds, 2e-3, [] {}, fn);
}

// A host op, by the thread's CPU time (as the run times it): 5 rounds of 5 ms, since a few sizes
// serve every plan.
template <class Fn>
double host_time_per_call(Fn&& fn, const std::function<void()>& prepare = [] {}) {
  return time_per_call<5>(thread_cpu_seconds, 5e-3, prepare, fn);
}

// Values in [-1, 1) to time ops on: copies of one pool, drawn once (drawing is slower than the ops).
std::vector<float> random_values(uint64_t n) {
  static std::vector<float> pool;
  if (pool.size() < n) {
    std::minstd_rand rng(1);
    pool.reserve(n);
    while (pool.size() < n) pool.push_back(float(rng()) / float(std::minstd_rand::max()) * 2 - 1);
  }
  return std::vector<float>(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(n));
}

uint64_t round_page(uint64_t bytes) {
  return (bytes + AccelBackend::kBufferAlign - 1) / AccelBackend::kBufferAlign * AccelBackend::kBufferAlign;
}

}  // namespace

// ---- workloads -------------------------------------------------------------------------------

RunPhase parse_phase(const std::string& text) {
  if (text == "prefill") return RunPhase::kPrefill;
  if (text == "decode") return RunPhase::kDecode;
  if (text == "generate") return RunPhase::kGenerate;
  throw std::invalid_argument(fmt::format("unknown phase '{}' (prefill, decode or generate)", text));
}

std::string to_string(RunPhase p) {
  return p == RunPhase::kPrefill ? "prefill" : p == RunPhase::kDecode ? "decode" : "generate";
}

std::vector<Workload::Step> Workload::steps() const {
  if (phase == RunPhase::kPrefill) return {{seq, 0, false}};
  // As `tessera generate` runs: the prompt, then a token at a time, each step's last logits only.
  std::vector<Step> out;
  if (phase == RunPhase::kGenerate) out.push_back({seq, 0, true});
  for (uint32_t i = 1; i < new_tokens; ++i) out.push_back({1, seq + i - 1, true});
  return out;
}

uint32_t Workload::capacity() const { return phase == RunPhase::kPrefill ? seq : seq + new_tokens - 1; }

double Prediction::StageTime::slowest_shared() const {
  double slowest = 0;
  for (const auto& [rank, s] : shared) slowest = std::max(slowest, s);
  return slowest;
}

double LinkCosts::allreduce_seconds(int ranks, uint64_t bytes) const {
  const auto by_ranks = allreduce.find(ranks);
  if (by_ranks == allreduce.end() || by_ranks->second.empty())
    throw std::logic_error(fmt::format("no all-reduce over {} ranks was measured", ranks));
  const auto& sizes = by_ranks->second;
  auto hi = sizes.lower_bound(bytes);
  if (hi == sizes.end()) return std::prev(hi)->second * double(bytes) / double(std::prev(hi)->first);
  if (hi->first == bytes || hi == sizes.begin()) return hi->second;
  const auto lo = std::prev(hi);
  return lo->second + (hi->second - lo->second) * double(bytes - lo->first) / double(hi->first - lo->first);
}

LinkCosts measure_links(Comm& comm, const std::vector<uint64_t>& bytes) {
  // In a run every all-reduce follows a stretch of computing, on every rank at once; where ranks
  // outnumber cores, the OS has some of them parked then. So the ranks measure as they run: in
  // groups of k side by side (the last one smaller, or working alone), each all-reduce after a few
  // ms of work and a barrier, and counted as the run's report counts it, at its fastest rank's time.
  constexpr auto kWork = std::chrono::milliseconds(5);
  constexpr int kTimes = 8;
  const int world = comm.size(), me = comm.rank();
  LinkCosts out;
  for (int k = 2; k <= world; ++k) {
    int group = -1;
    for (int b = 0; b + 1 < world; b += k) {  // every rank makes every group of two or more
      std::vector<int> ranks(std::min(k, world - b));
      std::iota(ranks.begin(), ranks.end(), b);
      const int id = comm.group(ranks, -1);
      if (b == me / k * k) group = id;
    }
    std::vector<std::vector<double>> mine(bytes.size(), std::vector<double>(kTimes));  // [size][time]
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::vector<float> data(bytes[i] / 4, 1.0f);
      for (int t = -1; t < kTimes; ++t) {  // the first sets up the group's buffers: not timed
        for (const auto t0 = Clock::now(); Clock::now() - t0 < kWork;) {
        }
        if (group < 0) continue;
        comm.barrier(group);
        const auto t0 = Clock::now();
        comm.allreduce_sum(data, group);
        if (t >= 0) mine[i][t] = since(t0);
      }
    }
    std::vector<std::vector<std::vector<double>>> all;  // [rank][size][time]
    for (const std::string& theirs : comm.allgather(nlohmann::json(mine).dump()))
      all.push_back(nlohmann::json::parse(theirs).get<std::vector<std::vector<double>>>());
    // Per group of k: each all-reduce at its fastest member's time, their mean; the slowest group.
    for (int b = 0; b + k <= world; b += k)
      for (size_t i = 0; i < bytes.size(); ++i) {
        double sum = 0;
        for (int t = 0; t < kTimes; ++t) {
          double fastest = INFINITY;
          for (int r = b; r < b + k; ++r) fastest = std::min(fastest, all[r][i][t]);
          sum += fastest;
        }
        out.allreduce[k][bytes[i]] = std::max(out.allreduce[k][bytes[i]], sum / kTimes);
      }
  }
  return out;
}

double Prediction::total() const { return std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0); }

// ---- the host's operations, measured now at the sizes the workload runs them -----------------

// Each op is timed at sizes that are powers of two, sizes between them linear in between: the
// host's loops take time in proportion to their values, and a few sizes, each timed long enough to
// be steady, serve every plan the search tries.
class CostModel::HostCost {
 public:
  explicit HostCost(bool on) : on_(on) {}
  double layer_norm(uint32_t rows, uint32_t cols) const {
    return sized(0, cols, rows, [&](uint64_t n) {
      const auto x = random_values(n * cols);
      std::vector<float> y(x.size());
      const LayerNormWeights w{std::vector<float>(cols, 1.0f), std::vector<float>(cols, 0.0f)};
      return host_time_per_call(
          [&] { tessera::layer_norm(x.data(), y.data(), static_cast<uint32_t>(n), cols, w, 1e-5f); });
    });
  }
  // One head's scaling and causal softmax over its scores, tokens x (past + tokens).
  double softmax(uint32_t tokens, uint32_t past) const {
    return sized(1, tokens, past + tokens, [&](uint64_t L) {
      const uint32_t cols = static_cast<uint32_t>(std::max<uint64_t>(L, tokens));
      const auto scores = random_values(uint64_t{tokens} * cols);
      std::vector<float> s(scores.size());
      return host_time_per_call(
          [&] {
            for (auto& v : s) v *= 0.125f;
            softmax_causal(s.data(), tokens, cols, cols - tokens);
          },
          [&] { s = scores; });
    });
  }
  double gelu(uint64_t values) const {
    return sized(2, 0, values, [&](uint64_t n) {
      const auto x = random_values(n);
      std::vector<float> y(x.size());
      return host_time_per_call([&] { gelu_tanh(y.data(), y.size()); }, [&] { y = x; });
    });
  }
  // x += y over `values` floats: the residuals, the partial sums' reduce, the embedding's sum.
  double add(uint64_t values) const {
    return sized(3, 0, values, [&](uint64_t n) {
      const auto y = random_values(n);
      std::vector<float> x(n, 0.0f);
      return host_time_per_call([&] {
        for (uint64_t j = 0; j < n; ++j) x[j] += y[j];
      });
    });
  }

 private:
  // Op `op` (with `fixed` the same) at size `x`, from its times at the powers of two around it.
  double sized(int op, uint64_t fixed, uint64_t x, const std::function<double(uint64_t)>& measure) const {
    if (!on_ || x == 0) return 0;
    auto at = [&](uint64_t n) {
      const Measurements::key_type key{uint64_t(op), fixed, n, 0, 0, 0};
      if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
      return memo_[key] = measure(n);
    };
    const uint64_t lo = uint64_t{1} << (63 - std::countl_zero(x));
    if (lo == x) return at(x);
    return at(lo) + (at(2 * lo) - at(lo)) * double(x - lo) / double(lo);
  }
  bool on_;
  mutable Measurements memo_;

 public:
  Measurements& measurements() const { return memo_; }
};

// ---- the devices ------------------------------------------------------------------------------

// One device's costs (seconds on its clock) and memory. `attention` is the products of the
// attention core of `heads` heads for `batch` sequences; on a device that runs other ops it
// includes the softmax, which the host runs for the others.
class CostModel::DeviceCost {
 public:
  DeviceCost(std::string source, bool runs_other_ops) : source(std::move(source)), runs_other_ops(runs_other_ops) {}
  virtual ~DeviceCost() = default;
  virtual double linear(uint32_t m, uint32_t n, uint32_t k) const = 0;
  virtual double attention(uint32_t batch, uint32_t heads, uint32_t tokens, uint32_t past, uint32_t capacity,
                           uint32_t head_dim) const = 0;
  // Devices that run other ops: the up projection with its GELU, and LayerNorm.
  virtual double linear_gelu(uint32_t m, uint32_t n, uint32_t k) const { return linear(m, n, k); }
  virtual double layer_norm(uint32_t, uint32_t) const { return 0; }
  virtual uint64_t kv_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) const {
    return KvCache::fp32_bytes(batch, heads, head_dim, capacity);
  }
  // The largest buffers one of its ops has in device memory beside the weights and caches.
  virtual uint64_t activation_bytes(uint32_t, uint32_t, uint32_t) const { return 0; }
  // Measured costs are taken at a few widths and interpolated between them (see part()).
  virtual bool interpolates() const { return false; }
  // What it measured: its ops' seconds by their arguments (none where its costs are computed).
  virtual Measurements* measurements() { return nullptr; }
  std::string calibrated;  // the file its measurements came from, if one
  virtual uint64_t capacity() const = 0;

  const std::string source;
  const bool runs_other_ops;
};

namespace {

// An accelerator: the descriptors AccelBackend submits, through the engine's timing model, at the
// accelerators' clock. Every buffer starts on a page, so the cycles are the device's own.
class AccelCost final : public CostModel::DeviceCost {
 public:
  AccelCost(const EngineConfig& engine, const MemoryModelConfig& mem, bool bf16, double clock_mhz, uint64_t capacity,
            std::string source)
      : DeviceCost(std::move(source), false), engine_(engine), mem_(mem), bf16_(bf16), clock_hz_(clock_mhz * 1e6),
        capacity_(capacity) {}
  double linear(uint32_t m, uint32_t n, uint32_t k) const override {
    return seconds({m, n, k, 0, AccelBackend::operand_ld(k, bf16_), 0, AccelBackend::operand_ld(n, bf16_)});
  }
  double attention(uint32_t batch, uint32_t heads, uint32_t tokens, uint32_t past, uint32_t capacity,
                   uint32_t D) const override {
    const uint32_t L = past + tokens;
    const uint64_t ld = AccelBackend::operand_ld(D, bf16_);
    double s = 0;
    for (uint32_t seq = 0; seq < batch; ++seq)
      for (uint32_t head = 0; head < heads; ++head) {
        const uint64_t at = AccelBackend::kv_offset(seq, head, heads, D, capacity, bf16_);
        s += seconds({L, tokens, D, at, ld, 0, AccelBackend::operand_ld(tokens, bf16_)});  // k q^T
        s += seconds({tokens, D, L, 0, AccelBackend::operand_ld(L, bf16_), at, ld});      // p v
      }
    return s;
  }
  uint64_t kv_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) const override {
    return 2 * round_page(AccelBackend::kv_bytes(batch, heads, head_dim, capacity, bf16_) / 2);
  }
  // A product's A and C, the largest of the layer's and the logits'.
  uint64_t activation_bytes(uint32_t rows, uint32_t k, uint32_t n) const override {
    uint64_t c_bytes = 0;
    AccelBackend::DataflowCache chosen;
    AccelBackend::gemm_descriptors(engine_, bf16_, {rows, n, k, 0, AccelBackend::operand_ld(k, bf16_), 0, 0}, chosen,
                                   &c_bytes);
    return round_page(uint64_t{rows} * AccelBackend::operand_ld(k, bf16_)) + round_page(c_bytes);
  }
  uint64_t capacity() const override { return capacity_; }

 private:
  double seconds(const AccelBackend::GemmOperands& g) const {
    if (g.m == 0 || g.n == 0 || g.k == 0) return 0;
    if (!bf16_ && g.k > engine_.k_max) return kInf;  // the backend refuses it
    const auto key = std::make_tuple(g.m, g.n, g.k, g.lda, g.ldb, g.a_addr % spec::kPageBytes, g.b_addr % spec::kPageBytes);
    if (const auto it = cycles_.find(key); it != cycles_.end()) return double(it->second) / clock_hz_;
    uint64_t cycles = 0;
    for (const Descriptor& d : AccelBackend::gemm_descriptors(engine_, bf16_, g, dataflow_))
      cycles += estimate(d, engine_, mem_).cycles;
    cycles_[key] = cycles;
    return double(cycles) / clock_hz_;
  }
  EngineConfig engine_;
  MemoryModelConfig mem_;
  bool bf16_;
  double clock_hz_;
  uint64_t capacity_;
  mutable AccelBackend::DataflowCache dataflow_;
  mutable std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint64_t, uint64_t, uint64_t, uint64_t>, uint64_t> cycles_;
};

// A GPU without a GPU: ProjectedGpuBackend's roofline, op for op.
class ProjectedCost final : public CostModel::DeviceCost {
 public:
  ProjectedCost(const GpuPeaks& peaks, GpuPrecision p)
      : DeviceCost(fmt::format("projected: {}", peaks.description), true), peaks_(peaks), precision_(p) {}
  double linear(uint32_t m, uint32_t n, uint32_t k) const override {
    return projected_gemm_seconds(peaks_, precision_, m, n, k);
  }
  double attention(uint32_t batch, uint32_t heads, uint32_t tokens, uint32_t past, uint32_t, uint32_t D) const override {
    const uint32_t L = past + tokens;
    const double per_head = linear(tokens, L, D) + linear(tokens, D, L);
    return batch * heads * per_head + projected_elementwise_seconds(peaks_, uint64_t{batch} * heads * tokens * L);
  }
  double linear_gelu(uint32_t m, uint32_t n, uint32_t k) const override {
    return linear(m, n, k) + projected_elementwise_seconds(peaks_, uint64_t{m} * n);
  }
  double layer_norm(uint32_t rows, uint32_t cols) const override {
    return projected_elementwise_seconds(peaks_, uint64_t{rows} * cols);
  }
  uint64_t capacity() const override { return static_cast<uint64_t>(peaks_.memory_bytes); }

 private:
  const GpuPeaks& peaks_;
  GpuPrecision precision_;
};

// The CPU, or a GPU that is there: its backend's own ops timed now on random data.
class MeasuredCost final : public CostModel::DeviceCost {
 public:
  MeasuredCost(std::unique_ptr<MatmulBackend> backend, const CostModel::HostCost& host)
      : DeviceCost("measured now: its backend's ops on random data", backend->runs_other_ops()),
        backend_(std::move(backend)), host_(host) {}
  double linear(uint32_t m, uint32_t n, uint32_t k) const override { return product(m, n, k, false); }
  double linear_gelu(uint32_t m, uint32_t n, uint32_t k) const override { return product(m, n, k, true); }
  double attention(uint32_t batch, uint32_t heads, uint32_t tokens, uint32_t past, uint32_t capacity,
                   uint32_t D) const override {
    const Measurements::key_type key{5, batch, heads, tokens, past, capacity};
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    const auto qkv = random_values(uint64_t{batch} * tokens * 3 * heads * D);
    std::vector<float> out(uint64_t{batch} * tokens * heads * D);
    const auto cache = backend_->make_kv_cache(batch, heads, D, capacity);
    double host = 0;
    double seconds = wall_time_per_call([&] {
      cache->length = past;  // the keys before are whatever the cache holds: the cost is the same
      if (runs_other_ops)
        backend_->attention(qkv.data(), out.data(), tokens, *cache);
      else
        attention_with_host_softmax(*backend_, qkv.data(), out.data(), tokens, *cache, &host);
    });
    // The host's softmax is a lane op of its own (HostCost), as the run reports it.
    if (!runs_other_ops) seconds = std::max(0.0, seconds - batch * heads * host_.softmax(tokens, past));
    return memo_[key] = seconds;
  }
  double layer_norm(uint32_t rows, uint32_t cols) const override {
    if (!runs_other_ops) return 0;
    const Measurements::key_type key{6, rows, cols, 0, 0, 0};
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    const auto x = random_values(uint64_t{rows} * cols);
    std::vector<float> y(x.size());
    const LayerNormWeights w{std::vector<float>(cols, 1.0f), std::vector<float>(cols, 0.0f)};
    return memo_[key] = wall_time_per_call([&] { backend_->layer_norm(x.data(), y.data(), rows, cols, w, 1e-5f); });
  }
  uint64_t kv_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) const override {
    return backend_->kv_cache_bytes(batch, heads, head_dim, capacity);
  }
  bool interpolates() const override { return true; }
  uint64_t capacity() const override { return backend_->memory_free().value_or(host_memory_available()); }
  Measurements* measurements() override { return &memo_; }

 private:
  double product(uint32_t m, uint32_t n, uint32_t k, bool gelu) const {
    const Measurements::key_type key{gelu ? 4u : 3u, m, n, k, 0, 0};
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    const Linear w{k, n, random_values(uint64_t{k} * n), std::vector<float>(n, 0.0f)};
    const auto x = random_values(uint64_t{m} * k);
    std::vector<float> y(uint64_t{m} * n);
    const double s = wall_time_per_call([&] {
      if (gelu)
        backend_->linear_gelu(x.data(), m, w, y.data());
      else
        backend_->linear(x.data(), m, w, y.data());
    });
    backend_->release(w);
    return memo_[key] = s;
  }
  std::unique_ptr<MatmulBackend> backend_;
  const CostModel::HostCost& host_;
  mutable Measurements memo_;
};

// A cost that grows with `x` (heads, columns, rows) of `full`: `exact` where the device's costs
// are, otherwise from `points` even steps of `full`, linear between them.
double part(const CostModel::DeviceCost& d, uint32_t x, uint32_t full, uint32_t points, bool exact,
            const std::function<double(uint32_t)>& at) {
  if (x == 0) return 0;
  if ((exact && !d.interpolates()) || full <= points) return at(x);
  const uint32_t step = (full + points - 1) / points, lo = x / step * step, hi = std::min(full, lo + step);
  if (lo == x || hi == x) return at(x);
  const double t_lo = lo ? at(lo) : 0, t_hi = at(hi);
  return t_lo + (t_hi - t_lo) * double(x - lo) / double(hi - lo);
}

}  // namespace

// ---- calibrations -----------------------------------------------------------------------------

std::string CostModel::host_source() const {
  return host_calibrated_.empty()
             ? "measured now (the thread's CPU time) at sizes that are powers of two, linear between"
             : fmt::format("calibrated: {} (tessera calibrate); sizes it lacks measured now", host_calibrated_);
}

std::string calibration_dir() {
  if (const char* dir = std::getenv("TESSERA_CALIBRATION_DIR"); dir && *dir) return dir;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) return std::string(cache) + "/tessera";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/tessera";
  return ".tessera-cache";
}

namespace {

// What a measurement was taken on: the host's CPUs, and for the CPU device OpenBLAS's threads.
std::string host_identity() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string model = "unknown CPU";
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.starts_with("model name")) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return fmt::format("{} x {}", model, std::thread::hardware_concurrency());
}

std::string device_identity(const PlanDevice& d) {
  if (d.kind == "cpu") {
    const CpuThreads& t = cpu_threads();
    return fmt::format("{}, OpenBLAS threads {} (products under {} MACs: 1)", host_identity(), t.threads, t.split_macs);
  }
  return fmt::format("GPU {} in {}", gpu_uuid(static_cast<int>(d.gpu_index)), to_string(d.precision));
}

std::string calibration_file(const PlanDevice& d) {
  if (d.kind == "cpu") return calibration_dir() + "/cpu.json";
  return fmt::format("{}/cuda-{}-{}.json", calibration_dir(), gpu_uuid(static_cast<int>(d.gpu_index)),
                     to_string(d.precision));
}

// Reads a calibration into `m` where it was taken on `identity`; whether it was.
bool read_calibration(const std::string& path, const std::string& identity, Measurements& m) {
  std::ifstream in(path);
  if (!in) return false;
  try {
    const auto j = nlohmann::json::parse(in);
    if (j.at("schema_version") != 1 || j.at("identity") != identity) return false;
    for (const auto& e : j.at("measurements")) {
      Measurements::key_type key{};
      for (size_t i = 0; i < key.size(); ++i) key[i] = e.at(i).get<uint64_t>();
      m[key] = e.at(key.size()).get<double>();
    }
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;  // not a calibration this build wrote: measured again
  }
}

void write_calibration(const std::string& path, const std::string& what, const std::string& identity,
                       const Measurements& m) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [key, seconds] : m) {
    nlohmann::json e = nlohmann::json::array();
    for (uint64_t v : key) e.push_back(v);
    e.push_back(seconds);
    entries.push_back(e);
  }
  const std::time_t now = std::time(nullptr);
  char created[32];
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path);
  out << nlohmann::json{{"schema_version", 1}, {"what", what}, {"identity", identity}, {"created", created},
                        {"measurements", entries}}
             .dump(1)
      << "\n";
  if (!out) throw std::runtime_error(fmt::format("cannot write the calibration {}", path));
}

// The sizes plans interpolate between: `points` even steps of `full` (all of them up to `points`).
std::vector<uint32_t> grid(uint32_t full, uint32_t points) {
  std::vector<uint32_t> xs;
  const uint32_t step = full <= points ? 1 : (full + points - 1) / points;
  for (uint32_t x = step; x < full; x += step) xs.push_back(x);
  xs.push_back(full);
  return xs;
}

}  // namespace

// ---- the cost model ----------------------------------------------------------------------------

CostModel::CostModel(const Gpt2Config& cfg, const std::vector<PlanDevice>& devices, const Workload& w, double clock_mhz,
                     bool host_ops, LinkCosts links)
    : cfg_(cfg), work_(w), clock_mhz_(clock_mhz), host_(std::make_unique<HostCost>(host_ops)), links_(std::move(links)) {
  if (w.batch == 0 || w.seq == 0) throw std::invalid_argument("the batch and the sequence must be positive");
  if (w.phase != RunPhase::kPrefill && w.new_tokens == 0)
    throw std::invalid_argument(fmt::format("the {} phase needs new tokens (--max-new-tokens)", to_string(w.phase)));
  if (w.phase == RunPhase::kDecode && w.new_tokens < 2)
    throw std::invalid_argument("the decode phase needs at least 2 new tokens: the first comes from the prefill");
  if (w.capacity() > cfg.positions)
    throw std::invalid_argument(fmt::format("the {} phase needs {} positions; the model has {}", to_string(w.phase),
                                            w.capacity(), cfg.positions));
  if (host_ops && read_calibration(calibration_dir() + "/host.json", host_identity(), host_->measurements()))
    host_calibrated_ = calibration_dir() + "/host.json";
  devices_list_ = devices;
  // Devices of the same kind and options cost the same: they share their costs (and memos).
  std::map<std::string, std::shared_ptr<DeviceCost>> by_options;
  for (const PlanDevice& d : devices) {
    std::string key = d.kind;
    std::shared_ptr<DeviceCost> cost;
    if (d.accelerator()) {
      const auto spec = driver::DeviceSpec::parse(d.spec);
      if (d.kind != "xdma") {
        for (const auto& [k, v] : spec.options) key += "&" + k + "=" + v;
        if (const auto it = by_options.find(key); it != by_options.end()) {
          cost = it->second;
        } else {
          const driver::SimulatedDevice sim = driver::describe_simulated(spec);
          cost = std::make_shared<AccelCost>(sim.engine, sim.memory, d.precision == GpuPrecision::kBf16,
                                             clock_mhz > 0 ? clock_mhz : accelerator_clock(spec).mhz, sim.free_bytes, "timing model: the engine's cycles (exact on model, rtl "
                                                             "within 0.1%) at the accelerator clock");
        }
      } else {
        // A card says what it is when opened; its memory system is the platform's (the timing model's default).
        std::unique_ptr<driver::Device> dev;
        try {
          dev = std::make_unique<driver::Device>(spec);
        } catch (const driver::DeviceError& e) {
          throw std::invalid_argument(fmt::format("--devices: {} cannot be opened: {}", d.label, e.what()));
        }
        cost = std::make_shared<AccelCost>(dev->properties().engine(), MemoryModelConfig{},
                                           d.precision == GpuPrecision::kBf16,
                                           clock_mhz > 0 ? clock_mhz : accelerator_clock(spec).mhz, dev->free_bytes(),
                                           "timing model at the card's clock (--clock-mhz), the platform's memory model");
        key = d.spec;
      }
    } else if (d.kind == "cpu") {
      cost = std::make_shared<MeasuredCost>(std::make_unique<CpuBackend>(), *host_);
    } else {  // cuda: measured where the GPU is there, else projected, as the run does
      std::string why_not;
      auto gpu = d.projected ? nullptr : make_cuda_backend(static_cast<int>(d.gpu_index), d.precision, d.spec, why_not);
      if (gpu)
        cost = std::make_shared<MeasuredCost>(std::move(gpu), *host_);
      else
        cost = std::make_shared<ProjectedCost>(gpu_peaks(d.gpu), d.precision);
      key = d.spec;
    }
    if (cost->measurements() && cost->calibrated.empty() &&
        read_calibration(calibration_file(d), device_identity(d), *cost->measurements()))
      cost->calibrated = calibration_file(d);
    by_options[key] = cost;
    costs_.push_back(cost);
    devices_[d.label] = cost.get();
    rank_[d.label] = std::max(d.rank, 0);
  }
}

CostModel::~CostModel() = default;

const CostModel::DeviceCost& CostModel::device(const std::string& label) const {
  const auto it = devices_.find(label);
  if (it == devices_.end()) throw std::logic_error(fmt::format("the cost model has no device {}", label));
  return *it->second;
}

std::string CostModel::source(const std::string& label) const {
  const DeviceCost& d = device(label);
  return d.calibrated.empty() ? d.source
                              : fmt::format("calibrated: {} (tessera calibrate); shapes it lacks measured now", d.calibrated);
}


std::vector<std::string> CostModel::calibrate(const std::string& label) {
  DeviceCost& d = *devices_.at(label);
  if (!d.measurements()) return {};
  const uint32_t E = cfg_.width;
  for (uint32_t b = 1; b <= work_.batch; ++b)
    for (const auto& step : work_.steps()) {
      for (uint32_t h : grid(cfg_.heads, 4)) heads_part(label, b, h, step);
      for (uint32_t c : grid(4 * E, 8)) columns_part(label, b, c, step, false);
      for (uint32_t v : grid(cfg_.vocab, 8)) vocab_part(label, b, v, step, false);
      const uint32_t rows = b * step.tokens;
      host_->layer_norm(rows, E);
      host_->add(uint64_t{rows} * E);
      d.layer_norm(rows, E);
    }
  PlanDevice which = *std::find_if(devices_list_.begin(), devices_list_.end(),
                                   [&](const PlanDevice& p) { return p.label == label; });
  const std::string device_file = calibration_file(which), host_file = calibration_dir() + "/host.json";
  write_calibration(device_file, which.spec, device_identity(which), *d.measurements());
  write_calibration(host_file, "host", host_identity(), host_->measurements());
  return {device_file, host_file};
}

double CostModel::heads_part(const std::string& label, uint32_t batch, uint32_t heads, const Workload::Step& step) const {
  const DeviceCost& d = device(label);
  const uint32_t E = cfg_.width, D = cfg_.head_dim(), rows = batch * step.tokens;
  return part(d, heads, cfg_.heads, 4, true, [&](uint32_t h) {
    double s = d.linear(rows, 3 * D * h, E) + d.attention(batch, h, step.tokens, step.past, work_.capacity(), D) +
               d.linear(rows, E, D * h);
    if (!d.runs_other_ops) s += double(batch) * h * host_->softmax(step.tokens, step.past);
    return s;
  });
}

double CostModel::columns_part(const std::string& label, uint32_t batch, uint32_t columns, const Workload::Step& step,
                               bool exact) const {
  const DeviceCost& d = device(label);
  const uint32_t E = cfg_.width, rows = batch * step.tokens;
  return part(d, columns, 4 * E, 8, exact, [&](uint32_t c) {
    const double up = d.runs_other_ops ? d.linear_gelu(rows, c, E) : d.linear(rows, c, E) + host_->gelu(uint64_t{rows} * c);
    return up + d.linear(rows, E, c);
  });
}

double CostModel::vocab_part(const std::string& label, uint32_t batch, uint32_t vocab, const Workload::Step& step,
                             bool exact) const {
  const DeviceCost& d = device(label);
  const uint32_t rows = step.last_only ? batch : batch * step.tokens;
  return part(d, vocab, cfg_.vocab, 8, exact, [&](uint32_t v) { return d.linear(rows, v, cfg_.width); });
}

// One microbatch of `batch` sequences through a stage, as Pipeline's StageRun runs it.
Prediction::StageTime CostModel::stage_time(const Stage& st, bool first, bool last, uint32_t batch,
                                            const Workload::Step& step, bool exact) const {
  const uint32_t E = cfg_.width, rows = batch * step.tokens, layers = st.last - st.first + 1;
  Prediction::StageTime t;
  const PlanDevice& d0 = st.devices.front();
  const bool alone = st.devices.size() == 1, ln_on_device = alone && device(d0.label).runs_other_ops;
  const bool whole = alone && d0.heads == cfg_.heads && d0.mlp == 4 * E;
  const uint64_t values = uint64_t{rows} * E;
  std::map<int, int> shards;  // per rank of the stage: its devices
  for (const PlanDevice& d : st.devices) ++shards[rank_.at(d.label)];
  const double ln = ln_on_device ? 0 : host_->layer_norm(rows, E);
  const double residual = host_->add(values) * (whole ? 1 : 2);
  // Every rank of the stage: the embedding (first stage), per layer two LayerNorms, two reduces of
  // its shards' partial sums, two all-reduces where the stage spans ranks, two residuals (with the
  // projections' biases where they are not in the device's own); the final LayerNorm (last stage).
  std::map<int, double> slowest_lane;
  for (const auto& [rank, n] : shards) {
    const double reduce = double(n - 1) * host_->add(values);
    const double allreduce =
        shards.size() > 1 ? links_.allreduce_seconds(static_cast<int>(shards.size()), values * 4) : 0;
    t.shared[rank] = (first ? host_->add(values) : 0) + layers * (2 * ln + 2 * reduce + 2 * allreduce + 2 * residual) +
                     (last ? ln : 0);
    slowest_lane[rank] = 0;
  }
  for (const PlanDevice& d : st.devices) {
    double lane =
        layers * (heads_part(d.label, batch, d.heads, step) + columns_part(d.label, batch, d.mlp, step, exact));
    if (last) lane += vocab_part(d.label, batch, d.vocab, step, exact);
    if (ln_on_device) lane += (2 * layers + (last ? 1 : 0)) * device(d.label).layer_norm(rows, E);
    t.lanes[d.label] = lane;
    double& slowest = slowest_lane[rank_.at(d.label)];
    slowest = std::max(slowest, lane);
  }
  for (const auto& [rank, shared] : t.shared) t.seconds = std::max(t.seconds, shared + slowest_lane[rank]);
  return t;
}

Prediction CostModel::predict(const Plan& plan, uint32_t microbatches, bool exact) const {
  Prediction p;
  const auto sizes = microbatch_sizes(work_.batch, microbatches);
  for (const Workload::Step& step : work_.steps()) {
    auto& stages = p.stages.emplace_back();
    std::vector<std::vector<double>> seconds;
    for (size_t s = 0; s < plan.stages.size(); ++s) {
      auto& per_mb = stages.emplace_back();
      auto& sec = seconds.emplace_back();
      std::map<uint32_t, Prediction::StageTime> by_size;
      for (uint32_t b : sizes) {
        if (!by_size.count(b))
          by_size[b] = stage_time(plan.stages[s], s == 0, s + 1 == plan.stages.size(), b, step, exact);
        per_mb.push_back(by_size[b]);
        sec.push_back(per_mb.back().seconds);
      }
    }
    const Schedule sched = gpipe_schedule(seconds);
    p.step_seconds.push_back(sched.makespan);
    p.step_bubble.push_back(sched.bubble());
  }
  return p;
}

std::map<std::string, DeviceMemory> CostModel::memory(const Plan& plan, uint32_t microbatches) const {
  std::map<std::string, DeviceMemory> out;
  const auto sizes = microbatch_sizes(work_.batch, microbatches);
  const uint32_t E = cfg_.width, D = cfg_.head_dim(), big = sizes.front();
  uint32_t tokens = 0;
  for (const auto& step : work_.steps()) tokens = std::max(tokens, step.tokens);
  const uint32_t rows = big * tokens;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    const uint32_t layers = st.last - st.first + 1;
    for (size_t i = 0; i < st.devices.size(); ++i) {
      const PlanDevice& d = st.devices[i];
      const DeviceCost& cost = device(d.label);
      DeviceMemory& m = out[d.label];
      m.capacity = cost.capacity();
      // An accelerator's weights lie in page-aligned buffers: four per layer and the output rows.
      m.weights = d.accelerator() ? weight_bytes(cfg_, d, layers, i == 0) + (4 * layers + 1) * spec::kPageBytes
                                  : weight_bytes(cfg_, d, layers, i == 0);
      for (uint32_t b : sizes) m.kv_cache += layers * cost.kv_bytes(b, d.heads, D, work_.capacity());
      m.activations = std::max({cost.activation_bytes(rows, E, 3 * D * d.heads), cost.activation_bytes(rows, E, d.mlp),
                                cost.activation_bytes(rows, d.mlp, E),
                                d.vocab ? cost.activation_bytes(rows, E, d.vocab) : 0});
    }
  }
  return out;
}

// ---- the search --------------------------------------------------------------------------------

namespace {

// The search over stages, shares and microbatches for one cost model (docs/RUNTIME.md, "Auto plans").
class Planner {
 public:
  Planner(const CostModel& cm, const std::vector<PlanDevice>& devices) : cm_(cm), devs_(devices) {}

  AutoPlan run(uint32_t fixed_m);

 private:
  struct Partial {  // stages so far in the DP: the sum and the largest of their times, their layers
    double sum = 0, max = 0;
    std::vector<uint32_t> layers;
  };
  using Group = std::vector<size_t>;  // device indices, in the order given

  // A device's lane summed over the workload's steps, by share.
  double total(int part, size_t i, uint32_t b, uint32_t x) {
    const auto key = std::make_tuple(part, i, b, x);
    if (const auto it = totals_.find(key); it != totals_.end()) return it->second;
    double t = 0;
    for (const auto& step : steps_)
      t += part == 0 ? cm_.heads_part(devs_[i].label, b, x, step)
           : part == 1 ? cm_.columns_part(devs_[i].label, b, x, step, false)
                       : cm_.vocab_part(devs_[i].label, b, x, step, false);
    return totals_[key] = t;
  }
  Stage make_stage(const Group& g, uint32_t first, uint32_t layers, bool last, uint32_t b);
  // A stage's time summed over the steps for the largest microbatch, or infinity where a device's
  // share does not fit in its memory.
  double stage_cost(const Group& g, uint32_t layers, bool first, bool last, uint32_t m);
  Plan make_plan(const std::vector<Group>& groups, const std::vector<uint32_t>& layers, uint32_t m);
  bool fits(const Plan& plan, uint32_t m) const {
    for (const auto& [label, mem] : cm_.memory(plan, m))
      if (mem.needed() > mem.capacity) return false;
    return true;
  }
  void search(const std::vector<Group>& groups, uint32_t m);
  void consider(Plan plan, uint32_t m);

  const CostModel& cm_;
  const std::vector<PlanDevice>& devs_;
  std::vector<Workload::Step> steps_ = cm_.workload().steps();
  std::map<std::tuple<int, size_t, uint32_t, uint32_t>, double> totals_;
  std::map<std::tuple<Group, uint32_t, bool, bool, uint32_t>, double> stage_costs_;
  std::optional<AutoPlan> best_;
  uint64_t candidates_ = 0;
};

Stage Planner::make_stage(const Group& g, uint32_t first, uint32_t layers, bool last, uint32_t b) {
  const Gpt2Config& cfg = cm_.cfg();
  const uint32_t H = cfg.heads, C = 4 * cfg.width, V = cfg.vocab;
  const size_t k = g.size();
  std::vector<uint32_t> h(k, H), c(k, C), v(k, last ? V : 0);
  auto lane = [&](size_t n, uint32_t heads, uint32_t cols, uint32_t rows) {
    return layers * (total(0, g[n], b, heads) + total(1, g[n], b, cols)) + (last ? total(2, g[n], b, rows) : 0);
  };
  if (k > 1) {
    // Start in proportion to each device's speed on the whole stage, at least one of each share.
    std::vector<double> speed;
    for (size_t n = 0; n < k; ++n) speed.push_back(1 / lane(n, H, C, V));
    auto split = [&](uint32_t whole) {
      auto out = proportional_shares(whole, speed);
      for (auto& x : out)
        if (x == 0) --*std::max_element(out.begin(), out.end()), x = 1;
      return out;
    };
    h = split(H), c = split(C);
    if (last) v = split(V);
    // Then move work from the slowest lane while that makes the slowest lane faster: a head, or
    // columns and output rows in steps from coarse to fine.
    for (int iteration = 0; iteration < 1000; ++iteration) {
      std::vector<double> t(k);
      for (size_t n = 0; n < k; ++n) t[n] = lane(n, h[n], c[n], v[n]);
      const size_t from = std::max_element(t.begin(), t.end()) - t.begin();
      double best = t[from];
      std::function<void()> apply;
      for (size_t to = 0; to < k; ++to) {
        if (to == from) continue;
        double others = 0;
        for (size_t n = 0; n < k; ++n)
          if (n != from && n != to) others = std::max(others, t[n]);
        auto try_move = [&](std::vector<uint32_t>& share, uint32_t step) {
          if (share[from] <= step) return;
          share[from] -= step, share[to] += step;
          const double after = std::max({others, lane(from, h[from], c[from], v[from]), lane(to, h[to], c[to], v[to])});
          share[from] += step, share[to] -= step;
          if (after < best * (1 - 1e-9)) best = after, apply = [&share, step, from, to] { share[from] -= step, share[to] += step; };
        };
        try_move(h, 1);
        for (uint32_t step : {512u, 128u, 32u, 8u}) try_move(c, step);
        if (last)
          for (uint32_t step : {8192u, 2048u, 512u, 128u, 32u}) try_move(v, step);
      }
      if (!apply) break;
      apply();
    }
  }
  Stage st{first, first + layers - 1, {}};
  std::vector<uint32_t> even_h, even_c, even_v;
  {
    const std::vector<double> ones(k, 1.0);
    even_h = proportional_shares(H, ones), even_c = proportional_shares(C, ones), even_v = proportional_shares(V, ones);
  }
  const bool even = h == even_h && c == even_c && (!last || v == even_v);
  for (size_t n = 0; n < k; ++n) {
    PlanDevice d = devs_[g[n]];
    d.heads = h[n], d.mlp = c[n], d.vocab = last ? v[n] : 0;
    d.shares_given = !even;  // equal shares read as the plain plan does
    d.weight = 1;
    st.devices.push_back(d);
  }
  return st;
}

double Planner::stage_cost(const Group& g, uint32_t layers, bool first, bool last, uint32_t m) {
  const auto key = std::make_tuple(g, layers, first, last, m);
  if (const auto it = stage_costs_.find(key); it != stage_costs_.end()) return it->second;
  const uint32_t b = microbatch_sizes(cm_.workload().batch, m).front();
  Plan one;
  one.stages.push_back(make_stage(g, 0, layers, last, b));
  double cost = kInf;
  if (fits(one, m)) {
    cost = 0;
    for (const auto& step : steps_) cost += cm_.stage_time(one.stages[0], first, last, b, step, false).seconds;
  }
  return stage_costs_[key] = cost;
}

Plan Planner::make_plan(const std::vector<Group>& groups, const std::vector<uint32_t>& layers, uint32_t m) {
  const uint32_t b = microbatch_sizes(cm_.workload().batch, m).front();
  Plan plan;
  uint32_t first = 0;
  for (size_t s = 0; s < groups.size(); ++s) {
    plan.stages.push_back(make_stage(groups[s], first, layers[s], s + 1 == groups.size(), b));
    first += layers[s];
  }
  plan.resolve(cm_.cfg());
  return plan;
}

void Planner::consider(Plan plan, uint32_t m) {
  ++candidates_;
  Prediction pred = cm_.predict(plan, m, false);
  const double t = pred.total();
  if (!std::isfinite(t)) return;
  if (best_) {
    // Within half a percent (about what the host's measured times vary by from run to run), the
    // simpler plan wins: fewer stages, devices, microbatches, explicit shares, then the plan's text.
    constexpr double kTie = 0.005;
    auto simplicity = [](const Plan& p, uint32_t microbatches) {
      size_t devices = 0, explicit_shares = 0;
      for (const auto& st : p.stages)
        for (const auto& d : st.devices) ++devices, explicit_shares += d.shares_given;
      return std::make_tuple(p.stages.size(), devices, microbatches, explicit_shares, p.str());
    };
    const double b = best_->predicted.total();
    if (t > b * (1 + kTie) ||
        (t >= b * (1 - kTie) && simplicity(plan, m) >= simplicity(best_->plan, best_->microbatches)))
      return;
  }
  if (!fits(plan, m)) return;
  if (!best_) best_.emplace();
  best_->plan = std::move(plan);
  best_->microbatches = m;
  best_->predicted = std::move(pred);
}

// Layers over a sequence of device groups: a DP over layer boundaries keeps, for the first s
// stages covering the first l layers, every split whose (sum, largest) stage time no other split
// beats in both; GPipe's makespan with m equal microbatches is about sum + (m - 1) largest. Each
// split left at the end is scored exactly.
void Planner::search(const std::vector<Group>& groups, uint32_t m) {
  const uint32_t L = cm_.cfg().layers;
  const size_t P = groups.size();
  std::vector<std::vector<std::vector<Partial>>> F(P + 1, std::vector<std::vector<Partial>>(L + 1));
  F[0][0].push_back({});
  for (size_t s = 0; s < P; ++s)
    for (uint32_t l = static_cast<uint32_t>(s); l + (P - s) <= L; ++l)
      for (const Partial& part : F[s][l]) {
        const bool last = s + 1 == P;
        for (uint32_t n = last ? L - l : 1; l + n + (P - s - 1) <= L; ++n) {
          const double d = stage_cost(groups[s], n, s == 0, last, m);
          if (!std::isfinite(d)) continue;
          Partial next{part.sum + d, std::max(part.max, d), part.layers};
          next.layers.push_back(n);
          auto& cell = F[s + 1][l + n];
          const bool dominated = std::any_of(cell.begin(), cell.end(), [&](const Partial& o) {
            return o.sum <= next.sum && o.max <= next.max;
          });
          if (dominated) continue;
          std::erase_if(cell, [&](const Partial& o) { return next.sum <= o.sum && next.max <= o.max; });
          cell.push_back(std::move(next));
        }
      }
  for (const Partial& part : F[P][L]) consider(make_plan(groups, part.layers, m), m);
}

AutoPlan Planner::run(uint32_t fixed_m) {
  const auto t0 = Clock::now();
  const Workload& w = cm_.workload();
  const uint32_t L = cm_.cfg().layers, H = cm_.cfg().heads;
  std::vector<uint32_t> ms;
  for (uint32_t m = 1; m <= w.batch; ++m)
    if (fixed_m == 0 || m == fixed_m) ms.push_back(m);
  // Stage groupings: ordered sequences of disjoint groups of the devices, some perhaps left out;
  // all of them up to 6 devices, above that contiguous runs of the devices in the order given.
  // Devices with the same costs and memory are interchangeable: a grouping that differs from one
  // seen only by which of them it names is skipped.
  const size_t n = devs_.size();
  std::vector<std::string> cls(n);
  for (size_t i = 0; i < n; ++i)
    cls[i] = fmt::format("{}@{}@r{}", static_cast<const void*>(&cm_.device(devs_[i].label)),
                         cm_.device(devs_[i].label).capacity(), devs_[i].rank);
  std::set<std::vector<std::multiset<std::string>>> seen;
  std::vector<Group> groups;
  std::function<void(uint64_t, size_t)> extend = [&](uint64_t left, size_t next_in_order) {
    if (!groups.empty()) {
      std::vector<std::multiset<std::string>> sig;
      for (const Group& g : groups) {
        std::multiset<std::string> m;
        for (size_t i : g) m.insert(cls[i]);
        sig.push_back(m);
      }
      if (seen.insert(sig).second)
        for (uint32_t m : ms) search(groups, m);
    }
    if (groups.size() == L || left == 0) return;
    if (n <= 6) {
      for (uint64_t sub = left; sub; sub = (sub - 1) & left) {
        Group g;
        for (size_t i = 0; i < n; ++i)
          if (sub >> i & 1) g.push_back(i);
        if (g.size() > H) continue;
        groups.push_back(g);
        extend(left & ~sub, 0);
        groups.pop_back();
      }
    } else {
      for (size_t end = next_in_order + 1; end <= n && end - next_in_order <= H; ++end) {
        Group g;
        for (size_t i = next_in_order; i < end; ++i) g.push_back(i);
        groups.push_back(g);
        extend(left & ~(((uint64_t{1} << end) - 1)), end);
        groups.pop_back();
      }
    }
  };
  extend(n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1, 0);

  if (!best_) {
    // Nothing fits: say by how much each device is short of an even share of the whole model.
    Plan all;
    all.stages.push_back(Stage{0, L - 1, devs_});
    for (auto& d : all.stages[0].devices) d.weight = 1, d.shares_given = false;
    std::string why;
    if (n <= H) {
      all.resolve(cm_.cfg());
      for (const auto& [label, mem] : cm_.memory(all, ms.back()))
        if (mem.needed() > mem.capacity)
          why += fmt::format("; {} needs {} bytes for an even share of every layer ({} of weights, {} of KV cache, {} "
                             "of buffers), {} more than its {}",
                             label, mem.needed(), mem.weights, mem.kv_cache, mem.activations,
                             mem.needed() - mem.capacity, mem.capacity);
    }
    throw std::invalid_argument(fmt::format("no plan over {} fits the model in the devices' memory{}",
                                            devs_.size() == 1 ? devs_[0].label : "these devices", why));
  }
  AutoPlan out = std::move(*best_);
  out.predicted = cm_.predict(out.plan, out.microbatches);  // the search's figures were partly interpolated
  out.memory = cm_.memory(out.plan, out.microbatches);
  std::set<std::string> used;
  for (const auto& st : out.plan.stages)
    for (const auto& d : st.devices) used.insert(d.label);
  for (const auto& d : devs_)
    if (!used.count(d.label)) out.unused.push_back(d.label);
  // The even split, for comparison: a stage per device, layers as even as possible, equal shares,
  // a microbatch per sequence; in the best order of the devices (every order up to 6 devices).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::set<std::vector<std::string>> orders_seen;
  do {
    std::vector<std::string> sig;
    for (size_t i : order) sig.push_back(cls[i]);
    if (n > L || !orders_seen.insert(sig).second) continue;
    Plan even;
    for (size_t k = 0, first = 0; k < n; ++k) {
      const uint32_t layers = L / n + (k < L % n ? 1 : 0);
      even.stages.push_back(Stage{static_cast<uint32_t>(first), static_cast<uint32_t>(first + layers - 1), {devs_[order[k]]}});
      even.stages.back().devices[0].weight = 1;
      even.stages.back().devices[0].shares_given = false;
      first += layers;
    }
    even.resolve(cm_.cfg());
    const uint32_t m = fixed_m ? fixed_m : w.batch;
    if (!fits(even, m)) continue;
    Prediction p = cm_.predict(even, m);
    if (!out.even_predicted || p.total() < out.even_predicted->total()) {
      out.even_predicted = std::move(p);
      out.even = std::move(even);
    }
  } while (n <= 6 && std::next_permutation(order.begin(), order.end()));
  out.candidates = candidates_;
  out.search_seconds = since(t0);
  return out;
}

}  // namespace

AutoPlan choose_plan(const CostModel& costs, const std::vector<PlanDevice>& devices, uint32_t microbatches) {
  if (devices.empty()) throw std::invalid_argument("--plan auto needs devices (--devices)");
  if (microbatches > costs.workload().batch)
    throw std::invalid_argument(fmt::format("{} microbatches for a batch of {} sequences: each microbatch needs one",
                                            microbatches, costs.workload().batch));
  return Planner(costs, devices).run(microbatches);
}

std::vector<PlanDevice> parse_devices(const std::string& text) {
  static const std::regex device_start(R"(^(r\d+:)?(model|rtl|xdma|cpu|cuda)\b)");
  std::vector<std::string> specs;
  size_t pos = 0;
  for (;;) {
    const size_t comma = text.find(',', pos);
    const std::string piece = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (specs.empty() || piece.empty() || std::regex_search(piece, device_start))
      specs.push_back(piece);
    else
      specs.back() += "," + piece;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::vector<PlanDevice> out;
  std::set<std::string> seen;
  for (const std::string& spec : specs) {
    if (spec.empty()) throw std::invalid_argument(fmt::format("--devices '{}': an empty device in the list", text));
    // A device as a one-device plan reads it: the same kinds, options and errors.
    Plan one;
    try {
      one = Plan::parse("0@" + spec);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--devices: {}", e.what()));
    }
    const PlanDevice& d = one.stages.at(0).devices.at(0);
    if (one.stages.size() != 1 || one.stages[0].devices.size() != 1 || d.shares_given || d.weight != 1)
      throw std::invalid_argument(fmt::format("--devices: '{}' is not one device", spec));
    if (!seen.insert(d.label).second) throw std::invalid_argument(fmt::format("--devices: {} is listed twice", d.label));
    out.push_back(d);
  }
  return out;
}

}  // namespace tessera
