// Auto plans: the cost model against runs on the accelerator model (exact: the planner's cycles are
// the device's), explicit shares, the search, and bad input.
#include <algorithm>
#include <map>
#include <memory>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tessera/backends/accel_backend.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/runtime/autoplan.hpp"
#include "tessera/runtime/transformer.hpp"

using namespace tessera;

namespace {

constexpr double kClockMhz = 100;

Gpt2Config small_model() {
  Gpt2Config c;
  c.layers = 3;
  c.width = 128;
  c.heads = 4;
  c.vocab = 500;
  c.positions = 64;
  return c;
}

// The plan run on model devices: each step's makespan on the devices' clocks, from the cycles the
// devices counted (host ops left out, as in a CostModel without host_ops).
struct Measured {
  std::vector<double> step_seconds;
};

Measured run_plan(const Gpt2Model& model, Plan plan, const Workload& w, uint32_t microbatches) {
  plan.assign_ranks(1);
  std::map<std::string, std::unique_ptr<driver::Device>> devices;
  std::map<std::string, std::unique_ptr<AccelBackend>> backends;
  std::vector<StageShards> stages;
  for (const Stage& st : plan.stages) {
    StageShards s{st.first, st.last, {}};
    for (const PlanDevice& d : st.devices) {
      devices[d.label] = std::make_unique<driver::Device>(driver::DeviceSpec::parse(d.spec));
      backends[d.label] = std::make_unique<AccelBackend>(*devices[d.label]);
      s.shards.push_back({backends[d.label].get(), d.head_begin, d.heads, d.mlp_begin, d.mlp, d.vocab_begin, d.vocab});
    }
    stages.push_back(std::move(s));
  }
  Pipeline p(model, stages);
  const auto steps = w.steps();
  const uint32_t first = steps.front().past;
  p.start(w.batch, w.capacity(), microbatches);
  std::vector<int32_t> tokens(uint64_t{w.batch} * w.seq);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % model.cfg.vocab);
  if (first > 0) p.step(tokens, w.seq, true);  // decode alone: the prompt first, not counted
  for (const auto& step : steps) {
    std::vector<int32_t> ids(tokens.begin(), tokens.begin() + uint64_t{w.batch} * step.tokens);
    p.step(ids, step.tokens, step.last_only);
  }
  Measured out;
  const uint32_t skip = first > 0 ? 1 : 0;
  for (uint32_t s = 0; s < steps.size(); ++s) {
    // [stage][microbatch][lane]: device seconds
    std::vector<std::vector<std::map<std::string, double>>> lanes(
        plan.stages.size(), std::vector<std::map<std::string, double>>(microbatches));
    for (const OpRecord& r : p.log())
      if (r.step == s + skip && r.device != "host") lanes[r.stage][r.microbatch][r.device] += double(r.cost.cycles) / (kClockMhz * 1e6);
    std::vector<std::vector<double>> seconds(plan.stages.size(), std::vector<double>(microbatches, 0.0));
    for (size_t st = 0; st < lanes.size(); ++st)
      for (uint32_t j = 0; j < microbatches; ++j)
        for (const auto& [lane, t] : lanes[st][j]) seconds[st][j] = std::max(seconds[st][j], t);
    out.step_seconds.push_back(gpipe_schedule(seconds).makespan);
  }
  return out;
}

std::vector<PlanDevice> devices_of(const Plan& plan) {
  std::vector<PlanDevice> out;
  for (const Stage& st : plan.stages)
    for (const PlanDevice& d : st.devices) out.push_back(d);
  return out;
}

}  // namespace

TEST_CASE("auto plans: predicted device times are the model devices' own, step for step", "[autoplan][exact]") {
  const Gpt2Model model = Gpt2Model::random(small_model(), 3);
  // Two stages, the first sharded unevenly over two presets, explicit shares in the last stage.
  const std::vector<std::string> plans = {
      "0-2@model:0",
      "0@model:0+model:1?preset=large;1-2@model:2*h1/c200/v123+model:3?preset=small*h3/c312/v377",
  };
  const std::vector<Workload> workloads = {
      {RunPhase::kPrefill, 3, 7, 0},   // three sequences: microbatches of 2 and 1 when m = 2
      {RunPhase::kGenerate, 1, 5, 4},  // a prompt of 5, then 3 decode steps
      {RunPhase::kDecode, 2, 6, 3},
  };
  for (const std::string& text : plans)
    for (const Workload& w : workloads)
      for (uint32_t m : {1u, 2u}) {
        if (m > w.batch) continue;
        Plan plan = Plan::parse(text);
        plan.resolve(model.cfg);
        plan.assign_ranks(1);
        const CostModel costs(model.cfg, devices_of(plan), w, kClockMhz, /*host_ops=*/false);
        const Prediction predicted = costs.predict(plan, m);
        const Measured measured = run_plan(model, plan, w, m);
        INFO(fmt::format("plan {}, phase {}, {} microbatch(es)", text, to_string(w.phase), m));
        REQUIRE(predicted.step_seconds.size() == measured.step_seconds.size());
        for (size_t s = 0; s < measured.step_seconds.size(); ++s) {
          INFO("step " << s);
          CHECK(predicted.step_seconds[s] == Approx(measured.step_seconds[s]).epsilon(1e-9));
        }
      }
}

