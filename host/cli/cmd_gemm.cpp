#include <filesystem>
#include <iostream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/driver/gemm_job.hpp"
#include "tessera/driver/trace.hpp"
#include "tessera/io/npy.hpp"
#include "tessera/runtime/energy.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

template <typename T>
std::span<const T> as(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
}

void dump(const std::string& dir, const GemmProblem& p, const GemmOutcome& out) {
  std::filesystem::create_directories(dir);
  const auto& r = p.req;
  if (r.bf16) {  // NumPy has no bf16: its bit patterns go as uint16 (view them with ml_dtypes.bfloat16)
    const auto f32 = [](const std::vector<int32_t>& v) {
      return std::span<const float>(reinterpret_cast<const float*>(v.data()), v.size());
    };
    write_npy<uint16_t>(dir + "/a.npy", {r.m, r.k}, p.a_bf16);
    write_npy<uint16_t>(dir + "/b.npy", {r.k, r.n}, p.b_bf16);
    if (r.bf16_out) write_npy<uint16_t>(dir + "/c.npy", {r.m, r.n}, as<uint16_t>(out.c));
    else write_npy<float>(dir + "/c.npy", {r.m, r.n}, as<float>(out.c));
    if (r.bias) write_npy<float>(dir + "/bias.npy", {r.n}, f32(p.bias));
    if (r.accumulate) write_npy<float>(dir + "/c_in.npy", {r.m, r.n}, f32(p.cin));
    return;
  }
  write_npy<int8_t>(dir + "/a.npy", {r.m, r.k}, p.a);
  write_npy<int8_t>(dir + "/b.npy", {r.k, r.n}, p.b);
  if (r.int8_out) {
    write_npy<int8_t>(dir + "/c.npy", {r.m, r.n}, as<int8_t>(out.c));
    write_npy<int32_t>(dir + "/mult.npy", {r.n}, p.mult);
    write_npy<int8_t>(dir + "/shift.npy", {r.n}, p.shift);
  } else {
    write_npy<int32_t>(dir + "/c.npy", {r.m, r.n}, as<int32_t>(out.c));
  }
  if (r.bias) write_npy<int32_t>(dir + "/bias.npy", {r.n}, p.bias);
  if (r.accumulate) write_npy<int32_t>(dir + "/c_in.npy", {r.m, r.n}, p.cin);
}

}  // namespace

