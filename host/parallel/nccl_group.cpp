#include "nccl_group.hpp"

#include <nccl.h>

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/cuda_error.hpp"

namespace tessera {

static void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw GpuError(fmt::format("NCCL {}: {}", what, ncclGetErrorString(r)));
}

static_assert(NcclGroup::kIdBytes == sizeof(ncclUniqueId::internal));

struct NcclGroup::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int gpu = 0;
  float* buffer = nullptr;  // the staging area on the GPU
  size_t capacity = 0;      // in floats

  ~State() {
    cudaSetDevice(gpu);
    if (comm) {
      ncclCommFinalize(comm);  // flushes, with the other members, before the local free
      ncclCommDestroy(comm);
    }
    if (buffer) cudaFree(buffer);
    if (stream) cudaStreamDestroy(stream);
  }
  // The calling thread on this group's GPU, with room for `n` floats.
  float* staging(size_t n) {
    check(cudaSetDevice(gpu), "cudaSetDevice");
    if (n > capacity) {
      if (buffer) check(cudaFree(buffer), "cudaFree");
      buffer = nullptr;
      capacity = 0;
      check(cudaMalloc(&buffer, n * sizeof(float)), "cudaMalloc");
      capacity = n;
    }
    return buffer;
  }
  void finish() { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
};

std::string NcclGroup::unique_id() {
  ncclUniqueId id;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof id.internal);
}

std::string NcclGroup::version() {
  int v = 0;
  check(ncclGetVersion(&v), "ncclGetVersion");
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  return fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

NcclGroup::NcclGroup(const std::string& id, int rank, int size, int gpu) : s_(std::make_unique<State>()) {
  ncclUniqueId uid;
  if (id.size() != sizeof uid.internal) throw std::invalid_argument("an NCCL group id of the wrong size");
  std::copy(id.begin(), id.end(), uid.internal);
  s_->gpu = gpu;
  check(cudaSetDevice(gpu), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(ncclCommInitRank(&s_->comm, size, uid, rank), "ncclCommInitRank");
}

NcclGroup::~NcclGroup() = default;

void NcclGroup::allreduce_sum(std::span<float> data) {
  float* d = s_->staging(data.size());
  check(cudaMemcpyAsync(d, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, s_->stream), "cudaMemcpyAsync");
  check(ncclAllReduce(d, d, data.size(), ncclFloat32, ncclSum, s_->comm, s_->stream), "ncclAllReduce");
  check(cudaMemcpyAsync(data.data(), d, data.size_bytes(), cudaMemcpyDeviceToHost, s_->stream), "cudaMemcpyAsync");
  s_->finish();
}

void NcclGroup::send(std::span<const float> data, int peer) {
  float* d = s_->staging(data.size());
  check(cudaMemcpyAsync(d, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, s_->stream), "cudaMemcpyAsync");
  check(ncclSend(d, data.size(), ncclFloat32, peer, s_->comm, s_->stream), "ncclSend");
  s_->finish();
}

void NcclGroup::recv(std::span<float> data, int peer) {
  float* d = s_->staging(data.size());
  check(ncclRecv(d, data.size(), ncclFloat32, peer, s_->comm, s_->stream), "ncclRecv");
  check(cudaMemcpyAsync(data.data(), d, data.size_bytes(), cudaMemcpyDeviceToHost, s_->stream), "cudaMemcpyAsync");
  s_->finish();
}

}  // namespace tessera
