// A layer's work on an NVIDIA GPU, built when the CUDA toolkit is found: GEMMs with cuBLAS in fp32
// (SGEMM) or bf16 (fp32 accumulation), or with cuBLASLt in int8 (int32 accumulation, quantized
// exactly as the accelerator's operands are: quantize.hpp), and the attention core, bias + GELU and
// LayerNorm in the backend's own kernels. Weights are converted and uploaded once and stay resident;
// activations go up and results come back per call, and each op's wall time (transfers included)
// is what the report shows as measured.
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/backends/gpu_error.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/backends/matmul_backend.hpp"

namespace tessera {

// The backend for GPU `index`, named `name` in reports, or nullptr with `why_not` set when this
// build has no CUDA support or the GPU cannot be used (no driver, no such device): callers fall
// back to projection.
std::unique_ptr<MatmulBackend> make_cuda_backend(int index, GpuPrecision precision, std::string name,
                                                 std::string& why_not);

// A GPU this process can use, as the CUDA runtime reports it.
struct GpuInfo {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability
  std::string uuid;                // hex, as gpu_uuid()
};
// Every GPU the CUDA runtime shows this process (CUDA_VISIBLE_DEVICES applies); an empty list with
// `why_not` set when there is none or it cannot be asked (no driver, or no CUDA in this build).
std::vector<GpuInfo> list_gpus(std::string& why_not);

// GPU `index`'s UUID in hex, the same wherever it is seen from (empty where it cannot be had).
std::string gpu_uuid(int index);
// Its name as the CUDA runtime gives it ("NVIDIA H100 80GB HBM3"; empty where it cannot be had).
std::string gpu_name(int index);

}  // namespace tessera
