// A CPU backend with a device's failings, for the pipeline tests: it can die on its n-th product
// (as a device that fails mid-run) and have a device's memory that KV caches must fit in.
#pragma once

#include <optional>
#include <string>

#include "tessera/backends/cpu_backend.hpp"
#include "tessera/driver/device.hpp"

namespace tessera::test {

class FaultyBackend final : public MatmulBackend {
 public:
  struct Faults {
    int dies_at_product = -1;               // -1: never
    std::optional<uint64_t> memory_free;    // none: caches in host memory
  };
  FaultyBackend(std::string name, Faults faults) : name_(std::move(name)), faults_(faults) {}
  std::string name() const override { return name_; }
  MatmulStats stats() const override { return cpu_.stats(); }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override {
    if (faults_.dies_at_product-- == 0) throw driver::DeviceError(name_ + ": the device died");
    cpu_.matmul(a, b, c, m, n, k, t);
  }
  std::optional<uint64_t> memory_free() const override { return faults_.memory_free; }

 private:
  std::string name_;
  Faults faults_;
  CpuBackend cpu_;
};

}  // namespace tessera::test
