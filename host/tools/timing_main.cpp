// tessera-timing: the timing model alone, for benchmarks. Estimates the descriptor that
// `tessera gemm` would submit for the same arguments and times estimate() itself, without the
// golden model's arithmetic that the model device also does.
//
//   tessera-timing [--preset P] [--mem-latency N] [--mem-bytes-per-cycle N] [--mem-max-reads N]
//                  [--mem-max-writes N] [--engine-max-reads N] --m M --n N --k K [--out int8] [--bias] [--relu]
//                  [--accumulate] [--json]
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/driver/gemm_job.hpp"
#include "tessera/model/timing.hpp"

namespace po = boost::program_options;
using namespace tessera;

namespace {

int run(int argc, char** argv) {
  std::string preset = "default", out_mode = "int32";
  GemmRequest req;
  MemoryModelConfig mem;
  double min_seconds = 0.05;
  uint32_t engine_max_reads = 0;
  po::options_description opts("tessera-timing: time the timing model's estimate of one GEMM");
  opts.add_options()
      ("help,h", "this text")
      ("preset", po::value(&preset)->default_value(preset), "engine preset")
      ("mem-latency", po::value(&mem.latency)->default_value(mem.latency), "memory latency, cycles")
      ("mem-bytes-per-cycle", po::value(&mem.bytes_per_cycle)->default_value(0), "memory bandwidth; 0 = the bus")
      ("mem-max-reads", po::value(&mem.max_reads)->default_value(mem.max_reads), "read bursts in flight")
      ("mem-max-writes", po::value(&mem.max_writes)->default_value(mem.max_writes), "write bursts in flight")
      ("engine-max-reads", po::value(&engine_max_reads)->default_value(0),
       "what-if: the engine's read tracker depth instead of the preset's (0 = the preset's)")
      ("m", po::value(&req.m)->required(), "rows of A and C")
      ("n", po::value(&req.n)->required(), "columns of B and C")
      ("k", po::value(&req.k)->required(), "columns of A, rows of B")
      ("out", po::value(&out_mode)->default_value(out_mode), "output mode: int32 | int8")
      ("bias", po::bool_switch(&req.bias), "add a per-column int32 bias")
      ("relu", po::bool_switch(&req.relu), "clamp at the output zero point (int8 only)")
      ("accumulate", po::bool_switch(&req.accumulate), "add an int32 C_in")
      ("fold", po::bool_switch(&req.fold), "the FOLD dataflow for small M")
      ("min-seconds", po::value(&min_seconds)->default_value(min_seconds), "repeat the estimate at least this long")
      ("json", "print one JSON object");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  po::notify(vm);
  if (out_mode != "int32" && out_mode != "int8")
    throw std::invalid_argument(fmt::format("--out must be int32 or int8, not '{}'", out_mode));
  req.int8_out = out_mode == "int8";
  EngineConfig cfg = EngineConfig::from_preset(EngineConfig::preset(preset));
  if (engine_max_reads != 0) cfg.max_reads = engine_max_reads;
  GemmProblem p;
  p.req = req;
  // A fresh device's first buffer, the one `tessera gemm` gets, starts right after the ring.
  const Descriptor d = gemm_descriptor(p, uint64_t{driver::Device::kRingEntries} * spec::kDescBytes);
  if (const Fault f = validate(d, 0, cfg)) throw std::invalid_argument(fmt::format("bad GEMM: {}", describe(f)));

  // Batches of estimates, each long enough for the clock; the median batch's time per estimate,
  // so that a busy machine's worst moments do not count.
  using clock = std::chrono::steady_clock;
  TimingEstimate t = estimate(d, cfg, mem);
  std::vector<double> per_estimate;
  uint64_t repeats = 0;
  const auto start = clock::now();
  while (per_estimate.size() < 5 || std::chrono::duration<double>(clock::now() - start).count() < min_seconds) {
    const auto t0 = clock::now();
    uint64_t n = 0;
    double s = 0;
    do {
      t = estimate(d, cfg, mem);
      ++n;
      s = std::chrono::duration<double>(clock::now() - t0).count();
    } while (s < min_seconds / 10);
    per_estimate.push_back(s / static_cast<double>(n));
    repeats += n;
  }
  std::nth_element(per_estimate.begin(), per_estimate.begin() + per_estimate.size() / 2, per_estimate.end());
  const double each = per_estimate[per_estimate.size() / 2];
  if (vm.count("json")) {
    const nlohmann::ordered_json j = {{"preset", preset},          {"m", req.m},
                                      {"n", req.n},                {"k", req.k},
                                      {"cycles", t.cycles},        {"stall_cycles", t.stall_cycles},
                                      {"read_bytes", t.read_bytes}, {"write_bytes", t.write_bytes},
                                      {"seconds", each},           {"repeats", repeats}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} {}x{}x{}: {} cycles, {} stalled, read {} B, written {} B; {:.3g} s per estimate\n",
                             preset, req.m, req.n, req.k, t.cycles, t.stall_cycles, t.read_bytes, t.write_bytes,
                             each);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const po::error& e) {
    std::cerr << fmt::format("tessera-timing: {}\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << fmt::format("tessera-timing: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("tessera-timing: {}\n", e.what());
    return 1;
  }
}
