// The processes of a multi-process run and the traffic between them. The pipeline moves
// activations between stages on different ranks with send/recv and sums the tensor-parallel
// partial results (and the logits) of a stage's ranks with allreduce_sum; MPI provides them
// (make_mpi_comm). A single-process run has no Comm at all.
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
  double seconds = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string library() const = 0;  // e.g. "Open MPI 4.1.4"
  // Activations from one rank to another; `tag` tells concurrent transfers apart.
  virtual void send(std::span<const float> data, int to, int tag) = 0;
  virtual void recv(std::span<float> data, int from, int tag) = 0;
  // A group of ranks (ascending) for collectives. Every rank calls it, in the same order; the id
  // it returns is for the members' use.
  virtual int group(const std::vector<int>& ranks) = 0;
  // Element-wise sum over the ranks of a group, left in each of them; only the members call it.
  virtual void allreduce_sum(std::span<float> data, int group) = 0;
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
