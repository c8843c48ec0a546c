// The golden model: executes one descriptor on a memory image exactly as the RTL must, byte for
// byte, including the order and kind of its error checks.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/model/descriptor.hpp"
#include "tessera/model/engine_config.hpp"
#include "tessera/model/faults.hpp"
#include "tessera/model/memory.hpp"
#include "tessera/model/spec.hpp"

namespace tessera {

struct Fault {
  spec::ErrorCode code = spec::ErrorCode::kNone;
  uint64_t addr = 0;
  explicit operator bool() const { return code != spec::ErrorCode::kNone; }
};

std::string describe(const Fault& f);

// The checks the engine makes when it decodes a descriptor, in the engine's order.
// desc_addr is where the descriptor sits in device memory (ERR_ADDR for descriptor-level faults).
Fault validate(const Descriptor& d, uint64_t desc_addr, const EngineConfig& cfg);

// validate(), then execute on `mem`. On a fault the engine may have written part of C (the RTL
// halts mid-GEMM on a bad shift or bus error); the golden model writes nothing in that case.
// A burst outside `mem` is an AXI error, as the memory model's DECERR makes it in the RTL.
// A `stuck` fault forces the bit in every sum that PE produces, as a defective device would
// (simulated devices only; the golden model proper passes none).
Fault execute(const Descriptor& d, uint64_t desc_addr, Memory& mem, const EngineConfig& cfg,
              const FaultConfig& stuck = {});

// What the engine's datapath does for a valid descriptor (its STEPS, TILES, DESCS and
// SPAD_RD_BYTES counters), in closed form from the tile schedule (docs/ENGINE.md, "Counted
// actions"): row blocks of R (one with FOLD) times column blocks of C (2C with FOLD), K steps a
// tile, every step reading R A bytes and C B bytes (2C with FOLD), every tile reading its R rows
// out through the epilogue with their C_in row and the tables the output mode uses.
struct ActionCounts {
  uint64_t steps = 0, tiles = 0, descs = 0, spad_read_bytes = 0;
  bool operator==(const ActionCounts&) const = default;
  ActionCounts& operator+=(const ActionCounts& o) {
    steps += o.steps, tiles += o.tiles, descs += o.descs, spad_read_bytes += o.spad_read_bytes;
    return *this;
  }
};
std::string describe(const ActionCounts& a);
ActionCounts count_actions(const Descriptor& d, const EngineConfig& cfg);
// The same for a given number of tiles (the timing model counts them in its simulation).
ActionCounts actions_of_tiles(uint64_t tiles, const Descriptor& d, const EngineConfig& cfg);

}  // namespace tessera
