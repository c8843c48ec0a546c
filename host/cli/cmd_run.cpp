#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "run_args.hpp"
#include "run_report.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/io/npy.hpp"
#include "tessera/parallel/comm.hpp"
#include "tessera/runtime/transformer.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

using Fp32Logits = std::function<const std::vector<float>&()>;

// Runs ra.plan on the devices of rank `me`; on rank 0 (or alone) sets `sum` to the run's summary, its
// numerics against `fp32` included, and writes the trace and logits the arguments ask for. 1 where a
// device failed its check, else 0.
int run_plan(const RunArgs& ra, const Gpt2Model& model, const std::vector<int32_t>& tokens, const Fp32Logits& fp32,
             Comm* comm, int me, std::optional<RunSummary>& sum);

}  // namespace

int run(const std::vector<std::string>& args) {
  RunArgs ra;
  ra.allow_auto = true;
  po::options_description opts(
      "tessera run: run a GPT-2 model over a plan of devices and compare it with an fp32 CPU run of the same model:\n"
      "per op and device time (measured on the CPU, cycles / clock on accelerators), cycles, MACs, utilization,\n"
      "bytes moved, the pipeline bubble, and the numerics of the logits; several plans side by side");
  opts.add_options()("help,h", "this text");
  ra.add_options(opts);
  const auto parsed = parse_args(opts, args);
  if (!parsed) return 0;
  ra.finish(*parsed);
  // Under mpirun every process runs this, each with the plan's devices of its rank.
  const std::unique_ptr<Comm> comm = mpi_world();
  ra.resolve_auto(RunPhase::kPrefill, 0, comm.get());
  if (comm) ra.require_one_plan("a run under mpirun");
  if (ra.plans.size() > 1 && !(ra.trace_path.empty() && ra.dump_dir.empty() && ra.capture_dir.empty()))
    throw std::invalid_argument("--trace, --dump and --capture take one plan");
  const std::vector<int32_t> tokens = ra.tokens();
  const Gpt2Model model = ra.load_model();
  check_tokens(model.cfg, tokens, ra.batch, ra.seq);
  std::vector<float> reference;  // computed once, by the process that reports
  const Fp32Logits fp32 = [&]() -> const std::vector<float>& {
    if (reference.empty()) {
      CpuBackend cpu;
      reference = forward(model, tokens, ra.batch, ra.seq, cpu);
    }
    return reference;
  };
  std::optional<RunSummary> sum;
  if (ra.plans.size() == 1) {
    ra.plan.assign_ranks(comm ? comm->size() : 1);
    return on_every_rank(comm.get(), "run", [&](int me) {
      if (const int rc = run_plan(ra, model, tokens, fp32, comm.get(), me, sum); rc != 0 || !sum) return rc;
      if (ra.json)
        print_json(*sum, ra);
      else if (ra.csv)
        print_csv(*sum, ra);
      else
        print_text(*sum, ra, model.cfg);
      return 0;
    });
  }
  std::vector<PlanRun> runs;
  for (size_t i = 0; i < ra.plans.size(); ++i) {
    ra.select_plan(i);
    ra.plan.assign_ranks(1);
    if (run_plan(ra, model, tokens, fp32, nullptr, 0, sum) != 0) return 1;
    runs.push_back({ra, std::move(*sum)});
  }
  print_comparison(runs, ra, model.cfg);
  return 0;
}

namespace {

int run_plan(const RunArgs& ra, const Gpt2Model& model, const std::vector<int32_t>& tokens, const Fp32Logits& fp32,
             Comm* comm, int me, std::optional<RunSummary>& sum) {
  const auto devs = open_devices(ra, comm, me, "run");
  if (!devs) return 1;
  Pipeline pipeline(model, stage_shards(ra.plan, *devs, me), comm);
  pipeline.profile_ops = ra.profile_ops;
  show_progress(pipeline, ra.microbatches);  // simulations can take a while
  const EnergyMark energy_before = read_energy(*devs);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float> logits = pipeline.forward(tokens, ra.batch, ra.seq, ra.microbatches);
  const MeasuredEnergies energy = measured_between(*devs, energy_before, read_energy(*devs));
  for (const auto& [dev, recorder] : devs->recorders) recorder->finish(*dev);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  clear_progress(pipeline);
  std::vector<OpRecord> log = labelled_log(pipeline, *devs);
  std::vector<RankSummary> ranks;
  if (comm) {
    // Rank 0 reports: every rank's records, devices and traffic come to it.
    ranks = gather(*comm, log, *devs, ra);
    if (me != 0) return 0;
  }
  if (!ra.trace_path.empty()) write_trace(ra.trace_path, log, ra, devs->macs_per_cycle);
  if (!ra.dump_dir.empty()) {
    std::filesystem::create_directories(ra.dump_dir);
    write_npy<float>(ra.dump_dir + "/logits.npy", {tokens.size(), model.cfg.vocab}, logits);
  }
  sum = summarize(ra, *devs, log, std::move(ranks), model.cfg, energy);
  sum->numerics = compare_logits(logits, fp32(), model.cfg.vocab);
  sum->wall_seconds = wall;
  sum->notes = pipeline.notes();
  if (comm) sum->mpi_library = comm->library();
  return 0;
}

}  // namespace

}  // namespace tessera::cli
