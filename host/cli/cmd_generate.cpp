#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <numeric>
#include <optional>
#include <set>
#include <span>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "auto_report.hpp"
#include "commands.hpp"
#include "run_args.hpp"
#include "run_report.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/io/tokenizer.hpp"
#include "tessera/runtime/sampling.hpp"
#include "tessera/runtime/transformer.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct GenerateArgs {
  RunArgs ra;  // model, plan, clocks, outputs; ra.seed seeds the sampling
  std::string prompt, tokenizer_dir;
  uint32_t max_new = 32;
  SamplingParams sampling;
  std::optional<Gpt2Tokenizer> tokenizer;
  std::vector<int32_t> prompt_ids;
  uint32_t vocab = 0;  // the ids that can be generated: the tokenizer's, or the model's without one
};

// A generation: the prompt in one step (prefill), then a step per new token (decode), each
// token chosen on rank 0 and shared with the other ranks. Stops at max_new tokens or end-of-text.
struct Generation {
  std::vector<int32_t> ids;
  std::vector<double> step_wall;  // seconds of each step, prefill first
  bool stopped_at_end = false;
  // The energy counters of the devices that have one, before the prefill, after it, and after the
  // decode (read between steps, outside every op's timing).
  std::vector<EnergyMark> energy;
};

Generation run_generation(Pipeline& p, const GenerateArgs& ga, Comm* comm, int me,
                          const std::function<void(int32_t)>& emit, const Devices* devs = nullptr) {
  const auto& prompt = ga.prompt_ids;
  p.start(1, static_cast<uint32_t>(prompt.size()) + ga.max_new - 1);
  Sampler sampler(ga.sampling, ga.ra.seed);
  const auto eot = ga.tokenizer ? ga.tokenizer->end_of_text() : std::nullopt;
  Generation g;
  std::vector<int32_t> next(prompt);
  if (devs) g.energy.push_back(read_energy(*devs));
  while (g.ids.size() < ga.max_new && !g.stopped_at_end) {
    const auto t0 = Clock::now();
    const std::vector<float> logits = p.step(next, static_cast<uint32_t>(next.size()), true);
    // The logits are complete on rank 0. A vocabulary padded past the tokenizer's is never sampled there.
    int32_t id = me == 0 ? sampler.next(std::span(logits).first(ga.vocab)) : 0;
    if (comm) id = std::stoi(comm->allgather(me == 0 ? std::to_string(id) : "")[0]);
    g.step_wall.push_back(since(t0));
    g.ids.push_back(id);
    g.stopped_at_end = eot && id == *eot;
    if (me == 0) emit(id);
    next = {id};
    if (devs && g.ids.size() == 1) g.energy.push_back(read_energy(*devs));
  }
  if (devs) g.energy.push_back(read_energy(*devs));
  p.end();
  return g;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * double(v.size() - 1);
  const size_t i = static_cast<size_t>(at);
  return i + 1 < v.size() ? v[i] + (at - double(i)) * (v[i + 1] - v[i]) : v[i];
}

// What a phase's times rest on: the kinds of time of the devices that ran it.
std::string time_label(const std::vector<OpRow>& rows) {
  std::set<std::string> kinds;
  for (const OpRow& r : rows) kinds.insert(r.time_kind);
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : " + ") + k;
  return out;
}

