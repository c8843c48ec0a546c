#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/cuda_backend.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/driver/device.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

nlohmann::json probe_engine(const std::string& spec) {
  nlohmann::json j = {{"spec", spec}};
  try {
    driver::Device dev(driver::DeviceSpec::parse(spec));
    const auto& p = dev.properties();
    j["available"] = true;
    j["preset"] = p.preset;
    j["array"] = {p.rows, p.cols};
    j["k_max"] = p.k_max;
    j["axi_bytes"] = p.axi_bytes;
    j["max_reads"] = p.max_reads;
    j["dataflows"] = p.fold ? nlohmann::json{"output-stationary", "fold"} : nlohmann::json{"output-stationary"};
    j["precisions"] = p.bf16 ? nlohmann::json{"int8", "bf16"} : nlohmann::json{"int8"};
    j["align"] = p.align;
    j["mem_bytes"] = p.mem_bytes;
    j["version"] = fmt::format("{}.{}", p.version >> 16, p.version & 0xffff);
  } catch (const std::exception& e) {
    j["available"] = false;
    j["reason"] = e.what();
  }
  return j;
}

// One entry per XDMA card found, each opened and identified; one "absent" entry when there is none.
std::vector<nlohmann::json> probe_xdma() {
  namespace fs = std::filesystem;
  std::vector<std::string> nodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("xdma") && name.ends_with("_user")) nodes.push_back("/dev/" + name.substr(0, name.size() - 5));
  }
  std::sort(nodes.begin(), nodes.end());
  if (nodes.empty())
    return {{{"spec", "xdma:/dev/xdma0"}, {"available", false},
             {"reason", "no FPGA card: no /dev/xdma*_user device nodes (is the card installed and the xdma driver "
                        "loaded?)"}}};
  std::vector<nlohmann::json> cards;
  for (const auto& node : nodes) cards.push_back(probe_engine("xdma:" + node));
  return cards;
}

// One entry per GPU the CUDA runtime shows; one "absent" entry with the reason when there is none.
std::vector<nlohmann::json> probe_gpus() {
  std::string why_not;
  const auto gpus = list_gpus(why_not);
  if (gpus.empty())
    return {{{"spec", "cuda:0"}, {"kind", "cuda"}, {"available", false},
             {"reason", why_not + fmt::format("; a plan may still name cuda:i[?gpu=NAME] (NAME: {}): its share is "
                                              "computed on the host and its time projected from that GPU's published "
                                              "peaks", known_gpus())}}};
  std::vector<nlohmann::json> list;
  for (const auto& g : gpus) {
    const GpuPeaks* peaks = detect_gpu_peaks(g.name);  // what its roofline is held to, where known
    list.push_back({{"spec", fmt::format("cuda:{}", g.index)}, {"kind", "cuda"}, {"available", true},
                    {"name", g.name}, {"mem_bytes", g.memory_bytes},
                    {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)}, {"uuid", g.uuid},
                    {"peaks", peaks ? nlohmann::json(std::string(peaks->description)) : nlohmann::json()}});
  }
  return list;
}

}  // namespace

int devices(const std::vector<std::string>& args) {
  po::options_description opts("tessera devices: list devices and their properties");
  opts.add_options()("help,h", "this text")("json", "print one JSON object");
  const auto parsed = parse_args(opts, args);
  if (!parsed) return 0;
  const po::variables_map& vm = *parsed;
  nlohmann::json presets = nlohmann::json::array();
  for (const auto& p : spec::kPresets) presets.push_back(std::string(p.name));
  nlohmann::json list = nlohmann::json::array();
  for (const char* spec : {"model:0", "rtl:0"}) {
    auto j = probe_engine(spec);
    j["kind"] = std::string(spec).substr(0, std::string(spec).find(':'));
    j["presets"] = presets;
    // The simulator has the presets its build verilated (the default test tier's: small, default);
    // one that cannot say (a TESSERA_SIM from before it could) lists none.
    if (j["kind"] == "rtl" && j["available"].get<bool>()) try {
        j["presets"] = driver::rtl_presets();
      } catch (const driver::DeviceError&) {
        j.erase("presets");
      }
    list.push_back(j);
  }
  for (auto& x : probe_xdma()) {
    x["kind"] = "xdma";
    list.push_back(x);
  }
  list.push_back({{"spec", "cpu"}, {"kind", "cpu"}, {"available", true},
                  {"threads", std::thread::hardware_concurrency()}, {"cores_available", cores_available()},
                  {"blas_threads", cpu_threads().threads}});
  for (auto& x : probe_gpus()) list.push_back(x);

  if (vm.count("json")) {
    std::cout << nlohmann::ordered_json{{"schema_version", 1}, {"devices", list}}.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<18} {:<10} {}\n", "DEVICE", "STATUS", "DETAILS");
  for (const auto& d : list) {
    std::string details;
    if (d["available"].get<bool>() && d.contains("array"))
      details = fmt::format("preset {} ({}x{} array{}, {}, k_max {}, {}-bit AXI, {} MiB){}",
                            d["preset"].get<std::string>().empty() ? "custom" : d["preset"].get<std::string>(),
                            d["array"][0].get<int>(), d["array"][1].get<int>(),
                            d["dataflows"].size() > 1 ? " with FOLD" : "",
                            d["precisions"].size() > 1 ? "int8 and bf16" : "int8 only", d["k_max"].get<int>(),
                            d["axi_bytes"].get<int>() * 8, d["mem_bytes"].get<uint64_t>() >> 20,
                            d.contains("presets") ? "; presets: " + d["presets"].dump() : "");
    else if (d["available"].get<bool>() && d.contains("uuid"))
      details = fmt::format("{}, {} MiB, compute capability {}, UUID {}; peaks: {}", d["name"].get<std::string>(),
                            d["mem_bytes"].get<uint64_t>() >> 20, d["compute_capability"].get<std::string>(),
                            d["uuid"].get<std::string>(),
                            d["peaks"].is_null() ? "unknown (no roofline)" : d["peaks"].get<std::string>());
    else if (d["available"].get<bool>())
      details = fmt::format("{} hardware threads, {} available to this process; BLAS threads: {} ({})",
                            d["threads"].get<unsigned>(), d["cores_available"].get<unsigned>(),
                            d["blas_threads"].get<unsigned>(), cpu_threads().source);
    else
      details = d["reason"].get<std::string>();
    std::cout << fmt::format("{:<18} {:<10} {}\n", d["spec"].get<std::string>(),
                             d["available"].get<bool>() ? "available" : "absent", details);
  }
  return 0;
}

}  // namespace tessera::cli
