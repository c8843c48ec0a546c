#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "auto_report.hpp"
#include "run_report.hpp"
#include "tessera/backends/accel_backend.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/cuda_backend.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/driver/health.hpp"
#include "tessera/driver/trace.hpp"
#include "tessera/parallel/comm.hpp"
#include "tessera/runtime/transformer.hpp"

namespace tessera {

// Op records and traffic travel between the ranks of a run as JSON (gather below).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MatmulStats, gemms, macs, cycles, read_bytes, write_bytes, projected_cycles,
                                   projected_seconds, activity)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OpRecord::Span, track, name, start, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OpRecord, stage, layer, microbatch, device, lane, op, start, seconds, cpu_seconds,
                                   cost, phases, rank, step)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CommStats, bytes_sent, bytes_received, messages, gpu_bytes_sent, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EngineConfig, rows, cols, k_max, axi_bytes, max_reads, addr_bits, fold)
NLOHMANN_JSON_SERIALIZE_ENUM(GpuPrecision, {{GpuPrecision::kFp32, "fp32"}, {GpuPrecision::kBf16, "bf16"},
                                            {GpuPrecision::kInt8, "int8"}})

}  // namespace tessera

namespace tessera::cli {

Devices::Devices(const Plan& plan, const RunArgs& ra, int rank, std::vector<std::string>* failures) {
  for (const auto& st : plan.stages)
    for (const auto& d : st.devices) {
      if (d.rank != rank) continue;
      if (d.kind == "cpu") {
        backends.push_back(std::make_unique<CpuBackend>());
      } else if (d.kind == "cuda") {
        // A GPU that is there is measured; one that is not (or one asked to be projected) is
        // computed on the host and projected.
        std::string why_not = "projected=1 asks for a projection";
        if (auto gpu = d.projected ? nullptr
                                   : make_cuda_backend(static_cast<int>(d.gpu_index), d.precision, d.spec, why_not)) {
          gpus[d.label] = {static_cast<int>(d.gpu_index), gpu_uuid(static_cast<int>(d.gpu_index))};
          backends.push_back(std::move(gpu));
          // Held to the peaks of the GPU that is there, whatever gpu= says (that is for projections).
          const std::string cuda_name = gpu_name(static_cast<int>(d.gpu_index));
          const GpuPeaks* peaks = detect_gpu_peaks(cuda_name);
          gpu_of[d.label] = {peaks ? std::string(peaks->name) : std::string(), d.precision};
          if (!peaks) unknown_gpus[d.label] = cuda_name;
        } else {
          const GpuPeaks& peaks = gpu_peaks(d.gpu);
          projected[d.label] = fmt::format("{} ({})", peaks.description, why_not);
          backends.push_back(std::make_unique<ProjectedGpuBackend>(d.spec, peaks, d.precision));
          gpu_of[d.label] = {d.gpu, d.precision};
        }
      } else {
        // Checked in place: the device that passed is the one the run uses.
        const auto spec = driver::DeviceSpec::parse(d.spec);
        std::shared_ptr<driver::Device> dev;
        try {
          dev = std::make_shared<driver::Device>(spec);
        } catch (const driver::DeviceError&) {
          // The checks' open step tries again and reports why it cannot.
        }
        const auto health = driver::run_health_checks(spec, {}, dev);
        if (health.result != driver::Verdict::kPass) {
          std::string why;
          for (const auto& t : health.tests)
            if (t.result != driver::Verdict::kPass) why += fmt::format("; {} {}: {}", t.name, driver::to_string(t.result), t.detail);
          const std::string failure = fmt::format("{} failed its quick health check and is not used{}", d.label, why);
          if (!failures) throw driver::DeviceError(failure);
          failures->push_back(failure);
          continue;
        }
        engines.push_back(dev ? std::move(dev) : std::make_shared<driver::Device>(spec));
        if (!ra.capture_dir.empty()) {
          // One trace per accelerator, named after its spec: DIR/rtl_0_preset_small.
          std::string name = d.spec;
          std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
          recorders.emplace_back(engines.back(), std::make_shared<driver::TraceRecorder>(ra.capture_dir + "/" + name));
          engines.back()->capture(recorders.back().second);
        }
        const auto& p = engines.back()->properties();
        macs_per_cycle[d.label] = uint64_t{p.rows} * p.cols;
        engine_of[d.label] = p.engine();
        auto accel = std::make_unique<AccelBackend>(*engines.back());
        if (ra.project_rows) {
          // The same engine and memory system (the default one) with another array.
          EngineConfig what_if = p.engine();
          what_if.rows = ra.project_rows;
          what_if.cols = ra.project_cols;
          accel->project(what_if, MemoryModelConfig{});
        }
        backends.push_back(std::move(accel));
      }
      by_spec[d.label] = backends.back().get();
      label_of[backends.back()->name()] = d.label;
    }
}

std::unique_ptr<Comm> mpi_world() {
  if (!launched_by_mpi()) return nullptr;
  std::string why_not;
  auto comm = make_mpi_comm(nullptr, nullptr, why_not);
  if (!comm) throw driver::UsageError(fmt::format("started by an MPI launcher, but {}", why_not));
  if (comm->size() == 1) comm.reset();
  return comm;
}

int on_every_rank(Comm* comm, std::string_view command, const std::function<int(int)>& fn) {
  if (!comm) return fn(0);
  try {
    return fn(comm->rank());
  } catch (const std::exception& e) {
    std::cerr << fmt::format("tessera {}: rank {} of {}: {}\n", command, comm->rank(), comm->size(), e.what())
              << std::flush;
    comm->abort(1);
  }
  return 1;  // not reached: abort ends the process
}

std::unique_ptr<Devices> open_devices(const RunArgs& ra, Comm* comm, int me, std::string_view command) {
  std::vector<std::string> failures;
  auto devs = std::make_unique<Devices>(ra.plan, ra, me, comm ? &failures : nullptr);
  std::map<std::string, std::pair<int, std::string>> gpus = devs->gpus;  // every rank's
  if (comm) {
    // Every rank hears of every failed health check before any starts, and stops; and of the GPUs
    // that are there, which can talk GPU to GPU.
    std::string all;
    for (const std::string& text : comm->allgather(nlohmann::json{failures, devs->gpus}.dump())) {
      const auto j = nlohmann::json::parse(text);
      for (const std::string& f : j[0].get<std::vector<std::string>>()) all += "\n  " + f;
      for (const auto& [label, gpu] : j[1].items()) gpus[label] = gpu;
    }
    // NCCL takes a GPU per rank: devices that share one (the same UUID) stay on MPI.
    std::map<std::string, int> sharing;
    for (const auto& [label, gpu] : gpus) ++sharing[gpu.second];
    std::erase_if(gpus, [&](const auto& g) { return g.second.second.empty() || sharing[g.second.second] > 1; });
    if (!all.empty()) {
      if (me == 0) std::cerr << fmt::format("tessera {}: devices failed on this run's ranks, nothing ran:{}\n", command, all);
      return nullptr;
    }
  }
  for (const auto& [label, gpu] : gpus) devs->nccl_gpu[label] = gpu.first;
  return devs;
}

std::vector<StageShards> stage_shards(const Plan& plan, const Devices& devs, int me) {
  std::vector<StageShards> stages;
  for (const auto& st : plan.stages) {
    StageShards s{st.first, st.last, {}};
    for (const auto& d : st.devices)
      s.shards.push_back({d.rank == me ? devs.by_spec.at(d.label) : nullptr, d.head_begin, d.heads, d.mlp_begin, d.mlp,
                          d.vocab_begin, d.vocab, d.rank, devs.nccl_gpu.count(d.label) ? devs.nccl_gpu.at(d.label) : -1});
    stages.push_back(std::move(s));
  }
  return stages;
}

void show_progress(Pipeline& pipeline, uint32_t microbatches) {
  if (!::isatty(STDERR_FILENO)) return;
  static std::mutex mu;
  pipeline.on_layer = [microbatches](size_t stage, uint32_t layer, uint32_t mb) {
    std::lock_guard lock(mu);
    std::cerr << fmt::format("\r  stage {} layer {} microbatch {} of {} ...   ", stage, layer, mb + 1, microbatches)
              << std::flush;
  };
}

void clear_progress(const Pipeline& pipeline) {
  if (pipeline.on_layer) std::cerr << "\r" << std::string(60, ' ') << "\r" << std::flush;
}

std::vector<OpRecord> labelled_log(const Pipeline& pipeline, const Devices& devs, size_t from) {
  std::vector<OpRecord> log(pipeline.log().begin() + static_cast<std::ptrdiff_t>(from), pipeline.log().end());
  for (OpRecord& r : log) {
    if (auto it = devs.label_of.find(r.device); it != devs.label_of.end()) r.device = it->second;
    if (auto it = devs.label_of.find(r.lane); it != devs.label_of.end()) r.lane = it->second;
  }
  return log;
}

// The run as it happened, in wall time: a process per device (the host first), one slice per
// op, with what the op cost on the device in its arguments.
void write_trace(const std::string& path, const std::vector<OpRecord>& log, const RunArgs& ra,
                 const std::map<std::string, uint64_t>& accelerators) {
  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, int> pid = {{"host", 0}};
  for (const auto& r : log) pid.try_emplace(r.device, static_cast<int>(pid.size()));
  constexpr int kOps = 0, kCompute = 1, kDma = 2;  // a device's tracks
  for (const auto& [name, id] : pid) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", id}, {"tid", 0},
                      {"args", {{"name", name == "host" ? "host (LayerNorm, softmax, GELU, residuals)" : name}}}});
    for (const auto& [tid, track] : {std::pair{kOps, "ops"}, {kCompute, "compute"}, {kDma, "DMA"}})
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", id}, {"tid", tid}, {"args", {{"name", track}}}});
  }
  for (const auto& r : log) {
    nlohmann::json args = {{"stage", r.stage}, {"layer", r.layer}, {"microbatch", r.microbatch}};
    if (r.cost.macs) args["macs"] = r.cost.macs;
    if (accelerators.count(r.device)) {
      args["cycles"] = r.cost.cycles;
      args["device_us"] = double(r.cost.cycles) / ra.clock_of(r.device);
      args["bytes"] = r.cost.read_bytes + r.cost.write_bytes;
    }
    events.push_back({{"ph", "X"}, {"name", r.op}, {"cat", r.device == "host" ? "host" : "compute"},
                      {"pid", pid.at(r.device)}, {"tid", kOps}, {"ts", r.start * 1e6}, {"dur", r.seconds * 1e6},
                      {"args", args}});
    for (const auto& ph : r.phases)
      events.push_back({{"ph", "X"}, {"name", ph.name}, {"cat", ph.track}, {"pid", pid.at(r.device)},
                        {"tid", ph.track == "dma" ? kDma : kCompute}, {"ts", ph.start * 1e6}, {"dur", ph.seconds * 1e6},
                        {"args", {{"op", r.op}, {"layer", r.layer}}}});
  }
  std::ofstream out(path);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  if (!out) throw std::runtime_error(fmt::format("cannot write the trace to {}", path));
}

