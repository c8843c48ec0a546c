// tessera: the command-line front end (the contract is in DESIGN.md).
// Exit codes: 0 success, 1 a check failed or the device failed, 2 bad usage or input.
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "tessera/backends/gpu_error.hpp"
#include "tessera/driver/device.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

std::optional<po::variables_map> parse_args(const po::options_description& opts, const std::vector<std::string>& args) {
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).run(), vm);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return std::nullopt;
  }
  po::notify(vm);
  return vm;
}

}  // namespace tessera::cli

namespace {

constexpr const char* kUsage = R"(usage: tessera <command> [options]

commands:
  devices    list devices and their properties
  gemm       run one int8 GEMM on a device and check it against the golden model
  validate   health checks of a device: quick, standard or stress
  run        run a GPT-2 model over a plan of devices and compare it with fp32 on the CPU
  plan       print how a model's layers split over devices, without running it (--auto: choose it)
  calibrate  time the CPU's or a GPU's ops once for --plan auto
  replay     play a trace captured by gemm or run --capture on a device and check every output
  generate   generate text from a prompt (prefill, then decode with KV caches) over a plan of devices
  eval       perplexity of a model over a text, with a sliding window, over a plan of devices
  bench      prompt processing and token generation in tokens/s per plan (as llama-bench)
  tokenize   GPT-2 byte-level BPE: text to token ids and back

run 'tessera <command> --help' for a command's options)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    (argc < 2 ? std::cerr : std::cout) << kUsage << "\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "devices") return tessera::cli::devices(args);
    if (cmd == "gemm") return tessera::cli::gemm(args);
    if (cmd == "validate") return tessera::cli::validate(args);
    if (cmd == "plan") return tessera::cli::plan(args);
    if (cmd == "calibrate") return tessera::cli::calibrate(args);
    if (cmd == "run") return tessera::cli::run(args);
    if (cmd == "replay") return tessera::cli::replay(args);
    if (cmd == "tokenize") return tessera::cli::tokenize(args);
    if (cmd == "generate") return tessera::cli::generate(args);
    if (cmd == "eval") return tessera::cli::eval(args);
    if (cmd == "bench") return tessera::cli::bench(args);
    std::cerr << fmt::format("tessera: unknown command '{}'\n{}\n", cmd, kUsage);
    return 2;
  } catch (const po::error& e) {
    std::cerr << fmt::format("tessera {}: {}\n", cmd, e.what());
    return 2;
  } catch (const std::invalid_argument& e) {  // driver::UsageError and other bad input
    std::cerr << fmt::format("tessera {}: {}\n", cmd, e.what());
    return 2;
  } catch (const tessera::driver::DeviceError& e) {
    std::cerr << fmt::format("tessera {}: device failed: {}\n", cmd, e.what());
    return 1;
  } catch (const tessera::GpuError& e) {
    std::cerr << fmt::format("tessera {}: GPU failed: {}\n", cmd, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("tessera {}: {}\n", cmd, e.what());
    return 1;
  }
}
