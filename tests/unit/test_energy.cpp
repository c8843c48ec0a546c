// The energy model's arithmetic on hand-worked cases, its tables, and the accelerator backend's
// activity (the engine's counted actions) on a model device.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <catch2/catch.hpp>

#include "tessera/backends/accel_backend.hpp"
#include "tessera/backends/nvml_power.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/driver/gemm_job.hpp"
#include "tessera/model/golden.hpp"
#include "tessera/runtime/energy.hpp"

using namespace tessera;

namespace {

const EngineConfig kDefault = EngineConfig::from_preset(EngineConfig::preset("default"));  // 16 x 16

// A table file in the test's temporary directory, removed afterwards.
struct TableFile {
  std::filesystem::path path;
  explicit TableFile(const nlohmann::json& j)
      : path(std::filesystem::temp_directory_path() / "tessera_energy_table_test.json") {
    std::ofstream(path) << j.dump();
  }
  ~TableFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("energy tables: the shipped ones, and scaling to a node", "[unit][energy]") {
  CHECK(EnergyTable::builtin_names() == std::vector<std::string>{"45nm", "16nm", "7nm"});
  const EnergyTable t45 = EnergyTable::load("45nm");
  CHECK(t45.node_nm == 45);
  CHECK(t45.mac_int8.value == Approx(0.3));  // 0.2 pJ multiply + 0.1 pJ 32-bit add
  CHECK(t45.spad_read_byte.value == Approx(10.0 / 8));  // 10 pJ per 64-bit read of an 8 KB SRAM
  CHECK(t45.dram_byte.value == Approx(3.97 * 8));
  CHECK(t45.mac_int8.source.find("Horowitz") != std::string::npos);

  // 7 nm: energies x0.068 and areas x0.059 (Stillmaker and Baas), but the HBM is another chip and
  // the SRAM cell and leakage are the node's own.
  const EnergyTable t7 = EnergyTable::load("7nm");
  CHECK(t7.node_nm == 7);
  CHECK(t7.mac_int8.value == Approx(0.3 * 0.068));
  CHECK(t7.epilogue_requant.value == Approx(3.2 * 0.068));
  CHECK(t7.spad_write_byte.value == Approx(1.25 * 0.068));
  CHECK(t7.dram_byte.value == Approx(t45.dram_byte.value));
  CHECK(t7.mac_int8_area.value == Approx(419 * 0.059));
  CHECK(t7.sram_bit_area.value == Approx(0.027));
  CHECK(t7.sram_overhead.value == Approx(t45.sram_overhead.value));
  CHECK(t7.mac_int8.source.find("Stillmaker") != std::string::npos);
  CHECK(t7.sram_bit_area.source.find("Stillmaker") == std::string::npos);

  // A table written out reads back the same.
  const TableFile file(t7.to_json());
  const EnergyTable back = EnergyTable::load(file.path.string());
  CHECK(back.mac_int8.value == Approx(t7.mac_int8.value));
  CHECK(back.static_mw_per_mm2.source == t7.static_mw_per_mm2.source);
  CHECK(back.name == "7nm");
}

TEST_CASE("energy tables: bad ones are named errors", "[unit][energy]") {
  auto error_of = [](const nlohmann::json& j) {
    try {
      EnergyTable::from_json(j, "t.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json good = EnergyTable::load("45nm").to_json();
  CHECK(error_of(good) == "no error");
  auto without = [&](const std::string& section, const std::string& key) {
    nlohmann::json j = good;
    if (key.empty()) j.erase(section); else j[section].erase(key);
    return j;
  };
  CHECK_THAT(error_of(without("energy_pj", "dram_byte")), Catch::Contains("'energy_pj.dram_byte' is missing"));
  CHECK_THAT(error_of(without("static_mw_per_mm2", "")), Catch::Contains("'static_mw_per_mm2' is missing"));
  // A table from before BF16 (no bf16 entries) still loads; it sizes and prices int8 work only.
  nlohmann::json old = without("energy_pj", "mac_bf16");
  old["energy_pj"].erase("epilogue_add_fp32");
  old["area_um2"].erase("mac_bf16");
  CHECK(error_of(old) == "no error");
  const EnergyTable int8_table = EnergyTable::from_json(old, "old.json");
  CHECK_THROWS_WITH(asic_area(EngineConfig::from_preset(EngineConfig::preset("small-bf16")), int8_table),
                    Catch::Contains("no area_um2.mac_bf16: it cannot size a BF16 engine"));
  const EngineConfig cfg = EngineConfig::from_preset(EngineConfig::preset("small"));
  EngineActivity bf16_work;
  bf16_work.macs = bf16_work.bf16_macs = 10;
  CHECK_THROWS_WITH(accel_energy(bf16_work, int8_table, asic_area(cfg, int8_table), 1e8),
                    Catch::Contains("cannot price BF16 work"));
  nlohmann::json j = good;
  j["energy_pj"]["mac_fp8"] = {{"value", 1}, {"source", "x"}};
  CHECK_THAT(error_of(j), Catch::Contains("unknown entry 'energy_pj.mac_fp8'"));
  j = good;
  j["energy_pj"]["mac_int8"]["value"] = -1;
  CHECK_THAT(error_of(j), Catch::Contains("'energy_pj.mac_int8' needs a value >= 0 and a source"));
  j = good;
  j["energy_pj"]["mac_int8"].erase("source");
  CHECK_THAT(error_of(j), Catch::Contains("'energy_pj.mac_int8' must be"));
  j = {{"name", "x"}, {"node_nm", 5}, {"description", "d"}, {"derived_from", "3nm"}};
  CHECK_THAT(error_of(j), Catch::Contains("must name a shipped table, not '3nm'"));
  j["derived_from"] = "45nm";
  CHECK_THAT(error_of(j), Catch::Contains("needs 'scale'"));
  j["scale"] = {{"energy", 0.5}, {"area", 0.25}, {"source", "a team's library"}};
  const EnergyTable half = EnergyTable::from_json(j, "t.json");
  CHECK(half.mac_int8.value == Approx(0.15));
  CHECK(half.sram_bit_area.value == Approx(0.346 * 0.25));
  CHECK_THAT(half.mac_int8.source, Catch::Contains("scaled x0.5 to 5 nm (a team's library)"));
  CHECK_THROWS_WITH(EnergyTable::load("no/such/table.json"),
                    Catch::Contains("neither a shipped one (45nm, 16nm, 7nm) nor a readable file"));
}

TEST_CASE("energy: worked cases on the default engine at 45 nm", "[unit][energy]") {
  const EnergyTable t = EnergyTable::load("45nm");
  // 256 MACs of 419 um^2 and, with BF16 (default-bf16), 5053 um^2 more each; scratchpads
  // 2 x 4096 x (16 + 16) + 2 x 16 x 16 x 4 + 2 x 16 x 9 = 264480 bytes of 0.346 um^2 bit cells, twice
  // that with the periphery.
  const EngineConfig with_bf16 = EngineConfig::from_preset(EngineConfig::preset("default-bf16"));
  REQUIRE(!kDefault.bf16);
  REQUIRE(with_bf16.bf16);
  CHECK(asic_area(kDefault, t).array_mm2 == Approx(256 * 419e-6));
  CHECK(asic_area(kDefault, t).sram_bytes == 264480);
  const AsicArea area = asic_area(with_bf16, t);
  CHECK(area.macs == 256);
  CHECK(area.sram_bytes == 264480);
  CHECK(area.array_mm2 == Approx(256 * (419 + 5053) * 1e-6));
  CHECK(area.sram_mm2 == Approx(264480 * 8 * 0.346 * 2 * 1e-6));
  CHECK(area.total_mm2() == Approx(1.400832 + 1.46416128));

  EngineActivity a;
  a.macs = 1000, a.spad_read_bytes = 800, a.spad_write_bytes = 400, a.dram_bytes = 100;
  a.epilogue_adds = 50, a.epilogue_requants = 10, a.cycles = 1000;
  const EnergySplit e = accel_energy(a, t, area, 250e6);
  CHECK(e.compute == Approx((1000 * 0.3 + 50 * 0.1 + 10 * 3.2) * 1e-12));  // 337 pJ
  CHECK(e.onchip == Approx(1200 * 1.25e-12));                             // 1500 pJ
  CHECK(e.dram == Approx(100 * 31.76e-12));                               // 3176 pJ
  // 10 mW/mm^2 over 2.86499328 mm^2 for 4 us.
  CHECK(e.leakage == Approx(10e-3 * 2.86499328 * 4e-6));
  CHECK(e.total() == Approx(e.compute + e.onchip + e.dram + e.leakage));
  // 400 of the MACs and 20 of the adds in BF16: 1.48 pJ and 0.9 pJ each instead.
  a.bf16_macs = 400, a.fp32_adds = 20;
  CHECK(accel_energy(a, t, area, 250e6).compute ==
        Approx((600 * 0.3 + 400 * 1.48 + 50 * 0.1 + 20 * 0.9 + 10 * 3.2) * 1e-12));
}

TEST_CASE("energy: a batch's activity from the engine's counters", "[unit][energy]") {
  // 20x40x8 to int8 with a bias: 2 row blocks x 3 column blocks, each tile reading 256 sums out
  // through the epilogue (a bias add and a requantization each).
  GemmProblem p;
  p.req = {.m = 20, .n = 40, .k = 8, .int8_out = true, .bias = true, .seed = 1};
  const Descriptor d = gemm_descriptor(p, 0);
  driver::Counters delta;
  delta.steps = 48, delta.read_bytes = 1000, delta.write_bytes = 300, delta.descs = 1, delta.spad_read_bytes = 777;
  delta.busy_cycles = 500;
  const EngineActivity a = activity_of(delta, {d}, kDefault);
  CHECK(a.macs == 48 * 256);
  CHECK(a.spad_read_bytes == 777);
  CHECK(a.spad_write_bytes == 1000 - 64);  // every beat read lands in a slot, the descriptor aside
  CHECK(a.dram_bytes == 1300);
  CHECK(a.epilogue_adds == 6 * 256);
  CHECK(a.epilogue_requants == 6 * 256);
  CHECK(a.cycles == 500);
}

TEST_CASE("energy: the accelerator backend's activity is the engine's counted actions", "[unit][energy]") {
  driver::Device dev(driver::DeviceSpec::parse("model?mem_mb=16"));
  AccelBackend accel(dev);
  const uint32_t m = 37, n = 45, k = 70;
  std::vector<float> a(m * k, 0.5f), b(k * n, -0.25f), c(m * n);
  const driver::Counters before = dev.counters();
  accel.matmul(a.data(), b.data(), c.data(), m, n, k, false);
  const driver::Counters delta = dev.counters() - before;
  const EngineActivity act = accel.stats().activity;
  // int32 out, no bias: no epilogue operations; 3 x 3 tiles (or FOLD's, as the backend chose) of 70 steps.
  CHECK(act.macs == delta.steps * 256);
  CHECK(act.macs >= uint64_t{48} * 48 * 70);
  CHECK(act.spad_read_bytes == delta.spad_read_bytes);
  CHECK(act.spad_write_bytes == delta.read_bytes - 64 * delta.descs);
  CHECK(act.dram_bytes == accel.stats().read_bytes + accel.stats().write_bytes);
  CHECK(act.epilogue_adds == 0);
  CHECK(act.epilogue_requants == 0);
  CHECK(act.cycles == accel.stats().cycles);
}

TEST_CASE("energy: NVML's power reading, or why there is none", "[unit][energy]") {
  // On a machine without the GPU driver this says why; with one, an unknown bus is refused by name.
  std::string why_not;
  const auto meter = NvmlPower::open("0000:ff:1f.7", why_not);
  CHECK(meter == nullptr);
  CHECK(!why_not.empty());
  INFO(why_not);
  CHECK((why_not.starts_with("no NVML library") || why_not.find("0000:ff:1f.7") != std::string::npos ||
         why_not.starts_with("nvmlInit_v2 failed")));
}