// Brings every rank's op records, device kinds and traffic to every rank (rank 0 reports them).
// Host and communication records are named after their rank: r1:host, r1:comm.
std::vector<RankSummary> gather(Comm& comm, std::vector<OpRecord>& log, Devices& devs, const RunArgs& ra) {
  nlohmann::json mine = {{"ops", nlohmann::json::array()}, {"accelerators", devs.macs_per_cycle},
                         {"engines", devs.engine_of}, {"gpus", devs.gpu_of},
                         {"projected", devs.projected}, {"unknown_gpus", devs.unknown_gpus},
                         {"devices", nlohmann::json::array()}};
  for (OpRecord r : log) {
    if (r.device == "host" || r.device == "comm") r.device = fmt::format("r{}:{}", comm.rank(), r.device);
    mine["ops"].push_back(r);
  }
  for (const PlanDevice* d : ra.plan.devices_of(comm.rank())) mine["devices"].push_back(d->label);
  // The run's traffic: without what --plan auto's timing of the all-reduces sent before it.
  mine["traffic"] = comm.stats() - ra.planning_traffic;
  std::vector<RankSummary> ranks;
  log.clear();
  int rank = 0;
  for (const std::string& text : comm.allgather(mine.dump())) {
    const auto j = nlohmann::json::parse(text);
    for (const auto& op : j["ops"]) log.push_back(op.get<OpRecord>());
    for (const auto& [k, v] : j["accelerators"].items()) devs.macs_per_cycle[k] = v;
    for (const auto& [k, v] : j["projected"].items()) devs.projected[k] = v;
    for (const auto& [k, v] : j["unknown_gpus"].items()) devs.unknown_gpus[k] = v;
    for (const auto& [k, v] : j["engines"].items()) devs.engine_of[k] = v;
    for (const auto& [k, v] : j["gpus"].items()) devs.gpu_of[k] = v;
    ranks.push_back({rank++, j["devices"], j["traffic"].get<CommStats>(), 0, 0});
  }
  return ranks;
}

