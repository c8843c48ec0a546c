#include "tessera/backends/nvml_power.hpp"

#include <dlfcn.h>

#include <chrono>
#include <thread>

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
  // nvmlReturn_t is an enum (0: success), nvmlDevice_t an opaque pointer; energy in millijoules.
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  p->total_energy_ =
      reinterpret_cast<int (*)(void*, unsigned long long*)>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
  p->shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
  if (!init || !by_bus || !p->total_energy_ || !p->shutdown_) {
    why_not = "the NVML library lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or "
              "nvmlDeviceGetTotalEnergyConsumption";
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
  if (!p->joules()) {
    why_not = fmt::format("the GPU at PCI bus {} has no energy counter in NVML", bus_id);
    return nullptr;
  }
  return p;
}

NvmlPower::~NvmlPower() {
  if (shutdown_) shutdown_();
  if (lib_) dlclose(lib_);
}

std::optional<double> NvmlPower::joules() const {
  unsigned long long millijoules = 0;
  if (total_energy_(device_, &millijoules) != 0) return std::nullopt;
  return double(millijoules) * 1e-3;
}

std::optional<double> NvmlPower::idle_watts(double seconds) const {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto e0 = joules();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto e1 = joules();
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!e0 || !e1 || dt <= 0) return std::nullopt;
  return (*e1 - *e0) / dt;
}

}  // namespace tessera
