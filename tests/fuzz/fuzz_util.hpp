// Shared helpers of the fuzz harnesses (docs/TESTING.md).
//
// Each harness feeds one input to a parser of outside input through the entry point the CLI uses
// and accepts exactly the exceptions that the CLI maps to "bad input" (exit 2) or "the device
// failed" (exit 1). Any other exception escapes, and libFuzzer reports it as a crash, as it does a
// sanitizer report, a hang (-timeout) or a huge allocation (-malloc_limit_mb).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>

namespace tessera::fuzz {

// A scratch directory for parsers that read files: made once per process, removed at exit. Files
// in it are rewritten for every input (in /dev/shm where there is one, so this costs little).
class ScratchDir {
 public:
  explicit ScratchDir(const char* name) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    const std::string prefix = "tessera-fuzz-" + std::string(name) + "-";
    // A harness that crashed left its directory behind: remove those whose process is gone.
    for (const auto& e : fs::directory_iterator(base, ec)) {
      const std::string n = e.path().filename().string();
      if (!n.starts_with(prefix)) continue;
      const long pid = std::strtol(n.c_str() + prefix.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
    dir_ = base / (prefix + std::to_string(::getpid()));
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return dir_; }

  // Writes `bytes` to `name` in the directory and returns its path.
  std::filesystem::path write(const std::string& name, std::span<const uint8_t> bytes) const {
    const auto p = dir_ / name;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz harness: cannot write %s\n", p.c_str());
      std::abort();
    }
    return p;
  }

  void remove(const std::string& name) const {
    std::error_code ec;
    std::filesystem::remove(dir_ / name, ec);
  }

 private:
  std::filesystem::path dir_;
};

// A property a parser broke: report it and crash, so that libFuzzer keeps the input.
[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "fuzz harness: %s\n", what);
  std::abort();
}

}  // namespace tessera::fuzz