namespace {

// What the plan says each rank sends: per microbatch, two all-reduces of the activations per layer
// in a stage that spans ranks (a ring all-reduce sends 2 (n - 1) / n of them), one activation
// transfer from each stage's first rank to the next stage's ranks that lack them; then the logits.
void predict_traffic(std::vector<RankSummary>& ranks, const Plan& plan, const RunArgs& ra, const Gpt2Config& cfg) {
  const uint64_t row_bytes = uint64_t{cfg.width} * 4, tokens = uint64_t{ra.batch} * ra.seq;
  std::vector<std::vector<int>> members;
  for (const Stage& st : plan.stages) {
    std::vector<int> m;
    for (const PlanDevice& d : st.devices) m.push_back(d.rank);
    std::sort(m.begin(), m.end());
    m.erase(std::unique(m.begin(), m.end()), m.end());
    members.push_back(m);
  }
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const uint64_t n = members[s].size(), layers = plan.stages[s].last - plan.stages[s].first + 1;
    if (n > 1)
      for (int r : members[s]) ranks[r].predicted_sent += 2 * layers * tokens * row_bytes * 2 * (n - 1) / n;
    if (s + 1 < plan.stages.size())
      for (int r : members[s + 1])
        if (!std::binary_search(members[s].begin(), members[s].end(), r))
          ranks[members[s].front()].predicted_sent += tokens * row_bytes;
  }
  // The logits: summed over the last stage's ranks, then sent by its first rank to rank 0.
  const uint64_t logits = tokens * cfg.vocab * 4, n = members.back().size();
  if (n > 1)
    for (int r : members.back()) ranks[r].predicted_sent += logits * 2 * (n - 1) / n;
  if (members.back().front() != 0) ranks[members.back().front()].predicted_sent += logits;
}

