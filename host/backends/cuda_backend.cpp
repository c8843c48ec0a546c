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
#include <deque>
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

// A left operand A[m, k] on the device: element (i, kk) at p[i * ld + kk]; or, where `packed` is
// set, A already packed for the backend's precision in its kPackA (and kScaleA) scratch.
struct LeftView {
  const float* p;
  uint64_t ld;
  bool packed = false;
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
        k_scale_(p == GpuPrecision::kInt8 ? positions() * 4 : 0), v_scale_(p == GpuPrecision::kInt8 ? positions() * 4 : 0),
        split_(cuda::split_scratch_bytes(batch, heads, head_dim, capacity)) {}
  // What one takes: the values in the precision, int8's scales, and a long cache's scratch for
  // decode split over its positions.
  static uint64_t bytes_for(GpuPrecision p, uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) {
    const uint64_t positions = uint64_t{batch} * heads * capacity;
    return 2 * (positions * head_dim * operand_bytes(p) + (p == GpuPrecision::kInt8 ? positions * 4 : 0)) +
           cuda::split_scratch_bytes(batch, heads, head_dim, capacity);
  }
  uint64_t bytes() const override { return bytes_for(precision_, batch, heads, head_dim, capacity); }
  cuda::KvView view() const {
    return {kv_kind(precision_), k_.as<void>(), v_.as<void>(), k_scale_.as<float>(), v_scale_.as<float>(), batch,
            heads, head_dim, capacity, cuda::split_scratch_at(split_.as<void>(), batch, heads, head_dim, capacity)};
  }

 private:
  uint64_t positions() const { return uint64_t{batch} * heads * capacity; }
  uint64_t values() const { return positions() * head_dim; }
  GpuPrecision precision_;
  DeviceBuffer k_, v_, k_scale_, v_scale_, split_;
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
  static constexpr double kIdleSeconds = 0.5;  // long enough for the energy counter to move by many steps
  static constexpr uint32_t kMaxHeadDim = 256;  // the attention kernel's threads per block
  static constexpr size_t kUploadChunkBytes = size_t{8} << 20;
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
  // From pageable memory (weights), through two pinned chunks in turn: one is filled while the other
  // goes up. When it returns, src may go (the last chunk is in pinned memory).
  void copy_up(float* dst, const float* src, uint64_t count) {
    constexpr uint64_t kChunk = kUploadChunkBytes / 4;
    for (uint64_t done = 0; done < count; done += kChunk) {
      UploadChunk& c = upload_chunks_[done / kChunk % 2];
      if (c.buffer.bytes() == 0) {
        c.buffer = PinnedBuffer(kUploadChunkBytes);
        c.sent = make<Event>([](cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); },
                             "cudaEventCreateWithFlags");
      }
      check(cudaEventSynchronize(c.sent.get()), "cudaEventSynchronize (an upload chunk free again)");
      const uint64_t n = std::min(kChunk, count - done);
      std::memcpy(c.buffer.as<float>(), src + done, n * 4);
      check(cudaMemcpyAsync(dst + done, c.buffer.as<float>(), n * 4, cudaMemcpyHostToDevice, stream()),
            "copy to the GPU");
      check(cudaEventRecord(c.sent.get(), stream()), "cudaEventRecord");
    }
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
      if (!a.packed)
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
      if (!a.packed)
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

