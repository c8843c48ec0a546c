// A group of processes, one GPU each, that move activations GPU to GPU with NCCL: the transport
// MpiComm gives a group whose members all run on real GPUs. The pipeline keeps activations in host
// memory between ops, so each transfer goes up to this GPU, through NCCL, and back.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace tessera {

class NcclGroup {
 public:
  // An id for a new group: made by one member, given to the others (over MPI) before they all
  // construct the group with it.
  static std::string unique_id();
  static constexpr int kIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
  // "NCCL 2.28.9", the library loaded at run time.
  static std::string version();

  // Every member constructs it at the same time: `rank` of `size`, on CUDA device `gpu` of this host.
  NcclGroup(const std::string& id, int rank, int size, int gpu);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // Element-wise sum over the group, left in every member.
  void allreduce_sum(std::span<float> data);
  // To and from the member `peer` (its rank in the group); transfers between two members arrive in
  // the order they were sent.
  void send(std::span<const float> data, int peer);
  void recv(std::span<float> data, int peer);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tessera