// Each op's energy and roofline point, and the totals per device: an accelerator's modelled from
// its counted actions with the energy table (an ASIC of its structure at the table's node, at the
// accelerator clock); a GPU's measured by its energy counter over the phase and shared among its
// ops by their time, or, where it has none, projected from its board power over the op's time.
void account_energy(RunSummary& sum, const RunArgs& ra, const Devices& devs, const MeasuredEnergies& measured) {
  const EnergyTable& table = ra.energy_table;
  std::set<std::string> without;
  std::map<std::string, double> device_seconds;
  for (const OpRow& r : sum.rows) device_seconds[r.device] += r.seconds;
  for (OpRow& r : sum.rows) {
    std::string source;
    if (const auto e = devs.engine_of.find(r.device); e != devs.engine_of.end()) {
      const EngineConfig& cfg = e->second;
      const AsicArea area = asic_area(cfg, table);
      const double clock_hz = ra.clock_of(r.device) * 1e6;  // the accelerator's own
      r.energy_kind = "modelled";
      r.split = accel_energy(r.cost.activity, table, area, clock_hz);
      r.joules = r.split.total();
      r.compute_ceiling = 2.0 * cfg.rows * cfg.cols * clock_hz;
      r.memory_ceiling = double(cfg.axi_bytes) * clock_hz;
      source =
          fmt::format("modelled: counted actions x the {} energy table ({}); an ASIC of {:.3f} mm^2 ({}x{} MACs, {} "
                      "scratchpad bytes) leaking at {} mW/mm^2 at {} MHz",
                      table.name, table.description, area.total_mm2(), cfg.rows, cfg.cols, area.sram_bytes,
                      table.static_mw_per_mm2.value, ra.clock_of(r.device));
    } else if (const auto g = devs.gpu_of.find(r.device); g != devs.gpu_of.end()) {
      const GpuPeaks* peaks = g->second.first.empty() ? nullptr : &gpu_peaks(g->second.first);
      if (peaks) {  // an unknown GPU has no ceilings
        r.compute_ceiling = peaks->peak(g->second.second);
        r.memory_ceiling = peaks->memory_bytes_per_s;
      }
      if (const auto m = measured.find(r.device); m != measured.end()) {
        const MeasuredEnergy& e = m->second;
        r.energy_kind = "measured";
        r.joules = device_seconds[r.device] > 0 ? e.board_joules * r.seconds / device_seconds[r.device] : 0;
        source = fmt::format("measured: the board's energy counter (NVML) read before and after the phase, {:.4g} J "
                             "in {:.4g} s, shared among its ops by their time",
                             e.board_joules, e.seconds);
        if (e.idle_watts)
          source += fmt::format("; above idle: less {:.1f} W (its idle power, measured before the run) over the phase",
                                *e.idle_watts);
      } else if (peaks) {
        r.energy_kind = "projected";
        r.joules = peaks->board_watts * r.seconds;
        source =
            fmt::format("projected: the {} board power ({} W, its maximum) over the op's time ({})", peaks->name,
                        peaks->board_watts, r.time_kind);
      } else {
        without.insert(r.device);
        continue;
      }
    } else {
      without.insert(r.device);
      continue;
    }
    // A GPU whose power could not always be read has both kinds, and both sources.
    DeviceEnergy& d = sum.energy[r.device];
    if (d.kind.find(r.energy_kind) == std::string::npos) d.kind += (d.kind.empty() ? "" : " + ") + r.energy_kind;
    if (d.source.find(source) == std::string::npos) d.source += (d.source.empty() ? "" : "; ") + source;
    d.joules += r.joules;
    d.split += r.split;
    d.macs += r.cost.macs;
    sum.joules += r.joules;
    sum.energy_macs += r.cost.macs;
    const uint64_t bytes = r.cost.read_bytes + r.cost.write_bytes;
    if (r.cost.macs && bytes) r.intensity = 2.0 * double(r.cost.macs) / double(bytes);
    if (r.cost.macs && r.seconds > 0) r.achieved = 2.0 * double(r.cost.macs) / r.seconds;
  }
  sum.no_energy.assign(without.begin(), without.end());
  for (const auto& [device, e] : measured)
    if (const auto d = sum.energy.find(device); d != sum.energy.end()) {
      d->second.phase_seconds = e.seconds;
      if (e.idle_watts) d->second.above_idle_joules = d->second.joules - *e.idle_watts * e.seconds;
    }
}

}  // namespace

EnergyMark read_energy(const Devices& devs) {
  EnergyMark mark{std::chrono::steady_clock::now(), {}};
  for (const auto& [label, b] : devs.by_spec)
    if (const auto j = b->energy_counter()) mark.joules[label] = *j;
  return mark;
}

MeasuredEnergies measured_between(const Devices& devs, const EnergyMark& before, const EnergyMark& after) {
  MeasuredEnergies out;
  const double seconds = std::chrono::duration<double>(after.at - before.at).count();
  for (const auto& [label, j1] : after.joules)
    if (const auto j0 = before.joules.find(label); j0 != before.joules.end())
      out[label] = {j1 - j0->second, seconds, devs.by_spec.at(label)->idle_watts()};
  return out;
}

