// Which of a multi-process pipeline's traffic goes GPU to GPU: the groups a Pipeline asks its Comm
// for, seen from each rank, without any MPI or GPU.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <utility>
#include <vector>

#include "tessera/backends/cpu_backend.hpp"
#include "tessera/parallel/comm.hpp"
#include "tessera/runtime/transformer.hpp"

using namespace tessera;

namespace {

// Records the groups asked for; communication itself is not for these tests.
class RecordingComm final : public Comm {
 public:
  RecordingComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string library() const override { return "recording"; }
  int group(const std::vector<int>& ranks, int gpu) override {
    groups.emplace_back(ranks, gpu);
    return static_cast<int>(groups.size()) - 1;
  }
  void send(std::span<const float>, int, int, int) override { throw std::logic_error("not in these tests"); }
  void recv(std::span<float>, int, int, int) override { throw std::logic_error("not in these tests"); }
  void allreduce_sum(std::span<float>, int) override { throw std::logic_error("not in these tests"); }
  void barrier(int) override { throw std::logic_error("not in these tests"); }
  std::vector<std::string> allgather(const std::string& text) override { return {text}; }
  [[noreturn]] void abort(int) override { throw std::logic_error("abort"); }
  CommStats stats() const override { return {}; }

  std::vector<std::pair<std::vector<int>, int>> groups;  // in the order asked: ranks, gpu

 private:
  int rank_, size_;
};

// The groups rank `me` asks for, for stages of (rank, gpu) shards, each shard all of a layer's
// heads or an even part of them.
std::vector<std::pair<std::vector<int>, int>> groups_seen(int me, int size,
                                                          const std::vector<std::vector<std::pair<int, int>>>& stages) {
  static const Gpt2Model m = Gpt2Model::tiny(3);
  std::vector<CpuBackend> cpus(8);
  std::vector<StageShards> plan;
  size_t next = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    StageShards st{static_cast<uint32_t>(s), static_cast<uint32_t>(s), {}};
    const uint32_t n = static_cast<uint32_t>(stages[s].size()), heads = m.cfg.heads / n, mlp = 4 * m.cfg.width / n,
                   vocab = m.cfg.vocab / n;
    for (uint32_t i = 0; i < n; ++i) {
      const auto [rank, gpu] = stages[s][i];
      st.shards.push_back({rank == me ? &cpus.at(next++) : nullptr, i * heads, heads, i * mlp, mlp, i * vocab, vocab,
                           rank, gpu});
    }
    plan.push_back(std::move(st));
  }
  RecordingComm comm(me, size);
  Pipeline p(m, plan, &comm);
  return comm.groups;
}

using Groups = std::vector<std::pair<std::vector<int>, int>>;

}  // namespace

TEST_CASE("ranks that each run one GPU talk GPU to GPU; any other rank makes it MPI", "[unit][comm]") {
  SECTION("a GPU pipeline stage feeding a tensor-parallel GPU stage") {
    // Stage 0 on rank 0's GPU 0; stage 1 split over rank 1 (GPU 0) and rank 2 (GPU 1).
    const std::vector<std::vector<std::pair<int, int>>> stages = {{{0, 0}}, {{1, 0}, {2, 1}}};
    CHECK(groups_seen(1, 3, stages) == Groups{{{1, 2}, 0}, {{0, 1}, 0}, {{0, 2}, 0}});
    CHECK(groups_seen(2, 3, stages) == Groups{{{1, 2}, 1}, {{0, 1}, 1}, {{0, 2}, 1}});
    // A rank outside a group asks for it too (collectively) and says its own GPU.
    CHECK(groups_seen(0, 3, stages) == Groups{{{1, 2}, 0}, {{0, 1}, 0}, {{0, 2}, 0}});
  }
  SECTION("a CPU in a stage keeps its all-reduce and its transfers on MPI") {
    const std::vector<std::vector<std::pair<int, int>>> stages = {{{0, 0}}, {{1, 0}, {2, -1}}};
    CHECK(groups_seen(1, 3, stages) == Groups{{{1, 2}, -1}, {{0, 1}, 0}});  // no link to rank 2
    CHECK(groups_seen(2, 3, stages) == Groups{{{1, 2}, -1}, {{0, 1}, -1}});
  }
  SECTION("a rank with two GPUs is not one GPU: MPI") {
    const std::vector<std::vector<std::pair<int, int>>> stages = {{{0, 0}, {0, 1}}, {{1, 0}}};
    CHECK(groups_seen(0, 2, stages).empty());  // one rank per stage: no group, and no link from rank 0
    CHECK(groups_seen(1, 2, stages).empty());
  }
  SECTION("one process: no groups at all") {
    const std::vector<std::vector<std::pair<int, int>>> stages = {{{0, 0}, {0, 1}}};
    CHECK(groups_seen(0, 1, stages).empty());
  }
}
