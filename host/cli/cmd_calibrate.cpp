#include <chrono>
#include <iostream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "run_args.hpp"
#include "tessera/runtime/autoplan.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

int calibrate(const std::vector<std::string>& args) {
  RunArgs ra;
  std::string device, phase_text = "prefill";
  uint32_t new_tokens = 0;
  po::options_description opts(
      "tessera calibrate: time a device's ops (the CPU, a GPU that is there) and the host's once, at the shapes\n"
      "plans of a model and workload need, and keep them in the calibration directory ($TESSERA_CALIBRATION_DIR,\n"
      "else $XDG_CACHE_HOME/tessera or ~/.cache/tessera), where --plan auto reads them instead of timing them again");
  opts.add_options()("help,h", "this text")
      ("device", po::value(&device), "the device: cpu or cuda[:i] (accelerators and projected GPUs need none)")
      ("model", po::value(&ra.model)->default_value("tiny"), "as tessera run's (its shapes are what is timed)")
      ("batch", po::value(&ra.batch)->default_value(1), "sequences")
      ("seq", po::value(&ra.seq)->default_value(32), "tokens per sequence (generate, decode: the prompt's)")
      ("phase", po::value(&phase_text)->default_value("prefill"), "prefill, decode or generate (as tessera plan --auto)")
      ("max-new-tokens", po::value(&new_tokens), "decode, generate: the tokens generated after the prompt")
      ("json", po::bool_switch(&ra.json), "print one JSON object");
  ra.add_cpu_threads_option(opts);
  const auto vm = parse_args(opts, args);
  if (!vm) return 0;
  ra.apply_cpu_threads(*vm);
  if (device.empty()) throw std::invalid_argument("give the device to calibrate: --device cpu or --device cuda[:i]");
  const auto devices = parse_devices(device);
  if (devices.size() != 1) throw std::invalid_argument(fmt::format("--device {}: one device", device));
  const RunPhase phase = parse_phase(phase_text);
  if (phase == RunPhase::kGenerate && ra.batch != 1) throw std::invalid_argument("the generate phase runs one sequence: --batch 1");
  const Gpt2Config cfg = ra.model_config();
  const auto t0 = std::chrono::steady_clock::now();
  CostModel costs(cfg, devices, Workload{phase, ra.batch, ra.seq, new_tokens}, 250);
  const std::string& label = devices[0].label;
  const std::vector<std::string> files = costs.calibrate(label);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ra.json) {
    std::cout << nlohmann::ordered_json{{"schema_version", 1}, {"device", label}, {"model", ra.model},
                                        {"phase", phase_text}, {"batch", ra.batch}, {"seq", ra.seq},
                                        {"files", files}, {"cost_source", costs.source(label)}, {"seconds", seconds}}
                     .dump(2)
              << "\n";
    return 0;
  }
  if (files.empty()) {
    std::cout << fmt::format("{} needs no calibration: {}\n", label, costs.source(label));
    return 0;
  }
  std::cout << fmt::format("calibrated {} and the host for {} ({}, batch {} x {} tokens) in {:.1f} s:\n", label,
                           ra.model, phase_text, ra.batch, ra.seq, seconds);
  for (const auto& f : files) std::cout << "  " << f << "\n";
  return 0;
}

}  // namespace tessera::cli
