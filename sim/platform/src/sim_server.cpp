// tessera-sim: runs one SystemC platform and serves the driver's requests (tessera/sim/protocol.hpp) on
// stdin/stdout. Anything else that writes to stdout (SystemC's banner, reports) is moved to stderr.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/platform/platform.hpp"
#include "tessera/sim/protocol.hpp"

namespace po = boost::program_options;
using namespace tessera;

namespace {

int g_in = 0, g_out = -1;

bool read_all(void* dst, size_t n) { return simproto::read_all(g_in, dst, n); }

void write_all(const void* src, size_t n) {
  if (!simproto::write_all(g_out, src, n)) throw std::runtime_error("driver closed the pipe");
}

void respond(uint32_t status, uint64_t v0, uint64_t v1, const void* payload, uint64_t len) {
  simproto::Response rsp{status, 0, v0, v1, len};
  write_all(&rsp, sizeof rsp);
  if (len) write_all(payload, len);
}

int serve(Platform& p) {
  std::vector<uint8_t> buf;
  for (;;) {
    simproto::Request req;
    if (!read_all(&req, sizeof req)) return 0;  // the driver went away
    buf.resize(req.len);
    if (req.len && !read_all(buf.data(), req.len)) return 0;
    try {
      switch (req.op) {
        case simproto::Op::kHello: respond(0, simproto::kMagic, p.mem_size(), nullptr, 0); break;
        case simproto::Op::kCsrRead: respond(0, p.csr_read(static_cast<uint32_t>(req.a)), 0, nullptr, 0); break;
        case simproto::Op::kCsrWrite:
          p.csr_write(static_cast<uint32_t>(req.a), static_cast<uint32_t>(req.b));
          respond(0, 0, 0, nullptr, 0);
          break;
        case simproto::Op::kMemWrite:
          p.mem_write(req.a, buf);
          respond(0, 0, 0, nullptr, 0);
          break;
        case simproto::Op::kMemRead:
          buf.resize(req.b);
          p.mem_read(req.a, buf);
          respond(0, 0, 0, buf.data(), buf.size());
          break;
        case simproto::Op::kRunUntilIrq: {
          const bool irq = p.run_until_irq(req.a);
          respond(0, irq, p.cycles(), nullptr, 0);
          break;
        }
        case simproto::Op::kRun:
          p.run(req.a);
          respond(0, 0, p.cycles(), nullptr, 0);
          break;
        case simproto::Op::kCycles: respond(0, 0, p.cycles(), nullptr, 0); break;
        case simproto::Op::kScoreboard: {
          const ScoreboardReport r = p.scoreboard();
          const std::string s = nlohmann::json{{"bytes_checked", r.bytes_checked},
                                               {"descriptors_checked", r.descriptors_checked},
                                               {"mismatches", r.mismatches},
                                               {"first_mismatch", r.first_mismatch},
                                               {"protocol_error", r.protocol_error}}
                                    .dump();
          respond(0, 0, 0, s.data(), s.size());
          break;
        }
        case simproto::Op::kShutdown: respond(0, 0, 0, nullptr, 0); return 0;
        default: throw std::invalid_argument(fmt::format("unknown request {}", static_cast<uint32_t>(req.op)));
      }
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      respond(1, 0, 0, msg.data(), msg.size());
    }
  }
}

}  // namespace

extern "C" int sc_main(int argc, char* argv[]) {
  // Keep the protocol stream to ourselves: stdout from here on is stderr.
  g_out = ::dup(1);
  ::dup2(2, 1);
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);

  PlatformConfig cfg;
  std::string slverr, fault;
  po::options_description opts("tessera-sim options");
  opts.add_options()
      ("help", "this text")
      ("presets", "print the presets this simulator has, one a line, and exit")
      ("preset", po::value(&cfg.preset)->default_value("default"), "engine preset")
      ("mem-mb", po::value<uint64_t>()->default_value(256), "device memory in MiB")
      ("mem-latency", po::value(&cfg.mem.latency)->default_value(cfg.mem.latency), "memory latency in cycles")
      ("mem-bytes-per-cycle", po::value(&cfg.mem.bytes_per_cycle)->default_value(0), "bandwidth; 0 = bus width")
      ("mem-max-reads", po::value(&cfg.mem.max_reads)->default_value(cfg.mem.max_reads), "read bursts in flight")
      ("mem-max-writes", po::value(&cfg.mem.max_writes)->default_value(cfg.mem.max_writes), "write bursts in flight")
      ("mem-w-first", po::bool_switch(&cfg.mem.w_first), "take write data before its burst's address, as AXI allows")
      ("slverr", po::value(&slverr), "answer bursts touching this address with SLVERR")
      ("fault", po::value(&fault), "simulate a defect: stuck:ROW,COL,BIT[,V], flip:RATE, slverr:ADDR, hang")
      ("seed", po::value(&cfg.seed)->default_value(uint64_t{1}), "seed for random faults")
      ("init-seed", po::value(&cfg.init_seed)->default_value(cfg.init_seed),
       "seed of the power-on values of state without a reset; 0 = all zeros")
      ("counter-start", po::value(&cfg.counter_start)->default_value(0),
       "the value of every performance counter after the power-on reset")
      ("no-scoreboard", "do not check writes against the golden model")
      ("trace", po::value(&cfg.trace_path), "write an FST waveform to this file");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cerr << opts << "\n";
      return 0;
    }
    if (vm.count("presets")) {
      std::string names;
      for (const std::string& p : Platform::presets()) names += p + "\n";
      write_all(names.data(), names.size());
      return 0;
    }
    cfg.mem_bytes = vm["mem-mb"].as<uint64_t>() << 20;
    cfg.scoreboard = !vm.count("no-scoreboard");
    if (!slverr.empty()) cfg.mem.slverr_addr = std::stoull(slverr, nullptr, 0);
    if (!fault.empty()) cfg.fault = FaultConfig::parse(fault);
    if (cfg.trace_path.empty())
      if (const char* t = std::getenv("TESSERA_TRACE")) cfg.trace_path = t;
    auto platform = Platform::create(cfg);
    return serve(*platform);
  } catch (const std::exception& e) {
    std::cerr << "tessera-sim: " << e.what() << "\n";
    return 2;  // its options refused: the driver makes this bad usage, not a failed device
  }
}