  // c = LayerNorm(x[m, k]) B, plus bias, then GELU when gelu. For bf16 and int8 the LayerNorm packs
  // A itself (layer_norm_pack: the per-token quantization fused in, no h written); fp32 normalizes
  // into h first.
  void norm_gemm(const float* x, float* h, uint32_t m, const std::array<DeviceBuffer, 2>& ln, float eps,
                 const RightOperand& b, float* c, uint64_t ldc, const float* bias, bool gelu) {
    const uint32_t k = b.k;
    if (precision_ == GpuPrecision::kFp32 || m == 0 || k == 0) {
      check(cuda::layer_norm(x, h, m, k, ln[0].as<float>(), ln[1].as<float>(), eps, stream()),
            "launching the layer_norm kernel");
      return gemm({h, k}, b, c, ldc, m, bias, gelu);
    }
    const bool int8 = precision_ == GpuPrecision::kInt8;
    const uint32_t kp = pad16(k, "k"), rows = int8 ? pad16(m, "m") : m;
    void* pa = int8 ? static_cast<void*>(buffer<int8_t>(kPackA, uint64_t{rows} * kp))
                    : static_cast<void*>(buffer<uint16_t>(kPackA, uint64_t{rows} * kp));
    float* sa = int8 ? buffer<float>(kScaleA, rows) : nullptr;
    check(cuda::layer_norm_pack(x, m, k, ln[0].as<float>(), ln[1].as<float>(), eps, int8, rows, pa, kp, sa, stream()),
          "launching the layer_norm_pack kernel");
    gemm({nullptr, k, true}, b, c, ldc, m, bias, gelu);
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
  struct UploadChunk {
    PinnedBuffer buffer;
    Event sent;  // recorded after its last copy up
  };
  std::array<UploadChunk, 2> upload_chunks_;
  std::map<const Linear*, ResidentLinear> weights_;
  std::map<const LayerNormWeights*, std::array<DeviceBuffer, 2>> norms_;
  MatmulStats stats_;
  std::vector<Phase> phases_;
  std::unique_ptr<NvmlPower> power_;
  std::optional<double> idle_watts_;
  uint64_t generation_ = 0;  // bumped when a scratch or staging buffer is reallocated

  friend class CudaStage;

 public:
  std::unique_ptr<StageProgram> make_stage(const StageSpec& spec) override;
};

using Graph = Owned<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;

// A stage on its GPUs from its input to its output (StageProgram): one part per shard, each on its
// backend's GPU and stream, all driven from the calling thread. The weights are each part's own,
// uploaded when it is made; activations, workspaces and the backends' GEMM scratch are allocated at
// start() for the largest step (a prefill of every position), the KV caches there too, in the ops'
// precision. A step is one upload (token ids or the residual stream, and the position), every
// kernel and GEMM of its layers, and one download; where the stage before feeds it (feed()), the
// residual stream arrives on the first part's GPU instead, and where it feeds the next, it leaves
// for that one's GPU.
//
// Sharded over several parts, every part keeps the whole residual stream and normalizes it itself;
// a row-parallel projection's partial sums go to the first part (peer copies, ordered by events),
// which adds them in shard order and then the bias (the sums the pipeline makes op by op, for any
// number of shards: NCCL's ring would pick its own order), and the result goes back to the others.
//
// Decode steps replay a CUDA graph per microbatch, captured at a microbatch's second decode step
// (the first, run eagerly, sizes every scratch buffer and picks cuBLASLt's algorithms); the kernels
// read the position from device memory, so one graph serves every step. A capture that fails is
// said in notes(), and decode then runs eagerly.
class CudaStage final : public StageProgram {
 public:
  CudaStage(const StageSpec& spec, const std::vector<CudaBackend*>& backends)
      : cfg_(spec.model->cfg), embed_(spec.embed), logits_(spec.parts.front().vocab != nullptr),
        sharded_(spec.parts.size() > 1) {
    const uint32_t E = cfg_.width, D = cfg_.head_dim();
    if (D > CudaBackend::kMaxHeadDim || cfg_.positions > cuda::kMaxAttentionPositions)
      throw std::invalid_argument(fmt::format("{}: the attention kernel takes up to {} positions and heads of up to {} "
                                              "values, not {} and {}", backends[0]->name_, cuda::kMaxAttentionPositions,
                                              CudaBackend::kMaxHeadDim, cfg_.positions, D));
    for (size_t i = 0; i < spec.parts.size(); ++i) {
      const StageSpec::Part& sp = spec.parts[i];
      Part& p = parts_.emplace_back(*backends[i]);
      p.heads = sp.heads;
      p.mlp = sp.layers.empty() ? 0 : sp.layers.front().mlp_up->out;
      p.vocab_begin = sp.vocab_begin;
      p.vocab = sp.vocab ? sp.vocab->out : 0;
      // What it will hold, checked before anything is uploaded.
      const uint64_t ob = operand_bytes(p.b.precision_);
      uint64_t bytes = 0, largest = 0;
      auto linear = [&](const Linear& l) {
        bytes += l.w.size() * ob + l.b.size() * 4;
        largest = std::max<uint64_t>(largest, l.w.size());
      };
      for (const StageSpec::Weights& w : sp.layers) {
        for (const Linear* l : {w.qkv, w.attn_proj, w.mlp_up, w.mlp_down}) linear(*l);
        bytes += 4 * uint64_t{E} * 4 + (i == 0 && sharded_ ? 2 * uint64_t{E} * 4 : 0);
      }
      if (sp.vocab) linear(*sp.vocab), bytes += 2 * uint64_t{E} * 4;
      if (i == 0 && embed_) bytes += uint64_t{cfg_.vocab + cfg_.positions} * E * 4;
      if (p.b.precision_ != GpuPrecision::kFp32) bytes += largest * 4;  // the fp32 copy of one, while it is packed
      check_fits(p, bytes, fmt::format("the weights of layers {}-{}{}", spec.first, spec.last,
                                       sp.vocab ? " and the logits" : ""));
      guarded(p, [&] {
        for (uint32_t l = spec.first; l <= spec.last; ++l) {
          const Gpt2Block& blk = spec.model->blocks.at(l);
          const StageSpec::Weights& w = sp.layers.at(l - spec.first);
          Layer& layer = p.layers.emplace_back(Layer{p.b.upload(*w.qkv), p.b.upload(*w.attn_proj), p.b.upload(*w.mlp_up),
                                                     p.b.upload(*w.mlp_down), p.b.upload(blk.ln_1, E),
                                                     p.b.upload(blk.ln_2, E), {}, {}});
          if (i == 0 && sharded_) {  // the biases, added once the partial sums are
            layer.proj_bias = upload(p, blk.attn_proj.b);
            layer.down_bias = upload(p, blk.mlp_proj.b);
          }
        }
        if (sp.vocab) {
          p.head = p.b.upload(*sp.vocab);
          p.ln_f = p.b.upload(spec.model->ln_f, E);
        }
        if (i == 0 && embed_) {
          wte_ = upload(p, spec.model->wte);
          wpe_ = upload(p, spec.model->wpe);
        }
        check(cudaStreamSynchronize(p.b.stream()), "cudaStreamSynchronize (weights uploaded)");
      });
      p.done = make<Event>([](cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); },
                           "cudaEventCreateWithFlags");
      p.b.take_phases();  // the uploads are no step's
      if (i > 0) peer_access(parts_[0].b.index_, p.b.index_);
    }
  }

