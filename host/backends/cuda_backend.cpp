#include "tessera/backends/cuda_backend.hpp"

#ifdef TESSERA_WITH_CUDA

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "cuda_error.hpp"
#include "cuda_kernels.hpp"
#include "tessera/backends/nvml_power.hpp"

namespace tessera {

// Next to check(cudaError_t) in this namespace, so that both overloads are found from below.
static void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw GpuError(fmt::format("cuBLAS {}: {}", what, cublasGetStatusString(s)));
}

namespace {

// cuBLAS and cuBLASLt take sizes and leading dimensions as int (or int64): every one passed to them
// is checked to fit an int.
int as_int(uint64_t v, const char* what) {
  if (v > static_cast<uint64_t>(INT_MAX))
    throw GpuError(fmt::format("CUDA backend: {} = {} is more than cuBLAS takes", what, v));
  return static_cast<int>(v);
}

// v rounded up to a multiple of 16: the int8 GEMM's padding (cuBLASLt's integer kernels want
// sizes and leading dimensions that are multiples of 4; 16 keeps every packed row 16-byte aligned).
uint32_t pad16(uint32_t v, const char* what) {
  return static_cast<uint32_t>(as_int((uint64_t{v} + 15) / 16 * 16, what));
}

// Memory that frees itself: on the device (cudaMalloc) or pinned on the host (cudaMallocHost, which
// the GPU copies to and from asynchronously, at full speed).
struct OnDevice {
  static constexpr const char* kAlloc = "cudaMalloc";
  static cudaError_t alloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void dealloc(void* p) { cudaFree(p); }
};
struct PinnedHost {
  static constexpr const char* kAlloc = "cudaMallocHost";
  static cudaError_t alloc(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static void dealloc(void* p) { cudaFreeHost(p); }
};

template <class Kind>
class Memory {
 public:
  Memory() = default;
  explicit Memory(size_t bytes) {
    if (bytes) check(Kind::alloc(&p_, bytes), Kind::kAlloc);
    bytes_ = bytes;
  }
  Memory(Memory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Memory& operator=(Memory&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Memory() {
    if (p_) Kind::dealloc(p_);
  }
  // The start of the allocation: cudaMalloc aligns it to 256 bytes, as cuBLASLt's algorithms assume.
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};
using DeviceBuffer = Memory<OnDevice>;
using PinnedBuffer = Memory<PinnedHost>;

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

cuda::KvKind kv_kind(GpuPrecision p) {
  return p == GpuPrecision::kFp32 ? cuda::KvKind::kFp32 : p == GpuPrecision::kBf16 ? cuda::KvKind::kBf16 : cuda::KvKind::kInt8;
}

// A KV cache in GPU memory in the ops' precision (cuda::KvView): [batch][heads][capacity][head_dim]
// keys and the same of values, with a scale per position of each for int8.
class GpuKvCache final : public KvCache {
 public:
  GpuKvCache(GpuPrecision p, uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity)
      : KvCache(batch, heads, head_dim, capacity, false), precision_(p),
        k_(values() * operand_bytes(p)), v_(values() * operand_bytes(p)),
        k_scale_(p == GpuPrecision::kInt8 ? positions() * 4 : 0), v_scale_(p == GpuPrecision::kInt8 ? positions() * 4 : 0) {}
  // What one takes: the values in the precision, and int8's scales.
  static uint64_t bytes_for(GpuPrecision p, uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) {
    const uint64_t positions = uint64_t{batch} * heads * capacity;
    return 2 * (positions * head_dim * operand_bytes(p) + (p == GpuPrecision::kInt8 ? positions * 4 : 0));
  }
  uint64_t bytes() const override { return bytes_for(precision_, batch, heads, head_dim, capacity); }
  cuda::KvView view() const {
    return {kv_kind(precision_), k_.as<void>(), v_.as<void>(), k_scale_.as<float>(), v_scale_.as<float>(), batch,
            heads, head_dim, capacity};
  }

 private:
  uint64_t positions() const { return uint64_t{batch} * heads * capacity; }
  uint64_t values() const { return positions() * head_dim; }
  GpuPrecision precision_;
  DeviceBuffer k_, v_, k_scale_, v_scale_;
};

// CUDA, cuBLAS and cuBLASLt handles that destroy themselves.
template <class T, auto Destroy>
struct Deleter {
  void operator()(T p) const { Destroy(p); }
};
template <class Handle, auto Destroy>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Deleter<Handle, Destroy>>;
using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using Blas = Owned<cublasHandle_t, cublasDestroy>;
using BlasLt = Owned<cublasLtHandle_t, cublasLtDestroy>;
using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

// What create(&handle) makes (its status checked and named `what`), owned from the moment it exists.
template <class Owner, class Create>
Owner make(Create&& create, const char* what) {
  typename Owner::pointer raw = nullptr;
  check(create(&raw), what);
  return Owner(raw);
}

Layout layout(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  return make<Layout>([&](cublasLtMatrixLayout_t* l) { return cublasLtMatrixLayoutCreate(l, type, rows, cols, ld); },
                      "cublasLtMatrixLayoutCreate");
}

// One int8 GEMM shape's cuBLASLt set-up: made once per shape, then reused.
struct LtPlan {
  MatmulDesc desc;
  Layout b, a, c;
  cublasLtMatmulAlgo_t algo{};
};

using Clock = std::chrono::steady_clock;

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

class CudaBackend final : public MatmulBackend {
 public:
  // Each handle is owned by a member as soon as it is made: a throw part way releases what was made.
  CudaBackend(int index, GpuPrecision precision, std::string name)
      : index_(index), precision_(precision), name_(std::move(name)) {
    check(cudaSetDevice(index), "cudaSetDevice");
    // Non-blocking: the backend's work never waits on the legacy default stream.
    stream_ = make<Stream>([](cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); },
                           "cudaStreamCreateWithFlags");
    blas_ = make<Blas>([](cublasHandle_t* h) { return cublasCreate(h); }, "cublasCreate");
    check(cublasSetStream(blas_.get(), stream()), "cublasSetStream");
    // Said outright, since the numerics rest on it: the default math mode, in which SGEMM does not
    // round its operands to TF32 (fp32 is held to 1e-4 of the CPU).
    check(cublasSetMathMode(blas_.get(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    lt_ = make<BlasLt>([](cublasLtHandle_t* h) { return cublasLtCreate(h); }, "cublasLtCreate");
    pref_ = make<Preference>([](cublasLtMatmulPreference_t* p) { return cublasLtMatmulPreferenceCreate(p); },
                             "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref_.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
          "MAX_WORKSPACE_BYTES");
    for (Event& e : events_) e = make<Event>([](cudaEvent_t* ev) { return cudaEventCreate(ev); }, "cudaEventCreate");
    scratch_[kWorkspace] = DeviceBuffer(kWorkspaceBytes);
    // cuBLAS's own, so that it allocates nothing while a CUDA graph is captured.
    scratch_[kBlasWorkspace] = DeviceBuffer(kWorkspaceBytes);
    check(cublasSetWorkspace(blas_.get(), scratch_[kBlasWorkspace].as<void>(), kWorkspaceBytes), "cublasSetWorkspace");
    // Its board's energy counter, where NVML has it: a phase's energy is then measured (the report
    // projects it from the board's maximum power otherwise), and its idle power now, before any work.
    char bus[32] = {};
    std::string no_power;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) power_ = NvmlPower::open(bus, no_power);
    if (power_) {
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before measuring the idle power)");
      idle_watts_ = power_->idle_watts(kIdleSeconds);
    }
  }
  ~CudaBackend() override {
    // Nothing is left running after an op (one that failed waited for its work too); this is for
    // safety. The members then free the memory, and after it the handles and the stream.
    cudaSetDevice(index_);
    cudaStreamSynchronize(stream());
  }
  std::string name() const override { return name_; }
  MatmulStats stats() const override { return stats_; }
  std::vector<Phase> take_phases() override { return std::exchange(phases_, {}); }
  bool runs_other_ops() const override { return true; }
  std::optional<double> energy_counter() const override { return power_ ? power_->joules() : std::nullopt; }
  std::optional<double> idle_watts() const override { return idle_watts_; }

  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override {
    run_op<2>({Upload{a, uint64_t{m} * k, kInA}, Upload{b, uint64_t{k} * n, kInB}}, gemm_name(), c, uint64_t{m} * n,
              [&](const std::array<float*, 2>& in, float* out) {
                gemm({in[0], k}, right(in[1], t ? k : n, t, k, n), out, n, m, nullptr, false);
              });
  }

  void linear(const float* x, uint32_t m, const Linear& w, float* y) override { run_linear(x, m, w, y, false); }
  void linear_gelu(const float* x, uint32_t m, const Linear& w, float* y) override { run_linear(x, m, w, y, true); }
  // Called from destructors (Pipeline's): they must not throw; a failed free leaves nothing to do.
  void release(const Linear& w) override {
    cudaSetDevice(index_);
    weights_.erase(&w);
  }
  void release(const LayerNormWeights& w) override {
    cudaSetDevice(index_);
    norms_.erase(&w);
  }

  // The cache in GPU memory, in the ops' precision.
  std::unique_ptr<KvCache> make_kv_cache(uint32_t batch, uint32_t heads, uint32_t head_dim,
                                         uint32_t capacity) override {
    if (capacity > cuda::kMaxAttentionPositions || head_dim > kMaxHeadDim)
      throw std::invalid_argument(fmt::format("{}: the attention kernel takes up to {} positions and heads of up to {} "
                                              "values, not {} and {}", name_, cuda::kMaxAttentionPositions,
                                              kMaxHeadDim, capacity, head_dim));
    std::unique_ptr<KvCache> cache;
    guarded([&] { cache = std::make_unique<GpuKvCache>(precision_, batch, heads, head_dim, capacity); });
    return cache;
  }
  uint64_t kv_cache_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) const override {
    return GpuKvCache::bytes_for(precision_, batch, heads, head_dim, capacity);
  }
  std::optional<uint64_t> memory_free() const override {
    size_t free = 0, total = 0;
    check(cudaSetDevice(index_), "cudaSetDevice");
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return free;
  }

  // Every sequence, head and token at once: the new keys and values appended to the cache in its
  // precision, then one kernel for the scores, softmax and mix.
  using MatmulBackend::attention;
  void attention(const float* qkv, float* out, uint32_t T, KvCache& kv) override {
    auto& cache = dynamic_cast<GpuKvCache&>(kv);  // made by make_kv_cache
    const uint32_t batch = cache.batch, H = cache.heads, D = cache.head_dim, past = cache.length, L = past + T;
    if (L > cache.capacity)
      throw std::invalid_argument(fmt::format("the KV cache holds {} positions; {} more do not fit after {}",
                                              cache.capacity, T, past));
    const uint64_t W = 3 * uint64_t{H} * D, HD = uint64_t{H} * D, rows = uint64_t{batch} * T;
    const cuda::KvView view = cache.view();
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    run_op<1>({Upload{qkv, rows * W, kInA}}, "attention", out, rows * HD,
              [&](const std::array<float*, 1>& in, float* o) {
                check(cuda::kv_append(in[0], T, past, nullptr, view, stream()), "launching the kv_append kernel");
                check(cuda::attention(in[0], o, T, past, nullptr, view, scale, stream()),
                      "launching the attention kernel");
                // The products' work, for the report: q k^T and p v over the positions each token sees.
                const uint64_t macs = 2 * uint64_t{batch} * H * D * (uint64_t{T} * past + uint64_t{T} * (T + 1) / 2);
                stats_.macs += macs;
                stats_.read_bytes += cache_read_bytes(batch, H, D, T, past);
                stats_.write_bytes += 4 * rows * HD;
              });
    cache.length = L;
  }

  void layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w,
                  float eps) override {
    const std::array<DeviceBuffer, 2>* g = nullptr;
    guarded([&] { g = &resident(w, cols); });
    run_op<1>({Upload{x, uint64_t{rows} * cols, kInA}}, "layernorm", y, uint64_t{rows} * cols,
              [&](const std::array<float*, 1>& in, float* out) {
                check(cuda::layer_norm(in[0], out, rows, cols, (*g)[0].as<float>(), (*g)[1].as<float>(), eps, stream()),
                      "launching the layer_norm kernel");
              });
  }

