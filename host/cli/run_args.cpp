#include "run_args.hpp"

#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/model/parse.hpp"
#include "tessera/parallel/comm.hpp"

#include <algorithm>
#include <charconv>
#include <random>
#include <set>

#include <fmt/format.h>

namespace po = boost::program_options;

namespace tessera::cli {

void RunArgs::add_options(po::options_description& opts) {
  opts.add_options()
      ("model", po::value(&model)->default_value("tiny"),
       "a model directory (config.json + model.safetensors), tiny, or random:LAYERS,WIDTH,HEADS[,VOCAB[,POSITIONS]]\n"
       "(seeded random weights of that shape: random:12,768,12,50257,1024 is GPT-2 small)")
      ("plan", po::value(&plan_text), kPlanHelp)
      ("devices", po::value(&devices_text), kDevicesHelp)
      ("tokens", po::value(&tokens_text), "comma-separated token ids (one sequence)")
      ("batch", po::value(&batch)->default_value(1), "sequences of random tokens")
      ("seq", po::value(&seq), "tokens per sequence (default: 32, or the model's positions if fewer)")
      ("microbatches", po::value(&microbatches)->default_value(1), "microbatches flowing through the stages")
      ("project-array", po::value(&project_array), "ASIC what-if: re-time every accelerator GEMM for an RxC array")
      ("project-clock-mhz", po::value(&project_clock_mhz), "ASIC what-if: its clock (default: --clock-mhz)")
      ("seed", po::value(&seed)->default_value(1), "seed of the random tokens")
      ("dump", po::value(&dump_dir), "write logits.npy (float32, [tokens, vocab]) here")
      ("trace", po::value(&trace_path), "write a Chrome trace-event JSON file (opens in Perfetto)")
      ("capture", po::value(&capture_dir),
       "record each accelerator's loads, descriptors and outputs in a trace under this directory (tessera replay)")
      ("csv", po::bool_switch(&csv), "print the per-op table as CSV")
      ("json", po::bool_switch(&json), "print one JSON object");
  add_energy_option(opts);
  add_clock_option(opts);
  add_cpu_threads_option(opts);
  add_profile_ops_option(opts);
}

void RunArgs::add_profile_ops_option(po::options_description& opts) {
  opts.add_options()("profile-ops", po::bool_switch(&profile_ops),
                     "run each GPU stage op by op, for a time per op (by default a stage held whole by a GPU runs "
                     "on it as one program, decode in CUDA graphs, and reports one 'stage' op a step)");
}

void RunArgs::add_cpu_threads_option(po::options_description& opts) {
  opts.add_options()("cpu-threads", po::value(&cpu_threads),
                     "BLAS threads of every product on the cpu device (default: one for small products, the cores "
                     "available for large ones, shared among the MPI ranks on the host)");
}

void RunArgs::add_clock_option(po::options_description& opts) {
  opts.add_options()("clock-mhz", po::value(&clock_mhz),
                     "accelerator clock: its time is cycles / clock (default: each accelerator's own preset's "
                     "estimated Fmax; docs/ENERGY.md)");
}

void RunArgs::resolve_clock(const Plan& p) {
  device_clocks.clear();
  AcceleratorClock slowest;
  for (const Stage& st : p.stages)
    for (const PlanDevice& d : st.devices) {
      if (!d.accelerator()) continue;
      const AcceleratorClock c =
          clock_given ? AcceleratorClock{clock_mhz, clock_source} : accelerator_clock(driver::DeviceSpec::parse(d.spec));
      device_clocks[d.label] = c;
      if (slowest.mhz == 0 || c.mhz < slowest.mhz) slowest = c;
    }
  if (clock_given) return;
  if (slowest.mhz == 0) slowest = {250, "assumed: the plan has no accelerator"};
  clock_mhz = slowest.mhz, clock_source = slowest.source;
}

double RunArgs::clock_of(const std::string& device) const {
  const auto it = device_clocks.find(device);
  return it == device_clocks.end() ? clock_mhz : it->second.mhz;
}

nlohmann::json RunArgs::clocks_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [label, c] : device_clocks) j[label] = {{"mhz", c.mhz}, {"source", c.source}};
  return j;
}

std::string RunArgs::clocks_text() const {
  const bool one = std::all_of(device_clocks.begin(), device_clocks.end(),
                               [&](const auto& d) { return d.second.mhz == clock_mhz; });
  if (one) return fmt::format("{} MHz ({})", clock_mhz, clock_source);
  std::string s;
  for (const auto& [label, c] : device_clocks) s += fmt::format("{}{} {} MHz ({})", s.empty() ? "" : "; ", label, c.mhz, c.source);
  return s;
}

void RunArgs::apply_cpu_threads(const po::variables_map& vm) const {
  if (!vm.count("cpu-threads")) return;
  if (cpu_threads == 0) throw std::invalid_argument("--cpu-threads must be positive");
  set_cpu_threads(cpu_threads);
}