// Generates on ra.plan and reports it: alone, as --json, --csv or text say; when its plan is one of
// several compared, its --json object goes to `compared`. `fp32` keeps the fp32 CPU generation
// that every plan is compared with, made once.
int report(const GenerateArgs& ga, const Gpt2Model& model, Comm* comm, int me, std::optional<Generation>& fp32,
           nlohmann::ordered_json* compared = nullptr) {
  const RunArgs& ra = ga.ra;
  const auto devs = open_devices(ra, comm, me, "generate");
  if (!devs) return 1;
  Pipeline pipeline(model, stage_shards(ra.plan, *devs, me), comm);
  pipeline.profile_ops = ra.profile_ops;
  const bool stream = me == 0 && !ra.json && !ra.csv && !compared;
  auto write_token = [&](int32_t id) {
    if (ga.tokenizer)
      std::cout << ga.tokenizer->token_bytes(id);
    else
      std::cout << " " << id;
    std::cout << std::flush;
  };
  if (stream) {
    if (ga.tokenizer)
      std::cout << ga.tokenizer->decode(ga.prompt_ids);
    else
      std::cout << fmt::format("{}", fmt::join(ga.prompt_ids, " "));
    std::cout << std::flush;
  }
  const auto t0 = Clock::now();
  const auto eot = ga.tokenizer ? ga.tokenizer->end_of_text() : std::nullopt;
  const Generation g = run_generation(pipeline, ga, comm, me, [&](int32_t id) {
    if (stream && id != eot) write_token(id);
  }, devs.get());
  const double wall = since(t0);
  for (const auto& [dev, recorder] : devs->recorders) recorder->finish(*dev);
  std::vector<OpRecord> log = labelled_log(pipeline, *devs);
  if (comm) {
    gather(*comm, log, *devs, ra);
    if (me != 0) return 0;
  }
  if (stream) std::cout << "\n\n";
  if (!ra.trace_path.empty()) write_trace(ra.trace_path, log, ra, devs->macs_per_cycle);

  // The same generation with fp32 on the CPU (unless that is the plan): where do the ids part?
  CpuBackend cpu;
  const Gpt2Config& cfg = model.cfg;
  const auto& first = ra.plan.stages.front().devices;
  const bool plan_is_reference = ra.plan.stages.size() == 1 && first.size() == 1 && first[0].kind == "cpu";
  if (!fp32 && plan_is_reference) fp32 = g;
  if (!fp32) {
    Pipeline reference(model, {StageShards{0, cfg.layers - 1, {Shard{&cpu, 0, cfg.heads, 0, 4 * cfg.width, 0, cfg.vocab}}}});
    fp32 = run_generation(reference, ga, nullptr, 0, [](int32_t) {});
  }
  const Generation& ref = *fp32;
  std::optional<size_t> divergence;
  for (size_t i = 0; i < std::max(g.ids.size(), ref.ids.size()) && !divergence; ++i)
    if (i >= g.ids.size() || i >= ref.ids.size() || g.ids[i] != ref.ids[i]) divergence = i;

  // Per phase, on the devices' clocks: the prefill, and each decode step over the pipeline's stages.
  auto phase_log = [&](auto&& keep) {
    std::vector<OpRecord> out;
    std::copy_if(log.begin(), log.end(), std::back_inserter(out), keep);
    return out;
  };
  const RunSummary prefill = summarize(ra, *devs, phase_log([](const OpRecord& r) { return r.step == 0; }), {}, cfg,
                                       measured_between(*devs, g.energy[0], g.energy[1]));
  const RunSummary decode = summarize(ra, *devs, phase_log([](const OpRecord& r) { return r.step > 0; }), {}, cfg,
                                      measured_between(*devs, g.energy[1], g.energy[2]));
  std::vector<double> latency;
  for (uint32_t s = 1; s < g.ids.size(); ++s)
    latency.push_back(summarize(ra, *devs, phase_log([s](const OpRecord& r) { return r.step == s; }), {}, cfg).makespan);
  const double decode_seconds = std::accumulate(latency.begin(), latency.end(), 0.0);
  const size_t n = ga.prompt_ids.size(), decoded = latency.size();
  const double wall_decode = std::accumulate(g.step_wall.begin() + 1, g.step_wall.end(), 0.0);
  const std::string prefill_time = time_label(prefill.rows), decode_time = time_label(decode.rows);
  // --plan auto: the prediction against what ran (a generation that stopped at end-of-text early
  // has fewer decode steps; per token they compare all the same).
  std::vector<AutoCheck> checks;
  if (ra.auto_plan) {
    const auto& steps = ra.auto_plan->predicted.step_seconds;
    checks.push_back({"time to first token", steps.front(), prefill.makespan});
    if (decoded && steps.size() > 1)
      checks.push_back({"decode per token", std::accumulate(steps.begin() + 1, steps.end(), 0.0) / double(steps.size() - 1),
                        decode_seconds / double(decoded)});
  }
  const std::string text = !ga.tokenizer ? ""
                           : ga.tokenizer->decode(std::span(g.ids).first(g.ids.size() - g.stopped_at_end));
  // The KV caches of every device of the plan, as start() sized them.
  uint64_t kv_bytes = 0;
  for (const Stage& st : ra.plan.stages)
    for (const PlanDevice& d : st.devices)
      kv_bytes += (st.last - st.first + 1) *
                  KvCache::fp32_bytes(1, d.heads, cfg.head_dim(), static_cast<uint32_t>(n) + ga.max_new - 1);

  if (ra.json || compared) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (const auto& [phase, sum] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}})
      for (const OpRow& r : sum->rows) {
        nlohmann::ordered_json o = {{"phase", phase}, {"device", r.device}, {"op", r.op}, {"calls", r.calls},
                                    {"seconds", r.seconds}, {"time", r.time_kind}, {"cycles", r.cost.cycles},
                                    {"macs", r.cost.macs}, {"bytes", r.cost.read_bytes + r.cost.write_bytes}};
        if (r.utilization >= 0) o["utilization"] = r.utilization;
        add_energy(o, r);
        ops.push_back(o);
      }
    nlohmann::ordered_json roofline = nlohmann::ordered_json::array();
    for (const auto& [phase, sum] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}})
      for (nlohmann::ordered_json point : roofline_json(*sum)) {
        point["phase"] = phase;
        roofline.push_back(point);
      }
    const auto as_text = [](const std::string& bytes) {
      return nlohmann::ordered_json::parse(
          nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    };
    nlohmann::ordered_json j = {
        {"schema_version", 1}, {"model", ra.model}, {"plan", ra.plan.str()},
        {"precision", plan_precision(ra.plan)}, {"clock_mhz", ra.clock_mhz},
        {"clock", ra.clock_source}, {"clocks", ra.clocks_json()}, {"cpu_threads", cpu_threads_json(ra.plan)},
        {"text", as_text(text)}, {"prompt_ids", ga.prompt_ids}, {"generated_ids", g.ids},
        {"stop", g.stopped_at_end ? "end_of_text" : "max_new_tokens"},
        {"sampling", {{"temperature", ga.sampling.temperature}, {"top_k", ga.sampling.top_k},
                      {"top_p", ga.sampling.top_p}, {"seed", ra.seed}}},
        {"ttft_s", prefill.makespan}, {"kv_cache_bytes", kv_bytes}, {"notes", pipeline.notes()},
        {"prefill", {{"tokens", n}, {"seconds", prefill.makespan},
                     {"tokens_per_s", prefill.makespan > 0 ? double(n) / prefill.makespan : 0.0},
                     {"time", prefill_time}}},
        {"decode", {{"tokens", decoded}, {"seconds", decode_seconds},
                    {"tokens_per_s", decode_seconds > 0 ? double(decoded) / decode_seconds : 0.0},
                    {"latency_ms", {{"median", percentile(latency, 0.5) * 1e3}, {"p90", percentile(latency, 0.9) * 1e3}}},
                    {"time", decode_time}}},
        {"wall", {{"ttft_s", g.step_wall.front()}, {"decode_tokens_per_s", wall_decode > 0 ? decoded / wall_decode : 0.0},
                  {"seconds", wall}}},
        {"reference", {{"device", "cpu"}, {"generated_ids", ref.ids},
                       {"first_divergence", divergence ? nlohmann::ordered_json(*divergence) : nlohmann::ordered_json()}}},
        {"ops", ops},
        {"energy", {{"prefill", energy_json(prefill, ra, n)}, {"decode", energy_json(decode, ra, decoded)}}},
        {"roofline", roofline}};
    if (ra.auto_plan) j["auto"] = auto_check_json(ra, checks, {&prefill, &decode});
    if (compared)
      compared->push_back(std::move(j));
    else
      std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (ra.csv) {
    std::cout << "phase,device,op,calls,seconds,time,cycles,macs,utilization,bytes,energy_j,energy\n";
    for (const auto& [phase, sum] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}})
      for (const OpRow& r : sum->rows)
        std::cout << fmt::format("{},{},{},{},{:.9f},{},{},{},{},{},{},{}\n", phase, r.device, r.op, r.calls, r.seconds,
                                 r.time_kind, r.cost.cycles, r.cost.macs,
                                 r.utilization >= 0 ? fmt::format("{:.4f}", r.utilization) : "",
                                 r.cost.read_bytes + r.cost.write_bytes,
                                 r.energy_kind.empty() ? "" : fmt::format("{:.6g}", r.joules), r.energy_kind);
    return 0;
  }
  std::cout << fmt::format("model {} ({} layers, width {}), plan {}, accelerator clock {}\n", ra.model, cfg.layers,
                           cfg.width, ra.plan.str(), ra.clocks_text());
  std::cout << cpu_threads_text(ra.plan) << "\n";
  std::cout << fmt::format("{:<8} {:<28} {:<16} {:>6} {:>12} {:<15} {:>12} {:>14} {:>6} {:>12}\n", "PHASE", "DEVICE",
                           "OP", "CALLS", "TIME (ms)", "", "CYCLES", "MACS", "UTIL", "BYTES");
  for (const auto& [phase, sum] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}})
    for (const OpRow& r : sum->rows)
      std::cout << fmt::format("{:<8} {:<28} {:<16} {:>6} {:>12.4g} {:<15} {:>12} {:>14} {:>6} {:>12}\n", phase,
                               r.device, r.op, r.calls, r.seconds * 1e3, r.time_kind,
                               r.cost.cycles ? std::to_string(r.cost.cycles) : "-",
                               r.cost.macs ? std::to_string(r.cost.macs) : "-",
                               r.utilization >= 0 ? fmt::format("{:.3f}", r.utilization) : "-",
                               r.cost.read_bytes + r.cost.write_bytes
                                   ? std::to_string(r.cost.read_bytes + r.cost.write_bytes) : "-");
  std::cout << fmt::format("\nprefill: {} tokens, time to first token {:.3f} ms ({:.1f} tokens/s; {})\n", n,
                           prefill.makespan * 1e3, prefill.makespan > 0 ? n / prefill.makespan : 0.0, prefill_time);
  if (decoded)
    std::cout << fmt::format("decode: {} tokens, {:.1f} tokens/s, per token {:.3f} ms median, {:.3f} ms p90 ({})\n",
                             decoded, decoded / decode_seconds, percentile(latency, 0.5) * 1e3,
                             percentile(latency, 0.9) * 1e3, decode_time);
  print_energy_text(prefill, n, "prefill");
  if (decoded) print_energy_text(decode, decoded, "decode");
  std::cout << fmt::format("\nKV caches: {:.2f} MiB over the plan's devices; wall time: {:.2f} s (time to first token "
                           "{:.3f} s)\n", double(kv_bytes) / (1 << 20), wall, g.step_wall.front());
  if (ra.auto_plan) std::cout << auto_check_text(ra, checks);
  for (const std::string& note : pipeline.notes()) std::cout << note << "\n";
  std::cout << fmt::format("stopped at {}; ", g.stopped_at_end ? "end-of-text" : "--max-new-tokens");
  if (divergence)
    std::cout << fmt::format("fp32 on the CPU generates the same ids up to token {} of {}, then {} where this run has {}\n",
                             *divergence, g.ids.size(), *divergence < ref.ids.size() ? std::to_string(ref.ids[*divergence]) : "nothing",
                             *divergence < g.ids.size() ? std::to_string(g.ids[*divergence]) : "nothing");
  else
    std::cout << fmt::format("fp32 on the CPU generates the same {} ids\n", g.ids.size());
  return 0;
}

