// CUDA runtime errors as GpuErrors, for the runtime's CUDA code.
#pragma once

#include <cuda_runtime.h>

#include <fmt/format.h>

#include "tessera/backends/gpu_error.hpp"

namespace tessera {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw GpuError(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}

}  // namespace tessera
