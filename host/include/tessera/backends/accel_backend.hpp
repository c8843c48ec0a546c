// Matrix products on a Tessera device (any driver backend) in int8, quantized as in quantize.hpp
// (per token, per output channel): the engine multiplies into int32 and the host dequantizes.
// Weights are quantized and uploaded once and stay resident on the device.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "tessera/driver/device.hpp"
#include "tessera/model/timing.hpp"
#include "tessera/backends/matmul_backend.hpp"

namespace tessera {

class AccelBackend final : public MatmulBackend {
 public:
  explicit AccelBackend(driver::Device& dev) : dev_(dev) {}
  std::string name() const override { return dev_.properties().spec; }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
              bool b_transposed) override;
  void linear(const float* x, uint32_t m, const Linear& w, float* y) override;
  void release(const Linear& w) override { weights_.erase(&w); }
  MatmulStats stats() const override { return stats_; }
  std::vector<Phase> take_phases() override { return std::exchange(phases_, {}); }
  // ASIC what-if: also estimate every GEMM with the timing model for this engine configuration
  // (another array, same memory system), into stats().projected_cycles.
  void project(const EngineConfig& cfg, const MemoryModelConfig& mem) {
    projection_ = cfg;
    projection_mem_ = mem;
  }

 private:
  // An int8 right-hand operand in device memory, row pitch aligned, with its column scales.
  struct Operand {
    driver::Buffer buf;
    uint32_t k = 0, n = 0;
    uint64_t ld = 0;
    std::vector<float> scale;
  };
  Operand upload_b(const float* b, uint32_t k, uint32_t n, bool transposed);
  void run(const float* a, uint32_t m, const Operand& b, float* c);

  driver::Device& dev_;
  std::map<const Linear*, Operand> weights_;  // resident for the backend's lifetime
  MatmulStats stats_;
  std::vector<Phase> phases_;
  void phase(const char* track, const char* name, std::chrono::steady_clock::time_point start) {
    phases_.push_back({track, name, start,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
  }
  std::optional<EngineConfig> projection_;
  MemoryModelConfig projection_mem_;
};

}  // namespace tessera
