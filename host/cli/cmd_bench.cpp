#include <unistd.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <random>
#include <set>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "run_args.hpp"
#include "run_report.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint32_t> parse_counts(const std::string& text, const char* option) {
  std::vector<uint32_t> out;
  for (int32_t v : parse_token_ids(text, option)) {
    if (v <= 0) throw std::invalid_argument(fmt::format("{}: {} is not a positive count", option, v));
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

// One test of one plan: a prefill of `tokens` tokens per sequence (pp), or `tokens` decode steps
// from an empty cache (tg), as llama-bench defines them.
struct Result {
  std::string plan, precision, test, time;  // time: what the device-clock figure rests on
  uint32_t batch = 0, tokens = 0, warmup = 0;
  double seconds = 0, wall_seconds = 0;  // on the devices' clocks, and of the simulation or run
  double tokens_per_s() const { return seconds > 0 ? batch * tokens / seconds : 0; }
  // Energy of the devices that have a figure (modelled, measured or projected, as `energy` says);
  // GPUs measured with their idle power known: the board's energy less idle.
  std::string energy;
  double joules = 0, clock_mhz = 0;
  std::optional<double> above_idle_joules;
  std::string clock;  // where clock_mhz comes from
  std::string clocks_text;
  nlohmann::json clocks;  // each accelerator's
  nlohmann::ordered_json cpu_threads;  // the CPU backend's, where the plan has a cpu device
  std::vector<std::string> notes;      // how its stage programs ran (Pipeline::notes)
  uint64_t energy_macs = 0;
  // Plans on GPUs alone: the least time their peaks allow for the test, and the GPUs' peaks.
  std::optional<double> roofline_seconds;
  std::string roofline_gpu;
  double j_per_token() const { return joules / (double(batch) * tokens); }
  std::optional<double> above_idle_j_per_token() const {
    if (!above_idle_joules) return std::nullopt;
    return *above_idle_joules / (double(batch) * tokens);
  }
  double tops_per_w() const { return joules > 0 ? 2.0 * double(energy_macs) / joules / 1e12 : 0; }
  std::optional<double> roofline_fraction() const {
    if (!roofline_seconds || seconds <= 0) return std::nullopt;
    return *roofline_seconds / seconds;
  }
};

// The roofline of a test on a plan whose devices are all GPUs with known peaks in one precision
// (present or projected): one GPU's, divided among the plan's GPUs as if they split it perfectly.
void add_roofline(Result& r, const Plan& plan, const Devices& devs, const Gpt2Config& cfg, bool prefill) {
  std::set<std::pair<std::string, GpuPrecision>> kinds;
  size_t gpus = 0;
  for (const Stage& st : plan.stages)
    for (const PlanDevice& d : st.devices) {
      const auto g = devs.gpu_of.find(d.label);
      if (d.kind != "cuda" || g == devs.gpu_of.end() || g->second.first.empty()) return;
      kinds.insert(g->second);
      ++gpus;
    }
  if (kinds.size() != 1) return;
  const auto& [name, precision] = *kinds.begin();
  const GpuPeaks& peaks = gpu_peaks(name);
  const double one = prefill ? roofline_prefill_seconds(cfg, peaks, precision, r.batch, r.tokens)
                             : roofline_decode_seconds(cfg, peaks, precision, r.batch, r.tokens);
  r.roofline_seconds = one / double(gpus);
  r.roofline_gpu = std::string(name);
}

void run_test(Pipeline& p, bool prefill, uint32_t tokens, uint32_t batch, const Gpt2Config& cfg, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(cfg.vocab) - 1);
  auto some = [&](uint32_t n) {
    std::vector<int32_t> t(uint64_t{batch} * n);
    for (auto& x : t) x = id(rng);
    return t;
  };
  p.start(batch, tokens);
  if (prefill)
    p.step(some(tokens), tokens, true);
  else
    for (uint32_t i = 0; i < tokens; ++i) p.step(some(1), 1, true);
  p.end();
}

