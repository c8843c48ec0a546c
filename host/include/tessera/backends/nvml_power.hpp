// A GPU's board energy through NVML, loaded at run time: libnvidia-ml.so.1 comes with the GPU
// driver, not with the CUDA toolkit, so a machine without the driver only goes without the
// measurement. Declares the NVML entry points it uses rather than needing nvml.h.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace tessera {

class NvmlPower {
 public:
  // The GPU at PCI bus id `bus_id` (as cudaDeviceGetPCIBusId gives it), or nullptr with `why_not`
  // set (no NVML library, no such GPU, or a GPU without an energy counter: before Volta).
  static std::unique_ptr<NvmlPower> open(const std::string& bus_id, std::string& why_not);
  ~NvmlPower();
  NvmlPower(const NvmlPower&) = delete;
  NvmlPower& operator=(const NvmlPower&) = delete;
  // The board's energy counter (nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver
  // loaded) in joules; none when the read fails. The difference of two reads is what the board
  // took between them, exactly, where a power reading is an average over the driver's window
  // (a second on Hopper) and misses short phases.
  std::optional<double> joules() const;
  // The board's power over `seconds` of doing nothing, from the counter (call it while idle).
  std::optional<double> idle_watts(double seconds) const;

 private:
  NvmlPower() = default;
  void* lib_ = nullptr;
  void* device_ = nullptr;
  int (*total_energy_)(void*, unsigned long long*) = nullptr;
  int (*shutdown_)() = nullptr;
};

}  // namespace tessera
