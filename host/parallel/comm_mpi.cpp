#include "tessera/parallel/comm.hpp"

#include <cstdlib>

#ifdef TESSERA_WITH_MPI

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#ifdef TESSERA_WITH_NCCL
#include "nccl_group.hpp"
#endif

namespace tessera {

namespace {

class MpiComm final : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Errors come back as codes and become exceptions, rather than aborting inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiComm() override {
    for (Group& g : groups_) {
#ifdef TESSERA_WITH_NCCL
      g.nccl.reset();  // before MPI_Finalize: every rank finalizes its NCCL groups in the same order
#endif
      if (g.mpi != MPI_COMM_NULL) MPI_Comm_free(&g.mpi);
    }
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string library() const override {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(text, &len);
    std::string s(text, len);
    s = s.substr(0, s.find_first_of(",\n"));
#ifdef TESSERA_WITH_NCCL
    s += " and " + NcclGroup::version();
#endif
    return s;
  }

  int group(const std::vector<int>& ranks, int gpu) override {
    Group g;
    g.ranks = ranks;
    const bool member = std::binary_search(ranks.begin(), ranks.end(), rank_);
    check(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, rank_, &g.mpi), "MPI_Comm_split");
#ifdef TESSERA_WITH_NCCL
    if (member && gpu >= 0) {
      // The group's first member makes the id and every member joins with it.
      std::string id = rank_ == ranks.front() ? NcclGroup::unique_id() : std::string();
      id.resize(NcclGroup::kIdBytes);
      check(MPI_Bcast(id.data(), NcclGroup::kIdBytes, MPI_CHAR, 0, g.mpi), "MPI_Bcast");
      // Every member has the id before any blocks in NCCL's init (a broadcast may still be in flight).
      check(MPI_Barrier(g.mpi), "MPI_Barrier");
      g.nccl = std::make_unique<NcclGroup>(id, member_index(g, rank_), static_cast<int>(ranks.size()), gpu);
    }
#else
    (void)gpu;  // no NCCL in this build: MPI carries it
#endif
    std::lock_guard lock(mu_);
    groups_.push_back(std::move(g));
    return static_cast<int>(groups_.size()) - 1;
  }
  void send(std::span<const float> data, int to, int tag, int group) override {
    const auto t0 = Clock::now();
    const Group* g = group >= 0 ? &member_of(group) : nullptr;
#ifdef TESSERA_WITH_NCCL
    if (g && g->nccl) {
      g->nccl->send(data, member_index(*g, to));
      account(t0, data.size_bytes(), 0, true);
      return;
    }
#endif
    check(MPI_Send(data.data(), count(data.size()), MPI_FLOAT, g ? member_index(*g, to) : to, tag,
                   g ? g->mpi : MPI_COMM_WORLD),
          "MPI_Send");
    account(t0, data.size_bytes(), 0, false);
  }
  void recv(std::span<float> data, int from, int tag, int group) override {
    const auto t0 = Clock::now();
    const Group* g = group >= 0 ? &member_of(group) : nullptr;
#ifdef TESSERA_WITH_NCCL
    if (g && g->nccl) {
      g->nccl->recv(data, member_index(*g, from));
      account(t0, 0, data.size_bytes(), true);
      return;
    }
#endif
    check(MPI_Recv(data.data(), count(data.size()), MPI_FLOAT, g ? member_index(*g, from) : from, tag,
                   g ? g->mpi : MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    account(t0, 0, data.size_bytes(), false);
  }
  void allreduce_sum(std::span<float> data, int group) override {
    const Group& g = member_of(group);
    const uint64_t members = g.ranks.size();
    // What a ring all-reduce moves per rank: 2 (n - 1) / n of the data each way.
    const uint64_t moved = data.size_bytes() * 2 * (members - 1) / members;
    const auto t0 = Clock::now();
#ifdef TESSERA_WITH_NCCL
    if (g.nccl) {
      g.nccl->allreduce_sum(data);
      account(t0, moved, moved, true);
      return;
    }
#endif
    check(MPI_Allreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_FLOAT, MPI_SUM, g.mpi), "MPI_Allreduce");
    account(t0, moved, moved, false);
  }
  void barrier(int group) override { check(MPI_Barrier(member_of(group).mpi), "MPI_Barrier"); }
  std::vector<std::string> allgather(const std::string& text) override {
    const int len = count(text.size());
    std::vector<int> lens(size_), offsets(size_);
    check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    int total = 0;
    for (int r = 0; r < size_; ++r) offsets[r] = std::exchange(total, total + lens[r]);
    std::string all(total, '\0');
    check(MPI_Allgatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], lens[r]));
    return out;
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  CommStats stats() const override {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static int count(size_t n) {
    if (n > static_cast<size_t>(INT32_MAX)) throw std::length_error("an MPI message of more than 2^31 elements");
    return static_cast<int>(n);
  }
  static void check(int err, const char* what) {
    if (err == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    throw std::runtime_error(fmt::format("{}: {}", what, std::string(text, len)));
  }
  // A group: its ranks (ascending), their MPI communicator, and NCCL's where it carries the traffic.
  struct Group {
    std::vector<int> ranks;
    MPI_Comm mpi = MPI_COMM_NULL;
#ifdef TESSERA_WITH_NCCL
    std::unique_ptr<NcclGroup> nccl;
#endif
  };

  // Groups are only added, never moved once made (a deque), so a reference outlives the lock.
  const Group& member_of(int group) const {
    std::lock_guard lock(mu_);
    const Group& g = groups_.at(group);
    if (g.mpi == MPI_COMM_NULL) throw std::logic_error("communication in a group by a rank outside it");
    return g;
  }
  static int member_index(const Group& g, int rank) {
    const auto it = std::lower_bound(g.ranks.begin(), g.ranks.end(), rank);
    if (it == g.ranks.end() || *it != rank) throw std::logic_error(fmt::format("rank {} is not in the group", rank));
    return static_cast<int>(it - g.ranks.begin());
  }
  void account(Clock::time_point t0, uint64_t sent, uint64_t received, bool gpu) {
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::lock_guard lock(mu_);
    if (gpu) stats_.gpu_bytes_sent += sent;
    stats_.bytes_sent += sent;
    stats_.bytes_received += received;
    ++stats_.messages;
    stats_.seconds += s;
  }

  int rank_ = 0, size_ = 1;
  mutable std::mutex mu_;
  std::deque<Group> groups_;
  CommStats stats_;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv, std::string& why_not) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    why_not = "the MPI library does not support MPI_THREAD_MULTIPLE, which the pipeline's stage threads need";
    MPI_Finalize();
    return nullptr;
  }
  return std::make_unique<MpiComm>();
}

}  // namespace tessera

#else

namespace tessera {

std::unique_ptr<Comm> make_mpi_comm(int*, char***, std::string& why_not) {
  why_not = "this build has no MPI (Open MPI was not found when it was configured)";
  return nullptr;
}

}  // namespace tessera

#endif

namespace tessera {

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

}  // namespace tessera
