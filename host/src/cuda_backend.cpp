#include "tessera/cuda_backend.hpp"

#ifdef TESSERA_WITH_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "tessera/driver.hpp"

namespace tessera {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw driver::DeviceError(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw driver::DeviceError(fmt::format("cuBLAS {}: status {}", what, static_cast<int>(s)));
}

// A device allocation of floats that frees itself.
class DeviceFloats {
 public:
  DeviceFloats() = default;
  explicit DeviceFloats(size_t n) : n_(n) { check(cudaMalloc(&p_, n * sizeof(float)), "cudaMalloc"); }
  DeviceFloats(DeviceFloats&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  DeviceFloats& operator=(DeviceFloats&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceFloats() {
    if (p_) cudaFree(p_);
  }
  float* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const float* src, size_t n) { check(cudaMemcpy(p_, src, n * sizeof(float), cudaMemcpyHostToDevice), "upload"); }
  void download(float* dst, size_t n) const {
    check(cudaMemcpy(dst, p_, n * sizeof(float), cudaMemcpyDeviceToHost), "download");
  }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
};

class CudaBackend final : public MatmulBackend {
 public:
  explicit CudaBackend(int index) : index_(index) {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cublasCreate(&handle_), "cublasCreate");
  }
  ~CudaBackend() override { cublasDestroy(handle_); }
  std::string name() const override { return fmt::format("cuda:{}", index_); }
  MatmulStats stats() const override { return stats_; }

  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    DeviceFloats da(uint64_t{m} * k), db(uint64_t{k} * n);
    da.upload(a, da.size());
    db.upload(b, db.size());
    gemm(da.get(), db.get(), m, n, k, t, c, nullptr);
  }

  void linear(const float* x, uint32_t m, const Linear& w, float* y) override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    auto it = weights_.find(&w);
    if (it == weights_.end()) {
      DeviceFloats dw(w.w.size());
      dw.upload(w.w.data(), w.w.size());
      it = weights_.emplace(&w, std::move(dw)).first;
    }
    DeviceFloats dx(uint64_t{m} * w.in);
    dx.upload(x, dx.size());
    gemm(dx.get(), it->second.get(), m, w.out, w.in, false, y, &w.b);
  }

 private:
  // Row-major C = A B is column-major C^T = B^T A^T: one SGEMM with the operands swapped.
  void gemm(const float* da, const float* db, uint32_t m, uint32_t n, uint32_t k, bool b_transposed, float* c,
            const std::vector<float>* bias) {
    DeviceFloats dc(uint64_t{m} * n);
    const float one = 1.0f, zero = 0.0f;
    check(cublasSgemm(handle_, b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                      static_cast<int>(m), static_cast<int>(k), &one, db, static_cast<int>(b_transposed ? k : n), da,
                      static_cast<int>(k), &zero, dc.get(), static_cast<int>(n)),
          "cublasSgemm");
    dc.download(c, dc.size());
    if (bias)
      for (uint32_t r = 0; r < m; ++r)
        for (uint32_t col = 0; col < n; ++col) c[uint64_t{r} * n + col] += (*bias)[col];
    ++stats_.gemms;
    stats_.macs += uint64_t{m} * n * k;
    stats_.read_bytes += 4 * (uint64_t{m} * k + uint64_t{k} * n);
    stats_.write_bytes += 4 * uint64_t{m} * n;
  }

  int index_;
  cublasHandle_t handle_ = nullptr;
  std::map<const Linear*, DeviceFloats> weights_;
  MatmulStats stats_;
};

}  // namespace

std::unique_ptr<MatmulBackend> make_cuda_backend(int index, std::string& why_not) {
  int count = 0;
  // With no GPU driver this is an error ("CUDA driver version is insufficient"), not zero devices.
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    why_not = fmt::format("no usable GPU: {}", cudaGetErrorString(e));
    return nullptr;
  }
  if (index < 0 || index >= count) {
    why_not = fmt::format("no GPU {} (this machine has {})", index, count);
    return nullptr;
  }
  return std::make_unique<CudaBackend>(index);
}

}  // namespace tessera

#else

namespace tessera {

std::unique_ptr<MatmulBackend> make_cuda_backend(int, std::string& why_not) {
  why_not = "this build has no CUDA backend (the CUDA toolkit was not found when it was configured)";
  return nullptr;
}

}  // namespace tessera

#endif
