#include "tessera/backends/nvml_power.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace tessera {

std::unique_ptr<NvmlPower> NvmlPower::open(const std::string& bus_id, std::string& why_not) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why_not = fmt::format("no NVML library ({})", dlerror());
    return nullptr;
  }
  std::unique_ptr<NvmlPower> p(new NvmlPower);
  p->lib_ = lib;
  // nvmlReturn_t is an enum (0: success), nvmlDevice_t an opaque pointer; power in milliwatts.
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  p->power_usage_ = reinterpret_cast<int (*)(void*, unsigned*)>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
  p->shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
  if (!init || !by_bus || !p->power_usage_ || !p->shutdown_) {
    why_not = "the NVML library lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetPowerUsage";
    p->shutdown_ = nullptr;
    return nullptr;
  }
  if (const int e = init(); e != 0) {
    why_not = fmt::format("nvmlInit_v2 failed (NVML error {})", e);
    p->shutdown_ = nullptr;
    return nullptr;
  }
  if (const int e = by_bus(bus_id.c_str(), &p->device_); e != 0) {
    why_not = fmt::format("NVML has no GPU at PCI bus {} (NVML error {})", bus_id, e);
    return nullptr;
  }
  if (!p->watts()) {
    why_not = fmt::format("the GPU at PCI bus {} does not report its power through NVML", bus_id);
    return nullptr;
  }
  return p;
}

NvmlPower::~NvmlPower() {
  if (shutdown_) shutdown_();
  if (lib_) dlclose(lib_);
}

std::optional<double> NvmlPower::watts() const {
  unsigned milliwatts = 0;
  if (power_usage_(device_, &milliwatts) != 0) return std::nullopt;
  return milliwatts * 1e-3;
}

}  // namespace tessera