TEST_CASE("auto plans: explicit shares parse, print and resolve", "[autoplan][plan]") {
  const Gpt2Config cfg = small_model();
  Plan p = Plan::parse("0-1@model:0*h1/c100+cpu*h3/c412;2@model:1*h2/c256/v100+model:2*h2/c256/v400");
  p.resolve(cfg);
  CHECK(p.str() == "0-1@model:0*h1/c100+cpu*h3/c412;2@model:1*h2/c256/v100+model:2*h2/c256/v400");
  CHECK(p.stages[0].devices[1].head_begin == 1);
  CHECK(p.stages[0].devices[1].mlp_begin == 100);
  CHECK(p.stages[1].devices[1].vocab_begin == 100);
  auto resolve = [&](const std::string& text) {
    Plan q = Plan::parse(text);
    q.resolve(cfg);
  };
  CHECK_THROWS_WITH(resolve("0-2@model:0*h2/c512/v500+cpu*h1/c0/v1"), Catch::Contains("positive numbers"));
  CHECK_THROWS_WITH(resolve("0-2@model:0*h2/c256/v250+cpu*h1/c256/v250"), Catch::Contains("3 heads"));
  CHECK_THROWS_WITH(resolve("0-2@model:0*h2/c256/v250+cpu"), Catch::Contains("give all or none"));
  CHECK_THROWS_WITH(resolve("0-1@model:0*h4/c512/v500;2@cpu"), Catch::Contains("last stage only"));
  CHECK_THROWS_WITH(resolve("0-2@model:0*h4/c512"), Catch::Contains("needed in the last stage"));
  CHECK_THROWS_WITH(resolve("0-2@model:0*h4/c512/x500"), Catch::Contains("*hHEADS/cCOLUMNS[/vROWS]"));
}

TEST_CASE("auto plans: the search balances unequal devices and beats the even split", "[autoplan][search]") {
  const Gpt2Config cfg = small_model();
  const auto devices = parse_devices("model:0?preset=default,model:1?preset=large");
  const Workload w{RunPhase::kPrefill, 2, 16, 0};
  const CostModel costs(cfg, devices, w, kClockMhz, /*host_ops=*/false);
  const AutoPlan a = choose_plan(costs, devices);
  INFO(a.plan.str());
  REQUIRE(a.even);
  CHECK(a.predicted.total() <= a.even_predicted->total());
  // The chosen plan reads back as it prints, and the plan read back predicts the search's time.
  Plan again = Plan::parse(a.plan.str());
  again.resolve(cfg);
  CHECK(again.str() == a.plan.str());
  again.assign_ranks(1);
  CHECK(costs.predict(again, a.microbatches).total() == Approx(a.predicted.total()).epsilon(1e-12));
  // No plan of an enumeration written here beats it: each device alone, every pipeline of the two in
  // either order, and one stage shared 1:1, 1:2 and 1:3 (the first device keeps one of the 4 heads);
  // each with 1 and 2 microbatches.
  const std::string s = "model:0?preset=default", l = "model:1?preset=large";
  std::vector<std::string> others = {"0-2@" + s, "0-2@" + l};
  for (const auto& [x, y] : {std::pair{s, l}, std::pair{l, s}})
    for (int cut : {0, 1}) others.push_back(fmt::format("0-{}@{};{}-2@{}", cut, x, cut + 1, y));
  for (int weight : {1, 2, 3}) others.push_back(fmt::format("0-2@{}*1+{}*{}", s, l, weight));
  for (const std::string& text : others)
    for (uint32_t m : {1u, 2u}) {
      Plan other = Plan::parse(text);
      other.resolve(cfg);
      other.assign_ranks(1);
      INFO(text << ", " << m << " microbatch(es)");
      CHECK(a.predicted.total() <= costs.predict(other, m).total() * (1 + 1e-12));
    }
  // The large preset's array is 4 times the default one's: a stage they share gives it the larger
  // share of the columns. Sharing must be what the search chose, or this checks nothing.
  const auto shared = std::find_if(a.plan.stages.begin(), a.plan.stages.end(),
                                   [](const Stage& st) { return st.devices.size() == 2; });
  REQUIRE(shared != a.plan.stages.end());
  CHECK(shared->devices[1].label == l);
  CHECK(shared->devices[1].mlp > shared->devices[0].mlp);
  // With --microbatches fixed, that many.
  CHECK(choose_plan(costs, devices, 2).microbatches == 2);
}

TEST_CASE("auto plans: bad input", "[autoplan][bad]") {
  Gpt2Config cfg = small_model();
  cfg.width = 256;  // 2.4 MB of weights
  CHECK_THROWS_WITH(parse_devices("model:0,model:0"), Catch::Contains("listed twice"));
  CHECK_THROWS_WITH(parse_devices("model:0,,cpu"), Catch::Contains("empty device"));
  CHECK_THROWS_WITH(parse_devices("gpu:0"), Catch::Contains("gpu"));
  CHECK(parse_devices("model:0?fault=stuck:1,1,20,cpu").size() == 2);  // an option's commas stay with it
  CHECK_THROWS_WITH(parse_phase("training"), Catch::Contains("prefill, decode or generate"));
  const auto one = parse_devices("model:0?mem_mb=1");
  CHECK_THROWS_WITH(CostModel(cfg, one, {RunPhase::kGenerate, 1, 60, 10}, kClockMhz),
                    Catch::Contains("needs 69 positions; the model has 64"));
  CHECK_THROWS_WITH(CostModel(cfg, one, {RunPhase::kDecode, 1, 8, 0}, kClockMhz), Catch::Contains("new tokens"));
  // 1 MiB cannot hold the weights: the error names the device and the bytes.
  const CostModel costs(cfg, one, {RunPhase::kPrefill, 1, 8, 0}, kClockMhz, false);
  CHECK_THROWS_WITH(choose_plan(costs, one), Catch::Contains("model:0?mem_mb=1 needs") && Catch::Contains("more than its"));
  CHECK_THROWS_WITH(choose_plan(costs, one, 2), Catch::Contains("2 microbatches for a batch of 1"));
}