void RunArgs::add_energy_option(po::options_description& opts) {
  opts.add_options()("energy-table", po::value(&energy_table_name)->default_value("7nm"),
                     "the accelerator's energy and area per action: 45nm, 16nm, 7nm (docs/ENERGY.md) or a table file");
}

void RunArgs::finish(const po::variables_map& vm) {
  if (json && csv) throw std::invalid_argument("give --json or --csv, not both");
  apply_cpu_threads(vm);
  if (!tokens_text.empty() && (vm.count("seq") || (vm.count("batch") && !vm["batch"].defaulted())))
    throw std::invalid_argument("give either --tokens or --batch/--seq, not both");
  clock_given = vm.count("clock-mhz") > 0;
  if (clock_given && !(clock_mhz > 0)) throw std::invalid_argument("--clock-mhz must be positive");
  if (clock_given) clock_source = "given: --clock-mhz";
  if (!project_array.empty()) {
    const size_t x = project_array.find('x');
    const auto rows = parse_uint(project_array.substr(0, x), 1, 255);
    const auto cols = x == std::string::npos ? std::nullopt : parse_uint(project_array.substr(x + 1), 1, 255);
    if (!rows || !cols)
      throw std::invalid_argument(fmt::format("--project-array {}: expected RxC with R and C in 1-255", project_array));
    project_rows = static_cast<uint32_t>(*rows);
    project_cols = static_cast<uint32_t>(*cols);
  }
  project_clock_given = vm.count("project-clock-mhz") > 0;
  if (vm.count("project-clock-mhz") && !(project_clock_mhz > 0))
    throw std::invalid_argument("--project-clock-mhz must be positive");
  if (vm.count("project-clock-mhz") && project_array.empty())
    throw std::invalid_argument("--project-clock-mhz needs --project-array");
  cfg = model_config();
  if (!tokens_text.empty()) {
    batch = 1;
    seq = static_cast<uint32_t>(std::count(tokens_text.begin(), tokens_text.end(), ',') + 1);
  }
  if (seq == 0) seq = std::min<uint32_t>(cfg.positions, 32);
  if (batch == 0 || microbatches == 0) throw std::invalid_argument("--batch and --microbatches must be positive");
  if (microbatches > batch)
    throw std::invalid_argument(fmt::format("{} microbatches for a batch of {} sequences: each microbatch needs one",
                                            microbatches, batch));
  if (seq > cfg.positions)
    throw std::invalid_argument(fmt::format("{} tokens in a sequence, more than the model's {} positions", seq,
                                            cfg.positions));
  microbatches_given = vm.count("microbatches") && !vm["microbatches"].defaulted();
  plans.clear();
  const auto listed = Plan::split_list(plan_text);
  if (listed.size() > 1 && std::count(listed.begin(), listed.end(), "auto"))
    throw std::invalid_argument("--plan auto takes no other plans beside it");
  auto_requested = plan_text == "auto";
  if (!devices_text.empty() && !auto_requested) throw std::invalid_argument("--devices goes with --plan auto");
  if (auto_requested) {
    if (!allow_auto) throw std::invalid_argument("--plan auto is for tessera run, generate and plan");
    energy_table = EnergyTable::load(energy_table_name);
    return;  // resolve_auto chooses the plan once the workload is known
  }
  for (const std::string& text : listed) {
    if (text.empty() && !plan_text.empty())
      throw std::invalid_argument(fmt::format("--plan {}: an empty plan in the list", plan_text));
    plans.push_back(text.empty() ? Plan::single("rtl:0", cfg.layers) : Plan::parse(text));
    plans.back().resolve(cfg);
  }
  select_plan(0);
  energy_table = EnergyTable::load(energy_table_name);
}

