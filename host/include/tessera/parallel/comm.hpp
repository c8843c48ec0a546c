// The processes of a multi-process run and the traffic between them. The pipeline moves
// activations between stages on different ranks with send/recv and sums the tensor-parallel
// partial results (and the logits) of a stage's ranks with allreduce_sum; MPI provides them
// (make_mpi_comm), and NCCL between ranks that each run on one GPU, where the build has it.
// A single-process run has no Comm at all.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// What a rank spent on communication.
struct CommStats {
  uint64_t bytes_sent = 0, bytes_received = 0, messages = 0;
  uint64_t gpu_bytes_sent = 0;  // of bytes_sent, what went GPU to GPU (NCCL)
  double seconds = 0;
  CommStats operator-(const CommStats& o) const {
    return {bytes_sent - o.bytes_sent, bytes_received - o.bytes_received, messages - o.messages,
            gpu_bytes_sent - o.gpu_bytes_sent, seconds - o.seconds};
  }
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string library() const = 0;  // e.g. "Open MPI 4.1.4 and NCCL 2.28.9"
  // A group of ranks (ascending) for collectives and transfers. Every rank calls it, in the same
  // order; the id it returns is for the members' use. `gpu` >= 0 says that every member runs on
  // one GPU, this rank's being CUDA device `gpu`: the group's traffic then goes GPU to GPU (NCCL)
  // where the build has it.
  virtual int group(const std::vector<int>& ranks, int gpu) = 0;
  // Activations from one rank to another, within `group` (both are members) or, with -1, over MPI;
  // `tag` tells concurrent MPI transfers apart (within a group, transfers arrive in order).
  virtual void send(std::span<const float> data, int to, int tag, int group) = 0;
  virtual void recv(std::span<float> data, int from, int tag, int group) = 0;
  // Element-wise sum over the ranks of a group, left in each of them; only the members call it.
  virtual void allreduce_sum(std::span<float> data, int group) = 0;
  // Returns when every member of the group has called it; only the members call it.
  virtual void barrier(int group) = 0;
  // Every rank's text, in rank order, on every rank.
  virtual std::vector<std::string> allgather(const std::string& text) = 0;
  // Ends every process of the run at once (after an error that one rank cannot recover from).
  [[noreturn]] virtual void abort(int code) = 0;
  virtual CommStats stats() const = 0;
};

// Whether this process was started by mpirun (or another MPI launcher).
bool launched_by_mpi();
// The MPI world (MPI_Init_thread with MPI_THREAD_MULTIPLE); nullptr with `why_not` set when this
// build has no MPI or the library cannot give threads what the pipeline needs.
std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv, std::string& why_not);

}  // namespace tessera