  void start(const std::vector<uint32_t>& batch_of, uint32_t capacity) override {
    end();  // what the last start() took is free again before anything is counted
    const uint64_t E = cfg_.width, D = cfg_.head_dim(), P = parts_.size();
    const uint32_t most = *std::max_element(batch_of.begin(), batch_of.end());
    const uint64_t rows = uint64_t{most} * capacity;
    const uint32_t sequences = std::accumulate(batch_of.begin(), batch_of.end(), 0u);
    std::map<int, std::pair<const Part*, uint64_t>> on_gpu;  // what the parts on each GPU take together
    for (size_t i = 0; i < P; ++i) {
      const Part& p = parts_[i];
      uint64_t bytes = rows * (3 * E + 4 * p.heads * D + p.mlp) * 4 + uint64_t{most} * E * 4 +
                       scratch_bytes(p, rows, most);
      for (uint32_t n : batch_of) bytes += p.layers.size() * GpuKvCache::bytes_for(p.b.precision_, n, p.heads, D, capacity);
      if (i == 0) bytes += rows * 4 + (P - 1) * rows * E * 4 + (fed_ ? uint64_t{sequences} * capacity * E * 4 : 0);
      auto& [first, total] = on_gpu.try_emplace(p.b.index_, &p, 0).first->second;
      total += bytes;
    }
    for (const auto& [gpu, need] : on_gpu)
      check_fits(*need.first, need.second,
                 fmt::format("the KV caches and workspaces for {} sequences of {} positions", sequences, capacity));
    for (size_t i = 0; i < P; ++i) {
      Part& p = parts_[i];
      guarded(p, [&] {
        p.x = DeviceBuffer(rows * E * 4);
        p.h = DeviceBuffer(rows * E * 4);
        p.tmp = DeviceBuffer(rows * E * 4);
        p.qkv = DeviceBuffer(rows * 3 * p.heads * D * 4);
        p.att = DeviceBuffer(rows * p.heads * D * 4);
        p.up = DeviceBuffer(rows * p.mlp * 4);
        p.last = DeviceBuffer(uint64_t{most} * E * 4);
        p.pasts = DeviceBuffer(batch_of.size() * 4);
        reserve_scratch(p, rows, most);
        p.caches.resize(batch_of.size());
        for (size_t j = 0; j < batch_of.size(); ++j)
          for (size_t l = 0; l < p.layers.size(); ++l)
            p.caches[j].push_back(std::make_unique<GpuKvCache>(p.b.precision_, batch_of[j], p.heads, D, capacity));
        if (i > 0) return;
        tokens_ = DeviceBuffer(rows * 4);
        gather_ = DeviceBuffer((P - 1) * rows * E * 4);
        for (size_t j = 0; j < batch_of.size() && fed_; ++j)
          inbox_.push_back(DeviceBuffer(uint64_t{batch_of[j]} * capacity * E * 4));
      });
    }
    pin_in_ = PinnedBuffer(rows * E * 4);
    pin_past_ = PinnedBuffer(batch_of.size() * 4);
    batch_of_ = batch_of;
    capacity_ = capacity;
  }

