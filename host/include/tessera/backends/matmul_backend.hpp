// The interface every backend implements: where the forward pass runs its matrix products, and,
// for backends that can, the rest of a layer's work.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/backends/kv_cache.hpp"
#include "tessera/io/gpt2.hpp"
#include "tessera/runtime/energy.hpp"

namespace tessera {

// What a backend's matrix products cost so far (cycles and bytes from an accelerator's counters).
struct MatmulStats {
  uint64_t gemms = 0, macs = 0, cycles = 0, read_bytes = 0, write_bytes = 0;
  uint64_t projected_cycles = 0;  // the timing model's cycles for another array (ASIC what-if)
  double projected_seconds = 0;   // a GPU's roofline time where there is no GPU to measure
  EngineActivity activity;        // an accelerator's counted actions, for its energy
  MatmulStats& operator+=(const MatmulStats& o) {
    gemms += o.gemms, macs += o.macs, cycles += o.cycles, read_bytes += o.read_bytes, write_bytes += o.write_bytes;
    projected_cycles += o.projected_cycles;
    projected_seconds += o.projected_seconds;
    activity += o.activity;
    return *this;
  }
  MatmulStats operator-(const MatmulStats& o) const {
    return {gemms - o.gemms,           macs - o.macs,
            cycles - o.cycles,         read_bytes - o.read_bytes,
            write_bytes - o.write_bytes, projected_cycles - o.projected_cycles,
            projected_seconds - o.projected_seconds, activity - o.activity};
  }
};

// A stretch of one product's wall time on a track of its device: "dma" (operands going to the
// device, results coming back) or "compute".
struct Phase {
  std::string track, name;
  std::chrono::steady_clock::time_point start;
  double seconds = 0;
};

class MatmulBackend;

// What a stage program runs: layers [first, last] of `model`, held whole by one device or sharded
// Megatron-style over several (the parts, in shard order), with the embedding first where `embed`
// and the final LayerNorm and the logits where the parts have rows of the vocabulary.
struct StageSpec {
  struct Weights {  // one part's tensors of one layer: the model's own where it holds them all
    const Linear *qkv = nullptr, *attn_proj = nullptr, *mlp_up = nullptr, *mlp_down = nullptr;
  };
  struct Part {
    MatmulBackend* backend = nullptr;
    uint32_t heads = 0;              // how many of the model's heads it holds
    std::vector<Weights> layers;     // [layer - first]
    const Linear* vocab = nullptr;   // the last stage: its rows of the tied output projection, as [width, rows]
    uint32_t vocab_begin = 0;        // where they go in a row of the logits
  };
  const Gpt2Model* model = nullptr;
  uint32_t first = 0, last = 0;
  bool embed = false;
  // One part: the projections' biases are in its weights. Several: each part's row-parallel
  // projections give partial sums, added in part order, then the model's biases, as the pipeline
  // adds them op by op.
  std::vector<Part> parts;
};

// A stage that runs on its devices from its input to its output (the cuda backend's resident
// stage): its weights uploaded when it is made, its activations, workspaces and KV caches on the
// devices, each step one upload (token ids or the residual stream) and one download (the residual
// stream, or the logits); or none, where the stage before feeds it or it feeds the next (feed()).
class StageProgram {
 public:
  virtual ~StageProgram() = default;
  // KV caches for microbatches of these sizes, of up to `capacity` positions (the earlier ones
  // freed); std::invalid_argument where they and the workspaces do not fit the device.
  virtual void start(const std::vector<uint32_t>& batch_of, uint32_t capacity) = 0;
  virtual void end() = 0;
  virtual uint64_t kv_cache_bytes() const = 0;
  // `seq` new tokens of each sequence of microbatch j after `past` positions. In: token ids (the
  // first stage) or the residual stream x [rows, width]; out: the residual stream, or (the last
  // stage) the logits [rows, vocab], with last_only [sequences, vocab].
  virtual void step(uint32_t microbatch, const int32_t* tokens, const float* x, uint32_t seq, uint32_t past,
                    bool last_only, float* out) = 0;
  // What a reader of the report should know of how it ran (decode without CUDA graphs, and why).
  virtual std::vector<std::string> notes() const { return {}; }
  // Whether this program writes its output (the residual stream) into `next`'s input device to
  // device, with no copy through the host. Where it does (true), from then on its step() is called
  // with out = nullptr and next's with x = nullptr. Called before start(), once.
  virtual bool feed(StageProgram& next) {
    (void)next;
    return false;
  }
};

// Where the forward pass runs its matrix products.
class MatmulBackend {
 public:
  virtual ~MatmulBackend() = default;
  virtual std::string name() const = 0;
  virtual MatmulStats stats() const = 0;
  // The phases of the products since the last call, where the backend tells them apart.
  virtual std::vector<Phase> take_phases() { return {}; }
  // c[m, n] = a[m, k] * b, with b [k, n] row-major, or [n, k] when b_transposed.
  virtual void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                      bool b_transposed) = 0;
  // y[m, out] = x[m, in] W + b.
  virtual void linear(const float* x, uint32_t m, const Linear& w, float* y);
  // Forgets what the backend keeps for `w` (weights resident on a device, keyed by its address),
  // before `w` goes away.
  virtual void release(const Linear& w) { (void)w; }
  // The same for LayerNorm weights (kept by backends that run layer_norm on a device).
  virtual void release(const LayerNormWeights& w) { (void)w; }

