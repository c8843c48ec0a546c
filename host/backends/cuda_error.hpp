// CUDA runtime errors as driver::DeviceErrors, for the runtime's CUDA code.
#pragma once

#include <cuda_runtime.h>

#include <fmt/format.h>

#include "tessera/driver/device.hpp"

namespace tessera {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw driver::DeviceError(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}

}  // namespace tessera