 private:
  // Device scratch, one allocation per use so that every operand starts an allocation (aligned).
  enum Slot { kInA, kInB, kOut, kPackA, kPackB, kScaleA, kScaleB, kAcc, kWorkspace, kBlasWorkspace, kSlots };
  // Pinned host memory that an op's inputs go up from and its result comes back to.
  enum Staging { kStageIn, kStageOut, kStagings };
  // Events around an op's phases: before the upload, after it, after the compute, after the download.
  enum Mark { kUpStart, kUpEnd, kComputeEnd, kDownEnd, kMarks };
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  static constexpr double kIdleSeconds = 0.5;
  static constexpr uint32_t kMaxHeadDim = 256;  // the attention kernel's threads per block  // long enough for the counter to move by many steps
  static constexpr size_t kMaxPlans = 512;  // int8 GEMM shapes remembered (a bound for ever-new shapes)

  struct Upload {
    const float* src;
    uint64_t count;
    Slot slot;
  };

  cudaStream_t stream() const { return stream_.get(); }

  // At least `bytes` of m. Growing frees the old memory, which work in flight may still use: the
  // stream is waited for first (rare: sizes grow by half at least each time).
  template <class Kind>
  void ensure(Memory<Kind>& m, uint64_t bytes) {
    if (bytes <= m.bytes()) return;
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (before growing a buffer)");
    ++generation_;  // a graph captured with the old memory is stale
    const uint64_t grown = std::max<uint64_t>(bytes, m.bytes() + m.bytes() / 2);
    m = Memory<Kind>();  // the old one goes first, so that both are never held at once
    m = Memory<Kind>(grown);
  }
  template <class T>
  T* buffer(Slot slot, uint64_t count) {
    ensure(scratch_[slot], count * sizeof(T));
    return scratch_[slot].as<T>();
  }
  template <class T>
  T* staging(Staging slot, uint64_t count) {
    ensure(staging_[slot], count * sizeof(T));
    return staging_[slot].as<T>();
  }
  // From pageable memory: cudaMemcpyAsync returns once it has taken the data, so src may go.
  void copy_up(float* dst, const float* src, uint64_t count) {
    if (count) check(cudaMemcpyAsync(dst, src, count * 4, cudaMemcpyHostToDevice, stream()), "copy to the GPU");
  }
  void mark(Mark m) { check(cudaEventRecord(events_[m].get(), stream()), "cudaEventRecord"); }
  double elapsed(Mark from, Mark to) const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, events_[from].get(), events_[to].get()), "cudaEventElapsedTime");
    return ms / 1e3;
  }

  // Runs fn on this backend's GPU. Should it throw, the work it queued may still be using the
  // buffers and the pinned memory that the next op reuses: that work is waited for before the error
  // goes on (an error of its own would be a consequence of the first and is not reported).
  template <class Fn>
  void guarded(Fn&& fn) {
    check(cudaSetDevice(index_), "cudaSetDevice");
    try {
      fn();
    } catch (...) {
      cudaStreamSynchronize(stream());
      throw;
    }
  }

  // One op: the inputs go up through pinned memory, compute(device inputs, device output) queues
  // the work, and the result comes back through pinned memory into dst, with one wait for the
  // stream. Phases: "dma" upload (the copy into pinned memory and the transfer), "compute", "dma"
  // download (the transfer and the copy out of pinned memory), laid end to end from the op's start,
  // their lengths from the events around them on the stream.
  template <size_t N, class Compute>
  void run_op(const std::array<Upload, N>& ups, const std::string& compute_name, float* dst, uint64_t out_count,
              Compute&& compute) {
    guarded([&] {
      // Room first (growing waits for the stream, idle here). Inputs share the pinned buffer, each at
      // a 256-byte boundary.
      std::array<uint64_t, N> at{};
      uint64_t staged = 0;
      for (size_t i = 0; i < N; ++i) {
        at[i] = staged;
        staged += (ups[i].count + 63) / 64 * 64;
      }
      float* pin_in = staging<float>(kStageIn, staged);
      float* pin_out = staging<float>(kStageOut, out_count);
      std::array<float*, N> dev{};
      for (size_t i = 0; i < N; ++i) dev[i] = buffer<float>(ups[i].slot, ups[i].count);
      float* out = buffer<float>(kOut, out_count);

      const auto start = Clock::now();
      for (size_t i = 0; i < N; ++i)
        if (ups[i].count) std::memcpy(pin_in + at[i], ups[i].src, ups[i].count * 4);
      const auto staged_at = Clock::now();
      mark(kUpStart);
      for (size_t i = 0; i < N; ++i)
        if (ups[i].count)
          check(cudaMemcpyAsync(dev[i], pin_in + at[i], ups[i].count * 4, cudaMemcpyHostToDevice, stream()),
                "copy to the GPU");
      mark(kUpEnd);
      compute(std::as_const(dev), out);
      mark(kComputeEnd);
      if (out_count)
        check(cudaMemcpyAsync(pin_out, out, out_count * 4, cudaMemcpyDeviceToHost, stream()), "copy from the GPU");
      mark(kDownEnd);
      check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (end of an op: a kernel or copy failed)");
      const auto synced = Clock::now();
      if (out_count) std::memcpy(dst, pin_out, out_count * 4);
      const auto done = Clock::now();

      const double up = seconds_between(start, staged_at) + elapsed(kUpStart, kUpEnd);
      const double work = elapsed(kUpEnd, kComputeEnd);
      const double down = elapsed(kComputeEnd, kDownEnd) + seconds_between(synced, done);
      phases_.push_back({"dma", "upload", start, up});
      phases_.push_back({"compute", compute_name, start + to_duration(up), work});
      phases_.push_back({"dma", "download", start + to_duration(up + work), down});
    });
  }

  // The keys and values the attention reads for T tokens after `past`: each token its positions'.
  uint64_t cache_read_bytes(uint32_t batch, uint32_t H, uint32_t D, uint32_t T, uint32_t past) const {
    const uint64_t positions = uint64_t{T} * past + uint64_t{T} * (T + 1) / 2;
    return 2 * uint64_t{batch} * H * positions * D * operand_bytes(precision_);
  }

  std::string gemm_name() const { return fmt::format("{} GEMM", to_string(precision_)); }

  // B [k, n] (or [n, k] when transposed) at p with leading dimension ld, made ready for a GEMM;
  // packed into `into` (and `scale`) for bf16 and int8.
  RightOperand right(const float* p, uint64_t ld, bool transposed, uint32_t k, uint32_t n, DeviceBuffer* into = nullptr,
                     DeviceBuffer* scale = nullptr) {
    RightOperand b{k, n, p, ld, transposed};
    if (precision_ == GpuPrecision::kFp32 || k == 0 || n == 0) return b;  // an empty B is never read
    // Column j of B as a packed row: element (j, kk) at p[j * so + kk * si].
    const uint64_t so = transposed ? ld : 1, si = transposed ? 1 : ld;
    const uint32_t kp = pad16(k, "k"), np = pad16(n, "n");
    if (!into) into = &scratch_[kPackB], scale = &scratch_[kScaleB];
    ensure(*into, uint64_t{np} * kp * operand_bytes(precision_));
    if (precision_ == GpuPrecision::kBf16) {
      check(cuda::pack_bf16(p, so, si, n, k, np, into->as<uint16_t>(), kp, stream()), "launching the pack_bf16 kernel");
    } else {
      ensure(*scale, uint64_t{np} * 4);
      check(cuda::pack_int8(p, so, si, n, k, np, into->as<int8_t>(), kp, scale->as<float>(), stream()),
            "launching the pack_int8 kernel");
      b.scale = scale->as<float>();
    }
    b.packed = into->as<void>();
    return b;
  }

  // c[m, n] (leading dimension ldc) = A B, plus bias[n] when given, then GELU when gelu.
  void gemm(LeftView a, const RightOperand& b, float* c, uint64_t ldc, uint32_t m, const float* bias, bool gelu) {
    const uint32_t k = b.k, n = b.n;
    if (m == 0 || n == 0) return;
    if (k == 0) {
      // An empty sum: zeros, then the epilogue.
      check(cudaMemset2DAsync(c, ldc * 4, 0, uint64_t{n} * 4, m, stream()), "cudaMemset2DAsync");
      check(cuda::bias_gelu(c, ldc, m, n, bias, gelu, stream()), "launching the bias_gelu kernel");
    } else if (precision_ == GpuPrecision::kFp32) {
      // Row-major C = A B is column-major C^T = B^T A^T.
      const float one = 1.0f, zero = 0.0f;
      check(cublasSgemm(blas_.get(), b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, as_int(n, "n"),
                        as_int(m, "m"), as_int(k, "k"), &one, b.f32, as_int(b.ld, "ldb"), a.p, as_int(a.ld, "lda"),
                        &zero, c, as_int(ldc, "ldc")),
            "cublasSgemm");
      check(cuda::bias_gelu(c, ldc, m, n, bias, gelu, stream()), "launching the bias_gelu kernel");
    } else if (precision_ == GpuPrecision::kBf16) {
      // Both operands packed k-contiguous: a TN GEMM (the zero padding of k adds nothing).
      const uint32_t kp = pad16(k, "k");
      auto* pa = buffer<uint16_t>(kPackA, uint64_t{m} * kp);
      check(cuda::pack_bf16(a.p, a.ld, 1, m, k, m, pa, kp, stream()), "launching the pack_bf16 kernel");
      const float one = 1.0f, zero = 0.0f;
      check(cublasGemmEx(blas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, as_int(n, "n"), as_int(m, "m"), as_int(kp, "k"), &one,
                         b.packed, CUDA_R_16BF, as_int(kp, "k"), pa, CUDA_R_16BF, as_int(kp, "k"), &zero, c,
                         CUDA_R_32F, as_int(ldc, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (bf16)");
      check(cuda::bias_gelu(c, ldc, m, n, bias, gelu, stream()), "launching the bias_gelu kernel");
    } else {
      // int8 x int8 -> int32 with cuBLASLt (TN, the layout its integer kernels want), padded to
      // multiples of 16 with zeros, then dequantized with the operands' scales.
      const uint32_t kp = pad16(k, "k"), np = pad16(n, "n"), mp = pad16(m, "m");
      auto* pa = buffer<int8_t>(kPackA, uint64_t{mp} * kp);
      auto* sa = buffer<float>(kScaleA, mp);
      check(cuda::pack_int8(a.p, a.ld, 1, m, k, mp, pa, kp, sa, stream()), "launching the pack_int8 kernel");
      auto* acc = buffer<int32_t>(kAcc, uint64_t{mp} * np);
      int8_gemm(b.packed, pa, acc, np, mp, kp);
      check(cuda::dequantize(acc, np, sa, b.scale, bias, gelu, c, ldc, m, n, stream()),
            "launching the dequantize kernel");
    }
    ++stats_.gemms;
    stats_.macs += uint64_t{m} * n * k;
    stats_.read_bytes += operand_bytes(precision_) * (uint64_t{m} * k + uint64_t{k} * n);
    stats_.write_bytes += 4 * uint64_t{m} * n;
  }

  // The cuBLASLt set-up of column-major acc[n, m] = b^T a (b [k, n], a [k, m], both k-contiguous),
  // made on first use of the shape.
  const LtPlan& lt_plan(uint32_t n, uint32_t m, uint32_t k) {
    const std::array<uint32_t, 3> key{n, m, k};
    if (const auto it = lt_plans_.find(key); it != lt_plans_.end()) return it->second;
    if (lt_plans_.size() >= kMaxPlans) lt_plans_.clear();
    LtPlan p;
    p.desc = make<MatmulDesc>(
        [](cublasLtMatmulDesc_t* d) { return cublasLtMatmulDescCreate(d, CUBLAS_COMPUTE_32I, CUDA_R_32I); },
        "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    check(cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    p.b = layout(CUDA_R_8I, k, n, k);
    p.a = layout(CUDA_R_8I, k, m, k);
    p.c = layout(CUDA_R_32I, n, m, n);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt_.get(), p.desc.get(), p.b.get(), p.a.get(), p.c.get(), p.c.get(),
                                         pref_.get(), 1, &result, &found),
          "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0 || result.state != CUBLAS_STATUS_SUCCESS)
      throw GpuError(fmt::format("cuBLASLt has no int8 GEMM for {}x{}x{} (padded) on {}", m, n, k, name_));
    p.algo = result.algo;
    return lt_plans_.emplace(key, std::move(p)).first->second;
  }

  // Column-major acc[n, m] = b^T a with b [k, n] and a [k, m], both k-contiguous; n, m, k and so every
  // leading dimension multiples of 16.
  void int8_gemm(const void* b, const void* a, int32_t* acc, uint32_t n, uint32_t m, uint32_t k) {
    // The heuristic's choice assumes cuBLASLt's default alignment, 256 bytes, for every matrix: each
    // is the start of an allocation of its own.
    for (const void* p : {b, a, static_cast<const void*>(acc)})
      if (reinterpret_cast<uintptr_t>(p) % 256 != 0)
        throw GpuError(fmt::format("CUDA backend: an int8 GEMM operand at {} is not 256-byte aligned", p));
    const LtPlan& p = lt_plan(n, m, k);
    const int32_t one = 1, zero = 0;
    check(cublasLtMatmul(lt_.get(), p.desc.get(), &one, b, p.b.get(), a, p.a.get(), &zero, acc, p.c.get(), acc,
                         p.c.get(), &p.algo, scratch_[kWorkspace].as<void>(), kWorkspaceBytes, stream()),
          "cublasLtMatmul (int8)");
  }

  void run_linear(const float* x, uint32_t m, const Linear& w, float* y, bool gelu) {
    const ResidentLinear* r = nullptr;
    guarded([&] { r = &resident(w); });
    run_op<1>({Upload{x, uint64_t{m} * w.in, kInA}}, gemm_name(), y, uint64_t{m} * w.out,
              [&](const std::array<float*, 1>& in, float* out) {
                gemm({in[0], w.in}, r->b, out, w.out, m, r->bias.as<float>(), gelu);
              });
  }

  // A layer's weights and bias on the GPU in the backend's precision, uploaded on first use and kept
  // until release(w).
  const ResidentLinear& resident(const Linear& w) {
    if (const auto it = weights_.find(&w); it != weights_.end()) return it->second;
    return weights_.emplace(&w, upload(w)).first->second;
  }

  // A layer's weights and bias uploaded and packed in the backend's precision (for resident(), or
  // for a stage program, which owns its own).
  ResidentLinear upload(const Linear& w) {
    if (w.w.size() != uint64_t{w.in} * w.out || w.b.size() != w.out)
      throw std::invalid_argument(fmt::format("a linear layer {} -> {} with {} weights and {} biases", w.in, w.out,
                                              w.w.size(), w.b.size()));
    const auto start = Clock::now();
    ResidentLinear r;
    r.raw = DeviceBuffer(w.w.size() * 4);
    copy_up(r.raw.as<float>(), w.w.data(), w.w.size());
    r.bias = DeviceBuffer(w.b.size() * 4);
    copy_up(r.bias.as<float>(), w.b.data(), w.b.size());
    r.b = right(r.raw.as<float>(), w.out, false, w.in, w.out, &r.packed, &r.scale);
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (weight upload)");
    if (precision_ != GpuPrecision::kFp32) {  // only the packed copy is used
      r.raw = DeviceBuffer();
      r.b.f32 = nullptr;
    }
    phases_.push_back({"dma", "upload weights", start, seconds_between(start, Clock::now())});
    return r;
  }

  // A LayerNorm's gain and bias on the GPU, uploaded on first use and kept until release(w).
  const std::array<DeviceBuffer, 2>& resident(const LayerNormWeights& w, uint32_t cols) {
    if (const auto it = norms_.find(&w); it != norms_.end()) return it->second;
    return norms_.emplace(&w, upload(w, cols)).first->second;
  }
  std::array<DeviceBuffer, 2> upload(const LayerNormWeights& w, uint32_t cols) {
    if (w.w.size() < cols || w.b.size() < cols)
      throw std::invalid_argument(fmt::format("LayerNorm over {} columns with {} gains and {} biases", cols,
                                              w.w.size(), w.b.size()));
    std::array<DeviceBuffer, 2> g{DeviceBuffer(w.w.size() * 4), DeviceBuffer(w.b.size() * 4)};
    copy_up(g[0].as<float>(), w.w.data(), w.w.size());
    copy_up(g[1].as<float>(), w.b.data(), w.b.size());
    return g;
  }

  // Declared in the order they are made; destroyed in reverse: memory before the handles and stream.
  int index_;
  GpuPrecision precision_;
  std::string name_;
  Stream stream_;
  Blas blas_;
  BlasLt lt_;
  Preference pref_;
  std::array<Event, kMarks> events_;
  std::map<std::array<uint32_t, 3>, LtPlan> lt_plans_;
  std::array<DeviceBuffer, kSlots> scratch_;
  std::array<PinnedBuffer, kStagings> staging_;
  std::map<const Linear*, ResidentLinear> weights_;
  std::map<const LayerNormWeights*, std::array<DeviceBuffer, 2>> norms_;
  MatmulStats stats_;
  std::vector<Phase> phases_;
  std::unique_ptr<NvmlPower> power_;
  std::optional<double> idle_watts_;
  uint64_t generation_ = 0;  // bumped when a scratch or staging buffer is reallocated

  friend class CudaStage;

 public:
  std::unique_ptr<StageProgram> make_stage(const Gpt2Model& model, uint32_t first, uint32_t last, bool embed,
                                           const Linear* vocab) override;
};

using Graph = Owned<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;

// A stage on the GPU from its input to its output (StageProgram). Its weights are its own, uploaded
// when it is made; its activations, workspaces and the backend's GEMM scratch are allocated at
// start() for the largest step (a prefill of every position), its KV caches there too, in the ops'
// precision. A step is one upload (token ids or the residual stream, and the position), every
// kernel and GEMM of its layers on the backend's stream, and one download. Decode steps replay a
// CUDA graph per microbatch, captured at a microbatch's second decode step (the first, run
// eagerly, sizes every scratch buffer and picks cuBLASLt's algorithms); the kernels read the
// position from device memory, so one graph serves every step. A capture that fails is said in
// notes(), and decode then runs eagerly.
class CudaStage final : public StageProgram {
 public:
  CudaStage(CudaBackend& b, const Gpt2Model& model, uint32_t first, uint32_t last, bool embed, const Linear* vocab)
      : b_(b), cfg_(model.cfg), embed_(embed), vocab_(vocab) {
    const uint64_t E = cfg_.width, ob = operand_bytes(b.precision_);
    const uint64_t layers = last - first + 1;
    uint64_t bytes = layers * (12 * E * E * ob + 13 * E * 4) + (vocab ? E * cfg_.vocab * ob + cfg_.vocab * 8 : 0) +
                     (embed ? uint64_t{cfg_.vocab + cfg_.positions} * E * 4 : 0);
    if (b.precision_ != GpuPrecision::kFp32)  // the fp32 copy of the largest matrix, while it is packed
      bytes += std::max<uint64_t>(4 * E * E, vocab ? E * cfg_.vocab : 0) * 4;
    if (cfg_.head_dim() > CudaBackend::kMaxHeadDim || cfg_.positions > cuda::kMaxAttentionPositions)
      throw std::invalid_argument(fmt::format("{}: the attention kernel takes up to {} positions and heads of up to {} "
                                              "values, not {} and {}", b.name_, cuda::kMaxAttentionPositions,
                                              CudaBackend::kMaxHeadDim, cfg_.positions, cfg_.head_dim()));
    check_fits(bytes, fmt::format("the weights of layers {}-{}{}", first, last, vocab ? " and the logits" : ""));
    b_.guarded([&] {
      for (uint32_t l = first; l <= last; ++l) {
        const Gpt2Block& blk = model.blocks.at(l);
        layers_.push_back({b_.upload(blk.c_attn), b_.upload(blk.attn_proj), b_.upload(blk.c_fc),
                           b_.upload(blk.mlp_proj), b_.upload(blk.ln_1, cfg_.width), b_.upload(blk.ln_2, cfg_.width)});
      }
      if (vocab_) {
        head_ = b_.upload(*vocab_);
        ln_f_ = b_.upload(model.ln_f, cfg_.width);
      }
      if (embed_) {
        wte_ = DeviceBuffer(model.wte.size() * 4);
        wpe_ = DeviceBuffer(model.wpe.size() * 4);
        b_.copy_up(wte_.as<float>(), model.wte.data(), model.wte.size());
        b_.copy_up(wpe_.as<float>(), model.wpe.data(), model.wpe.size());
      }
      check(cudaStreamSynchronize(b_.stream()), "cudaStreamSynchronize (weights uploaded)");
    });
    b_.take_phases();  // the uploads are no step's
  }

  void start(const std::vector<uint32_t>& batch_of, uint32_t capacity) override {
    end();  // what the last start() took is free again before anything is counted
    const uint64_t E = cfg_.width, H = cfg_.heads, D = cfg_.head_dim();
    const uint32_t most = *std::max_element(batch_of.begin(), batch_of.end());
    rows_ = uint64_t{most} * capacity;
    uint64_t cache_bytes = 0;
    for (uint32_t n : batch_of) cache_bytes += layers_.size() * GpuKvCache::bytes_for(b_.precision_, n, H, D, capacity);
    const uint64_t work = rows_ * (2 * E + 3 * E + E + E + 4 * E) * 4 + rows_ * 4 + most * E * 4;
    check_fits(cache_bytes + work + scratch_bytes(rows_, most),
               fmt::format("the KV caches and workspaces for {} sequences of {} positions",
                           std::accumulate(batch_of.begin(), batch_of.end(), 0u), capacity));
    b_.guarded([&] {
      x_ = DeviceBuffer(rows_ * E * 4);
      h_ = DeviceBuffer(rows_ * E * 4);
      qkv_ = DeviceBuffer(rows_ * 3 * E * 4);
      att_ = DeviceBuffer(rows_ * E * 4);
      tmp_ = DeviceBuffer(rows_ * E * 4);
      up_ = DeviceBuffer(rows_ * 4 * E * 4);
      tokens_ = DeviceBuffer(rows_ * 4);
      last_ = DeviceBuffer(uint64_t{most} * E * 4);
      pasts_ = DeviceBuffer(batch_of.size() * 4);
      pin_in_ = PinnedBuffer(rows_ * E * 4);
      pin_past_ = PinnedBuffer(batch_of.size() * 4);
      reserve_scratch(rows_, most);
      caches_.resize(batch_of.size());
      for (size_t j = 0; j < batch_of.size(); ++j)
        for (size_t l = 0; l < layers_.size(); ++l)
          caches_[j].push_back(std::make_unique<GpuKvCache>(b_.precision_, batch_of[j], H, D, capacity));
    });
    batch_of_ = batch_of;
    capacity_ = capacity;
  }

  void end() override {
    graphs_.clear();
    caches_.clear();
    eager_decodes_.clear();
    batch_of_.clear();
    for (DeviceBuffer* d : {&x_, &h_, &qkv_, &att_, &tmp_, &up_, &tokens_, &last_, &pasts_, &logits_}) *d = DeviceBuffer();
    pin_in_ = PinnedBuffer();
    pin_past_ = PinnedBuffer();
  }

  uint64_t kv_cache_bytes() const override {
    uint64_t bytes = 0;
    for (const auto& per_layer : caches_)
      for (const auto& c : per_layer) bytes += c->bytes();
    return bytes;
  }

  std::vector<std::string> notes() const override {
    if (graphs_off_.empty()) return {};
    return {fmt::format("decode ran without CUDA graphs: {}", graphs_off_)};
  }

  void step(uint32_t j, const int32_t* tokens, const float* x, uint32_t T, uint32_t past, bool last_only,
            float* out) override {
    if (j >= batch_of_.size()) throw std::logic_error("CudaStage::step before start");
    if (past + T > capacity_)
      throw std::invalid_argument(fmt::format("{} tokens after {} do not fit the {} positions started", T, past,
                                              capacity_));
    const uint32_t B = batch_of_[j];
    const uint64_t E = cfg_.width, rows = uint64_t{B} * T, rows_out = vocab_ ? (last_only ? B : rows) : rows;
    const uint64_t out_count = rows_out * (vocab_ ? cfg_.vocab : E);
    const MatmulStats before = b_.stats_;  // counted by account(), graph or not
    b_.guarded([&] {
      // Room for the result first (outside any capture: growing waits for the stream); all the
      // logits of a prefill may need more than start() made room for.
      if (vocab_ && out_count * 4 > logits_.bytes()) {
        check_fits(out_count * 4 - logits_.bytes() + scratch_bytes(rows, rows_out),
                   fmt::format("the logits of {} tokens", rows_out));
        b_.ensure(logits_, out_count * 4);
        reserve_scratch(rows, rows_out);
      }
      float* pin_out = b_.staging<float>(CudaBackend::kStageOut, out_count);
      const auto start = Clock::now();
      pin_past_.as<uint32_t>()[j] = past;
      if (embed_)
        std::memcpy(pin_in_.as<int32_t>(), tokens, rows * 4);
      else
        std::memcpy(pin_in_.as<float>(), x, rows * E * 4);
      const auto staged = Clock::now();
      const bool decode = T == 1;
      GraphKey key{j, last_only};
      b_.mark(CudaBackend::kUpStart);
      if (decode && replay(key)) {
        b_.mark(CudaBackend::kComputeEnd);
      } else if (decode && graphs_off_.empty() && eager_decodes_[key] >= 1) {
        capture(key, T, past, last_only, pin_out);
        b_.mark(CudaBackend::kComputeEnd);
      } else {
        enqueue(j, T, past, last_only, pin_out);
        if (decode) ++eager_decodes_[key];
        b_.mark(CudaBackend::kComputeEnd);
      }
      check(cudaStreamSynchronize(b_.stream()), "cudaStreamSynchronize (end of a stage step: a kernel or copy failed)");
      const auto synced = Clock::now();
      std::memcpy(out, pin_out, out_count * 4);
      const auto done = Clock::now();
      const double up = seconds_between(start, staged), work = b_.elapsed(CudaBackend::kUpStart, CudaBackend::kComputeEnd);
      b_.phases_.push_back({"dma", "stage input", start, up});
      b_.phases_.push_back({"compute", "stage (upload, layers, download)", start + to_duration(up), work});
      b_.phases_.push_back({"dma", "stage output", start + to_duration(up + work), seconds_between(synced, done)});
      b_.stats_ = before;
      account(B, T, past, rows_out);
    });
  }

 private:
  struct Layer {
    ResidentLinear qkv, proj, fc, down;
    std::array<DeviceBuffer, 2> ln_1, ln_2;
  };
  using GraphKey = std::pair<uint32_t, bool>;  // microbatch, last_only
  struct Captured {
    Graph graph;
    GraphExec exec;
    uint64_t generation = 0;  // of the backend's buffers it was captured with
  };

  void check_fits(uint64_t bytes, const std::string& what) const {
    const uint64_t free = *b_.memory_free();
    const auto mib = [](uint64_t v) { return double(v) / (1 << 20); };
    if (bytes > free)
      throw std::invalid_argument(fmt::format("{} need {:.1f} MiB on {}, which has {:.1f} MiB free ({:.1f} MiB short)",
                                              what, mib(bytes), b_.name_, mib(free), mib(bytes - free)));
  }

  // The backend's GEMM scratch for this stage's products over `rows` rows, and the logits' over
  // `rows_out`: packed left operands (bf16, int8), int8's row scales and int32 accumulators, and
  // the pinned buffer a result comes back through.
  uint64_t scratch_bytes(uint64_t rows, uint64_t rows_out) const {
    const uint64_t E = cfg_.width, V = vocab_ ? cfg_.vocab : 0, m = std::max(rows, rows_out) + 16;
    const uint64_t n = std::max<uint64_t>(4 * E, V) + 16, k = 4 * E + 16;
    const uint64_t packs = b_.precision_ == GpuPrecision::kFp32 ? 0
                           : b_.precision_ == GpuPrecision::kBf16 ? m * k * 2
                                                                  : m * k + m * 4 + m * n * 4;
    return packs + std::max(rows * E, rows_out * V) * 4;
  }
  void reserve_scratch(uint64_t rows, uint64_t rows_out) {
    const uint64_t E = cfg_.width, V = vocab_ ? cfg_.vocab : 0, m = std::max(rows, rows_out);
    const uint64_t mp = (m + 15) / 16 * 16, kp = (4 * E + 15) / 16 * 16;
    const uint64_t np = (std::max<uint64_t>(4 * E, V) + 15) / 16 * 16;
    if (b_.precision_ == GpuPrecision::kBf16) b_.buffer<uint16_t>(CudaBackend::kPackA, m * kp);
    if (b_.precision_ == GpuPrecision::kInt8) {
      b_.buffer<int8_t>(CudaBackend::kPackA, mp * kp);
      b_.buffer<float>(CudaBackend::kScaleA, mp);
      b_.buffer<int32_t>(CudaBackend::kAcc, mp * np);
    }
    b_.staging<float>(CudaBackend::kStageOut, std::max(rows * E, rows_out * V));
  }

  // Every copy and launch of a step on the stream (also what a capture records).
  void enqueue(uint32_t j, uint32_t T, uint32_t past, bool last_only, float* pin_out) {
    const uint32_t B = batch_of_[j], E = cfg_.width, V = cfg_.vocab;
    const uint32_t rows = B * T;
    cudaStream_t st = b_.stream();
    const uint32_t* past_dev = pasts_.as<uint32_t>() + j;
    check(cudaMemcpyAsync(pasts_.as<uint32_t>() + j, pin_past_.as<uint32_t>() + j, 4, cudaMemcpyHostToDevice, st),
          "copy of the position to the GPU");
    float* x = x_.as<float>();
    if (embed_) {
      check(cudaMemcpyAsync(tokens_.as<int32_t>(), pin_in_.as<int32_t>(), uint64_t{rows} * 4, cudaMemcpyHostToDevice, st),
            "copy of the token ids to the GPU");
      check(cuda::embed(tokens_.as<int32_t>(), wte_.as<float>(), wpe_.as<float>(), past, past_dev, rows, T, E, x, st),
            "launching the embed kernel");
    } else {
      check(cudaMemcpyAsync(x, pin_in_.as<float>(), uint64_t{rows} * E * 4, cudaMemcpyHostToDevice, st),
            "copy of the residual stream to the GPU");
    }
    float *h = h_.as<float>(), *qkv = qkv_.as<float>(), *att = att_.as<float>(), *tmp = tmp_.as<float>(),
          *up = up_.as<float>();
    const float scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim()));
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& w = layers_[l];
      const cuda::KvView cache = caches_[j][l]->view();
      check(cuda::layer_norm(x, h, rows, E, w.ln_1[0].as<float>(), w.ln_1[1].as<float>(), cfg_.eps, st),
            "launching the layer_norm kernel");
      b_.gemm({h, E}, w.qkv.b, qkv, 3 * E, rows, w.qkv.bias.as<float>(), false);
      check(cuda::kv_append(qkv, T, past, past_dev, cache, st), "launching the kv_append kernel");
      check(cuda::attention(qkv, att, T, past, past_dev, cache, scale, st), "launching the attention kernel");
      b_.gemm({att, E}, w.proj.b, tmp, E, rows, w.proj.bias.as<float>(), false);
      check(cuda::add_into(x, tmp, uint64_t{rows} * E, st), "launching the add_into kernel");
      check(cuda::layer_norm(x, h, rows, E, w.ln_2[0].as<float>(), w.ln_2[1].as<float>(), cfg_.eps, st),
            "launching the layer_norm kernel");
      b_.gemm({h, E}, w.fc.b, up, 4 * E, rows, w.fc.bias.as<float>(), true);
      b_.gemm({up, 4 * E}, w.down.b, tmp, E, rows, w.down.bias.as<float>(), false);
      check(cuda::add_into(x, tmp, uint64_t{rows} * E, st), "launching the add_into kernel");
    }
    if (!vocab_) {
      check(cudaMemcpyAsync(pin_out, x, uint64_t{rows} * E * 4, cudaMemcpyDeviceToHost, st),
            "copy of the residual stream from the GPU");
      return;
    }
    check(cuda::layer_norm(x, h, rows, E, ln_f_[0].as<float>(), ln_f_[1].as<float>(), cfg_.eps, st),
          "launching the layer_norm kernel");
    const float* in = h;
    uint32_t rows_out = rows;
    if (last_only) {  // each sequence's last token
      check(cudaMemcpy2DAsync(last_.as<float>(), uint64_t{E} * 4, h + uint64_t{T - 1} * E, uint64_t{T} * E * 4,
                              uint64_t{E} * 4, B, cudaMemcpyDeviceToDevice, st),
            "cudaMemcpy2DAsync (the last tokens)");
      in = last_.as<float>(), rows_out = B;
    }
    b_.gemm({in, E}, head_.b, logits_.as<float>(), V, rows_out, head_.bias.as<float>(), false);
    check(cudaMemcpyAsync(pin_out, logits_.as<float>(), uint64_t{rows_out} * V * 4, cudaMemcpyDeviceToHost, st),
          "copy of the logits from the GPU");
  }

  // Launches the microbatch's decode graph, where one was captured with the buffers of now.
  bool replay(const GraphKey& key) {
    const auto it = graphs_.find(key);
    if (it == graphs_.end() || it->second.generation != b_.generation_) return false;
    check(cudaGraphLaunch(it->second.exec.get(), b_.stream()), "cudaGraphLaunch");
    return true;
  }

  // Captures a decode step into a graph and launches it; where capture fails, says why (notes())
  // and runs the step eagerly, as every later one.
  void capture(const GraphKey& key, uint32_t T, uint32_t past, bool last_only, float* pin_out) {
    const uint64_t generation = b_.generation_;
    cudaStream_t st = b_.stream();
    std::string why;
    Captured c;
    if (const cudaError_t e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
      why = fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(e));
    } else {
      try {
        enqueue(key.first, T, past, last_only, pin_out);
      } catch (const std::exception& e) {
        why = e.what();
      }
      cudaGraph_t graph = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(st, &graph);
      c.graph.reset(graph);
      if (why.empty() && ended != cudaSuccess)
        why = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(ended));
      if (why.empty() && b_.generation_ != generation) why = "a buffer grew during the capture";
      if (why.empty()) {
        cudaGraphExec_t exec = nullptr;
        if (const cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0); ie != cudaSuccess)
          why = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(ie));
        c.exec.reset(exec);
      }
    }
    if (!why.empty()) {
      (void)cudaGetLastError();  // the capture's error is handled here
      graphs_off_ = why;
      enqueue(key.first, T, past, last_only, pin_out);
      return;
    }
    c.generation = generation;
    check(cudaGraphLaunch(c.exec.get(), st), "cudaGraphLaunch");
    graphs_[key] = std::move(c);
  }

  // What the step did, for the report, counted as the op-by-op path counts it (gemm(), attention()):
  // a replayed graph calls neither.
  void account(uint32_t B, uint32_t T, uint32_t past, uint64_t rows_out) {
    MatmulStats& s = b_.stats_;
    const uint64_t E = cfg_.width, rows = uint64_t{B} * T, ob = operand_bytes(b_.precision_);
    auto gemm = [&](uint64_t m, uint64_t n, uint64_t k) {
      ++s.gemms;
      s.macs += m * n * k;
      s.read_bytes += ob * (m * k + k * n);
      s.write_bytes += 4 * m * n;
    };
    const uint64_t positions = uint64_t{T} * past + uint64_t{T} * (T + 1) / 2;
    for (size_t l = 0; l < layers_.size(); ++l) {
      gemm(rows, 3 * E, E);
      s.macs += 2 * uint64_t{B} * cfg_.heads * cfg_.head_dim() * positions;  // the attention core
      s.read_bytes += b_.cache_read_bytes(B, cfg_.heads, cfg_.head_dim(), T, past);
      s.write_bytes += 4 * rows * E;
      gemm(rows, E, E);
      gemm(rows, 4 * E, E);
      gemm(rows, E, 4 * E);
    }
    if (vocab_) gemm(rows_out, cfg_.vocab, E);
  }

  CudaBackend& b_;
  const Gpt2Config cfg_;
  const bool embed_;
  const Linear* vocab_;
  std::vector<Layer> layers_;
  ResidentLinear head_;                  // the logits' weights (the last stage)
  std::array<DeviceBuffer, 2> ln_f_;
  DeviceBuffer wte_, wpe_;
  uint64_t rows_ = 0;
  uint32_t capacity_ = 0;
  std::vector<uint32_t> batch_of_;
  DeviceBuffer x_, h_, qkv_, att_, tmp_, up_, tokens_, last_, pasts_, logits_;
  PinnedBuffer pin_in_, pin_past_;
  std::vector<std::vector<std::unique_ptr<GpuKvCache>>> caches_;  // [microbatch][layer]
  std::map<GraphKey, Captured> graphs_;
  std::map<GraphKey, uint32_t> eager_decodes_;
  std::string graphs_off_;  // why decode runs without graphs, once a capture failed
};