// Several plans side by side: per plan its precision, time to first token, prefill and decode rates
// on the devices' clocks, decode energy, and how far its ids agree with fp32 on the CPU; then the texts.
void print_comparison(const nlohmann::ordered_json& runs, const GenerateArgs& ga) {
  const RunArgs& ra = ga.ra;
  if (ra.json) {
    std::cout << nlohmann::ordered_json{{"schema_version", 1}, {"model", ra.model}, {"prompt_ids", ga.prompt_ids},
                                        {"runs", runs}}
                     .dump(2)
              << "\n";
    return;
  }
  auto same_ids = [](const nlohmann::ordered_json& r) {
    const size_t n = r["generated_ids"].size();
    const auto& d = r["reference"]["first_divergence"];
    return d.is_null() ? fmt::format("all {}", n) : fmt::format("first {} of {}", d.get<size_t>(), n);
  };
  if (ra.csv) {
    std::cout << "plan,precision,ttft_s,prefill_tokens_per_s,decode_tokens_per_s,decode_j_per_token,"
                 "generated,first_divergence\n";
    for (const auto& r : runs)
      std::cout << fmt::format("{},{},{:.9f},{:.3f},{:.3f},{:.6g},{},{}\n", r["plan"].get<std::string>(),
                               r["precision"].get<std::string>(), r["ttft_s"].get<double>(),
                               r["prefill"]["tokens_per_s"].get<double>(), r["decode"]["tokens_per_s"].get<double>(),
                               r["energy"]["decode"]["j_per_token"].get<double>(), r["generated_ids"].size(),
                               r["reference"]["first_divergence"].dump());
    return;
  }
  std::cout << fmt::format("model {}, a prompt of {} tokens, {} plans side by side; time on the devices' clocks, ids "
                           "against fp32 on the CPU\n\n",
                           ra.model, ga.prompt_ids.size(), runs.size());
  std::cout << fmt::format("{:<40} {:<10} {:>10} {:>14} {:>13} {:>14} {:<16}\n", "PLAN", "PRECISION", "TTFT (ms)",
                           "PREFILL TOK/S", "DECODE TOK/S", "DECODE mJ/TOK", "IDS AS FP32");
  for (const auto& r : runs) {
    const double j = r["energy"]["decode"]["j_per_token"].get<double>();
    std::cout << fmt::format("{:<40} {:<10} {:>10.4g} {:>14.5g} {:>13.5g} {:>14} {:<16}\n", r["plan"].get<std::string>(),
                             r["precision"].get<std::string>(), r["ttft_s"].get<double>() * 1e3,
                             r["prefill"]["tokens_per_s"].get<double>(), r["decode"]["tokens_per_s"].get<double>(),
                             j > 0 ? fmt::format("{:.4g}", j * 1e3) : "-", same_ids(r));
  }
  if (ga.tokenizer) {
    std::cout << "\n";
    for (const auto& r : runs) std::cout << fmt::format("{}: {}\n", r["plan"].get<std::string>(), r["text"].dump());
  }
}

}  // namespace