// The per-op rows, the pipeline schedule and bubble, the totals and the per-rank traffic of a run.
RunSummary summarize(const RunArgs& ra, const Devices& devs, const std::vector<OpRecord>& log,
                     std::vector<RankSummary> ranks, const Gpt2Config& cfg, const MeasuredEnergies& measured) {
  RunSummary sum;
  // An op's time on its device: cycles / clock on an accelerator, projected for a GPU that is not
  // there, the thread's CPU time for the host's ops, and measured (wall) on the CPU and a GPU.
  // A stage's all-reduce counts at its fastest rank's time: the others' is longer only by a rank
  // parked by the OS (ranks outnumbering cores), as host ops count the CPU time, not the wall.
  using Collective = std::tuple<uint32_t, int, uint32_t, int>;  // step, stage, microbatch, which
  std::map<Collective, double> fastest;
  std::vector<Collective> collective(log.size());
  {
    std::map<std::tuple<int, uint32_t, int, uint32_t>, int> seen;  // per rank, step, stage, microbatch
    for (size_t i = 0; i < log.size(); ++i) {
      const OpRecord& r = log[i];
      if (r.op != "allreduce") continue;
      collective[i] = {r.step, r.stage, r.microbatch, seen[{r.rank, r.step, r.stage, r.microbatch}]++};
      const auto [it, fresh] = fastest.try_emplace(collective[i], r.seconds);
      if (!fresh) it->second = std::min(it->second, r.seconds);
    }
  }
  auto device_seconds = [&](const OpRecord& r) {
    if (devs.macs_per_cycle.count(r.device)) return double(r.cost.cycles) / (ra.clock_of(r.device) * 1e6);
    if (devs.projected.count(r.device)) return r.cost.projected_seconds;
    if (r.device == "host" || r.device.ends_with(":host")) return r.cpu_seconds;
    if (r.op == "allreduce") return fastest.at(collective[&r - log.data()]);
    return r.seconds;
  };
  // Per op and device, and per stage and microbatch (a stage's time: its shared host ops plus its
  // slowest device, counting the host ops done for that device's shard).
  std::map<std::pair<std::string, std::string>, size_t> index;
  const size_t P = ra.plan.stages.size(), M = ra.microbatches;
  // busy[s][j][rank]: a rank's shared host and communication work on stage s, microbatch j, and
  // each of its devices' lanes.
  struct RankTime {
    double shared = 0;
    std::map<std::string, double> lanes;
  };
  std::vector<std::vector<std::map<int, RankTime>>> busy(P, std::vector<std::map<int, RankTime>>(M));
  auto shared = [](const OpRecord& r) {
    return r.lane.empty() && (r.device == "host" || r.device == "comm" || r.device.ends_with(":host") ||
                              r.device.ends_with(":comm"));
  };
  for (const OpRecord& r : log) {
    auto [it, fresh] = index.try_emplace({r.device, r.op}, sum.rows.size());
    if (fresh) {
      sum.rows.emplace_back();
      sum.rows.back().device = r.device, sum.rows.back().op = r.op;
      sum.rows.back().time_kind = devs.time_kind(r.device);
    }
    OpRow& row = sum.rows[it->second];
    ++row.calls;
    row.seconds += device_seconds(r);
    row.cost += r.cost;
    // Not stage work: point-to-point transfers are mostly waiting for the other stage, and an
    // all-reduce's wait is for the stage's slowest rank (the schedule has both; their times are in
    // the per-rank traffic); the gather comes after the pipeline.
    if (r.op == "recv" || r.op == "send" || r.op == "allreduce_wait" || r.op == "gather_logits" ||
        r.op == "send_logits")
      continue;
    RankTime& t = busy[r.stage][r.microbatch][r.rank];
    if (shared(r))
      t.shared += device_seconds(r);
    else
      t.lanes[r.lane.empty() ? r.device : r.lane] += device_seconds(r);
  }
  // GPipe's schedule over those times; a stage's time is its slowest rank's.
  std::vector<std::vector<double>> stage_seconds(P, std::vector<double>(M, 0));
  for (size_t s = 0; s < P; ++s)
    for (size_t j = 0; j < M; ++j)
      for (const auto& [rank, t] : busy[s][j]) {
        double slowest = 0;
        for (const auto& [lane, seconds] : t.lanes) slowest = std::max(slowest, seconds);
        stage_seconds[s][j] = std::max(stage_seconds[s][j], t.shared + slowest);
      }
  const Schedule schedule = gpipe_schedule(stage_seconds);
  sum.makespan = schedule.makespan;
  sum.bubble = schedule.bubble();
  sum.theoretical_bubble = ra.plan.expected_bubble(ra.microbatches);

  const uint64_t what_if_macs_per_cycle = uint64_t{ra.project_rows} * ra.project_cols;
  for (OpRow& r : sum.rows) {
    sum.macs += r.cost.macs;
    sum.cycles += r.cost.cycles;
    sum.bytes += r.cost.read_bytes + r.cost.write_bytes;
    sum.projected_cycles += r.cost.projected_cycles;
    if (const auto it = devs.macs_per_cycle.find(r.device); it != devs.macs_per_cycle.end() && r.cost.cycles)
      r.utilization = double(r.cost.macs) / double(r.cost.cycles * it->second);
    if (r.cost.projected_cycles)
      r.projected_utilization = double(r.cost.macs) / double(r.cost.projected_cycles * what_if_macs_per_cycle);
  }
  for (const auto& [spec, b] : devs.by_spec) sum.devices.push_back(spec);
  sum.projected = devs.projected;
  sum.unknown_gpus = devs.unknown_gpus;
  account_energy(sum, ra, devs, measured);

  // Per rank: device time (on the devices' clocks), and communication against the plan's volume.
  std::map<int, double> compute;
  for (const OpRecord& r : log)
    if (!shared(r) && r.device != "host") compute[r.rank] += device_seconds(r);
  if (!ranks.empty()) predict_traffic(ranks, ra.plan, ra, cfg);
  for (RankSummary& r : ranks) r.compute_seconds = compute[r.rank];
  sum.ranks = std::move(ranks);
  return sum;
}

void add_energy(nlohmann::ordered_json& op, const OpRow& r) {
  if (r.energy_kind.empty()) return;
  op["energy_j"] = r.joules;
  op["energy"] = r.energy_kind;
  if (r.energy_kind == "modelled")
    op["energy_split"] = {{"compute", r.split.compute}, {"onchip", r.split.onchip}, {"dram", r.split.dram},
                          {"leakage", r.split.leakage}};
}

nlohmann::ordered_json energy_json(const RunSummary& sum, const RunArgs& ra, uint64_t tokens) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const auto& [device, e] : sum.energy) {
    nlohmann::ordered_json d = {{"device", device}, {"joules", e.joules}, {"energy", e.kind},
                                {"j_per_token", tokens ? e.joules / double(tokens) : 0.0},
                                {"tops_per_w", e.joules > 0 ? 2.0 * double(e.macs) / e.joules / 1e12 : 0.0}};
    if (e.kind == "modelled")
      d["split"] = {{"compute", e.split.compute}, {"onchip", e.split.onchip}, {"dram", e.split.dram},
                    {"leakage", e.split.leakage}};
    if (e.kind == "measured") {  // joules is the board's; above idle where the idle power is known
      d["board_joules"] = e.joules;
      d["above_idle_joules"] = e.above_idle_joules ? nlohmann::json(*e.above_idle_joules) : nlohmann::json();
      d["phase_seconds"] = e.phase_seconds;
    }
    d["source"] = e.source;
    devices.push_back(d);
  }
  return {{"joules", sum.joules}, {"j_per_token", tokens ? sum.joules / double(tokens) : 0.0},
          {"tops_per_w", sum.tops_per_w()}, {"devices", devices}, {"not_counted", sum.no_energy},
          {"table", {{"name", ra.energy_table.name}, {"node_nm", ra.energy_table.node_nm},
                     {"description", ra.energy_table.description}}}};
}

