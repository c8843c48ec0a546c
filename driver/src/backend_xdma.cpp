// The `xdma` backend: a Tessera engine on an FPGA card behind Xilinx's XDMA PCIe driver, which
// makes one set of character devices per card (the spec's path is their common prefix):
//
//   <path>_user      the AXI4-Lite user BAR, where the engine's CSRs sit: mmap'ed
//   <path>_h2c_0     host-to-card DMA engine 0: pwrite() at a device address
//   <path>_c2h_0     card-to-host DMA engine 0: pread() at a device address
//   <path>_events_0  user interrupt 0 (the engine's irq): read() blocks until it fires
//
// Options: mem_mb (device memory the design exposes to the engine, default 1024), csr_offset (BAR
// offset of the engine's CSR block, default 0), clock_mhz (engine clock, to turn waits into cycles
// for the watchdog, default 250), completion=irq|poll (read by the Device).
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "options.hpp"
#include "tessera/driver/device.hpp"

namespace tessera::driver {
namespace {

constexpr uint64_t kCsrWindow = 4096;        // the engine's CSR block (spec: 12-bit AXI-Lite addresses)
constexpr uint64_t kDmaChunk = 8ull << 20;   // one pread/pwrite at most; the driver splits further

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

class XdmaBackend final : public Backend {
 public:
  explicit XdmaBackend(const DeviceSpec& spec) : name_(spec.str()), prefix_(spec.path) {
    for (const auto& [k, v] : spec.options)
      if (k != "mem_mb" && k != "csr_offset" && k != "clock_mhz" && k != "completion" &&
          k != "dataflow" && k != "precision")
        throw UsageError(fmt::format("device '{}': unknown option '{}' (options: mem_mb, csr_offset, clock_mhz, "
                                     "completion, dataflow, precision)",
                                     name_, k));
    mem_size_ = option_number(spec, "mem_mb", 1024, 1, 1 << 20) << 20;
    const uint64_t csr_offset = option_number(spec, "csr_offset", 0, 0, UINT64_MAX);
    if (csr_offset % kCsrWindow) throw UsageError(fmt::format("device '{}': csr_offset must be 4 KiB aligned", name_));
    clock_mhz_ = static_cast<double>(option_number(spec, "clock_mhz", 250, 1, 2000));

    user_ = open_node("_user", O_RDWR | O_SYNC);
    h2c_ = open_node("_h2c_0", O_WRONLY);
    c2h_ = open_node("_c2h_0", O_RDONLY);
    // Interrupts are optional: without the events node (or with completion=poll) the driver polls.
    struct stat st {};
    const std::string events = prefix_ + "_events_0";
    if (spec.option("completion", "irq") == "irq" && ::stat(events.c_str(), &st) == 0 && S_ISCHR(st.st_mode))
      events_ = open_node("_events_0", O_RDONLY);

    void* p = ::mmap(nullptr, kCsrWindow, PROT_READ | PROT_WRITE, MAP_SHARED, user_.get(), static_cast<off_t>(csr_offset));
    if (p == MAP_FAILED)
      throw DeviceError(fmt::format("{}: cannot map the user BAR ({}_user at {:#x}): {}", name_, prefix_, csr_offset,
                                    std::strerror(errno)));
    csr_ = static_cast<volatile uint32_t*>(p);
    start_ = std::chrono::steady_clock::now();
  }

  ~XdmaBackend() override {
    if (csr_) ::munmap(const_cast<uint32_t*>(csr_), kCsrWindow);
  }

  uint32_t csr_read(uint32_t offset) override {
    live();
    check_csr(offset);
    return csr_[offset / 4];
  }
  void csr_write(uint32_t offset, uint32_t value) override {
    live();
    check_csr(offset);
    csr_[offset / 4] = value;
  }

