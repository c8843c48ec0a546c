// A GPU's board power through NVML, loaded at run time: libnvidia-ml.so.1 comes with the GPU
// driver, not with the CUDA toolkit, so a machine without the driver only goes without the
// measurement. Declares the four NVML entry points it uses rather than needing nvml.h.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace tessera {

class NvmlPower {
 public:
  // The GPU at PCI bus id `bus_id` (as cudaDeviceGetPCIBusId gives it), or nullptr with `why_not`
  // set (no NVML library, no such GPU, or a GPU that does not report its power).
  static std::unique_ptr<NvmlPower> open(const std::string& bus_id, std::string& why_not);
  ~NvmlPower();
  NvmlPower(const NvmlPower&) = delete;
  NvmlPower& operator=(const NvmlPower&) = delete;
  // The board's power draw now, in watts, as NVML reports it (averaged by the driver over its
  // sampling window); none when the read fails.
  std::optional<double> watts() const;

 private:
  NvmlPower() = default;
  void* lib_ = nullptr;
  void* device_ = nullptr;
  int (*power_usage_)(void*, unsigned*) = nullptr;
  int (*shutdown_)() = nullptr;
};

}  // namespace tessera