nlohmann::ordered_json roofline_json(const RunSummary& sum) {
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const OpRow& r : sum.rows)
    if (r.intensity > 0 && r.achieved > 0 && r.compute_ceiling > 0)
      points.push_back({{"device", r.device}, {"op", r.op}, {"intensity", r.intensity}, {"achieved", r.achieved},
                        {"compute_ceiling", r.compute_ceiling}, {"memory_ceiling", r.memory_ceiling},
                        {"time", r.time_kind}});
  return points;
}

nlohmann::ordered_json run_json(const RunSummary& sum, const RunArgs& ra) {
  const bool what_if = ra.project_rows > 0;
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const auto& r : sum.rows) {
    nlohmann::ordered_json o = {{"device", r.device}, {"op", r.op}, {"calls", r.calls},
                                {"seconds", r.seconds}, {"time", r.time_kind},
                                {"cycles", r.cost.cycles}, {"macs", r.cost.macs},
                                {"bytes", r.cost.read_bytes + r.cost.write_bytes}};
    if (r.utilization >= 0) o["utilization"] = r.utilization;
    add_energy(o, r);
    if (what_if && r.cost.projected_cycles)
      o["projected"] = {{"cycles", r.cost.projected_cycles},
                        {"seconds", double(r.cost.projected_cycles) / (ra.project_clock_mhz * 1e6)},
                        {"utilization", r.projected_utilization}};
    ops.push_back(o);
  }
  const Numerics& num = sum.numerics;
  nlohmann::ordered_json j = {
      {"schema_version", 1}, {"model", ra.model}, {"plan", ra.plan.str()}, {"devices", sum.devices},
      {"batch", ra.batch}, {"seq", ra.seq}, {"microbatches", ra.microbatches}, {"clock_mhz", ra.clock_mhz},
      {"clock", ra.clock_source}, {"clocks", ra.clocks_json()}, {"cpu_threads", cpu_threads_json(ra.plan)},
      {"ops", ops},
      {"numerics", {{"max_abs_err", num.max_abs_err}, {"rel_l2", num.rel_l2}, {"cosine", num.cosine},
                    {"top1_agreement", num.top1_agreement}, {"reference", "fp32 on the host CPU"}}},
      {"bubble", {{"measured", sum.bubble}, {"theoretical", sum.theoretical_bubble}}},
      {"totals", {{"seconds", sum.makespan}, {"macs", sum.macs}, {"cycles", sum.cycles}, {"bytes", sum.bytes},
                  {"wall_seconds", sum.wall_seconds}, {"joules", sum.joules},
                  {"j_per_token", sum.joules / double(uint64_t{ra.batch} * ra.seq)},
                  {"tops_per_w", sum.tops_per_w()}}},
      {"energy", energy_json(sum, ra, uint64_t{ra.batch} * ra.seq)},
      {"roofline", roofline_json(sum)}};
  if (!sum.notes.empty()) j["notes"] = sum.notes;
  if (what_if)
    j["projection"] = {{"array", {ra.project_rows, ra.project_cols}}, {"clock_mhz", ra.project_clock_mhz},
                       {"cycles", sum.projected_cycles},
                       {"seconds", double(sum.projected_cycles) / (ra.project_clock_mhz * 1e6)},
                       {"accelerator_seconds", double(sum.cycles) / (ra.clock_mhz * 1e6)}};
  if (!sum.ranks.empty()) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const RankSummary& r : sum.ranks)
      ranks.push_back({{"rank", r.rank}, {"devices", r.devices}, {"compute_seconds", r.compute_seconds},
                       {"comm_seconds", r.traffic.seconds}, {"bytes_sent", r.traffic.bytes_sent},
                       {"gpu_bytes_sent", r.traffic.gpu_bytes_sent}, {"bytes_received", r.traffic.bytes_received},
                       {"messages", r.traffic.messages}, {"predicted_bytes_sent", r.predicted_sent}});
    j["mpi"] = {{"library", sum.mpi_library}, {"processes", sum.ranks.size()}, {"ranks", ranks}};
  }
  if (ra.auto_plan)
    j["auto"] = auto_check_json(ra, {{"per batch", ra.auto_plan->predicted.total(), sum.makespan}}, {&sum});
  return j;
}

void print_json(const RunSummary& sum, const RunArgs& ra) { std::cout << run_json(sum, ra).dump(2) << "\n"; }

void print_csv(const RunSummary& sum, const RunArgs& ra) {
  std::cout << "device,op,calls,seconds,time,cycles,macs,utilization,bytes,projected_cycles,projected_seconds,"
               "energy_j,energy\n";
  for (const auto& r : sum.rows)
    std::cout << fmt::format("{},{},{},{:.9f},{},{},{},{},{},{},{},{},{}\n", r.device, r.op, r.calls, r.seconds,
                             r.time_kind, r.cost.cycles,
                             r.cost.macs, r.utilization >= 0 ? fmt::format("{:.4f}", r.utilization) : "",
                             r.cost.read_bytes + r.cost.write_bytes,
                             r.cost.projected_cycles ? std::to_string(r.cost.projected_cycles) : "",
                             r.cost.projected_cycles
                                 ? fmt::format("{:.9f}", double(r.cost.projected_cycles) / (ra.project_clock_mhz * 1e6))
                                 : "",
                             r.energy_kind.empty() ? "" : fmt::format("{:.6g}", r.joules), r.energy_kind);
}

