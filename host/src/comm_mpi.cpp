#include "tessera/comm.hpp"

#include <cstdlib>

#ifdef TESSERA_WITH_MPI

#include <mpi.h>

#include <chrono>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

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
    for (MPI_Comm& c : groups_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string library() const override {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(text, &len);
    std::string s(text, len);
    return s.substr(0, s.find_first_of(",\n"));
  }

  void send(std::span<const float> data, int to, int tag) override {
    const auto t0 = Clock::now();
    check(MPI_Send(data.data(), count(data.size()), MPI_FLOAT, to, tag, MPI_COMM_WORLD), "MPI_Send");
    account(t0, data.size_bytes(), 0);
  }
  void recv(std::span<float> data, int from, int tag) override {
    const auto t0 = Clock::now();
    check(MPI_Recv(data.data(), count(data.size()), MPI_FLOAT, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    account(t0, 0, data.size_bytes());
  }
  int group(const std::vector<int>& ranks) override {
    bool member = false;
    for (int r : ranks) member = member || r == rank_;
    MPI_Comm c = MPI_COMM_NULL;
    check(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, rank_, &c), "MPI_Comm_split");
    std::lock_guard lock(mu_);
    groups_.push_back(c);
    return static_cast<int>(groups_.size()) - 1;
  }
  void allreduce_sum(std::span<float> data, int group) override {
    MPI_Comm c;
    {
      std::lock_guard lock(mu_);
      c = groups_.at(group);
    }
    if (c == MPI_COMM_NULL) throw std::logic_error("allreduce_sum by a rank outside the group");
    int members = 0;
    MPI_Comm_size(c, &members);
    const auto t0 = Clock::now();
    check(MPI_Allreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_FLOAT, MPI_SUM, c), "MPI_Allreduce");
    // What a ring all-reduce moves per rank: 2 (n - 1) / n of the data each way.
    const uint64_t moved = data.size_bytes() * 2 * (members - 1) / members;
    account(t0, moved, moved);
  }
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
  void account(Clock::time_point t0, uint64_t sent, uint64_t received) {
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::lock_guard lock(mu_);
    stats_.bytes_sent += sent;
    stats_.bytes_received += received;
    ++stats_.messages;
    stats_.seconds += s;
  }

  int rank_ = 0, size_ = 1;
  mutable std::mutex mu_;
  std::vector<MPI_Comm> groups_;
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
