// Plans that place themselves (`--plan auto`, `tessera plan --auto`): pipeline stages, each stage's
// shares of every layer and the microbatch count, chosen to minimize the time per batch on the
// devices' clocks under each device's memory. Costs come from the project's own models: the engine's
// timing model for accelerators (the descriptors the backend submits, so exact on the model backend),
// the roofline projection for projected GPUs (the backend's own formulas), and measurements (taken
// now, or kept by `tessera calibrate`) for the CPU, real GPUs and the host's operations.
// docs/RUNTIME.md explains the search.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/io/gpt2.hpp"
#include "tessera/runtime/plan.hpp"

namespace tessera {

// What a plan is chosen for. prefill: `tessera run`'s pass over whole sequences (every token's
// logits); decode: the steps of a generation after its prompt, a token each; generate: both, as
// `tessera generate` runs them (one sequence, the last token's logits).
enum class RunPhase { kPrefill, kDecode, kGenerate };
RunPhase parse_phase(const std::string& text);  // throws std::invalid_argument
std::string to_string(RunPhase p);

struct Workload {
  RunPhase phase = RunPhase::kPrefill;
  uint32_t batch = 1, seq = 32;  // sequences, and tokens each (generate, decode: the prompt's)
  uint32_t new_tokens = 0;       // generate, decode: tokens generated after the prompt
  // The pipeline steps it runs: tokens each, positions before them, logits of the last token only.
  struct Step {
    uint32_t tokens = 0, past = 0;
    bool last_only = false;
  };
  std::vector<Step> steps() const;
  uint32_t capacity() const;  // the KV caches' positions
};

// One device's predicted memory (bytes): what it holds and what it has.
struct DeviceMemory {
  uint64_t weights = 0, kv_cache = 0, activations = 0, capacity = 0;
  uint64_t needed() const { return weights + kv_cache + activations; }
};

// A plan's predicted times on the devices' clocks (seconds), per step of the workload.
struct Prediction {
  struct StageTime {
    std::map<int, double> shared;         // per rank: its host work for the whole stage, and all-reduces
    std::map<std::string, double> lanes;  // per device: its ops and the host ops done for its shard
    double seconds = 0;                   // the slowest rank's: its shared work and its slowest lane
    double slowest_shared() const;
  };
  // [step][stage][microbatch]
  std::vector<std::vector<std::vector<StageTime>>> stages;
  std::vector<double> step_seconds;  // each step's makespan over the GPipe schedule
  std::vector<double> step_bubble;
  double total() const;              // the sum of the steps' makespans
};

// What an all-reduce of a stage spanning ranks takes (seconds, without the wait for the slowest
// rank), measured by measure_links: by the number of ranks and the bytes, linear between the
// sizes measured.
struct LinkCosts {
  std::map<int, std::map<uint64_t, double>> allreduce;  // [ranks][bytes]
  double allreduce_seconds(int ranks, uint64_t bytes) const;
};
class Comm;
// Every rank calls it: all-reduces of each of `bytes` over k ranks for every k from 2 to the
// world's size, every rank busy at once as in a run (groups of k side by side), each after a few ms
// of work and a barrier and counted at its fastest rank's time, as run reports count it; per k and
// size, the mean of those, in the slowest group. Every rank gets the times.
LinkCosts measure_links(Comm& comm, const std::vector<uint64_t>& bytes);

// Where each device's costs come from, and its memory: made once for a list of devices, the model
// and the workload, and shared by every candidate plan.
class CostModel {
 public:
  // clock_mhz: the accelerators' clock; 0: each at its own preset's (accelerator_clock, energy.hpp).
  // Opens nothing that is simulated; a real GPU or card (xdma)
  // is opened to be measured or described. Throws std::invalid_argument for a device that is not
  // there. Without host_ops, the host's operations cost nothing: the devices' times alone, which
  // tests compare with a run's exactly.
  // Devices on several ranks (a multi-process run) need `links`.
  CostModel(const Gpt2Config& cfg, const std::vector<PlanDevice>& devices, const Workload& w, double clock_mhz,
            bool host_ops = true, LinkCosts links = {});
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // The plan's times for the workload in `microbatches` microbatches. The plan must be resolved and
  // name only the model's devices. Not `exact` (the search): an accelerator's MLP and output
  // products are interpolated between a few widths, as measured devices' always are.
  Prediction predict(const Plan& plan, uint32_t microbatches, bool exact = true) const;
  // What each device of the plan needs and has, by label.
  std::map<std::string, DeviceMemory> memory(const Plan& plan, uint32_t microbatches) const;
  // "timing model (exact)", "projected (NVIDIA H100 ...)", "measured now", "calibrated: FILE"
  std::string source(const std::string& label) const;
  std::string host_source() const;  // the host's operations'
  // tessera calibrate: times the device's ops (and the host's) at every shape that plans of this
  // workload interpolate between, and writes them to the calibration directory, where later cost
  // models of the same device on the same machine read them instead of timing them again. Returns
  // the files written; none for a device whose costs are computed (accelerators, projected GPUs).
  std::vector<std::string> calibrate(const std::string& label);
  double clock_mhz() const { return clock_mhz_; }
  const Gpt2Config& cfg() const { return cfg_; }
  const Workload& workload() const { return work_; }