  void end() override {
    graphs_.clear();
    eager_decodes_.clear();
    batch_of_.clear();
    for (Part& p : parts_) {
      p.caches.clear();
      for (DeviceBuffer* d : {&p.x, &p.h, &p.qkv, &p.att, &p.tmp, &p.up, &p.last, &p.pasts, &p.logits}) *d = DeviceBuffer();
    }
    tokens_ = DeviceBuffer();
    gather_ = DeviceBuffer();
    inbox_.clear();
    pin_in_ = PinnedBuffer();
    pin_past_ = PinnedBuffer();
  }

  uint64_t kv_cache_bytes() const override {
    uint64_t bytes = 0;
    for (const Part& p : parts_)
      for (const auto& per_layer : p.caches)
        for (const auto& c : per_layer) bytes += c->bytes();
    return bytes;
  }

  std::vector<std::string> notes() const override {
    std::vector<std::string> out = notes_;
    if (!graphs_off_.empty()) out.push_back(fmt::format("decode ran without CUDA graphs: {}", graphs_off_));
    return out;
  }

  bool feed(StageProgram& next) override {
    auto* to = dynamic_cast<CudaStage*>(&next);
    if (!to || logits_ || to->embed_ || to->fed_ || next_) return false;
    peer_access(parts_[0].b.index_, to->parts_[0].b.index_);
    next_ = to;
    to->fed_ = true;
    return true;
  }

  void step(uint32_t j, const int32_t* tokens, const float* x, uint32_t T, uint32_t past, bool last_only,
            float* out) override {
    if (j >= batch_of_.size()) throw std::logic_error("CudaStage::step before start");
    if (past + T > capacity_)
      throw std::invalid_argument(fmt::format("{} tokens after {} do not fit the {} positions started", T, past,
                                              capacity_));
    const uint32_t B = batch_of_[j];
    const uint64_t E = cfg_.width, V = cfg_.vocab, rows = uint64_t{B} * T, rows_out = logits_ && last_only ? B : rows;
    const uint64_t out_count = next_ ? 0 : rows_out * (logits_ ? V : E);
    std::vector<MatmulStats> before;  // counted by account(), graph or not
    for (const Part& p : parts_) before.push_back(p.b.stats_);
    CudaBackend& b0 = parts_[0].b;
    all_guarded([&] {
      // Room for the result first (outside any capture: growing waits for the stream); all the
      // logits of a prefill may need more than start() made room for.
      for (Part& p : parts_)
        if (logits_ && rows_out * p.vocab * 4 > p.logits.bytes()) {
          check_fits(p, rows_out * p.vocab * 4 - p.logits.bytes() + scratch_bytes(p, rows, rows_out),
                     fmt::format("the logits of {} tokens", rows_out));
          guarded(p, [&] {
            p.b.ensure(p.logits, rows_out * p.vocab * 4);
            reserve_scratch(p, rows, rows_out);
          });
        }
      check(cudaSetDevice(b0.index_), "cudaSetDevice");
      float* pin_out = b0.staging<float>(CudaBackend::kStageOut, std::max<uint64_t>(out_count, 1));
      const auto start = Clock::now();
      pin_past_.as<uint32_t>()[j] = past;
      if (embed_)
        std::memcpy(pin_in_.as<int32_t>(), tokens, rows * 4);
      else if (!fed_)
        std::memcpy(pin_in_.as<float>(), x, rows * E * 4);
      const auto staged = Clock::now();
      const bool decode = T == 1;
      const GraphKey key{j, last_only};
      mark(parts_[0], CudaBackend::kUpStart);
      if (decode && replay(key)) {
      } else if (decode && graphs_off_.empty() && eager_decodes_[key] >= 1) {
        capture(key, T, past, last_only, pin_out);
      } else {
        enqueue(j, T, past, last_only, pin_out);
        if (decode) ++eager_decodes_[key];
      }
      // Every part's work is joined into the first part's stream (enqueue's end): its events time
      // the step of every part, and its wait is for all of them.
      mark(parts_[0], CudaBackend::kComputeEnd);
      check(cudaStreamSynchronize(b0.stream()), "cudaStreamSynchronize (end of a stage step: a kernel or copy failed)");
      const auto synced = Clock::now();
      if (out_count) std::memcpy(out, pin_out, out_count * 4);
      const auto done = Clock::now();
      const double up = seconds_between(start, staged), work = b0.elapsed(CudaBackend::kUpStart, CudaBackend::kComputeEnd);
      for (size_t i = 0; i < parts_.size(); ++i) {
        CudaBackend& b = parts_[i].b;
        if (i == 0) b.phases_.push_back({"dma", "stage input", start, up});
        b.phases_.push_back({"compute", i == 0 ? "stage (upload, layers, download)" : "stage (its shard's layers)",
                             start + to_duration(up), work});
        if (i == 0) b.phases_.push_back({"dma", "stage output", start + to_duration(up + work), seconds_between(synced, done)});
        b.stats_ = before[i];
      }
      account(B, T, past, rows_out);
    });
  }

