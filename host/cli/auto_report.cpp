#include "auto_report.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "run_report.hpp"

namespace tessera::cli {

namespace {

// Per stage of a prediction, summed over the workload's steps: each microbatch's time, and the
// first (largest) microbatch's shared time and lanes.
struct StageSummary {
  std::vector<double> seconds;
  double shared = 0;
  std::map<std::string, double> lanes;
};

std::vector<StageSummary> stage_summaries(const Prediction& p) {
  std::vector<StageSummary> out;
  for (const auto& step : p.stages) {
    out.resize(step.size());
    for (size_t s = 0; s < step.size(); ++s) {
      out[s].seconds.resize(step[s].size(), 0.0);
      for (size_t j = 0; j < step[s].size(); ++j) out[s].seconds[j] += step[s][j].seconds;
      out[s].shared += step[s][0].slowest_shared();
      for (const auto& [lane, t] : step[s][0].lanes) out[s].lanes[lane] += t;
    }
  }
  return out;
}

// The idle share of the stages over all the steps.
double bubble(const Prediction& p) {
  double idle = 0, total = 0;
  for (size_t i = 0; i < p.step_seconds.size(); ++i) {
    idle += p.step_bubble[i] * p.step_seconds[i];
    total += p.step_seconds[i];
  }
  return total > 0 ? idle / total : 0;
}

nlohmann::ordered_json totals(const Prediction& p, RunPhase phase) {
  nlohmann::ordered_json j = {{"total_s", p.total()}};
  const auto& s = p.step_seconds;
  if (phase == RunPhase::kGenerate) {
    j["ttft_s"] = s.front();
    if (s.size() > 1) j["decode_s_per_token"] = std::accumulate(s.begin() + 1, s.end(), 0.0) / double(s.size() - 1);
  } else if (phase == RunPhase::kDecode) {
    j["decode_s_per_token"] = p.total() / double(s.size());
  }
  return j;
}

// The plan's devices' own times, the host's work left out (CostModel without host_ops), in cycles
// at each device's clock, summed over the workload's steps, stages and microbatches; beside the cycles each
// device counted in the run. Empty unless every device of the plan is a simulated accelerator: a
// CPU or GPU counts no cycles, and a cost model would open a card again to describe it.
nlohmann::ordered_json device_cycles_json(const RunArgs& ra, const std::vector<const RunSummary*>& ran) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const AutoPlan& a = *ra.auto_plan;
  std::vector<PlanDevice> devices;
  int ranks = 1;
  for (const Stage& st : a.plan.stages)
    for (const PlanDevice& d : st.devices) {
      if (d.kind != "model" && d.kind != "rtl") return out;
      devices.push_back(d);
      ranks = std::max(ranks, d.rank + 1);
    }
  LinkCosts free_links;  // all-reduces are host work too: none of the devices' time
  for (int k = 2; k <= ranks; ++k) free_links.allreduce[k][1] = 0;
  const CostModel own(ra.cfg, devices, ra.costs->workload(), ra.costs->clock_mhz(), /*host_ops=*/false, free_links);
  std::map<std::string, double> predicted;
  for (const auto& step : own.predict(a.plan, a.microbatches).stages)
    for (const auto& stage : step)
      for (const Prediction::StageTime& mb : stage)
        for (const auto& [label, seconds] : mb.lanes) predicted[label] += seconds * ra.clock_of(label) * 1e6;
  std::map<std::string, uint64_t> counted;
  for (const RunSummary* sum : ran)
    for (const OpRow& r : sum->rows) counted[r.device] += r.cost.cycles;
  for (const PlanDevice& d : devices)
    out.push_back({{"device", d.label}, {"predicted", std::llround(predicted[d.label])}, {"counted", counted[d.label]}});
  return out;
}

}  // namespace