  class DeviceCost;  // autoplan.cpp
  class HostCost;
  const DeviceCost& device(const std::string& label) const;

  // One microbatch of `batch` sequences through a stage in one step, as the pipeline runs it.
  Prediction::StageTime stage_time(const Stage& st, bool first, bool last, uint32_t batch,
                                   const Workload::Step& step, bool exact = true) const;
  // A device's lane in one layer (or the logits), by its share: its heads (q, k, v, the attention
  // core, the projection), its MLP columns (up, GELU, down), its output rows.
  double heads_part(const std::string& label, uint32_t batch, uint32_t heads, const Workload::Step& step) const;
  double columns_part(const std::string& label, uint32_t batch, uint32_t columns, const Workload::Step& step,
                      bool exact = true) const;
  double vocab_part(const std::string& label, uint32_t batch, uint32_t vocab, const Workload::Step& step,
                    bool exact = true) const;

 private:
  Gpt2Config cfg_;
  Workload work_;
  double clock_mhz_;
  std::unique_ptr<HostCost> host_;
  LinkCosts links_;
  std::string host_calibrated_;  // the file the host's measurements came from, if one
  std::map<std::string, int> rank_;  // by label
  std::vector<std::shared_ptr<DeviceCost>> costs_;  // devices of the same kind and options share one
  std::map<std::string, DeviceCost*> devices_;        // by label
  std::vector<PlanDevice> devices_list_;
};

struct AutoPlan {
  Plan plan;                  // resolved; shares written out where weights cannot say them
  uint32_t microbatches = 1;
  Prediction predicted;
  std::map<std::string, DeviceMemory> memory;
  std::vector<std::string> unused;  // devices the plan leaves out
  // The even split: a stage per device, layers as even as possible, one microbatch per sequence,
  // in the best order of the devices; nullopt where none fits.
  std::optional<Plan> even;
  std::optional<Prediction> even_predicted;
  uint64_t candidates = 0;    // plans scored
  double search_seconds = 0;
};

// The fastest plan for the workload over (a subset of) `devices`, with `microbatches` fixed where
// given (0: chosen). Throws std::invalid_argument where no plan fits in the devices' memory, naming
// each device and how many bytes it is short of its share.
AutoPlan choose_plan(const CostModel& costs, const std::vector<PlanDevice>& devices, uint32_t microbatches = 0);

// Where `tessera calibrate` keeps its files: $TESSERA_CALIBRATION_DIR, else $XDG_CACHE_HOME/tessera,
// else ~/.cache/tessera. Each file says what it was measured on (the CPU model and count, OpenBLAS's
// threads, a GPU's UUID); a file measured on another machine is not used.
std::string calibration_dir();

// The devices of --devices: specs comma-separated (a comma starts a device only where a device kind
// follows, so that an option's commas stay with it). Throws std::invalid_argument.
std::vector<PlanDevice> parse_devices(const std::string& text);

}  // namespace tessera
