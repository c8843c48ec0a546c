// Execution plans (DESIGN.md): layers split into pipeline stages, each stage run by a group of
// devices that shard every layer Megatron-style (c_attn and c_fc column-parallel with the heads
// split, the two projections row-parallel with a reduce after them), in shares set by weights.
//
//   "0-5@rtl:0+rtl:1;6-11@cuda:0"     two stages; the first shards over two RTL devices
//   "0-11@rtl:0*1+cuda:0*3"           one stage; the GPU takes three quarters of each layer
//   "0-11@cuda:0?precision=int8"      the GPU's GEMMs in int8, quantized like the accelerator's
//   "0-5@r0:rtl:0+r1:rtl:0;6-11@r2:cuda:0"   over MPI: each device on the rank it names
//   "0-11@rtl:0*h4/c1024/v16000+cuda:0*h8/c2048/v34257"   explicit shares: heads, MLP columns and
//                                      (last stage) output rows per device, as `tessera plan --auto` prints
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/backends/gpu_projection.hpp"
#include "tessera/io/gpt2.hpp"

namespace tessera {

struct PlanDevice {
  std::string spec;     // as written: model..., rtl..., xdma:..., cpu, cuda[:i]
  int rank = -1;        // the MPI rank that runs it (rK: before the spec), or -1 until assign_ranks
  bool rank_given = false;
  std::string label;    // its name in reports: the spec, with "rK:" in multi-process runs
  std::string kind;     // model | rtl | xdma | cpu | cuda
  double weight = 1;    // share of each layer, relative to the group
  bool shares_given = false;  // *hH/cC[/vV]: heads, mlp and vocab as written, not from the weight
  uint32_t gpu_index = 0;      // cuda: the GPU
  std::string gpu = "h100";    // cuda: whose published peaks a projection uses (?gpu=NAME)
  GpuPrecision precision = GpuPrecision::kFp32;  // cuda, accelerators: the GEMMs' precision (?precision=P)
  bool projected = false;      // cuda: computed on the host and its time projected even where a GPU is present
  // Filled in by Plan::resolve for a model:
  uint32_t heads = 0, head_begin = 0;  // attention heads [head_begin, head_begin + heads)
  uint32_t mlp = 0, mlp_begin = 0;     // columns of c_fc [mlp_begin, mlp_begin + mlp)
  uint32_t vocab = 0, vocab_begin = 0; // last stage: its rows of the tied output projection
  uint64_t weight_bytes = 0;           // what it holds for all its stage's layers
  bool accelerator() const { return kind == "model" || kind == "rtl" || kind == "xdma"; }
};

// `total` split in proportion to `weights`, largest remainders first, summing to `total`.
std::vector<uint32_t> proportional_shares(uint32_t total, const std::vector<double>& weights);

// The weight bytes a device holds for `layers` layers of its shares (heads, mlp, vocab): an
// accelerator int8 weights with an fp32 scale per output column, or bf16 weights (biases stay on the
// host); the others fp32 weights and biases, the projections' biases on a stage's first device only.
uint64_t weight_bytes(const Gpt2Config& cfg, const PlanDevice& d, uint32_t layers, bool first_of_stage);

struct Stage {
  uint32_t first = 0, last = 0;  // layers, inclusive
  std::vector<PlanDevice> devices;
};

struct Plan {
  std::vector<Stage> stages;

  // Parses the text; throws std::invalid_argument naming what is wrong (syntax, an unknown
  // device kind, a bad weight, a device listed twice).
  static Plan parse(const std::string& text);
  // A list of plans, comma-separated: a comma starts a plan only where the text after it starts as a
  // stage does (LAYERS@), so a device option's commas (fault=stuck:1,1,20) stay in their plan.
  static std::vector<std::string> split_list(const std::string& text);
  // All layers on one device.
  static Plan single(const std::string& device, uint32_t layers);
  // Checks the plan against the model and fills in each device's heads, MLP columns and weight
  // bytes; throws std::invalid_argument for layers overlapping, missing or past the model, for a
  // group with more shards than heads (or a device whose share rounds to no head), and for explicit
  // shares that do not add up to the model's.
  void resolve(const Gpt2Config& cfg);

  // Puts every device on a rank of a run of `world` processes: where the plan names none, devices
  // go round-robin in the order written. Throws std::invalid_argument when only some devices name
  // a rank or one names a rank the run does not have. Sets each device's label.
  void assign_ranks(int world);
  // The devices of rank `rank`.
  std::vector<const PlanDevice*> devices_of(int rank) const;

  std::string str() const;
  // GPipe's bubble, (p - 1) / (m + p - 1), for p stages and m microbatches.
  double expected_bubble(uint32_t microbatches) const;
};

// GPipe's schedule over a plan's stage times: stage s takes microbatch j when it is done with j - 1
// and stage s - 1 is done with j. `seconds[s][j]` is stage s's time on microbatch j.
struct Schedule {
  double makespan = 0;
  double busy = 0;  // the stages' times, summed
  size_t stages = 0;
  // The stages' idle share over the makespan.
  double bubble() const { return makespan > 0 ? 1 - busy / (double(stages) * makespan) : 0; }
};
Schedule gpipe_schedule(const std::vector<std::vector<double>>& seconds);

}  // namespace tessera