 private:
  struct Layer {
    ResidentLinear qkv, proj, fc, down;
    std::array<DeviceBuffer, 2> ln_1, ln_2;
    DeviceBuffer proj_bias, down_bias;  // the first part of a sharded stage: the model's biases
  };
  // One shard of the stage on its backend's GPU.
  struct Part {
    explicit Part(CudaBackend& backend) : b(backend) {}
    CudaBackend& b;
    uint32_t heads = 0, mlp = 0, vocab_begin = 0, vocab = 0;
    std::vector<Layer> layers;
    ResidentLinear head;  // its rows of the logits' weights (the last stage)
    std::array<DeviceBuffer, 2> ln_f;
    DeviceBuffer x, h, qkv, att, tmp, up, last, pasts, logits;
    std::vector<std::vector<std::unique_ptr<GpuKvCache>>> caches;  // [microbatch][layer]
    Event done;  // recorded on its stream where another part's stream waits for it
  };
  using GraphKey = std::pair<uint32_t, bool>;  // microbatch, last_only
  struct Captured {
    Graph graph;
    GraphExec exec;
    uint64_t generation = 0;  // of the backends' buffers it was captured with
  };

  // Bumped whenever any part's backend reallocates a buffer a graph may have captured.
  uint64_t generation() const {
    uint64_t g = 0;
    for (const Part& p : parts_) g += p.b.generation_;
    return g;
  }

  template <class Fn>
  static void guarded(Part& p, Fn&& fn) {
    p.b.guarded(std::forward<Fn>(fn));
  }
  // Runs fn; should it throw, every part's stream is waited for before the error goes on.
  template <class Fn>
  void all_guarded(Fn&& fn) {
    try {
      fn();
    } catch (...) {
      for (Part& p : parts_) {
        cudaSetDevice(p.b.index_);
        cudaStreamSynchronize(p.b.stream());
      }
      throw;
    }
  }
  static cudaStream_t on(Part& p) {
    check(cudaSetDevice(p.b.index_), "cudaSetDevice");
    return p.b.stream();
  }
  static void mark(Part& p, CudaBackend::Mark m) {
    on(p);
    p.b.mark(m);
  }

  DeviceBuffer upload(Part& p, const std::vector<float>& v) {
    DeviceBuffer d(v.size() * 4);
    p.b.copy_up(d.as<float>(), v.data(), v.size());
    return d;
  }

  // Lets GPU `from` read and write GPU `to`'s memory directly where the two can; where they cannot,
  // the copies between them still work, through host memory, and notes() says so.
  void peer_access(int from, int to) {
    if (from == to) return;
    for (auto [a, b] : {std::pair{from, to}, std::pair{to, from}}) {
      int can = 0;
      check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      if (!can) {
        notes_.push_back(fmt::format("GPU {} cannot reach GPU {} directly: the copies between them go through host "
                                     "memory", a, b));
        continue;
      }
      check(cudaSetDevice(a), "cudaSetDevice");
      if (const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0); e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        check(e, "cudaDeviceEnablePeerAccess");
    }
  }

  void check_fits(const Part& p, uint64_t bytes, const std::string& what) const {
    const uint64_t free = *p.b.memory_free();
    const auto mib = [](uint64_t v) { return double(v) / (1 << 20); };
    if (bytes > free)
      throw std::invalid_argument(fmt::format("{} need {:.1f} MiB on {}, which has {:.1f} MiB free ({:.1f} MiB short)",
                                              what, mib(bytes), p.b.name_, mib(free), mib(bytes - free)));
  }