nlohmann::ordered_json auto_plan_json(const RunArgs& ra) {
  const AutoPlan& a = *ra.auto_plan;
  const CostModel& cm = *ra.costs;
  const Workload& w = cm.workload();
  const auto summaries = stage_summaries(a.predicted);
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (size_t s = 0; s < a.plan.stages.size(); ++s) {
    const Stage& st = a.plan.stages[s];
    nlohmann::ordered_json devs = nlohmann::ordered_json::array();
    for (const PlanDevice& d : st.devices) {
      const DeviceMemory& m = a.memory.at(d.label);
      devs.push_back({{"device", d.label}, {"kind", d.kind}, {"heads", {d.head_begin, d.head_begin + d.heads}},
                      {"mlp_columns", {d.mlp_begin, d.mlp_begin + d.mlp}},
                      {"vocab_rows", {d.vocab_begin, d.vocab_begin + d.vocab}}, {"weight_bytes", m.weights},
                      {"kv_cache_bytes", m.kv_cache}, {"activation_bytes", m.activations},
                      {"memory_capacity", m.capacity}, {"cost_source", cm.source(d.label)}});
    }
    stages.push_back({{"layers", {st.first, st.last}}, {"devices", devs},
                      {"predicted", {{"seconds_per_microbatch", summaries[s].seconds}, {"shared_s", summaries[s].shared},
                                     {"lanes", summaries[s].lanes}}}});
  }
  nlohmann::ordered_json j = {
      {"plan", a.plan.str()}, {"phase", to_string(w.phase)}, {"batch", w.batch}, {"seq", w.seq},
      {"new_tokens", w.new_tokens}, {"microbatches", a.microbatches},
      {"clock_mhz", ra.clock_mhz}, {"clock", ra.clock_source}, {"clocks", ra.clocks_json()}, {"stages", stages},
      {"bubble", {{"predicted", bubble(a.predicted)}, {"theoretical", a.plan.expected_bubble(a.microbatches)}}},
      {"predicted", totals(a.predicted, w.phase)}};
  if (a.even) {
    j["even_split"] = {{"plan", a.even->str()}, {"predicted", totals(*a.even_predicted, w.phase)}};
    j["speedup_over_even"] = a.even_predicted->total() / a.predicted.total();
  } else {
    j["even_split"] = nullptr;
    j["speedup_over_even"] = nullptr;
  }
  j["unused_devices"] = a.unused;
  j["host_cost_source"] = cm.host_source();
  j["search"] = {{"candidates", a.candidates}, {"seconds", a.search_seconds}};
  return j;
}

