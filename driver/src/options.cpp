#include "options.hpp"

#include <fmt/format.h>

#include "tessera/model/parse.hpp"

namespace tessera::driver {

uint64_t option_number(const DeviceSpec& spec, const std::string& key, uint64_t fallback, uint64_t lo, uint64_t hi) {
  const auto it = spec.options.find(key);
  if (it == spec.options.end()) return fallback;
  if (const auto v = parse_uint(it->second, lo, hi)) return *v;
  throw UsageError(
      fmt::format("device '{}': option {}={} is not a number in [{}, {}]", spec.str(), key, it->second, lo, hi));
}

SimOptions SimOptions::parse(const DeviceSpec& spec, const std::set<std::string>& extra) {
  static const std::set<std::string> common = {"preset",         "mem_mb",        "mem_latency",
                                               "mem_bytes_per_cycle", "mem_max_reads", "mem_max_writes",
                                               "fault",          "seed",          "completion",
                                               "dataflow",       "precision",     "reset"};
  SimOptions o;
  for (const auto& [k, v] : spec.options) {
    if (!common.count(k) && !extra.count(k)) {
      std::string known;
      for (const auto& n : common) known += (known.empty() ? "" : ", ") + n;
      for (const auto& n : extra) known += ", " + n;
      throw UsageError(fmt::format("device '{}': unknown option '{}' (options: {})", spec.str(), k, known));
    }
  }
  o.preset = spec.preset();
  try {
    EngineConfig::preset(o.preset);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("device '{}': {}", spec.str(), e.what()));
  }
  o.mem_bytes = option_number(spec, "mem_mb", o.mem_bytes >> 20, 1, 1 << 16) << 20;
  auto u32 = [&](const char* key, uint32_t fallback, uint32_t lo, uint32_t hi) {
    return static_cast<uint32_t>(option_number(spec, key, fallback, lo, hi));
  };
  o.mem.latency = u32("mem_latency", o.mem.latency, 1, 100000);
  o.mem.bytes_per_cycle = u32("mem_bytes_per_cycle", o.mem.bytes_per_cycle, 1, 1024);
  o.mem.max_reads = u32("mem_max_reads", o.mem.max_reads, 1, 256);
  o.mem.max_writes = u32("mem_max_writes", o.mem.max_writes, 1, 256);
  o.mem.w_first = u32("mem_w_first", 0, 0, 1) != 0;  // rtl only: a property of the platform's memory
  o.seed = option_number(spec, "seed", o.seed, 0, UINT64_MAX);
  if (spec.options.count("fault")) {
    try {
      o.fault = FaultConfig::parse(spec.options.at("fault"));
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("device '{}': {}", spec.str(), e.what()));
    }
    const auto& p = EngineConfig::preset(o.preset);
    if (o.fault.kind == FaultConfig::Kind::kStuck && (o.fault.row >= p.rows || o.fault.col >= p.cols))
      throw UsageError(fmt::format("device '{}': there is no PE ({}, {}) in a {}x{} array", spec.str(), o.fault.row,
                                   o.fault.col, p.rows, p.cols));
  }
  return o;
}

SimulatedDevice describe_simulated(const DeviceSpec& spec) {
  if (spec.kind != "model" && spec.kind != "rtl")
    throw UsageError(fmt::format("device '{}': only a simulated device (model, rtl) is known before it is opened",
                                 spec.str()));
  // The options each backend and the device itself accept (make_model_backend, make_rtl_backend).
  const SimOptions o = SimOptions::parse(spec, spec.kind == "rtl" ? kRtlOptions : std::set<std::string>{});
  SimulatedDevice d{EngineConfig::from_preset(EngineConfig::preset(o.preset)), o.mem, 0};
  if (spec.option("dataflow", "auto") == "classic") d.engine.fold = false;
  const uint64_t ring = uint64_t{Device::kRingEntries} * spec::kDescBytes;
  d.free_bytes = o.mem_bytes > ring ? o.mem_bytes - ring : 0;
  return d;
}

}  // namespace tessera::driver