void print_energy_text(const RunSummary& sum, uint64_t tokens, std::string_view phase) {
  if (sum.energy.empty()) return;
  const std::string title = phase.empty() ? "energy" : fmt::format("{} energy", phase);
  std::string heading = title;
  std::transform(heading.begin(), heading.end(), heading.begin(), [](unsigned char c) { return std::toupper(c); });
  std::cout << fmt::format("\n{:<28} {:>12} {:>12} {:>9} {:<10} {}\n", heading, "mJ", "mJ/TOKEN", "TOPS/W", "", "SPLIT");
  for (const auto& [device, e] : sum.energy) {
    const std::string split = e.kind != "modelled" ? "-"
                              : fmt::format("compute {:.1f}%, on-chip {:.1f}%, DRAM {:.1f}%, leakage {:.1f}%",
                                            100 * e.split.compute / e.joules, 100 * e.split.onchip / e.joules,
                                            100 * e.split.dram / e.joules, 100 * e.split.leakage / e.joules);
    std::cout << fmt::format("{:<28} {:>12.4g} {:>12.4g} {:>9.3g} {:<10} {}\n", device, e.joules * 1e3,
                             e.joules * 1e3 / double(tokens), e.joules > 0 ? 2.0 * double(e.macs) / e.joules / 1e12 : 0.0,
                             e.kind, split);
  }
  for (const auto& [device, e] : sum.energy) {
    std::cout << fmt::format("  {}: {}\n", device, e.source);
    if (e.above_idle_joules)
      std::cout << fmt::format("  {}: board {:.4g} mJ ({:.4g} mJ per token), above idle {:.4g} mJ ({:.4g} mJ per "
                               "token)\n", device, e.joules * 1e3, e.joules * 1e3 / double(tokens),
                               *e.above_idle_joules * 1e3, *e.above_idle_joules * 1e3 / double(tokens));
  }
  std::cout << fmt::format("{}: {:.4g} mJ, {:.4g} mJ per token, {:.3g} TOPS/W{}\n", title, sum.joules * 1e3,
                           sum.joules * 1e3 / double(tokens), sum.tops_per_w(),
                           sum.no_energy.empty() ? "" : fmt::format(" (without {}: no power figure)",
                                                                    fmt::join(sum.no_energy, ", ")));
}

void print_text(const RunSummary& sum, const RunArgs& ra, const Gpt2Config& cfg) {
  std::cout << fmt::format("model {} ({} layers, width {}), plan {}, batch {} x {} tokens, {} microbatch(es), "
                           "accelerator clock {}\n",
                           ra.model, cfg.layers, cfg.width, ra.plan.str(), ra.batch, ra.seq, ra.microbatches,
                           ra.clocks_text());
  std::cout << cpu_threads_text(ra.plan) << "\n";
  std::cout << fmt::format("{:<28} {:<16} {:>6} {:>12} {:<15} {:>12} {:>14} {:>6} {:>12}\n", "DEVICE", "OP", "CALLS",
                           "TIME (ms)", "", "CYCLES", "MACS", "UTIL", "BYTES");
  for (const auto& r : sum.rows)
    std::cout << fmt::format("{:<28} {:<16} {:>6} {:>12.4g} {:<15} {:>12} {:>14} {:>6} {:>12}\n", r.device, r.op, r.calls,
                             r.seconds * 1e3, r.time_kind,
                             r.cost.cycles ? std::to_string(r.cost.cycles) : "-", r.cost.macs ? std::to_string(r.cost.macs) : "-",
                             r.utilization >= 0 ? fmt::format("{:.3f}", r.utilization) : "-",
                             r.cost.read_bytes + r.cost.write_bytes ? std::to_string(r.cost.read_bytes + r.cost.write_bytes) : "-");
  std::cout << fmt::format("\ntotal: {:.3f} ms on the devices' clocks over the pipeline schedule, {} MACs, {} "
                           "accelerator cycles, {} bytes moved; {:.2f} s of wall time\n",
                           sum.makespan * 1e3, sum.macs, sum.cycles, sum.bytes, sum.wall_seconds);
  for (const auto& [spec, gpu] : sum.projected)
    std::cout << fmt::format("{}: times projected from the published peaks of the {}, not measured; its values are "
                             "computed on the host with its precision's numerics\n",
                             spec, gpu);
  for (const std::string& note : sum.notes) std::cout << note << "\n";
  for (const auto& [spec, name] : sum.unknown_gpus)
    std::cout << fmt::format("{}: the {} is not in the table of GPU peaks ({}): no roofline for it\n", spec,
                             name.empty() ? "GPU" : name, known_gpus());
  print_energy_text(sum, uint64_t{ra.batch} * ra.seq);
  if (ra.project_rows > 0) {
    std::cout << fmt::format("\nASIC what-if: the same GEMMs on a {}x{} array at {} MHz (timing model, default memory "
                             "system)\n",
                             ra.project_rows, ra.project_cols, ra.project_clock_mhz);
    for (const auto& r : sum.rows)
      if (r.cost.projected_cycles)
        std::cout << fmt::format("  {:<28} {:<16} {:>12} cycles {:>10.3f} ms  utilization {:.3f}\n", r.device, r.op,
                                 r.cost.projected_cycles, r.cost.projected_cycles / (ra.project_clock_mhz * 1e3),
                                 r.projected_utilization);
    std::cout << fmt::format("  accelerator total: {:.3f} ms projected, {:.3f} ms as run\n",
                             sum.projected_cycles / (ra.project_clock_mhz * 1e3), sum.cycles / (ra.clock_mhz * 1e3));
  }
  if (!sum.ranks.empty()) {
    std::cout << fmt::format("\n{} processes ({}); traffic per rank, measured and as the plan predicts it:\n",
                             sum.ranks.size(), sum.mpi_library);
    std::cout << fmt::format("{:<6} {:<40} {:>12} {:>10} {:>12} {:>14} {:>12}\n", "RANK", "DEVICES", "COMPUTE (ms)",
                             "COMM (ms)", "BYTES SENT", "PREDICTED", "GPU TO GPU");
    for (const RankSummary& r : sum.ranks) {
      std::string names;
      for (const auto& d : r.devices) names += (names.empty() ? "" : "+") + d;
      std::cout << fmt::format("{:<6} {:<40} {:>12.4g} {:>10.4g} {:>12} {:>14} {:>12}\n", r.rank, names,
                               r.compute_seconds * 1e3, r.traffic.seconds * 1e3, r.traffic.bytes_sent, r.predicted_sent,
                               r.traffic.gpu_bytes_sent);
    }
  }
  const Numerics& num = sum.numerics;
  std::cout << fmt::format("bubble: {:.3f} from the ops' times on a GPipe schedule, {:.3f} in theory ((p - 1) / (m + p - 1))\n",
                           sum.bubble, sum.theoretical_bubble);
  std::cout << fmt::format("numerics against fp32 on the CPU: max abs error {:.4g}, relative L2 {:.4g}, cosine {:.6f}, "
                           "top-1 agreement {:.3f}\n",
                           num.max_abs_err, num.rel_l2, num.cosine, num.top1_agreement);
  if (ra.auto_plan) std::cout << auto_check_text(ra, {{"per batch", ra.auto_plan->predicted.total(), sum.makespan}});
}

