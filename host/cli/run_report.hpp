// What `tessera run` and `tessera generate` share: the plan's devices opened and health-checked,
// the pipeline's stages over them, and the report of what the ops cost (per device and op, the
// schedule and bubble, per-rank traffic; text, JSON, CSV and Chrome trace).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_args.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/backends/matmul_backend.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/driver/trace.hpp"
#include "tessera/parallel/comm.hpp"
#include "tessera/runtime/transformer.hpp"

namespace tessera::cli {


// The plan's devices, opened: accelerators only after they pass their quick health check.
struct Devices {
  std::vector<std::shared_ptr<driver::Device>> engines;
  std::vector<std::pair<std::shared_ptr<driver::Device>, std::shared_ptr<driver::TraceRecorder>>> recorders;
  std::vector<std::unique_ptr<MatmulBackend>> backends;
  std::map<std::string, MatmulBackend*> by_spec;   // by the plan's label
  std::map<std::string, std::string> label_of;      // a backend's name -> the device's label
  std::map<std::string, uint64_t> macs_per_cycle;  // accelerators: R * C
  std::map<std::string, EngineConfig> engine_of;   // accelerators: their engine's configuration
  // GPUs, present or projected: whose published figures (GpuPeaks) and their GEMMs' precision.
  std::map<std::string, std::pair<std::string, GpuPrecision>> gpu_of;
  std::map<std::string, std::string> projected;    // GPUs not present: the GPU their times are for
  std::map<std::string, std::pair<int, std::string>> gpus;  // GPUs present: their CUDA device and UUID
  std::map<std::string, std::string> unknown_gpus;  // GPUs present that the peaks table lacks: their name

  // How a device's time is known: measured, from its cycles, or projected.
  std::string time_kind(const std::string& device) const {
    return macs_per_cycle.count(device) ? "cycles / clock" : projected.count(device) ? "projected" : "measured";
  }