int generate(const std::vector<std::string>& args) {
  GenerateArgs ga;
  RunArgs& ra = ga.ra;
  ra.allow_auto = true;
  po::options_description opts(
      "tessera generate: generate text from a prompt over a plan of devices: prefill, then decode with KV caches,\n"
      "the text streamed as it comes; then per phase, device and op the time, cycles, utilization and bytes, the\n"
      "time to first token and the decode rate, and where fp32 on the CPU would have generated other ids");
  opts.add_options()
      ("help,h", "this text")
      ("model", po::value(&ra.model)->default_value("tiny"),
       "a model directory (config.json + model.safetensors, with vocab.json + merges.txt for --prompt), tiny, "
       "or random:LAYERS,WIDTH,HEADS[,VOCAB[,POSITIONS]]")
      ("prompt", po::value(&ga.prompt), "the prompt text (needs a tokenizer)")
      ("tokens", po::value(&ra.tokens_text), "the prompt as comma-separated token ids")
      ("tokenizer", po::value(&ga.tokenizer_dir), "the tokenizer's directory (default: the model's)")
      ("max-new-tokens", po::value(&ga.max_new)->default_value(32), "tokens to generate at most")
      ("temperature", po::value(&ga.sampling.temperature)->default_value(0), "0: greedy; otherwise sample")
      ("top-k", po::value(&ga.sampling.top_k)->default_value(0), "sample from the k most likely tokens (0: all)")
      ("top-p", po::value(&ga.sampling.top_p)->default_value(1.0), "sample from the smallest set reaching this mass")
      ("seed", po::value(&ra.seed)->default_value(1), "seed of the sampling")
      ("plan", po::value(&ra.plan_text), kPlanHelp)
      ("devices", po::value(&ra.devices_text), kDevicesHelp)
      ("trace", po::value(&ra.trace_path), "write a Chrome trace-event JSON file (opens in Perfetto)")
      ("capture", po::value(&ra.capture_dir), "record each accelerator's work in a trace under this directory")
      ("csv", po::bool_switch(&ra.csv), "print the per-op table as CSV")
      ("json", po::bool_switch(&ra.json), "print one JSON object");
  ra.add_energy_option(opts);
  ra.add_clock_option(opts);
  ra.add_cpu_threads_option(opts);
  ra.add_profile_ops_option(opts);
  const auto vm = parse_args(opts, args);
  if (!vm) return 0;
  if (vm->count("prompt") == vm->count("tokens")) throw std::invalid_argument("give --prompt or --tokens");
  ra.finish(*vm);
  ga.sampling.check();
  if (ga.max_new == 0) throw std::invalid_argument("--max-new-tokens must be positive");
  const Gpt2Config& cfg = ra.cfg;
  std::string dir = ga.tokenizer_dir;
  if (dir.empty() && std::filesystem::is_directory(ra.model) && Gpt2Tokenizer::present(ra.model)) dir = ra.model;
  if (!dir.empty()) {
    ga.tokenizer = Gpt2Tokenizer::load(dir);
    if (ga.tokenizer->vocab_size() > cfg.vocab)
      throw std::invalid_argument(fmt::format("the tokenizer in {} has {} tokens, more than the model's vocabulary of {}",
                                              dir, ga.tokenizer->vocab_size(), cfg.vocab));
  }
  if (!ga.prompt.empty() || vm->count("prompt")) {
    if (!ga.tokenizer)
      throw std::invalid_argument(fmt::format(
          "--prompt needs a tokenizer: {} has no vocab.json and merges.txt; give --tokenizer DIR, or ids with --tokens",
          ra.model));
    ga.prompt_ids = ga.tokenizer->encode(ga.prompt);
  } else {
    ga.prompt_ids = parse_token_ids(ra.tokens_text, "--tokens");
  }
  if (ga.prompt_ids.empty()) throw std::invalid_argument("the prompt has no tokens");
  const uint32_t n = static_cast<uint32_t>(ga.prompt_ids.size());
  check_tokens(cfg, ga.prompt_ids, 1, n);
  ga.vocab = ga.tokenizer ? ga.tokenizer->vocab_size() : cfg.vocab;
  for (int32_t id : ga.prompt_ids)
    if (static_cast<uint32_t>(id) >= ga.vocab)
      throw std::invalid_argument(fmt::format("token id {} is outside the tokenizer's vocabulary [0, {})", id, ga.vocab));
  if (uint64_t{n} + ga.max_new - 1 > cfg.positions)
    throw std::invalid_argument(fmt::format(
        "a prompt of {} tokens and {} new ones need {} positions; the model has {} (lower --max-new-tokens)", n,
        ga.max_new, uint64_t{n} + ga.max_new - 1, cfg.positions));
  ra.batch = 1;
  ra.seq = n;
  ra.microbatches = 1;

  const std::unique_ptr<Comm> comm = mpi_world();
  ra.resolve_auto(RunPhase::kGenerate, ga.max_new, comm.get());
  if (comm) ra.require_one_plan("a run under mpirun");
  if (ra.plans.size() > 1 && !(ra.trace_path.empty() && ra.capture_dir.empty()))
    throw std::invalid_argument("--trace and --capture take one plan");
  const Gpt2Model model = ra.load_model();
  std::optional<Generation> fp32;
  if (ra.plans.size() == 1) {
    ra.plan.assign_ranks(comm ? comm->size() : 1);
    return on_every_rank(comm.get(), "generate", [&](int me) { return report(ga, model, comm.get(), me, fp32); });
  }
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < ra.plans.size(); ++i) {
    ra.select_plan(i);
    ra.plan.assign_ranks(1);
    if (report(ga, model, nullptr, 0, fp32, &runs) != 0) return 1;
  }
  print_comparison(runs, ga);
  return 0;
}

}  // namespace tessera::cli
