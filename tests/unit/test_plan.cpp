// Execution plans: parsing, validation against a model, shares and weight bytes, the bubble.
#include <catch2/catch.hpp>

#include "tessera/runtime/plan.hpp"

using namespace tessera;

TEST_CASE("plans parse and print back", "[unit][plan]") {
  const Plan p = Plan::parse("0-5@rtl:0+rtl:1;6-11@cuda:0");
  REQUIRE(p.stages.size() == 2);
  CHECK(p.stages[0].first == 0);
  CHECK(p.stages[0].last == 5);
  CHECK(p.stages[0].devices.size() == 2);
  CHECK(p.stages[1].devices[0].kind == "cuda");
  CHECK(p.str() == "0-5@rtl:0+rtl:1;6-11@cuda:0");
  const Plan w = Plan::parse("0-11@rtl?preset=small*1+cpu*3");
  CHECK(w.stages[0].devices[0].spec == "rtl:0?preset=small");
  CHECK(w.stages[0].devices[1].weight == 3);
  CHECK(Plan::single("model", 1).str() == "0@model:0");
  const Plan g = Plan::parse("0@cuda:1?gpu=a100&precision=int8;1@cuda?precision=bf16");
  CHECK(g.stages[0].devices[0].gpu_index == 1);
  CHECK(g.stages[0].devices[0].gpu == "a100");
  CHECK(g.stages[0].devices[0].precision == GpuPrecision::kInt8);
  CHECK(g.stages[1].devices[0].precision == GpuPrecision::kBf16);
  CHECK(Plan::parse("0@cuda:0").stages[0].devices[0].precision == GpuPrecision::kFp32);
}

TEST_CASE("bad plans name the problem", "[unit][plan]") {
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"", "empty"},
           {"0-5", "LAYERS@DEVICES"},
           {"5-0@cpu", "backwards"},
           {"x-3@cpu", "not a layer number"},
           {"0-3@tpu:0", "unknown device"},
           {"0-3@cpu*0", "not a positive number"},
           {"0-3@cpu*-1", "not a positive number"},
           {"0-3@cpu:1", "no index"},
           {"0-3@cuda:x", "cuda[:i]"},
           {"0-3@cuda:0?precision=fp16", "fp32, bf16 or int8"},
           {"0-3@cuda:0?gpu=v100", "unknown GPU"},
           {"0-3@cuda:0?clock=5", "not 'clock=5'"},
           {"0-1@rtl:0;2-3@rtl", "appears twice"},
           {"0-3@cpu+", "empty device"}}) {
    INFO(text);
    CHECK_THROWS_WITH(Plan::parse(text), Catch::Contains(needle));
  }
}

TEST_CASE("plans are checked against the model", "[unit][plan]") {
  const Gpt2Config cfg;  // tiny: 2 layers, 4 heads
  auto resolve = [&](const std::string& text) {
    Plan p = Plan::parse(text);
    p.resolve(cfg);
    return p;
  };
  CHECK_THROWS_WITH(resolve("0@cpu"), Catch::Contains("no stage runs layer 1"));
  CHECK_THROWS_WITH(resolve("0-2@cpu"), Catch::Contains("layers 0-1"));
  CHECK_THROWS_WITH(resolve("0-1@cpu;1@model"), Catch::Contains("layer 1 is in stage 0 and in stage 1"));
  CHECK_THROWS_WITH(resolve("1@cpu;0@model"), Catch::Contains("layer order"));
  CHECK_THROWS_WITH(resolve("0-1@model:0+model:1+model:2+model:3+model:4"), Catch::Contains("only 4 heads"));
  CHECK_THROWS_WITH(resolve("0-1@model:0*1+cpu*100"), Catch::Contains("no attention head"));

  const Plan p = resolve("0-1@model:0*1+cpu*3");
  const auto& d = p.stages[0].devices;
  CHECK((d[0].heads == 1 && d[1].heads == 3 && d[1].head_begin == 1));
  CHECK((d[0].mlp == 128 && d[1].mlp == 384 && d[1].mlp_begin == 128));
  CHECK((d[0].vocab == 128 && d[1].vocab == 384));
  // model:0, int8: per layer E*3D + D*E + E*128 + 128*E weights with an fp32 scale per output
  // column, for two layers, plus its 128 rows of the output projection with their scales.
  const uint64_t E = 128, D = 32;
  CHECK(d[0].weight_bytes == 2 * (E * 3 * D + D * E + E * 128 + 128 * E + 4 * (3 * D + E + 128 + E)) + 128 * E + 4 * 128);
  CHECK(resolve("0-1@cpu").stages[0].devices[0].weight_bytes ==
        4 * (2 * (12 * E * E + 9 * E) + 512 * E));  // fp32 weights and biases, the whole output projection
}

TEST_CASE("the expected bubble is GPipe's", "[unit][plan]") {
  CHECK(Plan::parse("0@cpu").expected_bubble(4) == 0);
  CHECK(Plan::parse("0@cpu;1@model").expected_bubble(4) == Approx(1.0 / 5));
  CHECK(Plan::parse("0@cpu;1@model;2@rtl").expected_bubble(1) == Approx(2.0 / 3));
}