  // A part's GEMM scratch on its backend's GPU for products over `rows` rows, and the logits' over
  // `rows_out`: packed left operands (bf16, int8), int8's row scales and int32 accumulators.
  uint64_t scratch_bytes(const Part& p, uint64_t rows, uint64_t rows_out) const {
    const uint64_t E = cfg_.width, m = std::max(rows, rows_out) + 16;
    const uint64_t n = std::max<uint64_t>({3 * uint64_t{p.heads} * cfg_.head_dim(), p.mlp, E, p.vocab}) + 16;
    const uint64_t k = std::max<uint64_t>({E, p.mlp, uint64_t{p.heads} * cfg_.head_dim()}) + 16;
    const uint64_t packs = p.b.precision_ == GpuPrecision::kFp32 ? 0
                           : p.b.precision_ == GpuPrecision::kBf16 ? m * k * 2
                                                                   : m * k + m * 4 + m * n * 4;
    return packs;
  }
  void reserve_scratch(Part& p, uint64_t rows, uint64_t rows_out) {
    const uint64_t E = cfg_.width, m = std::max(rows, rows_out), mp = (m + 15) / 16 * 16;
    const uint64_t k = std::max<uint64_t>({E, p.mlp, uint64_t{p.heads} * cfg_.head_dim()}), kp = (k + 15) / 16 * 16;
    const uint64_t n = std::max<uint64_t>({3 * uint64_t{p.heads} * cfg_.head_dim(), p.mlp, E, p.vocab});
    const uint64_t np = (n + 15) / 16 * 16;
    if (p.b.precision_ == GpuPrecision::kBf16) p.b.buffer<uint16_t>(CudaBackend::kPackA, m * kp);
    if (p.b.precision_ == GpuPrecision::kInt8) {
      p.b.buffer<int8_t>(CudaBackend::kPackA, mp * kp);
      p.b.buffer<float>(CudaBackend::kScaleA, mp);
      p.b.buffer<int32_t>(CudaBackend::kAcc, mp * np);
    }
    if (&p == &parts_[0]) p.b.staging<float>(CudaBackend::kStageOut, std::max(rows * E, rows_out * cfg_.vocab));
  }

  // Stream `to` waits for the work queued so far on part `from`'s stream.
  static void wait_for(Part& from, Part& to) {
    check(cudaEventRecord(from.done.get(), on(from)), "cudaEventRecord");
    check(cudaStreamWaitEvent(on(to), from.done.get(), 0), "cudaStreamWaitEvent");
  }
  // A copy between two GPUs' memory (or within one), as unified addressing tells them apart: unlike
  // cudaMemcpyPeerAsync, a CUDA graph can capture it.
  static void copy_between(float* dst, const float* src, uint64_t count, cudaStream_t st, const char* what) {
    check(cudaMemcpyAsync(dst, src, count * 4, cudaMemcpyDefault, st), what);
  }
  // The first part's residual stream (count values) to every other part.
  void broadcast(uint64_t count) {
    Part& p0 = parts_[0];
    for (size_t i = 1; i < parts_.size(); ++i) {
      wait_for(p0, parts_[i]);
      copy_between(parts_[i].x.as<float>(), p0.x.as<float>(), count, on(parts_[i]),
                   "copy of the residual stream to another shard's GPU");
    }
  }
  // Every part's x += its projection's output (tmp): one part adds it itself (the bias is in it);
  // several add their partial sums in shard order on the first part, then `bias`, and (where `share`)
  // copy x back to the others.
  void add_projection(uint64_t count, const DeviceBuffer& bias, bool share = true) {
    Part& p0 = parts_[0];
    if (!sharded_) {
      check(cuda::add_into(p0.x.as<float>(), p0.tmp.as<float>(), count, on(p0)), "launching the add_into kernel");
      return;
    }
    for (size_t i = 1; i < parts_.size(); ++i) {
      wait_for(parts_[i], p0);
      copy_between(gather_.as<float>() + (i - 1) * count, parts_[i].tmp.as<float>(), count, on(p0),
                   "copy of a partial sum to the first shard's GPU");
    }
    check(cuda::add_partials(p0.x.as<float>(), p0.tmp.as<float>(), gather_.as<float>(),
                             static_cast<uint32_t>(parts_.size() - 1), count, bias.as<float>(), cfg_.width, on(p0)),
          "launching the add_partials kernel");
    if (share) broadcast(count);
  }