std::unique_ptr<StageProgram> CudaBackend::make_stage(const Gpt2Model& model, uint32_t first, uint32_t last,
                                                      bool embed, const Linear* vocab) {
  return std::make_unique<CudaStage>(*this, model, first, last, embed, vocab);
}


// How many GPUs the CUDA runtime shows this process, or -1 with `why_not` set. With no GPU driver
// the count is an error ("CUDA driver version is insufficient"), not zero devices.
int gpu_count(std::string& why_not) {
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    why_not = fmt::format("no usable GPU: {}", cudaGetErrorString(e));
    return -1;
  }
  return count;
}

std::string uuid_hex(const cudaDeviceProp& p) {
  std::string hex;
  for (char b : p.uuid.bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(b));
  return hex;
}

}  // namespace

std::unique_ptr<MatmulBackend> make_cuda_backend(int index, GpuPrecision precision, std::string name,
                                                 std::string& why_not) {
  const int count = gpu_count(why_not);
  if (count < 0) return nullptr;
  if (index < 0 || index >= count) {
    why_not = fmt::format("no GPU {} (this machine has {})", index, count);
    return nullptr;
  }
  try {
    return std::make_unique<CudaBackend>(index, precision, std::move(name));
  } catch (const GpuError& e) {  // a GPU that is there but cannot be used (busy, out of memory)
    why_not = fmt::format("GPU {} cannot be used: {}", index, e.what());
    return nullptr;
  }
}