void print_auto_plan(const RunArgs& ra) {
  const AutoPlan& a = *ra.auto_plan;
  const CostModel& cm = *ra.costs;
  const Workload& w = cm.workload();
  const Gpt2Config& cfg = ra.cfg;
  std::cout << fmt::format("model {}: {} layers, width {}, {} heads, vocabulary {}\n", ra.model, cfg.layers, cfg.width,
                           cfg.heads, cfg.vocab);
  std::cout << fmt::format("auto plan for {} of {} x {} tokens{}, accelerators at {}\n", to_string(w.phase), w.batch,
                           w.seq, w.phase == RunPhase::kPrefill ? "" : fmt::format(" and {} new", w.new_tokens),
                           ra.clocks_text());
  std::cout << fmt::format("\n  --plan \"{}\" --microbatches {}\n\n", a.plan.str(), a.microbatches);
  const auto summaries = stage_summaries(a.predicted);
  std::cout << fmt::format("{:<6} {:<8} {:<24} {:>7} {:>11} {:>13} {:>12} {:>12}\n", "STAGE", "LAYERS", "DEVICE", "HEADS",
                           "MLP COLS", "VOCAB ROWS", "LANE S", "SHARED S");
  auto range = [](uint32_t b, uint32_t n) { return n ? fmt::format("{}-{}", b, b + n - 1) : std::string("-"); };
  for (size_t s = 0; s < a.plan.stages.size(); ++s) {
    const Stage& st = a.plan.stages[s];
    for (size_t i = 0; i < st.devices.size(); ++i) {
      const PlanDevice& d = st.devices[i];
      std::cout << fmt::format("{:<6} {:<8} {:<24} {:>7} {:>11} {:>13} {:>12.6f} {:>12}\n", s,
                               range(st.first, st.last - st.first + 1), d.label, range(d.head_begin, d.heads),
                               range(d.mlp_begin, d.mlp), range(d.vocab_begin, d.vocab), summaries[s].lanes.at(d.label),
                               i == 0 ? fmt::format("{:.6f}", summaries[s].shared) : "");
    }
  }
  std::cout << "(per stage, the first microbatch over the workload's steps, on the devices' clocks)\n\n";
  const auto t = totals(a.predicted, w.phase);
  std::cout << fmt::format("predicted: {:.6f} s in all", a.predicted.total());
  if (t.contains("ttft_s")) std::cout << fmt::format("; time to first token {:.6f} s", t["ttft_s"].get<double>());
  if (t.contains("decode_s_per_token"))
    std::cout << fmt::format("; decode {:.6f} s a token", t["decode_s_per_token"].get<double>());
  std::cout << fmt::format("; bubble {:.3f} (GPipe's (p - 1) / (m + p - 1): {:.3f})\n", bubble(a.predicted),
                           a.plan.expected_bubble(a.microbatches));
  if (a.even)
    std::cout << fmt::format("even split \"{}\" (--microbatches {}): {:.6f} s; the auto plan is {:.2f}x faster\n",
                             a.even->str(), a.even_predicted->stages.at(0).at(0).size(), a.even_predicted->total(),
                             a.even_predicted->total() / a.predicted.total());
  else
    std::cout << "even split (a stage per device): does not fit or has more stages than layers\n";
  std::cout << fmt::format("\n{:<24} {:>14} {:>14} {:>14} {:>14} {:>16}\n", "DEVICE", "WEIGHTS", "KV CACHE", "BUFFERS",
                           "NEEDED", "CAPACITY");
  for (const auto& [label, m] : a.memory)
    std::cout << fmt::format("{:<24} {:>14} {:>14} {:>14} {:>14} {:>16}\n", label, m.weights, m.kv_cache, m.activations,
                             m.needed(), m.capacity);
  std::cout << "\ncosts:\n";
  for (const auto& [label, m] : a.memory) std::cout << fmt::format("  {}: {}\n", label, cm.source(label));
  std::cout << fmt::format("  host (LayerNorm, softmax, GELU, residuals): {}\n", cm.host_source());
  if (!a.unused.empty()) std::cout << fmt::format("unused devices: {}\n", fmt::join(a.unused, ", "));
  std::cout << fmt::format("searched {} plans in {:.2f} s\n", a.candidates, a.search_seconds);
}

nlohmann::ordered_json auto_check_json(const RunArgs& ra, const std::vector<AutoCheck>& checks,
                                       const std::vector<const RunSummary*>& ran) {
  nlohmann::ordered_json j = auto_plan_json(ra);
  nlohmann::ordered_json c = nlohmann::ordered_json::array();
  for (const AutoCheck& k : checks)
    c.push_back({{"what", k.what}, {"predicted_s", k.predicted}, {"measured_s", k.measured}, {"error", k.error()}});
  j["checks"] = c;
  j["device_cycles"] = device_cycles_json(ra, ran);
  return j;
}

std::string auto_check_text(const RunArgs& ra, const std::vector<AutoCheck>& checks) {
  std::string out = fmt::format("auto plan \"{}\", {} microbatch(es):", ra.auto_plan->plan.str(), ra.auto_plan->microbatches);
  for (const AutoCheck& k : checks)
    out += fmt::format(" {} predicted {:.6f} s, measured {:.6f} s ({:+.1f}%);", k.what, k.predicted, k.measured,
                       100 * k.error());
  out.back() = '\n';
  return out;
}

}  // namespace tessera::cli
