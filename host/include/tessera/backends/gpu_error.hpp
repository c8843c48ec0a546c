#pragma once

#include <stdexcept>

namespace tessera {

// A GPU or its libraries (CUDA, cuBLAS, cuBLASLt, NCCL) failed: a failed run (exit 1), like a
// device failure.
class GpuError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tessera
