// The `model` backend: the register-level engine model in this process.
#include <fmt/format.h>

#include "options.hpp"
#include "tessera/driver.hpp"
#include "tessera/engine_model.hpp"

namespace tessera::driver {
namespace {

class ModelBackend final : public Backend {
 public:
  ModelBackend(const EngineConfig& cfg, uint64_t mem_bytes, const MemoryModelConfig& mem)
      : model_(cfg, mem_bytes, mem) {}
  uint32_t csr_read(uint32_t offset) override { return model_.csr_read(offset); }
  void csr_write(uint32_t offset, uint32_t value) override { model_.csr_write(offset, value); }
  void mem_write(uint64_t addr, std::span<const uint8_t> bytes) override { model_.memory().write(addr, bytes); }
  void mem_read(uint64_t addr, std::span<uint8_t> bytes) override { model_.memory().read(addr, bytes); }
  uint64_t mem_size() const override { return model_.memory().size(); }
  bool wait_irq(uint64_t) override { return model_.irq(); }
  uint64_t cycles() override { return model_.cycles(); }

 private:
  EngineModel model_;
};

}  // namespace

std::unique_ptr<Backend> make_model_backend(const DeviceSpec& spec) {
  const SimOptions o = SimOptions::parse(spec, {});
  return std::make_unique<ModelBackend>(EngineConfig::from_preset(EngineConfig::preset(o.preset)), o.mem_bytes, o.mem);
}

}  // namespace tessera::driver