  // Every copy and launch of a step on the parts' streams (also what a capture records), joined
  // into the first part's stream at the end.
  void enqueue(uint32_t j, uint32_t T, uint32_t past, bool last_only, float* pin_out) {
    const uint32_t B = batch_of_[j], E = cfg_.width, V = cfg_.vocab, D = cfg_.head_dim();
    const uint32_t rows = B * T;
    const uint64_t count = uint64_t{rows} * E;
    Part& p0 = parts_[0];
    for (size_t i = 1; i < parts_.size(); ++i) wait_for(p0, parts_[i]);  // the others start after the first
    for (Part& p : parts_)
      check(cudaMemcpyAsync(p.pasts.as<uint32_t>() + j, pin_past_.as<uint32_t>() + j, 4, cudaMemcpyHostToDevice, on(p)),
            "copy of the position to the GPU");
    cudaStream_t st = on(p0);
    if (embed_) {
      check(cudaMemcpyAsync(tokens_.as<int32_t>(), pin_in_.as<int32_t>(), uint64_t{rows} * 4, cudaMemcpyHostToDevice, st),
            "copy of the token ids to the GPU");
      check(cuda::embed(tokens_.as<int32_t>(), wte_.as<float>(), wpe_.as<float>(), past, p0.pasts.as<uint32_t>() + j,
                        rows, T, E, p0.x.as<float>(), st),
            "launching the embed kernel");
    } else if (fed_) {
      check(cudaMemcpyAsync(p0.x.as<float>(), inbox_.at(j).as<float>(), count * 4, cudaMemcpyDeviceToDevice, st),
            "copy of the residual stream the stage before left");
    } else {
      check(cudaMemcpyAsync(p0.x.as<float>(), pin_in_.as<float>(), count * 4, cudaMemcpyHostToDevice, st),
            "copy of the residual stream to the GPU");
    }
    broadcast(count);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (size_t l = 0; l < p0.layers.size(); ++l) {
      for (Part& p : parts_) {
        const Layer& w = p.layers[l];
        const uint32_t* past_dev = p.pasts.as<uint32_t>() + j;
        const cuda::KvView cache = p.caches[j][l]->view();
        float *x = p.x.as<float>(), *h = p.h.as<float>(), *qkv = p.qkv.as<float>(), *att = p.att.as<float>();
        const uint32_t HD = p.heads * D;
        cudaStream_t ps = on(p);
        p.b.norm_gemm(x, h, rows, w.ln_1, cfg_.eps, w.qkv.b, qkv, 3 * HD, w.qkv.bias.as<float>(), false);
        check(cuda::kv_append(qkv, T, past, past_dev, cache, ps), "launching the kv_append kernel");
        check(cuda::attention(qkv, att, T, past, past_dev, cache, scale, ps), "launching the attention kernel");
        p.b.gemm({att, HD}, w.proj.b, p.tmp.as<float>(), E, rows, w.proj.bias.as<float>(), false);
      }
      add_projection(count, p0.layers[l].proj_bias);
      for (Part& p : parts_) {
        const Layer& w = p.layers[l];
        float *x = p.x.as<float>(), *h = p.h.as<float>(), *up = p.up.as<float>();
        on(p);
        p.b.norm_gemm(x, h, rows, w.ln_2, cfg_.eps, w.fc.b, up, p.mlp, w.fc.bias.as<float>(), true);
        p.b.gemm({up, p.mlp}, w.down.b, p.tmp.as<float>(), E, rows, w.down.bias.as<float>(), false);
      }
      // After the last layer only the logits read the other parts' x.
      add_projection(count, p0.layers[l].down_bias, logits_ || l + 1 < p0.layers.size());
    }
    if (logits_) {
      const uint32_t rows_out = last_only ? B : rows;
      for (Part& p : parts_) {
        cudaStream_t ps = on(p);
        float *x = p.x.as<float>(), *h = p.h.as<float>();
        check(cuda::layer_norm(x, h, rows, E, p.ln_f[0].as<float>(), p.ln_f[1].as<float>(), cfg_.eps, ps),
              "launching the layer_norm kernel");
        const float* in = h;
        if (last_only) {  // each sequence's last token
          check(cudaMemcpy2DAsync(p.last.as<float>(), uint64_t{E} * 4, h + uint64_t{T - 1} * E, uint64_t{T} * E * 4,
                                  uint64_t{E} * 4, B, cudaMemcpyDeviceToDevice, ps),
                "cudaMemcpy2DAsync (the last tokens)");
          in = p.last.as<float>();
        }
        if (p.vocab == 0) continue;
        p.b.gemm({in, E}, p.head.b, p.logits.as<float>(), p.vocab, rows_out, p.head.bias.as<float>(), false);
        check(cudaMemcpy2DAsync(pin_out + p.vocab_begin, uint64_t{V} * 4, p.logits.as<float>(), uint64_t{p.vocab} * 4,
                                uint64_t{p.vocab} * 4, rows_out, cudaMemcpyDeviceToHost, ps),
              "copy of the logits from the GPU");
      }
    } else if (next_) {
      copy_between(next_->inbox_.at(j).as<float>(), p0.x.as<float>(), count, on(p0),
                   "copy of the residual stream to the next stage's GPU");
    } else {
      check(cudaMemcpyAsync(pin_out, p0.x.as<float>(), count * 4, cudaMemcpyDeviceToHost, on(p0)),
            "copy of the residual stream from the GPU");
    }
    for (size_t i = 1; i < parts_.size(); ++i) wait_for(parts_[i], p0);  // joined
  }