// `warmup` untimed runs of the test, then the one measured.
Result measure(Pipeline& p, const RunArgs& ra, const Devices& devs, const Gpt2Config& cfg, bool prefill,
               uint32_t tokens, uint32_t batch, uint32_t warmup, std::mt19937_64& rng) {
  for (uint32_t w = 0; w < warmup; ++w) run_test(p, prefill, tokens, batch, cfg, rng);
  const size_t from = p.log().size();
  const EnergyMark before = read_energy(devs);
  const auto t0 = Clock::now();
  run_test(p, prefill, tokens, batch, cfg, rng);
  const MeasuredEnergies measured = measured_between(devs, before, read_energy(devs));
  Result r;
  r.plan = ra.plan.str(), r.precision = plan_precision(ra.plan), r.test = fmt::format("{}{}", prefill ? "pp" : "tg", tokens), r.batch = batch, r.tokens = tokens;
  r.warmup = warmup;
  r.clock_mhz = ra.clock_mhz, r.clock = ra.clock_source, r.cpu_threads = cpu_threads_json(ra.plan);
  r.clocks_text = ra.clocks_text(), r.clocks = ra.clocks_json();
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::vector<OpRecord> log = labelled_log(p, devs, from);
  // Time: each step over the pipeline schedule; energy: the whole test's, counters and all.
  std::set<std::string> kinds, energy_kinds;
  for (uint32_t s = 0; s < (prefill ? 1 : tokens); ++s) {
    std::vector<OpRecord> step;
    std::copy_if(log.begin(), log.end(), std::back_inserter(step), [s](const OpRecord& o) { return o.step == s; });
    const RunSummary sum = summarize(ra, devs, step, {}, cfg);
    r.seconds += sum.makespan;
    for (const OpRow& row : sum.rows) kinds.insert(row.time_kind);
  }
  const RunSummary whole = summarize(ra, devs, log, {}, cfg, measured);
  r.joules = whole.joules;
  r.energy_macs = whole.energy_macs;
  for (const auto& [device, e] : whole.energy) {
    energy_kinds.insert(e.kind);
    if (e.above_idle_joules) r.above_idle_joules = r.above_idle_joules.value_or(0) + *e.above_idle_joules;
  }
  for (const auto& k : kinds) r.time += (r.time.empty() ? "" : " + ") + k;
  for (const auto& k : energy_kinds) r.energy += (r.energy.empty() ? "" : " + ") + k;
  add_roofline(r, ra.plan, devs, cfg, prefill);
  r.notes = p.notes();
  return r;
}

// Whether a plan has a device timed by the wall clock (the CPU, a GPU that is there): one that a
// first run's set-up (allocations, libraries' lazy loading, caches) would slow.
bool timed_by_wall_clock(const Plan& plan, const Devices& devs) {
  for (const Stage& st : plan.stages)
    for (const PlanDevice& d : st.devices)
      if (devs.time_kind(d.label) == "measured") return true;
  return false;
}

}  // namespace