  // This process's devices (`rank`'s). A device that fails its quick check is an error here, or,
  // with `failures`, a line added there so that every rank can hear of it first.
  Devices(const Plan& plan, const RunArgs& ra, int rank, std::vector<std::string>* failures = nullptr);
  std::map<std::string, int> nccl_gpu;  // every rank's GPUs that can talk GPU to GPU: their CUDA device
};

// The MPI world where mpirun started this process and it has more than one rank; else none.
std::unique_ptr<Comm> mpi_world();
// fn(rank) on this process; an error on one rank of several is said with its rank and ends them all
// (rather than leave the others waiting).
int on_every_rank(Comm* comm, std::string_view command, const std::function<int(int)>& fn);

// This rank's devices, opened and checked. With a Comm, every rank hears of every failed check, and
// of the GPUs present (NCCL pairs ranks that each have one), before any starts. nullptr when a
// device failed: rank 0 has said which on stderr, and the command exits 1.
std::unique_ptr<Devices> open_devices(const RunArgs& ra, Comm* comm, int me, std::string_view command);
// The plan's stages over them, the shards of other ranks without a backend.
std::vector<StageShards> stage_shards(const Plan& plan, const Devices& devs, int me);
// Where a terminal is watching: the stage, layer and microbatch as the pipeline runs them.
void show_progress(Pipeline& pipeline, uint32_t microbatches);
void clear_progress(const Pipeline& pipeline);
// The pipeline's records from `from` on, devices by their labels in the plan.
std::vector<OpRecord> labelled_log(const Pipeline& pipeline, const Devices& devs, size_t from = 0);

struct OpRow {
  std::string device, op;
  uint64_t calls = 0;
  double seconds = 0;  // on the device's time: measured, cycles / clock, or projected
  MatmulStats cost;
  std::string time_kind;           // Devices::time_kind
  double utilization = -1;         // accelerators: MACs / (cycles x R x C); -1 elsewhere
  double projected_utilization = 0;  // the what-if array's, where it ran
  // Energy: "modelled" (an accelerator: its counted actions with the energy table), "projected" (a
  // GPU: its board power over the op's time); "" where there is no figure (the host, CPUs).
  std::string energy_kind;
  double joules = 0;
  EnergySplit split;  // accelerators
  // Roofline: operations (2 per MAC) per byte moved, op/s achieved, and the device's ceilings in op/s
  // and bytes/s; 0 where the device has none (the host, CPUs).
  double intensity = 0, achieved = 0, compute_ceiling = 0, memory_ceiling = 0;
};

// A device's energy over a run, and where the figure comes from.
struct DeviceEnergy {
  std::string kind, source;
  double joules = 0;  // measured: the board's
  EnergySplit split;
  uint64_t macs = 0;
  std::optional<double> above_idle_joules;  // measured with the idle power known: the board's less idle
  double phase_seconds = 0;                  // measured: the wall time the counter was read over
};

// What the devices with an energy counter (GPUs, through NVML) took over a phase, from reads of
// their counters before and after it, outside every op's timing.
struct EnergyMark {
  std::chrono::steady_clock::time_point at;
  std::map<std::string, double> joules;  // by device label
};
EnergyMark read_energy(const Devices& devs);
struct MeasuredEnergy {
  double board_joules = 0, seconds = 0;  // the phase's wall time
  std::optional<double> idle_watts;       // measured when the device was opened
};
using MeasuredEnergies = std::map<std::string, MeasuredEnergy>;  // by device label
MeasuredEnergies measured_between(const Devices& devs, const EnergyMark& before, const EnergyMark& after);

// One rank of a multi-process run, for the report.
struct RankSummary {
  int rank = 0;
  std::vector<std::string> devices;
  CommStats traffic;
  uint64_t predicted_sent = 0;  // what the plan says it sends
  double compute_seconds = 0;   // its devices' time, on their clocks
};

// What a run did, computed once from its op records; print_json, print_csv and print_text only
// format it.
struct RunSummary {
  std::vector<OpRow> rows;  // per device and op, in the order they first ran
  std::vector<std::string> devices;            // the plan's, by label
  std::map<std::string, std::string> projected;  // GPUs projected, and from what
  std::map<std::string, std::string> unknown_gpus;  // GPUs present that the peaks table lacks
  double makespan = 0;      // on the devices' clocks over the GPipe schedule
  double bubble = 0, theoretical_bubble = 0, wall_seconds = 0;
  uint64_t macs = 0, cycles = 0, bytes = 0, projected_cycles = 0;
  // Energy over the devices that have a figure; those that have none are named.
  std::map<std::string, DeviceEnergy> energy;
  std::vector<std::string> no_energy;
  double joules = 0;
  uint64_t energy_macs = 0;  // of the devices with a figure
  double tops_per_w() const { return joules > 0 ? 2.0 * double(energy_macs) / joules / 1e12 : 0; }
  Numerics numerics;
  std::vector<std::string> notes;  // how stage programs ran (Pipeline::notes)
  std::string mpi_library;  // multi-process runs: the library and a row per rank (process)
  std::vector<RankSummary> ranks;
};



// Brings every rank's op records, device kinds and traffic to every rank (rank 0 reports them).
// Host and communication records are named after their rank: r1:host, r1:comm.
std::vector<RankSummary> gather(Comm& comm, std::vector<OpRecord>& log, Devices& devs, const RunArgs& ra);
// The per-op rows, the pipeline schedule and bubble, the totals and the per-rank traffic of a run.
RunSummary summarize(const RunArgs& ra, const Devices& devs, const std::vector<OpRecord>& log,
                     std::vector<RankSummary> ranks, const Gpt2Config& cfg, const MeasuredEnergies& measured = {});
// The run as it happened, in wall time (Chrome trace events).
void write_trace(const std::string& path, const std::vector<OpRecord>& log, const RunArgs& ra,
                 const std::map<std::string, uint64_t>& accelerators);
// An op's energy fields, where it has a figure: energy_j, energy (its kind), energy_split.
void add_energy(nlohmann::ordered_json& op, const OpRow& r);
// Per device and in total: joules, J per token (over `tokens`), TOPS/W, each figure's kind and
// source, and the energy table.
nlohmann::ordered_json energy_json(const RunSummary& sum, const RunArgs& ra, uint64_t tokens);
// Each op with MACs against its device's ceilings: [{device, op, intensity, achieved, compute_ceiling,
// memory_ceiling, time}].
nlohmann::ordered_json roofline_json(const RunSummary& sum);
nlohmann::ordered_json run_json(const RunSummary& sum, const RunArgs& ra);  // `run --json`'s object
void print_json(const RunSummary& sum, const RunArgs& ra);
void print_csv(const RunSummary& sum, const RunArgs& ra);
// The energy per device, its sources, and the total over `tokens`, of a phase where one is named.
void print_energy_text(const RunSummary& sum, uint64_t tokens, std::string_view phase = "");
void print_text(const RunSummary& sum, const RunArgs& ra, const Gpt2Config& cfg);

// One plan of several that `run` compares: the arguments it ran with (its plan and clock) and what it did.
struct PlanRun {
  RunArgs args;
  RunSummary sum;
};
// The plans side by side: per plan its precision, time on the devices' clocks (and against the first
// plan's), energy and numerics against fp32 on the CPU. --json: each plan's `run --json` object under
// "runs"; --csv: a row per plan.
void print_comparison(const std::vector<PlanRun>& runs, const RunArgs& ra, const Gpt2Config& cfg);

}  // namespace tessera::cli