void RunArgs::resolve_auto(RunPhase phase, uint32_t new_tokens, Comm* comm) {
  if (!auto_requested) return;
  const int world = comm ? comm->size() : 1;
  std::string listed_text = devices_text;
  if (listed_text.empty()) {
    if (!comm) throw std::invalid_argument("--plan auto needs --devices (the devices to place the model on)");
    for (int r = 0; r < world; ++r) listed_text += fmt::format("{}r{}:model:0", r ? "," : "", r);  // one per rank
  }
  // Every device on a rank: as written, or round-robin; the plan chosen names them.
  Plan listed;
  listed.stages.push_back(Stage{0, cfg.layers - 1, parse_devices(listed_text)});
  listed.assign_ranks(world);
  std::vector<PlanDevice> devices = listed.stages[0].devices;
  if (comm)
    for (PlanDevice& d : devices) d.rank_given = true;
  const Workload w{phase, batch, seq, new_tokens};
  LinkCosts links;
  if (comm) {
    // Every size of activations a stage's all-reduce may carry.
    std::set<uint64_t> bytes;
    for (const auto& step : w.steps())
      for (uint32_t b = 1; b <= batch; ++b) bytes.insert(uint64_t{b} * step.tokens * cfg.width * 4);
    links = measure_links(*comm, {bytes.begin(), bytes.end()});
    planning_traffic = comm->stats();
  }
  // Rank 0 plans; every rank runs what it chose (or stops with its reason).
  std::string chosen;
  if (!comm || comm->rank() == 0) {
    try {
      // Each accelerator at --clock-mhz or its own clock, as the chosen plan's run times it.
      auto model = std::make_shared<CostModel>(cfg, devices, w, clock_given ? clock_mhz : 0, true, std::move(links));
      auto_plan = choose_plan(*model, devices, microbatches_given ? microbatches : 0);
      costs = std::move(model);
      chosen = fmt::format("{}\n{}", auto_plan->plan.str(), auto_plan->microbatches);
    } catch (const std::invalid_argument& e) {
      if (!comm) throw;
      chosen = fmt::format("error\n{}", e.what());
    }
  }
  if (comm) chosen = comm->allgather(chosen)[0];
  const size_t line = chosen.find('\n');
  if (chosen.starts_with("error\n")) throw std::invalid_argument(chosen.substr(line + 1));
  plans = {Plan::parse(chosen.substr(0, line))};
  plans[0].resolve(cfg);
  microbatches = static_cast<uint32_t>(std::stoul(chosen.substr(line + 1)));
  select_plan(0);
}

void RunArgs::select_plan(size_t i) {
  plan = plans.at(i);
  resolve_clock(plan);
  if (!project_clock_given) project_clock_mhz = clock_mhz;
}

void RunArgs::require_one_plan(std::string_view what) const {
  if (plans.size() > 1)
    throw std::invalid_argument(fmt::format("--plan lists {} plans; {} takes one", plans.size(), what));
}

std::string plan_precision(const Plan& plan) {
  std::set<std::string> kinds;
  for (const Stage& st : plan.stages)
    for (const PlanDevice& d : st.devices) kinds.insert(d.kind == "cpu" ? "fp32" : std::string(to_string(d.precision)));
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : "+") + k;
  return out;
}

Gpt2Config RunArgs::model_config() const {
  if (model == "tiny") return Gpt2Config{};
  if (!model.starts_with("random:")) return Gpt2Config::load(model);
  std::vector<uint32_t> v;
  for (size_t pos = 7; pos <= model.size();) {
    const size_t comma = std::min(model.find(',', pos), model.size());
    const auto x = parse_uint(std::string_view(model).substr(pos, comma - pos), 1, 1u << 30);
    if (!x)
      throw std::invalid_argument(fmt::format("--model {}: expected random:LAYERS,WIDTH,HEADS[,VOCAB[,POSITIONS]]", model));
    v.push_back(static_cast<uint32_t>(*x));
    pos = comma + 1;
  }
  if (v.size() < 3 || v.size() > 5)
    throw std::invalid_argument(fmt::format("--model {}: expected random:LAYERS,WIDTH,HEADS[,VOCAB[,POSITIONS]]", model));
  Gpt2Config c;
  c.layers = v[0];
  c.width = v[1];
  c.heads = v[2];
  if (v.size() > 3) c.vocab = v[3];
  if (v.size() > 4) c.positions = v[4];
  c.validate("--model " + model);
  return c;
}

Gpt2Model RunArgs::load_model() const {
  if (model == "tiny") return Gpt2Model::tiny(seed);
  if (model.starts_with("random:")) return Gpt2Model::random(cfg, seed);
  return Gpt2Model::load(model);
}

nlohmann::ordered_json cpu_threads_json(const Plan& plan) {
  for (const Stage& st : plan.stages)
    for (const PlanDevice& d : st.devices)
      if (d.kind == "cpu") {
        const CpuThreads& t = tessera::cpu_threads();
        return {{"threads", t.threads}, {"split_macs", t.split_macs}, {"source", t.source}};
      }
  return nullptr;
}

std::string cpu_threads_text(const Plan& plan) {
  if (cpu_threads_json(plan).is_null()) return {};
  const CpuThreads& t = tessera::cpu_threads();
  if (!t.split_macs) return fmt::format("cpu: {} BLAS thread(s) for every product ({})\n", t.threads, t.source);
  return fmt::format("cpu: {} BLAS thread(s) for products of {} multiply-adds or more, one for smaller ones ({})\n",
                     t.threads, t.split_macs, t.source);
}

std::vector<int32_t> parse_token_ids(std::string_view text, std::string_view option) {
  std::vector<int32_t> out;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view t = text.substr(pos, comma - pos);
    int32_t v = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size())
      throw std::invalid_argument(fmt::format("{}: '{}' is not a token id", option, t));
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

std::vector<int32_t> RunArgs::tokens() const {
  if (!tokens_text.empty()) return parse_token_ids(tokens_text, "--tokens");
  std::vector<int32_t> out;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(cfg.vocab) - 1);
  out.resize(uint64_t{batch} * seq);
  for (auto& t : out) t = id(rng);
  return out;
}

}  // namespace tessera::cli
