#include "options.hpp"

#include <charconv>

#include <fmt/format.h>

namespace tessera::driver {

namespace {

uint64_t number(const DeviceSpec& spec, const std::string& key, const std::string& text, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  int base = 10;
  std::string_view t = text;
  if (t.starts_with("0x")) {
    base = 16;
    t.remove_prefix(2);
  }
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size() || v < lo || v > hi)
    throw UsageError(fmt::format("device '{}': option {}={} is not a number in [{}, {}]", spec.str(), key, text, lo, hi));
  return v;
}

}  // namespace

SimOptions SimOptions::parse(const DeviceSpec& spec, const std::set<std::string>& extra) {
  static const std::set<std::string> common = {"preset",         "mem_mb",        "mem_latency",
                                               "mem_bytes_per_cycle", "mem_max_reads", "mem_max_writes"};
  SimOptions o;
  for (const auto& [k, v] : spec.options) {
    if (!common.count(k) && !extra.count(k)) {
      std::string known;
      for (const auto& n : common) known += (known.empty() ? "" : ", ") + n;
      for (const auto& n : extra) known += ", " + n;
      throw UsageError(fmt::format("device '{}': unknown option '{}' (options: {})", spec.str(), k, known));
    }
  }
  o.preset = spec.option("preset", o.preset);
  try {
    EngineConfig::preset(o.preset);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("device '{}': {}", spec.str(), e.what()));
  }
  if (spec.options.count("mem_mb")) o.mem_bytes = number(spec, "mem_mb", spec.options.at("mem_mb"), 1, 1 << 16) << 20;
  if (spec.options.count("mem_latency"))
    o.mem.latency = static_cast<uint32_t>(number(spec, "mem_latency", spec.options.at("mem_latency"), 1, 100000));
  if (spec.options.count("mem_bytes_per_cycle"))
    o.mem.bytes_per_cycle = static_cast<uint32_t>(
        number(spec, "mem_bytes_per_cycle", spec.options.at("mem_bytes_per_cycle"), 1, 1024));
  if (spec.options.count("mem_max_reads"))
    o.mem.max_reads = static_cast<uint32_t>(number(spec, "mem_max_reads", spec.options.at("mem_max_reads"), 1, 256));
  if (spec.options.count("mem_max_writes"))
    o.mem.max_writes =
        static_cast<uint32_t>(number(spec, "mem_max_writes", spec.options.at("mem_max_writes"), 1, 256));
  return o;
}

}  // namespace tessera::driver