  // Launches the microbatch's decode graph, where one was captured with the buffers of now.
  bool replay(const GraphKey& key) {
    const auto it = graphs_.find(key);
    if (it == graphs_.end() || it->second.generation != generation()) return false;
    check(cudaGraphLaunch(it->second.exec.get(), on(parts_[0])), "cudaGraphLaunch");
    return true;
  }

  // Captures a decode step into a graph (from the first part's stream, the others joining it
  // through the events) and launches it; where capture fails, says why (notes()) and runs the step
  // eagerly, as every later one.
  void capture(const GraphKey& key, uint32_t T, uint32_t past, bool last_only, float* pin_out) {
    const uint64_t generation_then = generation();
    cudaStream_t st = on(parts_[0]);
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
      on(parts_[0]);
      const cudaError_t ended = cudaStreamEndCapture(st, &graph);
      c.graph.reset(graph);
      if (why.empty() && ended != cudaSuccess)
        why = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(ended));
      if (why.empty() && generation() != generation_then) why = "a buffer grew during the capture";
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
    c.generation = generation_then;
    check(cudaGraphLaunch(c.exec.get(), on(parts_[0])), "cudaGraphLaunch");
    graphs_[key] = std::move(c);
  }

  // What the step did, for the report, each part on its backend, counted as the op-by-op path
  // counts it (gemm(), attention()): a replayed graph calls neither.
  void account(uint32_t B, uint32_t T, uint32_t past, uint64_t rows_out) {
    const uint64_t E = cfg_.width, D = cfg_.head_dim(), rows = uint64_t{B} * T;
    const uint64_t positions = uint64_t{T} * past + uint64_t{T} * (T + 1) / 2;
    for (Part& p : parts_) {
      MatmulStats& s = p.b.stats_;
      const uint64_t ob = operand_bytes(p.b.precision_), HD = uint64_t{p.heads} * D;
      auto gemm = [&](uint64_t m, uint64_t n, uint64_t k) {
        ++s.gemms;
        s.macs += m * n * k;
        s.read_bytes += ob * (m * k + k * n);
        s.write_bytes += 4 * m * n;
      };
      for (size_t l = 0; l < p.layers.size(); ++l) {
        gemm(rows, 3 * HD, E);
        s.macs += 2 * uint64_t{B} * p.heads * D * positions;  // the attention core
        s.read_bytes += p.b.cache_read_bytes(B, p.heads, D, T, past);
        s.write_bytes += 4 * rows * HD;
        gemm(rows, E, HD);
        gemm(rows, p.mlp, E);
        gemm(rows, E, p.mlp);
      }
      if (logits_ && p.vocab) gemm(rows_out, p.vocab, E);
    }
  }

  const Gpt2Config cfg_;
  const bool embed_;
  const bool logits_;   // the last stage: the final LayerNorm and the logits
  const bool sharded_;  // over several parts
  std::deque<Part> parts_;  // in shard order (a deque: a Part does not move)
  DeviceBuffer wte_, wpe_, tokens_;  // the first part's: the embedding
  DeviceBuffer gather_;              // the first part's: the other parts' partial sums
  std::vector<DeviceBuffer> inbox_;  // [microbatch], the first part's: where the stage before leaves x (fed_)
  bool fed_ = false;
  CudaStage* next_ = nullptr;  // the stage this one feeds
  uint32_t capacity_ = 0;
  std::vector<uint32_t> batch_of_;
  PinnedBuffer pin_in_, pin_past_;
  std::map<GraphKey, Captured> graphs_;
  std::map<GraphKey, uint32_t> eager_decodes_;
  std::string graphs_off_;  // why decode runs without graphs, once a capture failed
  std::vector<std::string> notes_;
};

std::unique_ptr<StageProgram> CudaBackend::make_stage(const StageSpec& spec) {
  std::vector<CudaBackend*> backends;
  for (const StageSpec::Part& p : spec.parts) {
    auto* b = dynamic_cast<CudaBackend*>(p.backend);
    if (!b) return nullptr;  // a part on another kind of device: the stage runs op by op
    backends.push_back(b);
  }
  if (backends.empty()) return nullptr;
  return std::make_unique<CudaStage>(spec, backends);
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
