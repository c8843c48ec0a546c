// The engine's synthesis parameters, as its CFG_* registers report them: what the driver, the
// models and the runtime need to know of an engine without its numerics.
#pragma once

#include <cstdint>
#include <string_view>

#include "tessera/model/spec.hpp"

namespace tessera {

struct EngineConfig {
  uint32_t rows = 16, cols = 16, k_max = 4096;
  uint32_t axi_bytes = 32, max_reads = 16;
  uint32_t addr_bits = spec::kAddrBits;
  bool fold = true;   // CFG_ARRAY.FOLD: the FOLD dataflow for small M
  bool bf16 = false;  // CFG_ARRAY.BF16: the BF16 precision

  // Whether an array of this shape and bus supports FOLD (tsr_int_pkg::fold_ok).
  static bool fold_ok(uint32_t rows, uint32_t cols, uint32_t axi_bytes) { return rows % 2 == 0 && 2 * cols <= axi_bytes; }

  static EngineConfig from_preset(const spec::Preset& p);
  static const spec::Preset& preset(std::string_view name);  // throws std::invalid_argument
};

}  // namespace tessera
