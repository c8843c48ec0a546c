#include "tessera/cuda_backend.hpp"

#ifdef TESSERA_WITH_CUDA

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "cuda_error.hpp"
#include "cuda_kernels.hpp"
#include "tessera/driver.hpp"

namespace tessera {

// Next to check(cudaError_t) in this namespace, so that both overloads are found from below.
static void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw driver::DeviceError(fmt::format("cuBLAS {}: {}", what, cublasGetStatusString(s)));
}

namespace {

uint32_t round_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

// Device memory that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes) check(cudaMalloc(&p_, bytes), "cudaMalloc");
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  // At least `bytes` long; what it held is not kept when it grows.
  void reserve(size_t bytes) {
    if (bytes > bytes_) *this = DeviceBuffer(bytes);
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A left operand A[m, k] on the device: element (i, kk) at p[i * ld + kk].
struct LeftView {
  const float* p;
  uint64_t ld;
};

// A right operand B[k, n] ready for a GEMM in the backend's precision. fp32: element (kk, j) at
// f32[kk * ld + j], or f32[j * ld + kk] when transposed. bf16 and int8: packed one output column
// per row ([padded n][padded k], k contiguous), with a scale per column for int8.
struct RightOperand {
  uint32_t k = 0, n = 0;
  const float* f32 = nullptr;
  uint64_t ld = 0;
  bool transposed = false;
  const void* packed = nullptr;
  const float* scale = nullptr;
};

// Ownership of what a resident weight's RightOperand points at.
struct ResidentLinear {
  DeviceBuffer raw, packed, scale, bias;
  RightOperand b;
};

template <class T, auto Destroy>
struct Deleter {
  void operator()(T p) const { Destroy(p); }
};
using MatmulDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                                   Deleter<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>,
                               Deleter<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>;
using Preference = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                                   Deleter<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>>;

Layout layout(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
  return Layout(l);
}

using Clock = std::chrono::steady_clock;

class CudaBackend final : public MatmulBackend {
 public:
  CudaBackend(int index, GpuPrecision precision, std::string name)
      : index_(index), precision_(precision), name_(std::move(name)) {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, stream_), "cublasSetStream");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
    scratch_[kWorkspace].reserve(kWorkspaceBytes);
  }
  ~CudaBackend() override {
    cudaSetDevice(index_);
    cublasLtDestroy(lt_);
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }
  std::string name() const override { return name_; }
  MatmulStats stats() const override { return stats_; }
  std::vector<Phase> take_phases() override { return std::exchange(phases_, {}); }
  bool runs_other_ops() const override { return true; }

  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    auto start = Clock::now();
    float* da = upload(kInA, a, uint64_t{m} * k);
    float* db = upload(kInB, b, uint64_t{k} * n);
    sync_phase("dma", "upload", start);
    float* dc = buffer<float>(kOut, uint64_t{m} * n);
    gemm({da, k}, right(db, t ? k : n, t, k, n), dc, n, m, nullptr, false);
    sync_phase("compute", gemm_name(), start);
    download(c, dc, uint64_t{m} * n, start);
  }

  void linear(const float* x, uint32_t m, const Linear& w, float* y) override { run_linear(x, m, w, y, false); }
  void linear_gelu(const float* x, uint32_t m, const Linear& w, float* y) override { run_linear(x, m, w, y, true); }
  void release(const Linear& w) override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    weights_.erase(&w);
  }

  void attention(const float* qkv, float* out, uint32_t batch, uint32_t T, uint32_t H, uint32_t D) override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    const uint64_t W = 3 * uint64_t{H} * D, rows = uint64_t{batch} * T;
    auto start = Clock::now();
    const float* d = upload(kInA, qkv, rows * W);
    sync_phase("dma", "upload", start);
    float* scores = buffer<float>(kScores, uint64_t{T} * T);
    float* o = buffer<float>(kOut, rows * H * D);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (uint32_t s = 0; s < batch; ++s)
      for (uint32_t h = 0; h < H; ++h) {
        const float* q = d + uint64_t{s} * T * W + uint64_t{h} * D;
        gemm({q, W}, right(q + uint64_t{H} * D, W, true, D, T), scores, T, T, nullptr, false);
        cuda::softmax_causal(scores, T, T, scale, stream_);
        gemm({scores, T}, right(q + 2 * uint64_t{H} * D, W, false, T, D), o + uint64_t{s} * T * H * D + h * D,
             uint64_t{H} * D, T, nullptr, false);
      }
    check(cudaGetLastError(), "softmax kernel");
    sync_phase("compute", "attention", start);
    download(out, o, rows * H * D, start);
  }

  void layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w,
                  float eps) override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    auto it = norms_.find(&w);
    if (it == norms_.end()) {
      std::array<DeviceBuffer, 2> gb{DeviceBuffer(w.w.size() * 4), DeviceBuffer(w.b.size() * 4)};
      copy_up(gb[0].as<float>(), w.w.data(), w.w.size());
      copy_up(gb[1].as<float>(), w.b.data(), w.b.size());
      it = norms_.emplace(&w, std::move(gb)).first;
    }
    auto start = Clock::now();
    const float* dx = upload(kInA, x, uint64_t{rows} * cols);
    sync_phase("dma", "upload", start);
    float* dy = buffer<float>(kOut, uint64_t{rows} * cols);
    cuda::layer_norm(dx, dy, rows, cols, it->second[0].as<float>(), it->second[1].as<float>(), eps, stream_);
    check(cudaGetLastError(), "layer_norm kernel");
    sync_phase("compute", "layernorm", start);
    download(y, dy, uint64_t{rows} * cols, start);
  }

 private:
  enum Slot { kInA, kInB, kOut, kPackA, kPackB, kScaleA, kScaleB, kAcc, kScores, kWorkspace, kSlots };
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  template <class T>
  T* buffer(Slot slot, uint64_t count) {
    scratch_[slot].reserve(count * sizeof(T));
    return scratch_[slot].as<T>();
  }
  void copy_up(float* dst, const float* src, uint64_t count) {
    check(cudaMemcpyAsync(dst, src, count * 4, cudaMemcpyHostToDevice, stream_), "copy to the GPU");
  }
  float* upload(Slot slot, const float* src, uint64_t count) {
    float* d = buffer<float>(slot, count);
    copy_up(d, src, count);
    return d;
  }
  void download(float* dst, const float* src, uint64_t count, Clock::time_point& start) {
    check(cudaMemcpyAsync(dst, src, count * 4, cudaMemcpyDeviceToHost, stream_), "copy from the GPU");
    sync_phase("dma", "download", start);
  }
  // Waits for the stream and records the phase since `start`, which moves on to now.
  void sync_phase(const char* track, std::string name, Clock::time_point& start) {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    const auto now = Clock::now();
    phases_.push_back({track, std::move(name), start, std::chrono::duration<double>(now - start).count()});
    start = now;
  }
  std::string gemm_name() const { return fmt::format("{} GEMM", to_string(precision_)); }

  // B [k, n] (or [n, k] when transposed) at p with leading dimension ld, made ready for a GEMM;
  // packed into `into` (and `scale`) for bf16 and int8.
  RightOperand right(const float* p, uint64_t ld, bool transposed, uint32_t k, uint32_t n, DeviceBuffer* into = nullptr,
                     DeviceBuffer* scale = nullptr) {
    RightOperand b{k, n, p, ld, transposed};
    if (precision_ == GpuPrecision::kFp32) return b;
    // Column j of B as a packed row: element (j, kk) at p[j * so + kk * si].
    const uint64_t so = transposed ? ld : 1, si = transposed ? 1 : ld;
    const uint32_t kp = round_up(k, 16), np = round_up(n, 16);
    if (!into) into = &scratch_[kPackB], scale = &scratch_[kScaleB];
    into->reserve(uint64_t{np} * kp * operand_bytes(precision_));
    if (precision_ == GpuPrecision::kBf16) {
      cuda::pack_bf16(p, so, si, n, k, np, into->as<uint16_t>(), kp, stream_);
    } else {
      scale->reserve(uint64_t{np} * 4);
      cuda::pack_int8(p, so, si, n, k, np, into->as<int8_t>(), kp, scale->as<float>(), stream_);
      b.scale = scale->as<float>();
    }
    check(cudaGetLastError(), "packing kernel");
    b.packed = into->as<void>();
    return b;
  }

  // c[m, n] (leading dimension ldc) = A B, plus bias[n] when given, then GELU when gelu.
  void gemm(LeftView a, const RightOperand& b, float* c, uint64_t ldc, uint32_t m, const float* bias, bool gelu) {
    const uint32_t k = b.k, n = b.n;
    // Row-major C = A B is column-major C^T = B^T A^T.
    if (precision_ == GpuPrecision::kFp32) {
      const float one = 1.0f, zero = 0.0f;
      check(cublasSgemm(blas_, b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                        static_cast<int>(m), static_cast<int>(k), &one, b.f32, static_cast<int>(b.ld), a.p,
                        static_cast<int>(a.ld), &zero, c, static_cast<int>(ldc)),
            "cublasSgemm");
      cuda::bias_gelu(c, ldc, m, n, bias, gelu, stream_);
    } else if (precision_ == GpuPrecision::kBf16) {
      // Both operands packed k-contiguous: a TN GEMM.
      const uint32_t kp = round_up(k, 16);
      auto* pa = buffer<uint16_t>(kPackA, uint64_t{m} * kp);
      cuda::pack_bf16(a.p, a.ld, 1, m, k, m, pa, kp, stream_);
      const float one = 1.0f, zero = 0.0f;
      check(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                         static_cast<int>(kp), &one, b.packed, CUDA_R_16BF, static_cast<int>(kp), pa, CUDA_R_16BF,
                         static_cast<int>(kp), &zero, c, CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (bf16)");
      cuda::bias_gelu(c, ldc, m, n, bias, gelu, stream_);
    } else {
      // int8 x int8 -> int32 with cuBLASLt (TN, the layout its integer kernels want), padded to
      // multiples of 16, then dequantized with the operands' scales.
      const uint32_t kp = round_up(k, 16), np = round_up(n, 16), mp = round_up(m, 16);
      auto* pa = buffer<int8_t>(kPackA, uint64_t{mp} * kp);
      auto* sa = buffer<float>(kScaleA, mp);
      cuda::pack_int8(a.p, a.ld, 1, m, k, mp, pa, kp, sa, stream_);
      auto* acc = buffer<int32_t>(kAcc, uint64_t{mp} * np);
      int8_gemm(b.packed, pa, acc, np, mp, kp);
      cuda::dequantize(acc, np, sa, b.scale, bias, gelu, c, ldc, m, n, stream_);
    }
    check(cudaGetLastError(), "GEMM epilogue kernel");
    ++stats_.gemms;
    stats_.macs += uint64_t{m} * n * k;
    stats_.read_bytes += operand_bytes(precision_) * (uint64_t{m} * k + uint64_t{k} * n);
    stats_.write_bytes += 4 * uint64_t{m} * n;
  }

  // Column-major acc[n, m] = b^T a with b [k, n] and a [k, m], both k-contiguous.
  void int8_gemm(const void* b, const void* a, int32_t* acc, uint32_t n, uint32_t m, uint32_t k) {
    cublasLtMatmulDesc_t raw = nullptr;
    check(cublasLtMatmulDescCreate(&raw, CUBLAS_COMPUTE_32I, CUDA_R_32I), "cublasLtMatmulDescCreate");
    const MatmulDesc desc(raw);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    check(cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    const Layout lb = layout(CUDA_R_8I, k, n, k), la = layout(CUDA_R_8I, k, m, k), lc = layout(CUDA_R_32I, n, m, n);
    cublasLtMatmulPreference_t pref_raw = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref_raw), "cublasLtMatmulPreferenceCreate");
    const Preference pref(pref_raw);
    const size_t ws = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
          "MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t algo{};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt_, raw, lb.get(), la.get(), lc.get(), lc.get(), pref_raw, 1, &algo, &found),
          "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw driver::DeviceError(fmt::format("cuBLASLt has no int8 GEMM for {}x{}x{} on {}", m, n, k, name_));
    const int32_t one = 1, zero = 0;
    check(cublasLtMatmul(lt_, raw, &one, b, lb.get(), a, la.get(), &zero, acc, lc.get(), acc, lc.get(), &algo.algo,
                         scratch_[kWorkspace].as<void>(), ws, stream_),
          "cublasLtMatmul (int8)");
  }

  void run_linear(const float* x, uint32_t m, const Linear& w, float* y, bool gelu) {
    check(cudaSetDevice(index_), "cudaSetDevice");
    const ResidentLinear& r = resident(w);
    auto start = Clock::now();
    const float* dx = upload(kInA, x, uint64_t{m} * w.in);
    sync_phase("dma", "upload", start);
    float* dy = buffer<float>(kOut, uint64_t{m} * w.out);
    gemm({dx, w.in}, r.b, dy, w.out, m, r.bias.as<float>(), gelu);
    sync_phase("compute", gemm_name(), start);
    download(y, dy, uint64_t{m} * w.out, start);
  }

  // A layer's weights and bias on the GPU in the backend's precision, uploaded on first use.
  const ResidentLinear& resident(const Linear& w) {
    auto it = weights_.find(&w);
    if (it != weights_.end()) return it->second;
    const auto start = Clock::now();
    ResidentLinear r;
    r.raw = DeviceBuffer(w.w.size() * 4);
    copy_up(r.raw.as<float>(), w.w.data(), w.w.size());
    r.bias = DeviceBuffer(w.b.size() * 4);
    copy_up(r.bias.as<float>(), w.b.data(), w.b.size());
    r.b = right(r.raw.as<float>(), w.out, false, w.in, w.out, &r.packed, &r.scale);
    check(cudaStreamSynchronize(stream_), "weight upload");
    if (precision_ != GpuPrecision::kFp32) r.raw = DeviceBuffer();  // only the packed copy is used
    phases_.push_back({"dma", "upload weights", start, std::chrono::duration<double>(Clock::now() - start).count()});
    return weights_.emplace(&w, std::move(r)).first->second;
  }

  int index_;
  GpuPrecision precision_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  std::array<DeviceBuffer, kSlots> scratch_;
  std::map<const Linear*, ResidentLinear> weights_;
  std::map<const LayerNormWeights*, std::array<DeviceBuffer, 2>> norms_;
  MatmulStats stats_;
  std::vector<Phase> phases_;
};

}  // namespace

std::unique_ptr<MatmulBackend> make_cuda_backend(int index, GpuPrecision precision, std::string name,
                                                 std::string& why_not) {
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
  return std::make_unique<CudaBackend>(index, precision, std::move(name));
}

std::string gpu_uuid(int index) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) return {};
  std::string hex;
  for (char b : p.uuid.bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(b));
  return hex;
}

}  // namespace tessera

#else

namespace tessera {

std::unique_ptr<MatmulBackend> make_cuda_backend(int, GpuPrecision, std::string, std::string& why_not) {
  why_not = "this build has no CUDA backend (the CUDA toolkit was not found when it was configured)";
  return nullptr;
}

std::string gpu_uuid(int) { return {}; }

}  // namespace tessera

#endif
