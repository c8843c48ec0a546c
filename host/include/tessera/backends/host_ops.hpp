// The fp32 operations the host CPU runs for backends that run only matrix products, exposed for the
// tests and for the GPU backends' reference checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/backends/matmul_backend.hpp"

namespace tessera {

// The CPU time of the calling thread, in seconds: what the host's operations are timed by, so
// that other threads and processes sharing the cores do not count in them.
double thread_cpu_seconds();

void layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w, float eps);
void gelu_tanh(float* x, size_t n);
// Row r is the query at position offset + r; it sees keys 0 .. offset + r and the rest become 0.
void softmax_causal(float* scores, uint32_t rows, uint32_t cols, uint32_t offset);

// MatmulBackend::attention for backends that run only matrix products: q k^T and the product with v
// on `b` (its kv_ methods, over a cache wherever `b` keeps it), the scaling and softmax on the host,
// whose CPU time (thread_cpu_seconds) is added to *host_seconds.
void attention_with_host_softmax(MatmulBackend& b, const float* qkv, float* out, uint32_t tokens, KvCache& cache,
                                 double* host_seconds);

}  // namespace tessera
