// The accelerator's energy and silicon area, estimated from what it did (its counted actions,
// docs/ENGINE.md) with a table of energies and areas per action at a technology node, in the
// spirit of Accelergy: energy = sum over actions of count x energy per action, plus leakage over
// the busy time. Every figure in a table names its source; docs/ENERGY.md has the tables, what they
// leave out, and how a team brings its own (--energy-table FILE).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/model/descriptor.hpp"
#include "tessera/model/engine_config.hpp"

namespace tessera {

namespace driver {
struct Counters;
struct DeviceSpec;
}

// A figure and where it comes from.
struct Sourced {
  double value = 0;
  std::string source;
};

struct EnergyTable {
  std::string name, description;
  double node_nm = 0;
  // Energy per action, in pJ.
  Sourced mac_int8;          // one int8 x int8 multiply into an int32 sum
  Sourced spad_read_byte;    // a scratchpad byte read
  Sourced spad_write_byte;   // a scratchpad byte written
  Sourced dram_byte;         // a byte moved to or from device memory (not scaled with the node)
  Sourced epilogue_add;      // a 32-bit add per output element: C_in (ACCUMULATE) and bias (BIAS)
  Sourced epilogue_requant;  // requantization to int8 per output element: multiply, round, shift
  // BF16 (optional in a table file, which then cannot price BF16 work; source empty where absent)
  Sourced mac_bf16;          // one bf16 x bf16 multiply into an fp32 sum
  Sourced epilogue_add_fp32; // an fp32 add per output element (C_in, bias)
  // Area per unit, in um^2.
  Sourced mac_int8_area;     // an 8-bit multiplier and a 32-bit adder
  Sourced mac_bf16_area;     // BF16 builds, in addition: a bf16 multiplier and an fp32 adder
  Sourced sram_bit_area;     // a 6T SRAM bit cell
  Sourced sram_overhead;     // SRAM macro area over its bit cells' area (periphery), a ratio
  Sourced static_mw_per_mm2; // leakage power density

  // The shipped tables: 45nm (published figures), 16nm and 7nm (scaled from them).
  static std::vector<std::string> builtin_names();
  // A shipped table by name, or a table file (JSON, docs/ENERGY.md); throws std::invalid_argument
  // naming what is wrong.
  static EnergyTable load(std::string_view name_or_file);
  static EnergyTable from_json(const nlohmann::json& j, std::string_view origin);
  nlohmann::ordered_json to_json() const;
};

// What an engine did, for its energy: the counted actions (padding included: a padded row or
// column switches as much as a used one), and its busy time for leakage.
struct EngineActivity {
  uint64_t macs = 0;       // performed: STEPS x R x C
  uint64_t bf16_macs = 0;  // of which BF16
  uint64_t fp32_adds = 0;  // BF16's epilogue adds (C_in, bias), not in epilogue_adds
  uint64_t spad_read_bytes = 0, spad_write_bytes = 0;
  uint64_t dram_bytes = 0;  // read and written, descriptors included
  uint64_t epilogue_adds = 0, epilogue_requants = 0;
  uint64_t cycles = 0;  // busy
  bool operator==(const EngineActivity&) const = default;
  EngineActivity& operator+=(const EngineActivity& o);
  EngineActivity operator-(const EngineActivity& o) const;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EngineActivity, macs, bf16_macs, fp32_adds, spad_read_bytes, spad_write_bytes,
                                   dram_bytes, epilogue_adds, epilogue_requants, cycles)

// The activity of a batch of descriptors from the engine's counters over it (`delta`): the
// scratchpad's writes are every beat read except the descriptors' own 64 bytes; the epilogue's
// operations per element come from each descriptor's flags over its tiles (count_actions).
EngineActivity activity_of(const driver::Counters& delta, const std::vector<Descriptor>& descs,
                           const EngineConfig& cfg);

// Joules by where they go.
struct EnergySplit {
  double compute = 0;  // MACs and the epilogue
  double onchip = 0;   // scratchpad reads and writes
  double dram = 0;     // device memory traffic
  double leakage = 0;  // static power over the busy time
  double total() const { return compute + onchip + dram + leakage; }
  EnergySplit& operator+=(const EnergySplit& o) {
    compute += o.compute, onchip += o.onchip, dram += o.dram, leakage += o.leakage;
    return *this;
  }
};

// The engine's silicon at the table's node, from its structure: R x C MACs (with BF16, each also a
// bf16 multiplier and an fp32 adder) and its scratchpads' bytes (A, B, C_in and the epilogue's
// tables, both slots). Control, pipeline registers and wiring are not counted: a lower bound.
struct AsicArea {
  uint64_t macs = 0, sram_bytes = 0;
  double array_mm2 = 0, sram_mm2 = 0;
  double total_mm2() const { return array_mm2 + sram_mm2; }
};
uint64_t scratchpad_bytes(const EngineConfig& cfg);
AsicArea asic_area(const EngineConfig& cfg, const EnergyTable& t);

// The engine's clock on the FPGA target, estimated per preset by static timing of its synthesized
// netlist (rtl/fmax.json, written by scripts/synth --fmax --update-fmax): none for a preset
// without an estimate.
struct FmaxEstimate {
  double mhz = 0;        // the estimate: the logic's, bounded by the DSP48E1's datasheet maximum
  double logic_mhz = 0;  // from the latest arrival, logic delays only (no routing)
  std::string limited_by;
};
std::optional<FmaxEstimate> estimated_fmax(std::string_view preset);
// The same for a device: its preset's (model, rtl); none for a card (xdma), whose clock is its own.
std::optional<FmaxEstimate> estimated_fmax(const driver::DeviceSpec& spec);

// The clock an accelerator's cycles are timed at when none is given: its own preset's estimated
// Fmax, or an assumed 250 MHz (a card, a preset without an estimate), with where it comes from.
struct AcceleratorClock {
  double mhz = 0;
  std::string source;
};
AcceleratorClock accelerator_clock(const driver::DeviceSpec& spec);

// The energy of `a` on an engine of `area` at `clock_hz`.
EnergySplit accel_energy(const EngineActivity& a, const EnergyTable& t, const AsicArea& area, double clock_hz);

}  // namespace tessera
