#include "tessera/backends/cpu_backend.hpp"

#include <cblas.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

namespace tessera {

namespace {

// A positive count in an environment variable, if it holds one.
std::optional<unsigned> env_count(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  unsigned v = 0;
  const std::string_view t(text);
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size() || v == 0) return std::nullopt;
  return v;
}

// The cgroup's CPU quota in cores (rounded up), where it has one: v2's cpu.max ("200000 100000"
// or "max 100000"), else v1's cfs quota and period.
std::optional<unsigned> cgroup_quota() {
  double quota = 0, period = 0;
  if (std::ifstream v2("/sys/fs/cgroup/cpu.max"); v2) {
    std::string q;
    if (!(v2 >> q >> period) || q == "max") return std::nullopt;
    quota = std::atof(q.c_str());
  } else {
    std::ifstream q1("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p1("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (!(q1 >> quota) || !(p1 >> period)) return std::nullopt;
  }
  if (quota <= 0 || period <= 0) return std::nullopt;
  return std::max(1u, static_cast<unsigned>(std::ceil(quota / period)));
}

unsigned cpus_in_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return std::max(1, CPU_COUNT(&set));
}

// The MPI ranks on this host, as Open MPI or MPICH tell their processes; 1 outside MPI.
unsigned ranks_on_host() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const auto n = env_count(name)) return *n;
  return 1;
}

// A product this large takes milliseconds on one core, more than a time slice lost to a preempted
// thread would cost it.
constexpr uint64_t kSplitMacs = uint64_t{1} << 25;

CpuThreads choose(std::optional<unsigned> given) {
  if (given) return {*given, 0, fmt::format("--cpu-threads {}", *given)};
  if (const auto env = env_count("OPENBLAS_NUM_THREADS")) return {*env, 0, fmt::format("OPENBLAS_NUM_THREADS={}", *env)};
  const unsigned cores = cores_available(), ranks = ranks_on_host();
  // A launcher that bound each rank to its cores left it an affinity narrower than the host's;
  // an unbound rank shares the host's cores with the others.
  const bool bound = cpus_in_affinity() < static_cast<unsigned>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const unsigned share = ranks > 1 && !bound ? std::max(1u, cores / ranks) : cores;
  std::string source = fmt::format("chosen: {} core{} available", cores, cores == 1 ? "" : "s");
  if (ranks > 1)
    source += bound ? fmt::format(", bound by the MPI launcher ({} ranks on the host)", ranks)
                    : fmt::format(", shared by {} MPI ranks on the host", ranks);
  return {share, kSplitMacs, source};
}

std::mutex chosen_mutex;
std::optional<CpuThreads> chosen;

// OpenBLAS's thread count is the process's: set only when it changes.
void use_threads(unsigned n) {
  static std::atomic<unsigned> current{0};
  if (current.exchange(n) != n) openblas_set_num_threads(static_cast<int>(n));
}

}  // namespace

unsigned cores_available() {
  const unsigned cpus = cpus_in_affinity();
  const auto quota = cgroup_quota();
  return quota ? std::min(cpus, *quota) : cpus;
}

const CpuThreads& cpu_threads() {
  std::lock_guard lock(chosen_mutex);
  if (!chosen) chosen = choose(std::nullopt);
  return *chosen;
}

void set_cpu_threads(std::optional<unsigned> given) {
  std::lock_guard lock(chosen_mutex);
  chosen = choose(given);
}

void CpuBackend::matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                        bool b_transposed) {
  ++stats_.gemms;
  stats_.macs += uint64_t{m} * n * k;
  if (m == 1) {  // a decode step: c = a B, as B^T a (sgemm would pack all of B first)
    use_threads(cpu_threads().for_product(uint64_t{m} * n * k));
    cblas_sgemv(CblasRowMajor, b_transposed ? CblasNoTrans : CblasTrans, static_cast<int>(b_transposed ? n : k),
                static_cast<int>(b_transposed ? k : n), 1.0f, b, static_cast<int>(b_transposed ? k : n), a, 1, 0.0f, c,
                1);
    return;
  }
  use_threads(cpu_threads().for_product(uint64_t{m} * n * k));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(k), b,
              static_cast<int>(b_transposed ? k : n), 0.0f, c, static_cast<int>(n));
}

void CpuBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  ++stats_.gemms;
  stats_.macs += uint64_t{m} * w.out * w.in;
  // The bias goes in first so that one sgemm with beta = 1 adds the product to it.
  for (uint32_t r = 0; r < m; ++r) std::copy(w.b.begin(), w.b.end(), y + uint64_t{r} * w.out);
  if (m == 1) {  // a decode step: y += W^T x
    use_threads(cpu_threads().for_product(uint64_t{m} * w.out * w.in));
    cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(w.in), static_cast<int>(w.out), 1.0f, w.w.data(),
                static_cast<int>(w.out), x, 1, 1.0f, y, 1);
    return;
  }
  use_threads(cpu_threads().for_product(uint64_t{m} * w.out * w.in));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(w.out),
              static_cast<int>(w.in), 1.0f, x, static_cast<int>(w.in), w.w.data(), static_cast<int>(w.out), 1.0f,
              y, static_cast<int>(w.out));
}

}  // namespace tessera