  // Whether the backend runs the rest of a layer's work on its device too: the attention core, the
  // MLP's GELU, and LayerNorm when it holds a whole stage (the cuda backend's kernels). Where it
  // does not, the host runs them and the report shows them as host ops.
  virtual bool runs_other_ops() const { return false; }
  // The stage `spec` as one program on its parts' devices, asked of the first part's backend, for
  // backends that run whole stages (nullptr for the others, or where a part's backend is not of
  // its kind: the stage then runs op by op). Throws std::invalid_argument where the weights do not
  // fit.
  virtual std::unique_ptr<StageProgram> make_stage(const StageSpec& spec) {
    (void)spec;
    return nullptr;
  }
  // Whether the report times its ops by the wall clock (the CPU, a GPU that is there) rather than
  // by the device's own count (an accelerator's cycles, a projection): the pipeline then runs each
  // of them alone in the process, so that a simulation beside it does not slow it down.
  virtual bool timed_by_wall_clock() const { return true; }
  // A device that meters its board's energy (a GPU, through NVML): its energy counter in joules,
  // read now (a phase's energy is the difference of two reads), and its power while idle, measured
  // when it was opened; none where it has no counter.
  virtual std::optional<double> energy_counter() const { return std::nullopt; }
  virtual std::optional<double> idle_watts() const { return std::nullopt; }
  // The device memory free for KV caches, where the backend keeps them on its device; none where
  // they are in host memory.
  virtual std::optional<uint64_t> memory_free() const { return std::nullopt; }
  // A KV cache for `batch` sequences of up to `capacity` positions of `heads` heads; where the
  // backend keeps it on its device, it takes the memory now and throws when there is not enough.
  virtual std::unique_ptr<KvCache> make_kv_cache(uint32_t batch, uint32_t heads, uint32_t head_dim,
                                                 uint32_t capacity);
  // The bytes such a cache takes.
  virtual uint64_t kv_cache_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) const {
    return KvCache::fp32_bytes(batch, heads, head_dim, capacity);
  }
  // The products of the attention core with the host's softmax between them, for one sequence and
  // head of `cache`, when `tokens` new ones follow its cache.length positions (L = length + tokens):
  // kv_store keeps their keys and values k, v [tokens, head_dim] at positions length onwards;
  // kv_scores gives scores[tokens, L] = q k^T; kv_mix gives out[tokens, head_dim] = p v.
  virtual void kv_store(KvCache& cache, uint32_t seq, uint32_t head, const float* k, const float* v, uint32_t tokens);
  virtual void kv_scores(KvCache& cache, uint32_t seq, uint32_t head, const float* q, uint32_t tokens, float* scores);
  virtual void kv_mix(KvCache& cache, uint32_t seq, uint32_t head, const float* p, uint32_t tokens, float* out);
  // The attention core for `tokens` new tokens of each of the cache's sequences, from
  // qkv[batch * tokens, 3 * heads * head_dim] (the q, k and v blocks side by side): their keys and
  // values go into the cache at positions cache.length onwards; then per sequence and head,
  // out = softmax(q k^T / sqrt(head_dim)) v over every position up to the token's own, into
  // out[batch * tokens, heads * head_dim]; cache.length grows by `tokens`.
  virtual void attention(const float* qkv, float* out, uint32_t tokens, KvCache& cache);
  // The same for whole sequences of `seq` tokens, with a cache of their own.
  void attention(const float* qkv, float* out, uint32_t batch, uint32_t seq, uint32_t heads, uint32_t head_dim);
  // y = gelu_tanh(x W + b).
  virtual void linear_gelu(const float* x, uint32_t m, const Linear& w, float* y);
  virtual void layer_norm(const float* x, float* y, uint32_t rows, uint32_t cols, const LayerNormWeights& w, float eps);
};

}  // namespace tessera
