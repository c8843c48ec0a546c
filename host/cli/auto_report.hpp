// What --plan auto chose and predicted, for `tessera plan` and beside a run's measurements.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "run_args.hpp"

namespace tessera::cli {

// The plan chosen, per stage its shares and predicted times, the bubble, memory per device, the
// even split and the speedup over it, where each device's costs come from, and the search.
nlohmann::ordered_json auto_plan_json(const RunArgs& ra);
void print_auto_plan(const RunArgs& ra);

// A run of the auto plan against its prediction: measured / predicted - 1 of the time per batch
// (or, for a generation, of the time to first token and the decode time per token).
struct AutoCheck {
  std::string what;
  double predicted = 0, measured = 0;
  double error() const { return predicted > 0 ? measured / predicted - 1 : 0; }
};
struct RunSummary;
// `ran`: the run's summaries (a generation's prefill and decode), for "device_cycles": each
// accelerator's cycles as the planner's device costs predict them (without the host's work) beside
// the cycles it counted. Given where every device of the plan is a model or rtl device; the timing
// model is exact on model devices, so there the two are equal: what tests hold the planner to, where
// the wall-clock time per batch (the checks) depends on the machine.
nlohmann::ordered_json auto_check_json(const RunArgs& ra, const std::vector<AutoCheck>& checks,
                                       const std::vector<const RunSummary*>& ran);
std::string auto_check_text(const RunArgs& ra, const std::vector<AutoCheck>& checks);

}  // namespace tessera::cli