int gemm(const std::vector<std::string>& args) {
  std::string device, out_mode, precision = "int8", dump_dir, capture_dir, energy_table = "7nm";
  double clock_mhz = 0;
  GemmRequest req;
  po::options_description opts("tessera gemm: run one GEMM and check it against the golden model");
  opts.add_options()
      ("help,h", "this text")
      ("device", po::value(&device)->required(), "device spec: model[:i][?opts], rtl[:i][?opts]")
      ("m", po::value(&req.m)->required(), "rows of A and C")
      ("n", po::value(&req.n)->required(), "columns of B and C")
      ("k", po::value(&req.k)->required(), "columns of A, rows of B")
      ("precision", po::value(&precision)->default_value("int8"),
       "operands: int8 (int32 sums) | bf16 (fp32 sums; docs/ENGINE.md, \"BF16 numerics\")")
      ("out", po::value(&out_mode), "output mode: int32 | int8 (int8 precision, default int32); fp32 | bf16 "
                                    "(bf16 precision, default fp32)")
      ("bias", po::bool_switch(&req.bias), "add a per-column bias (int32; fp32 with bf16)")
      ("relu", po::bool_switch(&req.relu), "int8: clamp below at the output zero point; bf16: max(x, 0)")
      ("accumulate", po::bool_switch(&req.accumulate), "add a C_in (int32; fp32 with bf16)")
      ("specials", po::bool_switch(&req.specials),
       "bf16: operands also zeros, subnormals, range extremes, infinities and NaNs")
      ("fold", po::bool_switch(&req.fold),
       "small-M dataflow: the array's lower half of rows computes the next column block (M <= R/2, "
       "K <= k_max/2, int32 output, no bias or C_in)")
      ("seed", po::value(&req.seed)->default_value(1), "seed of the random operands")
      ("dump", po::value(&dump_dir), "write a.npy, b.npy, c.npy (and bias, mult, shift) here")
      ("capture", po::value(&capture_dir), "record the driver's loads, descriptors and outputs here (tessera replay)")
      ("clock-mhz", po::value(&clock_mhz),
       "the engine's clock, for its leakage (default: its preset's estimated Fmax; docs/ENERGY.md)")
      ("energy-table", po::value(&energy_table)->default_value("7nm"),
       "energy and area per action: 45nm, 16nm, 7nm (docs/ENERGY.md) or a table file")
      ("json", "print one JSON object");
  const auto parsed = parse_args(opts, args);
  if (!parsed) return 0;
  const po::variables_map& vm = *parsed;
  if (precision != "int8" && precision != "bf16")
    throw driver::UsageError(fmt::format("--precision must be int8 or bf16, not '{}'", precision));
  req.bf16 = precision == "bf16";
  if (out_mode.empty()) out_mode = req.bf16 ? "fp32" : "int32";
  if (req.bf16 ? out_mode != "fp32" && out_mode != "bf16" : out_mode != "int32" && out_mode != "int8")
    throw driver::UsageError(fmt::format("--out must be {} with --precision {}, not '{}'",
                                         req.bf16 ? "fp32 or bf16" : "int32 or int8", precision, out_mode));
  req.int8_out = out_mode == "int8";
  req.bf16_out = out_mode == "bf16";
  if (req.relu && !req.int8_out && !req.bf16) throw driver::UsageError("--relu needs --out int8 or --precision bf16");
  if (req.specials && !req.bf16) throw driver::UsageError("--specials needs --precision bf16");
  for (const auto& [name, v] : {std::pair{"m", req.m}, {"n", req.n}, {"k", req.k}})
    if (v == 0 || v > spec::kDimMax)
      throw driver::UsageError(fmt::format("--{} must be in [1, {}], not {}", name, spec::kDimMax, v));

  if (vm.count("clock-mhz") && !(clock_mhz > 0)) throw driver::UsageError("--clock-mhz must be positive");
  const EnergyTable table = EnergyTable::load(energy_table);
  if (req.fold && (req.bf16 || req.int8_out || req.bias || req.accumulate))
    throw driver::UsageError(
        "--fold computes plain int8 x int8 = int32 results: it takes no --precision bf16, --out int8, --bias or "
        "--accumulate");

  driver::DeviceSpec spec = driver::DeviceSpec::parse(device);
  // A simulated device named without a preset is the default engine with the precisions asked for.
  if (req.bf16 && spec.kind != "xdma" && !spec.options.count("preset")) spec.options["preset"] = "default-bf16";
  if (!vm.count("clock-mhz")) clock_mhz = accelerator_clock(spec).mhz;
  driver::Device dev(spec);
  if (req.bf16 && !dev.properties().bf16)
    throw driver::UsageError(fmt::format("--precision bf16 on {}: {}", dev.properties().spec, driver::no_bf16_reason(spec)));
  if (req.fold) {
    const auto& pr = dev.properties();
    if (!pr.fold)
      throw driver::UsageError(fmt::format("{}: the engine has no FOLD dataflow, or the device says dataflow=classic", pr.spec));
    if (req.m > pr.rows / 2 || req.k > pr.k_max / 2)
      throw driver::UsageError(fmt::format("--fold needs M <= {} and K <= {} on {} (a {}x{} array), not M = {}, K = {}",
                                           pr.rows / 2, pr.k_max / 2, pr.spec, pr.rows, pr.cols, req.m, req.k));
  }
  std::shared_ptr<driver::TraceRecorder> recorder;
  if (!capture_dir.empty()) dev.capture(recorder = std::make_shared<driver::TraceRecorder>(capture_dir));
  const GemmProblem problem = GemmProblem::random(req);
  const GemmOutcome out = run_gemm(dev, problem);
  if (recorder) recorder->finish(dev);
  if (!dump_dir.empty()) dump(dump_dir, problem, out);

  const auto& pr = dev.properties();
  const uint64_t macs = uint64_t{req.m} * req.n * req.k;
  const uint64_t ideal = (macs + pr.rows * pr.cols - 1) / (pr.rows * pr.cols);
  const uint64_t cycles = out.counters.busy_cycles;
  const double util = cycles ? double(ideal) / double(cycles) : 0.0;
  // Modelled: the engine's counted actions with the energy table, an ASIC of its structure.
  const AsicArea area = asic_area(pr.engine(), table);
  const EnergySplit energy =
      accel_energy(activity_of(out.counters, {gemm_descriptor(problem, 0)}, pr.engine()), table, area, clock_mhz * 1e6);
  if (vm.count("json")) {
    nlohmann::ordered_json j = {{"schema_version", 1},
                        {"device", pr.spec},
                        {"m", req.m},
                        {"n", req.n},
                        {"k", req.k},
                        {"precision", precision},
                        {"out", out_mode},
                        {"bias", req.bias},
                        {"relu", req.relu},
                        {"accumulate", req.accumulate},
                        {"seed", req.seed},
                        {"array", {pr.rows, pr.cols}},
                        {"dataflow", req.fold ? "fold" : "output-stationary"},
                        {"cycles", cycles},
                        {"ideal_cycles", ideal},
                        {"utilization", util},
                        {"stall_cycles", out.counters.stall_cycles},
                        {"macs", out.counters.macs},
                        {"read_bytes", out.counters.read_bytes},
                        {"write_bytes", out.counters.write_bytes},
                        {"bit_exact", out.bit_exact},
                        {"seconds", out.seconds},
                        {"sim_cycles_per_second", out.seconds > 0 ? double(cycles) / out.seconds : 0.0},
                        {"energy", {{"joules", energy.total()}, {"energy", "modelled"},
                                    {"split", {{"compute", energy.compute}, {"onchip", energy.onchip},
                                               {"dram", energy.dram}, {"leakage", energy.leakage}}},
                                    {"tops_per_w", 2.0 * double(macs) / energy.total() / 1e12},
                                    {"clock_mhz", clock_mhz}, {"table", table.name},
                                    {"asic_area_mm2", {{"array", area.array_mm2}, {"sram", area.sram_mm2},
                                                       {"total", area.total_mm2()}}}}}};
    if (req.int8_out) {
      j["out_zp"] = problem.out_zp;
      j["act_min"] = problem.act_min;
      j["act_max"] = problem.act_max;
    }
    if (!out.mismatch.empty()) j["mismatch"] = out.mismatch;
    if (out.scoreboard) j["scoreboard"] = {{"ok", out.scoreboard->ok}, {"detail", out.scoreboard->detail}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} {}x{}x{} {} {}{}{}{}{} seed {} on a {}x{} array\n", pr.spec, req.m, req.n, req.k,
                             precision, out_mode, req.bias ? " +bias" : "", req.relu ? " +relu" : "",
                             req.accumulate ? " +accumulate" : "", req.fold ? " +fold" : "", req.seed, pr.rows, pr.cols);
    std::cout << fmt::format("  cycles {}  ideal {}  utilization {:.3f}  stall {}  MACs {}  read {} B  written {} B\n",
                             cycles, ideal, util, out.counters.stall_cycles, out.counters.macs,
                             out.counters.read_bytes, out.counters.write_bytes);
    std::cout << fmt::format("  bit-exact vs golden model: {}{}\n", out.bit_exact ? "yes" : "NO",
                             out.mismatch.empty() ? "" : " (" + out.mismatch + ")");
    if (out.scoreboard) std::cout << fmt::format("  scoreboard: {}\n", out.scoreboard->detail);
    std::cout << fmt::format("  energy (modelled, {} table, an ASIC of {:.3f} mm^2 at {} MHz): {:.4g} nJ, {:.3g} TOPS/W; "
                             "compute {:.4g}, on-chip {:.4g}, DRAM {:.4g}, leakage {:.4g} nJ\n",
                             table.name, area.total_mm2(), clock_mhz, energy.total() * 1e9,
                             2.0 * double(macs) / energy.total() / 1e12, energy.compute * 1e9, energy.onchip * 1e9,
                             energy.dram * 1e9, energy.leakage * 1e9);
    std::cout << fmt::format("  wall {:.3f} s", out.seconds)
              << (dev.properties().spec.starts_with("rtl") && out.seconds > 0
                      ? fmt::format(", {:.0f} simulated cycles/s\n", double(cycles) / out.seconds)
                      : std::string("\n"));
  }
  return out.bit_exact ? 0 : 1;
}

}  // namespace tessera::cli
