// The reference backend: fp32 products on the host CPU with OpenBLAS.
#pragma once

#include <optional>
#include <string>

#include "tessera/backends/matmul_backend.hpp"

namespace tessera {

// The threads the CPU backend's BLAS runs on. A product split over threads waits for the slowest
// of them, and a thread that a busy neighbour preempts costs it a scheduler time slice: one busy
// process beside a kjv-tiny decode on two threads made it 60x slower (docs/PERFORMANCE.md). So a
// product too small to repay that risk (every one-row product of a small model's decode) runs on
// one thread, and a large one (prefill, a large vocabulary's logits) on the cores this process may
// use (its CPU affinity and cgroup quota), shared among the MPI ranks on the host where the
// launcher left them unbound.
struct CpuThreads {
  unsigned threads = 1;     // for the products that are split
  uint64_t split_macs = 0;  // products of fewer multiply-adds run on one thread; 0: all on `threads`
  std::string source;       // why: chosen from the cores, --cpu-threads, or OPENBLAS_NUM_THREADS
  unsigned for_product(uint64_t macs) const { return split_macs && macs < split_macs ? 1 : threads; }
};
// The process's threads: chosen on first use, or what set_cpu_threads last gave.
const CpuThreads& cpu_threads();
// Sets them: `given` threads for every product (a command's --cpu-threads), or none to choose
// them (OPENBLAS_NUM_THREADS, where set, is taken as given: OpenBLAS's pool has that many).
void set_cpu_threads(std::optional<unsigned> given);
// The cores this process may run on: its affinity mask, bounded by its cgroup's CPU quota.
unsigned cores_available();

class CpuBackend final : public MatmulBackend {
 public:
  std::string name() const override { return "cpu"; }
  MatmulStats stats() const override { return stats_; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
              bool b_transposed) override;
  void linear(const float* x, uint32_t m, const Linear& w, float* y) override;

 private:
  MatmulStats stats_;
};
}  // namespace tessera
