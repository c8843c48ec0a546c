// The `rtl` backend: the Verilated engine in a SystemC platform, run by a tessera-sim process of
// its own (SystemC elaborates once per process, so several rtl devices need several processes).
// The two talk over pipes (tessera/sim/protocol.hpp); a simulator that dies is a DeviceError, not a hang.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "options.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/sim/protocol.hpp"

extern char** environ;

namespace tessera::driver {
namespace {

namespace fs = std::filesystem;

// tessera-sim next to the running executable, else where the build put it, unless TESSERA_SIM says.
std::string find_simulator() {
  if (const char* env = std::getenv("TESSERA_SIM")) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& dir : {self.parent_path(), self.parent_path() / "../sim/platform"}) {
      if (fs::exists(dir / "tessera-sim")) return (dir / "tessera-sim").string();
    }
  }
  return TESSERA_SIM_PATH;
}

class RtlBackend final : public Backend {
 public:
  RtlBackend(const DeviceSpec& spec, const SimOptions& o) : name_(spec.str()) {
    ::signal(SIGPIPE, SIG_IGN);  // a dead simulator shows up as EPIPE, not as our death
    // Options first: a bad value is bad usage whether or not the simulator is there.
    const uint64_t init_seed = option_number(spec, "init_seed", 1, 0, INT32_MAX);
    const uint64_t counter_start = option_number(spec, "counter_start", 0, 0, UINT64_MAX);
    const std::string exe = find_simulator();
    if (!fs::exists(exe))
      throw DeviceError(fmt::format("{}: simulator '{}' not found (build tessera-sim or set TESSERA_SIM)", name_, exe));
    std::vector<std::string> args = {exe,
                                     "--preset", o.preset,
                                     "--mem-mb", std::to_string(o.mem_bytes >> 20),
                                     "--mem-latency", std::to_string(o.mem.latency),
                                     "--mem-bytes-per-cycle", std::to_string(o.mem.bytes_per_cycle),
                                     "--mem-max-reads", std::to_string(o.mem.max_reads),
                                     "--mem-max-writes", std::to_string(o.mem.max_writes)};
    if (o.mem.w_first) args.push_back("--mem-w-first");
    if (spec.options.count("slverr")) args.insert(args.end(), {"--slverr", spec.options.at("slverr")});
    if (o.fault) args.insert(args.end(), {"--fault", o.fault.str(), "--seed", std::to_string(o.seed)});
    if (spec.options.count("trace")) args.insert(args.end(), {"--trace", spec.options.at("trace")});
    if (spec.option("scoreboard", "1") == "0") args.push_back("--no-scoreboard");
    args.insert(args.end(), {"--init-seed", std::to_string(init_seed)});
    if (counter_start) args.insert(args.end(), {"--counter-start", std::to_string(counter_start)});

    int to_sim[2], from_sim[2];
    if (::pipe2(to_sim, O_CLOEXEC) || ::pipe2(from_sim, O_CLOEXEC))
      throw DeviceError(fmt::format("{}: pipe: {}", name_, std::strerror(errno)));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_sim[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_sim[1], 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);  // read by the simulator before its main
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(to_sim[0]);
    ::close(from_sim[1]);
    out_ = to_sim[1];
    in_ = from_sim[0];
    if (rc != 0) throw DeviceError(fmt::format("{}: cannot start '{}': {}", name_, exe, std::strerror(rc)));
    pid_ = pid;
    const auto hello = call(simproto::Op::kHello);
    if (hello.v0 != simproto::kMagic) throw DeviceError(fmt::format("{}: '{}' is not tessera-sim", name_, exe));
    mem_size_ = hello.v1;
  }

  ~RtlBackend() override {
    try {
      if (in_ >= 0) call(simproto::Op::kShutdown);
    } catch (...) {
    }
    if (out_ >= 0) ::close(out_);
    if (in_ >= 0) ::close(in_);
    if (const pid_t pid = pid_.exchange(-1); pid > 0) ::waitpid(pid, nullptr, 0);
  }