int bench(const std::vector<std::string>& args) {
  RunArgs ra;
  std::string prompts = "128", decodes = "32", format = "md";
  po::options_description opts(
      "tessera bench: prompt processing (pp: a prefill of P tokens) and token generation (tg: N decode steps)\n"
      "in tokens/s on the devices' clocks, per plan, as llama-bench measures them");
  opts.add_options()
      ("help,h", "this text")
      ("model", po::value(&ra.model)->default_value("tiny"),
       "a model directory, tiny, or random:LAYERS,WIDTH,HEADS[,VOCAB[,POSITIONS]]")
      ("prompt,p", po::value(&prompts)->default_value("128"), "prompt lengths, comma-separated")
      ("gen,n", po::value(&decodes)->default_value("32"), "decode lengths, comma-separated")
      ("batch", po::value(&ra.batch)->default_value(1), "sequences at once")
      ("plan", po::value(&ra.plan_text), kPlanHelp)
      ("seed", po::value(&ra.seed)->default_value(1), "seed of the random tokens")
      ("warmup", po::value<uint32_t>(),
       "untimed runs of each test before the one measured (default: 1 on plans with a device timed by the wall "
       "clock, the CPU or a GPU that is there; 0 on simulated and projected ones, whose times do not change)")
      ("output,o", po::value(&format)->default_value("md"), "md, csv or json");
  ra.add_energy_option(opts);
  ra.add_clock_option(opts);
  ra.add_cpu_threads_option(opts);
  ra.add_profile_ops_option(opts);
  const auto vm = parse_args(opts, args);
  if (!vm) return 0;
  if (format != "md" && format != "csv" && format != "json")
    throw std::invalid_argument(fmt::format("-o {}: expected md, csv or json", format));
  const std::vector<uint32_t> pp = parse_counts(prompts, "-p"), tg = parse_counts(decodes, "-n");
  ra.finish(*vm);  // the model's configuration and the plans
  const Gpt2Config& cfg = ra.cfg;
  for (uint32_t t : pp)
    if (t > cfg.positions) throw std::invalid_argument(fmt::format("-p {}: more than the model's {} positions", t, cfg.positions));
  for (uint32_t t : tg)
    if (t > cfg.positions) throw std::invalid_argument(fmt::format("-n {}: more than the model's {} positions", t, cfg.positions));
  const Gpt2Model model = ra.load_model();
  std::mt19937_64 rng(ra.seed);
  std::vector<Result> results;
  const bool tty = ::isatty(STDERR_FILENO);
  for (size_t i = 0; i < ra.plans.size(); ++i) {
    ra.select_plan(i);
    ra.plan.assign_ranks(1);
    const Plan& plan = ra.plan;
    const auto devs = open_devices(ra, nullptr, 0, "bench");
    Pipeline pipeline(model, stage_shards(ra.plan, *devs, 0));
    pipeline.profile_ops = ra.profile_ops;
    const uint32_t warmup = vm->count("warmup") ? (*vm)["warmup"].as<uint32_t>() : timed_by_wall_clock(plan, *devs);
    for (bool prefill : {true, false})
      for (uint32_t t : prefill ? pp : tg) {
        if (tty) std::cerr << fmt::format("\r  {} {}{} ...   ", plan.str(), prefill ? "pp" : "tg", t) << std::flush;
        results.push_back(measure(pipeline, ra, *devs, cfg, prefill, t, ra.batch, warmup, rng));
      }
  }
  if (tty) std::cerr << "\r" << std::string(70, ' ') << "\r" << std::flush;

  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  if (format == "json") {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const Result& r : results) {
      rows.push_back({{"plan", r.plan}, {"precision", r.precision}, {"test", r.test}, {"batch", r.batch},
                      {"tokens", r.tokens}, {"warmup", r.warmup}, {"seconds", r.seconds},
                      {"tokens_per_s", r.tokens_per_s()}, {"time", r.time}, {"joules", r.joules},
                      {"j_per_token", r.j_per_token()}, {"above_idle_j_per_token", optional(r.above_idle_j_per_token())},
                      {"tops_per_w", r.tops_per_w()}, {"energy", r.energy},
                      {"roofline", r.roofline_seconds
                                       ? nlohmann::ordered_json{{"gpu", r.roofline_gpu},
                                                                {"seconds", *r.roofline_seconds},
                                                                {"fraction", *r.roofline_fraction()},
                                                                {"board_watts", gpu_peaks(r.roofline_gpu).board_watts}}
                                       : nlohmann::ordered_json()},
                      {"clock_mhz", r.clock_mhz}, {"clock", r.clock}, {"clocks", r.clocks},
                      {"wall_seconds", r.wall_seconds},
                      {"cpu_threads", r.cpu_threads}, {"notes", r.notes}});
    }
    std::cout << nlohmann::ordered_json{{"schema_version", 1}, {"model", ra.model}, {"clock_mhz", ra.clock_mhz},
                                        {"energy_table", ra.energy_table.name}, {"results", rows}}.dump(2) << "\n";
  } else if (format == "csv") {
    std::cout << "model,plan,batch,test,tokens_per_s,seconds,time,wall_seconds,j_per_token,tops_per_w,energy,precision,"
                 "warmup,roofline_fraction,above_idle_j_per_token\n";
    for (const Result& r : results)
      std::cout << fmt::format("{},{},{},{},{:.3f},{:.9f},{},{:.3f},{:.6g},{:.4g},{},{},{},{},{}\n", ra.model, r.plan,
                               r.batch, r.test, r.tokens_per_s(), r.seconds, r.time, r.wall_seconds, r.j_per_token(),
                               r.tops_per_w(), r.energy, r.precision, r.warmup,
                               r.roofline_fraction() ? fmt::format("{:.4f}", *r.roofline_fraction()) : "",
                               r.above_idle_joules ? fmt::format("{:.6g}", *r.above_idle_j_per_token()) : "");
  } else {
    std::cout << fmt::format("| model | plan | precision | batch | test | tokens/s | time | of roofline | mJ/token | "
                             "above idle | TOPS/W | energy | wall s |\n"
                             "|---|---|---|---:|---|---:|---|---:|---:|---:|---:|---|---:|\n");
    for (const Result& r : results)
      std::cout << fmt::format(
          "| {} | {} | {} | {} | {} | {:.2f} | {} | {} | {:.4g} | {} | {:.3g} | {} | {:.2f} |\n", ra.model, r.plan,
          r.precision, r.batch, r.test, r.tokens_per_s(), r.time,
          r.roofline_fraction() ? fmt::format("{:.1f}%", 100 * *r.roofline_fraction()) : "-", r.j_per_token() * 1e3,
          r.above_idle_joules ? fmt::format("{:.4g}", *r.above_idle_j_per_token() * 1e3) : "-",
          r.tops_per_w(), r.energy, r.wall_seconds);
    std::set<std::string> clocks, rooflines;
    for (const Result& r : results) {
      clocks.insert(r.clocks_text);
      if (r.roofline_seconds) rooflines.insert(std::string(gpu_peaks(r.roofline_gpu).description));
    }
    std::set<uint32_t> warmups;
    for (const Result& r : results) warmups.insert(r.warmup);
    std::cout << fmt::format("\ntokens/s on the devices' clocks (accelerators at {}); pp: a prefill of that many "
                             "tokens per sequence, tg: that many decode steps from an empty cache; each test timed "
                             "after {} untimed run(s) of it (--warmup)\n",
                             fmt::join(clocks, "; "), fmt::join(warmups, " or "));
    if (!rooflines.empty())
      std::cout << fmt::format("of roofline: the least time the GPU's peaks allow for the test (prefill: FLOPs / "
                               "peak; decode: weight and KV-cache bytes / bandwidth, per step) over the time it took; "
                               "peaks of the {}\n",
                               fmt::join(rooflines, "; "));
    std::cout << fmt::format("energy: accelerators modelled from their counted actions ({} table: {}); GPUs that are "
                             "there measured by their board's energy counter (NVML) over the test, with the energy "
                             "above their idle power beside it, and projected from their board power over their "
                             "time where they are not; the host is not counted\n",
                             ra.energy_table.name, ra.energy_table.description);
    std::set<std::string> threads, notes;
    for (size_t i = 0; i < ra.plans.size(); ++i) threads.insert(cpu_threads_text(ra.plans[i]));
    for (const Result& r : results) notes.insert(r.notes.begin(), r.notes.end());
    for (const auto& t : threads) std::cout << t;
    for (const auto& n : notes) std::cout << n << "\n";
  }
  return 0;
}

}  // namespace tessera::cli
