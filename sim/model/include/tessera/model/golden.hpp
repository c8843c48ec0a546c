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

}  // namespace tessera
