#include <iostream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/driver/trace.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

int replay(const std::vector<std::string>& args) {
  std::string dir, device = "model";
  po::options_description opts("tessera replay: play a captured trace on a device and check every output");
  opts.add_options()
      ("help,h", "this text")
      ("trace", po::value(&dir)->required(), "the trace directory (from gemm or run --capture)")
      ("device", po::value(&device)->default_value("model"), "device spec to play it on")
      ("json", "print one JSON object");
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: tessera replay DIR [--device D] [--json]\n" << opts << "\n";
    return 0;
  }
  po::notify(vm);

  driver::Device dev(driver::DeviceSpec::parse(device));
  const driver::ReplayReport r = driver::replay(dir, dev);
  const int64_t delta = static_cast<int64_t>(r.replayed_cycles) - static_cast<int64_t>(r.recorded_cycles);
  const double pct = r.recorded_cycles ? 100.0 * double(delta) / double(r.recorded_cycles) : 0.0;
  if (vm.count("json")) {
    nlohmann::ordered_json j = {
        {"schema_version", 1}, {"trace", dir}, {"captured_on", r.captured_on}, {"device", r.device},
        {"result", r.ok() ? "pass" : "fail"}, {"loads", r.loads}, {"descriptors", r.descriptors},
        {"waits", r.waits}, {"checks", r.checks}, {"bytes_checked", r.bytes_checked},
        {"bytes_wrong", r.bytes_wrong},
        {"cycles", {{"recorded", r.recorded_cycles}, {"replayed", r.replayed_cycles}, {"delta", delta}}}};
    if (r.first_mismatch) j["first_mismatch"] = *r.first_mismatch;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("replay of {} (captured on {}) on {}\n", dir, r.captured_on, r.device);
    std::cout << fmt::format("  {} loads, {} descriptors, {} waits, {} checks of {} bytes\n", r.loads, r.descriptors,
                             r.waits, r.checks, r.bytes_checked);
    std::cout << fmt::format("  busy cycles: recorded {}, replayed {} ({:+}, {:+.2f}%)\n", r.recorded_cycles,
                             r.replayed_cycles, delta, pct);
    if (r.ok())
      std::cout << "  every output matches\n";
    else
      std::cout << fmt::format("  MISMATCH: {} of {} bytes differ; first: {}\n", r.bytes_wrong, r.bytes_checked,
                               *r.first_mismatch);
  }
  return r.ok() ? 0 : 1;
}

}  // namespace tessera::cli
