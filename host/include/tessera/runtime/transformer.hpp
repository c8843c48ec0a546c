// The GPT-2 forward pass, with its matrix products on an interchangeable backend and everything
// else (embeddings, LayerNorm, softmax, GELU, residuals) on the host CPU in fp32, except where a
// backend runs those itself (runs_other_ops).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "tessera/backends/matmul_backend.hpp"
#include "tessera/io/gpt2.hpp"
#include "tessera/parallel/comm.hpp"

namespace tessera {

// Token ids for `batch` sequences of `seq` tokens each, row-major; throws std::invalid_argument
// (bad input) for an id outside the vocabulary, more tokens than positions, or a size mismatch.
void check_tokens(const Gpt2Config& cfg, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq);

// One device's part of every layer of a stage, Megatron-style: heads [head_begin, +heads) of
// c_attn (column-parallel) and the matching rows of the attention projection (row-parallel),
// columns [mlp_begin, +mlp) of c_fc and the matching rows of the MLP projection, and in the last
// stage rows [vocab_begin, +vocab) of the tied output projection.
struct Shard {
  MatmulBackend* backend = nullptr;  // null for a shard another rank runs
  uint32_t head_begin = 0, heads = 0, mlp_begin = 0, mlp = 0, vocab_begin = 0, vocab = 0;
  int rank = 0;                      // the process that runs it (multi-process runs)
  int gpu = -1;                      // its CUDA device, where it runs on a real GPU (known on every rank)
};

struct StageShards {
  uint32_t first = 0, last = 0;  // layers, inclusive
  std::vector<Shard> shards;
};

// One operation of a run, for the report: a device's matrix products or the host's other work.
struct OpRecord {
  int stage = 0, layer = -1;  // layer -1: embeddings or the output projection
  uint32_t microbatch = 0;
  std::string device;         // a backend's name, or "host"
  std::string lane;           // a host op done for one shard (softmax, GELU): that shard's device
  std::string op;             // qkv, attention, attn_proj, mlp_up, mlp_down, logits; host: layernorm, ...
  double start = 0;           // wall time since the pipeline was built
  double seconds = 0;         // wall time
  double cpu_seconds = 0;     // a host op: the CPU time of the thread that ran it (what reports count)
  MatmulStats cost;           // on the device
  struct Span {
    std::string track, name;
    double start = 0, seconds = 0;  // like the record's
  };
  std::vector<Span> phases;   // DMA and compute within the op, where the backend tells them apart
  int rank = 0;               // the process it ran in; device "comm" records its communication
  uint32_t step = 0;          // which step() of the generation started (forward: 0)
};

class ShardWorker;  // a stage's thread per shard (transformer.cpp)

// Runs the model over stages of sharded devices. Weights are sliced once, when built. Microbatches
// flow through the stages GPipe-style, a worker thread per stage; each device's shards run on a
// thread of their own, and the partial sums of the row-parallel projections are added in shard
// order, so a run is deterministic.
//
// With a Comm, every rank builds the same pipeline and runs the shards whose rank is its own (the
// others have no backend): a stage's ranks sum their partial results with allreduce_sum, the
// lowest rank of a stage sends each microbatch's activations to the next stage's ranks that do not
// have them, and the logits come to rank 0. Ranks that each run a single shard on a GPU move their
// activations GPU to GPU (Comm::group with a gpu): a stage's all-reduce when every rank of the stage
// is one, and a transfer between stages when both ends are.
class Pipeline {
 public:
  Pipeline(const Gpt2Model& model, std::vector<StageShards> stages, Comm* comm = nullptr);
  ~Pipeline();  // releases the weights it gave the backends
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  // Logits [batch * seq, vocab], row-major (complete on rank 0 of a multi-process run); the batch
  // goes through in `microbatches` parts.
  std::vector<float> forward(std::span<const int32_t> tokens, uint32_t batch, uint32_t seq, uint32_t microbatches = 1);

  // Generation. start() gives every local shard a KV cache per layer and microbatch for `batch`
  // sequences of up to `capacity` positions (std::invalid_argument, before anything is allocated,
  // where the caches do not fit in a device's free memory or the host's). Each step() then runs
  // `n` more tokens of every sequence (tokens [batch * n], row-major) at the next positions:
  // prefill is a step with the prompt, decode a step with n = 1. It returns their logits,
  // [batch * n, vocab], or with last_only [batch, vocab] for each sequence's last token. Every
  // rank of a multi-process run calls it with the same tokens.
  void start(uint32_t batch, uint32_t capacity, uint32_t microbatches = 1);
  std::vector<float> step(std::span<const int32_t> tokens, uint32_t n, bool last_only = false);
  uint32_t position() const { return position_; }  // tokens of each sequence so far
  uint64_t kv_cache_bytes() const;                  // what this process's caches hold
  void end();                                        // frees the caches