std::string gpu_uuid(int index) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) return {};
  return uuid_hex(p);
}

std::string gpu_name(int index) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) return {};
  return p.name;
}

std::vector<GpuInfo> list_gpus(std::string& why_not) {
  const int count = gpu_count(why_not);
  if (count < 0) return {};
  if (count == 0) {
    why_not = "no usable GPU: the CUDA runtime sees none (is CUDA_VISIBLE_DEVICES empty?)";
    return {};
  }
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (const cudaError_t e = cudaGetDeviceProperties(&p, i); e != cudaSuccess) {
      why_not = fmt::format("GPU {}: {}", i, cudaGetErrorString(e));
      return {};
    }
    gpus.push_back({i, p.name, p.totalGlobalMem, p.major, p.minor, uuid_hex(p)});
  }
  return gpus;
}

}  // namespace tessera

#else

namespace tessera {

namespace {
constexpr const char* kNoCuda = "this build has no CUDA backend (the CUDA toolkit was not found when it was configured)";
}

std::unique_ptr<MatmulBackend> make_cuda_backend(int, GpuPrecision, std::string, std::string& why_not) {
  why_not = kNoCuda;
  return nullptr;
}

std::string gpu_uuid(int) { return {}; }
std::string gpu_name(int) { return {}; }

std::vector<GpuInfo> list_gpus(std::string& why_not) {
  why_not = kNoCuda;
  return {};
}

}  // namespace tessera

#endif
