// The `model` backend: the register-level engine model in this process.
#include <atomic>

#include <fmt/format.h>

#include "options.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/model/engine_model.hpp"

namespace tessera::driver {
namespace {

class ModelBackend final : public Backend {
 public:
  ModelBackend(const EngineConfig& cfg, const SimOptions& o) : model_(cfg, o.mem_bytes, o.mem, o.fault, o.seed) {}
  uint32_t csr_read(uint32_t offset) override { return live().csr_read(offset); }
  void csr_write(uint32_t offset, uint32_t value) override { live().csr_write(offset, value); }
  void mem_write(uint64_t addr, std::span<const uint8_t> bytes) override { live().memory().write(addr, bytes); }
  void mem_read(uint64_t addr, std::span<uint8_t> bytes) override { live().memory().read(addr, bytes); }
  uint64_t mem_size() const override { return model_.memory().size(); }
  // The model runs each descriptor to completion when it is queued: there is no time to pass.
  bool wait_irq(uint64_t) override { return live().irq(); }
  void advance(uint64_t) override { live(); }
  uint64_t cycles() override { return live().cycles(); }
  void abort() override { aborted_ = true; }

 private:
  EngineModel& live() {
    if (aborted_) throw DeviceError("model device: given up on (aborted)");
    return model_;
  }
  EngineModel model_;
  std::atomic<bool> aborted_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_model_backend(const DeviceSpec& spec) {
  const SimOptions o = SimOptions::parse(spec, {});
  return std::make_unique<ModelBackend>(EngineConfig::from_preset(EngineConfig::preset(o.preset)), o);
}

}  // namespace tessera::driver
