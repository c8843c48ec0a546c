// Options shared by the simulated backends (model, rtl), parsed from the device spec.
#pragma once

#include <set>
#include <string>

#include "tessera/driver/device.hpp"
#include "tessera/model/faults.hpp"
#include "tessera/model/timing.hpp"

namespace tessera::driver {

struct SimOptions {
  std::string preset = "default";
  uint64_t mem_bytes = 256ull << 20;
  MemoryModelConfig mem;
  FaultConfig fault;  // fault=...: a defect to simulate
  uint64_t seed = 1;  // seed=...: for random faults

  // Throws UsageError for an unknown key or a bad value; `extra` lists backend-specific keys.
  static SimOptions parse(const DeviceSpec& spec, const std::set<std::string>& extra);
};

// The options only the rtl backend takes (make_rtl_backend; describe_simulated checks them too).
inline const std::set<std::string> kRtlOptions = {"mem_w_first", "slverr", "trace", "scoreboard", "init_seed",
                                                    "counter_start"};

// The number option `key` of `spec` in [lo, hi], or `fallback` when absent; else a UsageError.
uint64_t option_number(const DeviceSpec& spec, const std::string& key, uint64_t fallback, uint64_t lo, uint64_t hi);

}  // namespace tessera::driver
