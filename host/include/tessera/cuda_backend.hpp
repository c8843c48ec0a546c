// Matrix products on an NVIDIA GPU with cuBLAS (fp32 SGEMM), built when the CUDA toolkit is found.
// Weights are uploaded once and stay resident; activations go up and results come back per call,
// and each op's wall time (transfers included) is what the report shows as measured.
#pragma once

#include <memory>
#include <string>

#include "tessera/transformer.hpp"

namespace tessera {

// The backend for GPU `index`, or nullptr with `why_not` set when this build has no CUDA support
// or the GPU cannot be used (no driver, no such device): callers fall back to projection.
std::unique_ptr<MatmulBackend> make_cuda_backend(int index, std::string& why_not);

}  // namespace tessera
