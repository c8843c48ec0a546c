// Options shared by the simulated backends (model, rtl), parsed from the device spec.
#pragma once

#include <set>
#include <string>

#include "tessera/driver.hpp"
#include "tessera/timing.hpp"

namespace tessera::driver {

struct SimOptions {
  std::string preset = "default";
  uint64_t mem_bytes = 256ull << 20;
  MemoryModelConfig mem;

  // Throws UsageError for an unknown key or a bad value; `extra` lists backend-specific keys.
  static SimOptions parse(const DeviceSpec& spec, const std::set<std::string>& extra);
};

}  // namespace tessera::driver