void print_comparison(const std::vector<PlanRun>& runs, const RunArgs& ra, const Gpt2Config& cfg) {
  const uint64_t tokens = uint64_t{ra.batch} * ra.seq;
  const double first = runs.front().sum.makespan;
  if (ra.json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const PlanRun& r : runs) all.push_back(run_json(r.sum, r.args));
    std::cout << nlohmann::ordered_json{{"schema_version", 1}, {"model", ra.model}, {"batch", ra.batch},
                                        {"seq", ra.seq}, {"runs", all}}
                     .dump(2)
              << "\n";
    return;
  }
  if (ra.csv) {
    std::cout << "plan,precision,seconds,clock_mhz,joules,j_per_token,max_abs_err,rel_l2,cosine,top1_agreement\n";
    for (const PlanRun& r : runs) {
      const Numerics& n = r.sum.numerics;
      std::cout << fmt::format("{},{},{:.9f},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.9f},{:.4f}\n", r.args.plan.str(),
                               plan_precision(r.args.plan), r.sum.makespan, r.args.clock_mhz, r.sum.joules,
                               r.sum.joules / double(tokens), n.max_abs_err, n.rel_l2, n.cosine, n.top1_agreement);
    }
    return;
  }
  std::cout << fmt::format("model {} ({} layers, width {}), batch {} x {} tokens, {} microbatch(es); {} plans side by "
                           "side, each against fp32 on the CPU\n\n",
                           ra.model, cfg.layers, cfg.width, ra.batch, ra.seq, ra.microbatches, runs.size());
  std::cout << fmt::format("{:<40} {:<10} {:>10} {:>8} {:>9} {:>10} {:>10} {:>10} {:>9} {:>6}\n", "PLAN", "PRECISION",
                           "TIME (ms)", "X FIRST", "CLOCK", "mJ/TOKEN", "MAX ABS", "REL L2", "COSINE", "TOP-1");
  for (const PlanRun& r : runs) {
    const Numerics& n = r.sum.numerics;
    std::cout << fmt::format("{:<40} {:<10} {:>10.4g} {:>8.3f} {:>9} {:>10} {:>10.4g} {:>10.4g} {:>9.6f} {:>6.3f}\n",
                             r.args.plan.str(), plan_precision(r.args.plan), r.sum.makespan * 1e3,
                             first > 0 ? r.sum.makespan / first : 0.0,
                             r.sum.cycles ? fmt::format("{:.4g} MHz", r.args.clock_mhz) : "-",
                             r.sum.energy.empty() ? "-" : fmt::format("{:.4g}", r.sum.joules * 1e3 / double(tokens)),
                             n.max_abs_err, n.rel_l2, n.cosine, n.top1_agreement);
  }
  std::cout << "\ntime on the devices' clocks over the pipeline schedule (accelerators: cycles / clock; GPUs measured "
               "or projected; the CPU measured); energy of the devices that have a figure\n";
  for (const PlanRun& r : runs)
    if (r.sum.cycles) std::cout << fmt::format("  {}: clock {}\n", r.args.plan.str(), r.args.clocks_text());
  std::map<std::string, std::set<std::string>> projected;  // GPU -> the devices projected as it
  for (const PlanRun& r : runs)
    for (const auto& [spec, gpu] : r.sum.projected) projected[gpu].insert(spec);
  for (const auto& [gpu, specs] : projected)
    std::cout << fmt::format("  {}: times projected from the published peaks of the {}, not measured\n",
                             fmt::join(specs, ", "), gpu);
}

}  // namespace tessera::cli