  uint32_t csr_read(uint32_t offset) override {
    return static_cast<uint32_t>(call(simproto::Op::kCsrRead, offset).v0);
  }
  void csr_write(uint32_t offset, uint32_t value) override { call(simproto::Op::kCsrWrite, offset, value); }
  void mem_write(uint64_t addr, std::span<const uint8_t> bytes) override {
    call(simproto::Op::kMemWrite, addr, 0, bytes);
  }
  void mem_read(uint64_t addr, std::span<uint8_t> bytes) override {
    call(simproto::Op::kMemRead, addr, bytes.size(), {}, bytes);
  }
  uint64_t mem_size() const override { return mem_size_; }
  bool wait_irq(uint64_t max_cycles) override { return call(simproto::Op::kRunUntilIrq, max_cycles).v0 != 0; }
  void advance(uint64_t cycles) override { call(simproto::Op::kRun, cycles); }
  // Killing the simulator ends a blocked call with EOF on the pipe, from any thread.
  void abort() override {
    if (const pid_t pid = pid_.load(); pid > 0) ::kill(pid, SIGKILL);
  }
  uint64_t cycles() override { return call(simproto::Op::kCycles).v1; }
  std::optional<ScoreboardStatus> scoreboard() override {
    std::vector<uint8_t> text;
    call(simproto::Op::kScoreboard, 0, 0, {}, {}, &text);
    const auto j = nlohmann::json::parse(text.begin(), text.end());
    const uint64_t mismatches = j["mismatches"].get<uint64_t>();
    const bool ok = mismatches == 0 && j["protocol_error"].get<std::string>().empty();
    std::string detail = fmt::format("{} bytes in {} descriptors checked, {} mismatches",
                                     j["bytes_checked"].get<uint64_t>(), j["descriptors_checked"].get<uint64_t>(),
                                     j["mismatches"].get<uint64_t>());
    if (!j["first_mismatch"].get<std::string>().empty()) detail += "; first: " + j["first_mismatch"].get<std::string>();
    if (!j["protocol_error"].get<std::string>().empty()) detail += "; AXI rule broken: " + j["protocol_error"].get<std::string>();
    return ScoreboardStatus{ok, mismatches, detail};
  }

 private:
  simproto::Response call(simproto::Op op, uint64_t a = 0, uint64_t b = 0, std::span<const uint8_t> payload = {},
                          std::span<uint8_t> into = {}, std::vector<uint8_t>* text = nullptr) {
    const simproto::Request req{op, 0, a, b, payload.size()};
    send(&req, sizeof req);
    if (!payload.empty()) send(payload.data(), payload.size());
    simproto::Response rsp;
    receive(&rsp, sizeof rsp);
    std::vector<uint8_t> body(rsp.len);
    if (rsp.len) receive(body.data(), body.size());
    if (rsp.status != 0)
      throw DeviceError(fmt::format("{}: simulator: {}", name_, std::string(body.begin(), body.end())));
    if (!into.empty()) {
      if (body.size() != into.size()) throw DeviceError(fmt::format("{}: simulator sent a short reply", name_));
      std::memcpy(into.data(), body.data(), body.size());
    }
    if (text) *text = std::move(body);
    return rsp;
  }

  void send(const void* p, size_t n) {
    if (!simproto::write_all(out_, p, n)) died();
  }
  void receive(void* p, size_t n) {
    if (!simproto::read_all(in_, p, n)) died();
  }
  [[noreturn]] void died() {
    int status = 0;
    std::string how = "closed its pipe";
    bool refused = false;
    if (const pid_t pid = pid_.exchange(-1); pid > 0 && ::waitpid(pid, &status, 0) == pid) {
      how = WIFSIGNALED(status) ? fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)))
                                : fmt::format("exited with status {}", WEXITSTATUS(status));
      refused = WIFEXITED(status) && WEXITSTATUS(status) == 2 && mem_size_ == 0;  // before its hello
    }
    ::close(in_);
    ::close(out_);
    in_ = out_ = -1;
    // A simulator that refused its options at start (a preset it was not built with) is bad usage;
    // it has said why on stderr.
    if (refused) throw UsageError(fmt::format("{}: the RTL simulator refused the device's options (its reason is above)", name_));
    throw DeviceError(fmt::format("{}: the RTL simulator process {}", name_, how));
  }

  std::string name_;
  std::atomic<pid_t> pid_ = -1;
  int in_ = -1, out_ = -1;
  uint64_t mem_size_ = 0;
};

}  // namespace

std::vector<std::string> rtl_presets() {
  const std::string exe = find_simulator();
  int out[2];
  if (::pipe2(out, O_CLOEXEC)) throw DeviceError(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::string arg0 = exe, arg1 = "--presets";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; rc == 0 && (n = ::read(out[0], buf, sizeof buf)) != 0;)
    if (n > 0) text.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR) break;
  ::close(out[0]);
  int status = 0;
  if (rc != 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw DeviceError(fmt::format("cannot ask the RTL simulator '{}' for its presets", exe));
  std::vector<std::string> names;
  for (size_t pos = 0, end; (end = text.find('\n', pos)) != std::string::npos; pos = end + 1)
    names.push_back(text.substr(pos, end - pos));
  return names;
}

std::unique_ptr<Backend> make_rtl_backend(const DeviceSpec& spec) {
  const SimOptions o = SimOptions::parse(spec, kRtlOptions);
  return std::make_unique<RtlBackend>(spec, o);
}

}  // namespace tessera::driver