  void mem_write(uint64_t addr, std::span<const uint8_t> bytes) override {
    check_range(addr, bytes.size());
    for (uint64_t done = 0; done < bytes.size();) {
      live();
      const size_t n = std::min<uint64_t>(kDmaChunk, bytes.size() - done);
      const ssize_t w = ::pwrite(h2c_.get(), bytes.data() + done, n, static_cast<off_t>(addr + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        throw DeviceError(fmt::format("{}: host-to-card DMA of {} bytes at {:#x} failed: {}", name_, n, addr + done,
                                      w < 0 ? std::strerror(errno) : "no progress"));
      done += static_cast<uint64_t>(w);
    }
  }

  void mem_read(uint64_t addr, std::span<uint8_t> bytes) override {
    check_range(addr, bytes.size());
    for (uint64_t done = 0; done < bytes.size();) {
      live();
      const size_t n = std::min<uint64_t>(kDmaChunk, bytes.size() - done);
      const ssize_t r = ::pread(c2h_.get(), bytes.data() + done, n, static_cast<off_t>(addr + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw DeviceError(fmt::format("{}: card-to-host DMA of {} bytes at {:#x} failed: {}", name_, n, addr + done,
                                      r < 0 ? std::strerror(errno) : "short read"));
      done += static_cast<uint64_t>(r);
    }
  }

  uint64_t mem_size() const override { return mem_size_; }

  bool wait_irq(uint64_t max_cycles) override {
    const int ms = std::max(1, static_cast<int>(static_cast<double>(max_cycles) / clock_mhz_ / 1000.0));
    if (pending()) return true;
    if (events_.get() >= 0) {
      pollfd pfd{events_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, ms) > 0) {
        uint32_t count = 0;  // the driver's event counter; reading it re-arms the interrupt
        if (::read(events_.get(), &count, sizeof count) < 0 && errno != EINTR)
          throw DeviceError(fmt::format("{}: reading {}_events_0: {}", name_, prefix_, std::strerror(errno)));
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 1)));
    }
    return pending();
  }

  void advance(uint64_t cycles) override {
    live();
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(static_cast<double>(cycles) / clock_mhz_));
  }

  // A card's clock runs on its own: its cycles are wall time at the nominal clock.
  uint64_t cycles() override {
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
    return static_cast<uint64_t>(us * clock_mhz_);
  }

  void abort() override { aborted_ = true; }

 private:
  Fd open_node(const char* suffix, int flags) {
    const std::string path = prefix_ + suffix;
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      throw DeviceError(fmt::format("{}: cannot open {}: {}{}", name_, path, std::strerror(err),
                                    err == ENOENT ? " (no XDMA card there: is the card installed and the xdma driver "
                                                    "loaded? `tessera devices` lists the cards found)"
                                                  : ""));
    }
    return Fd(fd);
  }

  void live() const {
    if (aborted_) throw DeviceError(fmt::format("{}: given up on (aborted)", name_));
  }
  void check_csr(uint32_t offset) const {
    if (offset % 4 || offset >= kCsrWindow)
      throw UsageError(fmt::format("{}: CSR offset {:#x} is outside the engine's register block", name_, offset));
  }
  void check_range(uint64_t addr, uint64_t len) const {
    if (addr > mem_size_ || len > mem_size_ - addr)
      throw UsageError(fmt::format("{}: [{:#x}, {:#x}) is outside the device's {} bytes of memory", name_, addr,
                                   addr + len, mem_size_));
  }
  bool pending() {
    return (csr_read(spec::csr::IRQ_STATUS) & csr_read(spec::csr::IRQ_ENABLE)) != 0;
  }

  std::string name_, prefix_;
  uint64_t mem_size_ = 0;
  double clock_mhz_ = 250;
  Fd user_, h2c_, c2h_, events_;
  volatile uint32_t* csr_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> aborted_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_xdma_backend(const DeviceSpec& spec) { return std::make_unique<XdmaBackend>(spec); }

}  // namespace tessera::driver
