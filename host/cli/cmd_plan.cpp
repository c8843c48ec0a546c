#include <algorithm>
#include <iostream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "auto_report.hpp"
#include "commands.hpp"
#include "run_args.hpp"
#include "tessera/io/gpt2.hpp"
#include "tessera/runtime/plan.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

int plan(const std::vector<std::string>& args) {
  RunArgs ra;
  ra.allow_auto = true;
  bool auto_plan = false;
  std::string phase_text = "prefill";
  uint32_t new_tokens = 0;
  po::options_description opts(
      "tessera plan: print an execution plan without running it: each stage's layers, each device's share\n"
      "of every layer (heads, MLP columns, output rows), the weight bytes it holds, and the expected\n"
      "pipeline bubble. Takes the arguments of `tessera run`. With --auto (--plan auto), chooses the plan\n"
      "over --devices and prints its predicted times, memory per device and speedup over the even split");
  opts.add_options()("help,h", "this text")
      ("auto", po::bool_switch(&auto_plan), "choose the plan over --devices (as --plan auto)")
      ("phase", po::value(&phase_text)->default_value("prefill"),
       "what --auto plans for: prefill (tessera run's pass), decode (a generation's steps after the prompt) or "
       "generate (both, one sequence)")
      ("max-new-tokens", po::value(&new_tokens), "decode, generate: the tokens generated after the prompt");
  ra.add_options(opts);
  const auto parsed = parse_args(opts, args);
  if (!parsed) return 0;
  if (auto_plan) {
    if (!ra.plan_text.empty() && ra.plan_text != "auto") throw std::invalid_argument("give --auto or --plan, not both");
    ra.plan_text = "auto";
  }
  const RunPhase phase = parse_phase(phase_text);
  if (!parsed->at("phase").defaulted() && ra.plan_text != "auto")
    throw std::invalid_argument("--phase goes with --auto");
  if (phase == RunPhase::kGenerate && parsed->count("batch") && ra.batch != 1)
    throw std::invalid_argument("the generate phase runs one sequence: --batch 1");
  ra.finish(*parsed);
  if (phase == RunPhase::kGenerate) ra.batch = 1;
  ra.resolve_auto(phase, new_tokens);
  if (ra.auto_plan) {
    if (ra.json) {
      const Gpt2Config& cfg = ra.cfg;
      nlohmann::ordered_json j = {
          {"schema_version", 1},
          {"model", {{"name", ra.model}, {"layers", cfg.layers}, {"width", cfg.width}, {"heads", cfg.heads},
                     {"vocab", cfg.vocab}, {"positions", cfg.positions}}}};
      const nlohmann::ordered_json chosen = auto_plan_json(ra);
      for (const auto& [key, value] : chosen.items()) j[key] = value;
      std::cout << j.dump(2) << "\n";
    } else {
      print_auto_plan(ra);
    }
    return 0;
  }
  ra.require_one_plan("tessera plan");
  const Gpt2Config& cfg = ra.cfg;
  const Plan& plan = ra.plan;
  const std::string& model_arg = ra.model;
  const uint32_t batch = ra.batch, seq = ra.seq, microbatches = ra.microbatches;
  const double bubble = plan.expected_bubble(microbatches);

  if (ra.json) {
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    for (const auto& st : plan.stages) {
      nlohmann::ordered_json devs = nlohmann::ordered_json::array();
      for (const auto& d : st.devices)
        devs.push_back({{"device", d.spec}, {"kind", d.kind}, {"weight", d.weight},
                        {"heads", {d.head_begin, d.head_begin + d.heads}}, {"mlp_columns", {d.mlp_begin, d.mlp_begin + d.mlp}},
                        {"vocab_rows", {d.vocab_begin, d.vocab_begin + d.vocab}}, {"weight_bytes", d.weight_bytes}});
      stages.push_back({{"layers", {st.first, st.last}}, {"devices", devs}});
    }
    const nlohmann::ordered_json j = {
        {"schema_version", 1},
        {"model", {{"name", model_arg}, {"layers", cfg.layers}, {"width", cfg.width}, {"heads", cfg.heads},
                   {"vocab", cfg.vocab}, {"positions", cfg.positions}}},
        {"plan", plan.str()}, {"batch", batch}, {"seq", seq}, {"microbatches", microbatches},
        {"stages", stages}, {"bubble", {{"theoretical", bubble}}}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("model {}: {} layers, width {}, {} heads, vocabulary {}, {} positions\n", model_arg,
                           cfg.layers, cfg.width, cfg.heads, cfg.vocab, cfg.positions);
  std::cout << fmt::format("plan {}: {} stage(s); batch {} x {} tokens in {} microbatch(es)\n\n", plan.str(),
                           plan.stages.size(), batch, seq, microbatches);
  std::cout << fmt::format("{:<6} {:<8} {:<28} {:>6} {:>9} {:>12} {:>12} {:>14}  {}\n", "STAGE", "LAYERS", "DEVICE",
                           "SHARE", "HEADS", "MLP COLS", "VOCAB ROWS", "WEIGHT BYTES", "WEIGHTS AS");
  uint64_t total = 0;
  auto range = [](uint32_t b, uint32_t n) { return n ? fmt::format("{}-{}", b, b + n - 1) : std::string("-"); };
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& st = plan.stages[s];
    double wsum = 0;
    for (const auto& d : st.devices) wsum += d.weight;
    for (const auto& d : st.devices) {
      std::cout << fmt::format("{:<6} {:<8} {:<28} {:>6.2f} {:>9} {:>12} {:>12} {:>14}  {}\n", s,
                               range(st.first, st.last - st.first + 1), d.spec, d.weight / wsum,
                               range(d.head_begin, d.heads), range(d.mlp_begin, d.mlp), range(d.vocab_begin, d.vocab),
                               d.weight_bytes,
                               !d.accelerator() ? "fp32" : d.precision == GpuPrecision::kBf16 ? "bf16" : "int8 + fp32 scales");
      total += d.weight_bytes;
    }
  }
  std::cout << fmt::format("\nweight bytes on devices: {} ({:.2f} MiB)\n", total, total / 1048576.0);
  std::cout << fmt::format("expected bubble: {:.3f}  ((p - 1) / (m + p - 1) with p = {} stages, m = {} microbatches)\n",
                           bubble, plan.stages.size(), microbatches);
  return 0;
}

}  // namespace tessera::cli
