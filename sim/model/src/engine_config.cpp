#include "tessera/model/engine_config.hpp"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tessera {

EngineConfig EngineConfig::from_preset(const spec::Preset& p) {
  EngineConfig c;
  c.rows = p.rows;
  c.cols = p.cols;
  c.k_max = p.k_max;
  c.axi_bytes = p.axi_data_bits / 8;
  c.max_reads = p.max_reads;
  c.fold = fold_ok(c.rows, c.cols, c.axi_bytes);
  c.bf16 = p.bf16 != 0;
  return c;
}

const spec::Preset& EngineConfig::preset(std::string_view name) {
  for (const auto& p : spec::kPresets)
    if (p.name == name) return p;
  std::string names;
  for (const auto& p : spec::kPresets) names += (names.empty() ? "" : ", ") + std::string(p.name);
  throw std::invalid_argument(fmt::format("unknown preset '{}' (presets: {})", name, names));
}

}  // namespace tessera
