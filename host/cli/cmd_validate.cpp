#include <unistd.h>

#include <iostream>
#include <utility>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/driver/health.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

int validate(const std::vector<std::string>& args) {
  std::string device, level = "quick";
  driver::HealthOptions ho;
  po::options_description opts(
      "tessera validate: health checks that keep a faulty device out of a job\n"
      "  quick     registers and a known-answer GEMM (seconds)\n"
      "  standard  + memory patterns over all device memory, DMA integrity, GEMMs in every mode and\n"
      "            flag on shapes that use every PE, counter consistency, descriptor throughput\n"
      "  stress    + random GEMMs against the golden model (--duration or --count)\n"
      "Exit 0 only when the verdict is pass");
  opts.add_options()
      ("help,h", "this text")
      ("device", po::value(&device)->required(), "device spec: model[:i][?opts], rtl[:i][?opts], xdma:/dev/xdmaN")
      ("level", po::value(&level)->default_value("quick"), "quick | standard | stress")
      ("strict", po::bool_switch(&ho.strict), "a skipped check fails the verdict")
      ("seed", po::value(&ho.seed)->default_value(1), "seed of the random data")
      ("duration", po::value(&ho.stress_seconds)->default_value(60), "stress: seconds of random GEMMs")
      ("count", po::value(&ho.stress_count)->default_value(0), "stress: this many random GEMMs instead")
      ("json", "print one JSON object");
  const auto parsed = parse_args(opts, args);
  if (!parsed) return 0;
  const po::variables_map& vm = *parsed;
  ho.level = driver::parse_level(level);
  if (!(ho.stress_seconds >= 0)) throw driver::UsageError("--duration must be a number of seconds >= 0");
  const bool json = vm.count("json") > 0;
  const auto spec = driver::DeviceSpec::parse(device);

  // Text mode prints each check as it ends (flushed on a terminal), the header with the first one,
  // so that a device spec with a bad option gets only its one-line error.
  const bool tty = !json && ::isatty(STDOUT_FILENO);
  bool header = false;
  ho.on_result = [&](const driver::CheckResult& r) {
    if (json) return;
    if (!std::exchange(header, true))
      std::cout << fmt::format("validating {} at level {} (seed {})\n\n{:<26} {:<10} {:>8}  {}\n", spec.str(), level,
                               ho.seed, "CHECK", "RESULT", "SECONDS", "DETAIL");
    std::cout << fmt::format("{:<26} {:<10} {:>8.2f}  {}\n", r.name, driver::to_string(r.result), r.seconds, r.detail);
    if (tty) std::cout.flush();
  };
  const driver::HealthReport report = driver::run_health_checks(spec, ho);

  if (json) {
    nlohmann::ordered_json tests = nlohmann::ordered_json::array();
    for (const auto& t : report.tests)
      tests.push_back({{"name", t.name}, {"result", driver::to_string(t.result)}, {"detail", t.detail},
                       {"seconds", t.seconds}});
    nlohmann::ordered_json j = {{"schema_version", 1},
                                {"device", report.device},
                                {"level", driver::to_string(report.level)},
                                {"result", driver::to_string(report.result)},
                                {"strict", ho.strict},
                                {"seed", ho.seed},
                                {"tests", tests}};
    std::cout << j.dump(2) << "\n";
  } else {
    size_t counts[4] = {};
    for (const auto& t : report.tests) ++counts[static_cast<int>(t.result)];
    std::cout << fmt::format("\nverdict: {} ({} passed, {} failed, {} skipped, {} incomplete{})\n",
                             driver::to_string(report.result), counts[0], counts[1], counts[2], counts[3],
                             ho.strict ? "; --strict: skips fail" : "");
  }
  return report.result == driver::Verdict::kPass ? 0 : 1;
}

}  // namespace tessera::cli
