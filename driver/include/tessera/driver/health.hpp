// Health checks: find a device that computes wrong answers before a job trusts it.
//
// Three cumulative levels, after the levels operators know from xbutil validate and dcgmi diag:
//   quick     registers (identity, configuration, scratch, error state) and a known-answer GEMM;
//   standard  + device-memory patterns over all of memory, DMA integrity in both directions,
//             GEMMs in every output mode and flag on shapes that use every PE, performance
//             counter consistency, descriptor throughput;
//   stress    + random GEMMs against the golden model for a time or a count.
//
// Every check has a hard time limit and ends pass, fail, skip (with the reason) or incomplete.
// The verdict never contradicts the device: an error the engine records during a check fails it,
// and a check that could not finish makes the verdict at best incomplete.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/driver/device.hpp"

namespace tessera::driver {

enum class Level { kQuick, kStandard, kStress };
enum class Verdict { kPass, kFail, kSkip, kIncomplete };

std::string_view to_string(Level level);
std::string_view to_string(Verdict verdict);
Level parse_level(std::string_view text);  // throws UsageError

struct CheckResult {
  std::string name;
  Verdict result = Verdict::kIncomplete;
  std::string detail;
  double seconds = 0;
};

struct HealthOptions {
  Level level = Level::kQuick;
  bool strict = false;          // a skip fails the verdict
  uint64_t seed = 1;            // for the random data of every check
  double stress_seconds = 60;   // stress: run random GEMMs this long...
  uint64_t stress_count = 0;    // ...or this many (0: by time)
  std::function<void(const CheckResult&)> on_result;  // called as each check ends
};

struct HealthReport {
  std::string device;
  Level level = Level::kQuick;
  Verdict result = Verdict::kIncomplete;
  std::vector<CheckResult> tests;
};

// Opens the device (as the first check) and runs the checks of `opts.level`; `opened`, when given,
// is that device already open, checked in place so that its user can go on with it (an rtl
// device is one simulator either way). Never throws for a device problem: that is a failed check.
// A malformed spec is a UsageError.
HealthReport run_health_checks(const DeviceSpec& spec, const HealthOptions& opts,
                               std::shared_ptr<Device> opened = nullptr);

// The verdict of a set of results (shared with callers that merge reports).
Verdict overall(const std::vector<CheckResult>& tests, bool strict);

}  // namespace tessera::driver