  const std::vector<OpRecord>& log() const { return log_; }
  // A stage whose shards all run in this process on devices that can run it as a program
  // (StageProgram: the cuda backend, one GPU or several) runs so, a record "stage" per device and
  // step, and two such stages next to each other hand the residual stream over device to device;
  // with profile_ops, set before start(), every stage runs op by op instead, for the per-op table.
  bool profile_ops = false;
  // What the stage programs have to say of how they ran (StageProgram::notes), with their device.
  std::vector<std::string> notes() const;
  // Called as each stage starts a layer of a microbatch (from the stage's worker thread).
  std::function<void(size_t stage, uint32_t layer, uint32_t microbatch)> on_layer;

 private:
  using Slices = StageSpec::Weights;  // one shard's weights for one layer
  struct Microbatch {
    uint32_t index = 0, batch = 0, seq = 0;  // seq: the tokens of each sequence in this step
    uint32_t past = 0;                       // positions before them
    bool last_only = false;                  // logits of each sequence's last token only
    const int32_t* tokens = nullptr;
    float* logits = nullptr;  // its rows of the output
    std::vector<float> x;     // the residual stream, handed from stage to stage
  };
  struct CacheKey {  // a local shard's cache of one layer for one microbatch
    size_t stage;
    uint32_t layer;  // in the model
    size_t shard;
    uint32_t microbatch;
    auto operator<=>(const CacheKey&) const = default;
  };
  class StageRun;  // one microbatch through one stage (transformer.cpp)
  void run_stage(size_t stage, Microbatch& m, std::vector<OpRecord>& log);
  void run(std::vector<Microbatch>& mbs, std::vector<float>& logits);  // through every stage, GPipe-style
  bool local(const Shard& sh) const { return !comm_ || sh.rank == comm_->rank(); }
  bool member(size_t stage) const;  // whether this process runs part of the stage
  int leader(size_t stage) const { return members_[stage].front(); }
  int link(size_t stage, int to) const;  // the group that carries stage's activations to `to`, or -1 (MPI)
  // A communication of a stage, timed and logged.
  void communicate(size_t stage, uint32_t microbatch, const char* op, uint64_t bytes, std::vector<OpRecord>& log,
                   const std::function<void()>& fn);

  const Gpt2Model& model_;
  std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  std::vector<StageShards> stages_;
  std::vector<std::vector<std::vector<Slices>>> slices_;  // [stage][layer in stage][shard]
  std::deque<Linear> sliced_;                              // the slices that are copies
  std::vector<bool> whole_;                                // [stage]: one device holds all of each layer
  Comm* comm_ = nullptr;
  std::vector<std::vector<int>> members_;                  // [stage]: its ranks, ascending
  std::vector<int> groups_;                                // [stage]: its Comm group, where it spans ranks
  std::map<std::pair<size_t, int>, int> links_;            // (stage, rank of the next): a GPU-to-GPU group
  std::vector<Linear> vocab_;                              // the last stage's shards of wte, as [E, rows]
  std::vector<OpRecord> log_;
  std::vector<uint32_t> microbatch_sizes_;  // of the generation started
  uint32_t position_ = 0, capacity_ = 0, steps_ = 0;  // steps_: step() calls since start()
  std::map<CacheKey, std::unique_ptr<KvCache>> caches_;
  std::vector<std::unique_ptr<StageProgram>> programs_;  // [stage]: where it runs as one (made at start)
  std::vector<bool> fed_;  // [stage]: its program's input comes device to device from the stage before
  void make_programs();  // at the first start(): the stages that run as programs
  void run_program(size_t stage, Microbatch& m, std::vector<OpRecord>& log);
  // [stage][shard]: a thread per local shard, kept for the pipeline's life, where a stage has several
  std::vector<std::vector<std::unique_ptr<ShardWorker>>> workers_;
  // Ops timed by the wall clock (the host's, a CPU's or a GPU's) hold it alone, the others shared:
  // their times are then what they take, not what they take beside a simulation.
  std::shared_mutex timing_;
};

// The sizes of `microbatches` microbatches of `batch` sequences, as Pipeline::start splits them:
// as equal as can be, the larger first.
std::vector<uint32_t> microbatch_sizes(uint32_t batch, uint32_t microbatches);

// Memory the kernel says can be taken without swapping (MemAvailable).
uint64_t host_memory_available();

// Logits [batch * seq, vocab] with every matrix product on one backend.
std::vector<float> forward(const Gpt2Model& model, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq,
                           MatmulBackend& backend);

// How far logits are from a reference run of the same model (DESIGN.md's numerics report).
struct Numerics {
  double max_abs_err = 0, rel_l2 = 0, cosine = 0, top1_agreement = 0;
};
Numerics compare_logits(std::span<const float> got, std::span<const float> ref, uint32_t vocab);

}  // namespace tessera
