// The arguments `tessera run` and `tessera plan` share (DESIGN.md's CLI contract).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "tessera/io/gpt2.hpp"
#include "tessera/runtime/autoplan.hpp"
#include "tessera/parallel/comm.hpp"
#include "tessera/runtime/energy.hpp"
#include "tessera/runtime/plan.hpp"

namespace tessera::cli {

struct RunArgs {
  std::string model = "tiny", plan_text, tokens_text, dump_dir, trace_path, capture_dir;
  std::string devices_text;        // --devices, for --plan auto
  bool allow_auto = false;         // the command takes --plan auto (run, generate, plan)
  bool auto_requested = false;     // --plan auto: the plan is chosen by resolve_auto
  bool microbatches_given = false;
  uint32_t batch = 1, seq = 0, microbatches = 1;
  double clock_mhz = 0;            // 0 until resolve_clock: --clock-mhz, or the slowest accelerator's
  std::string clock_source;        // where clock_mhz comes from, for the reports
  bool clock_given = false;
  // Each accelerator's clock by its label: --clock-mhz, or its own preset's estimate.
  std::map<std::string, AcceleratorClock> device_clocks;
  double clock_of(const std::string& device) const;  // device_clocks', else clock_mhz
  nlohmann::json clocks_json() const;                // {label: {mhz, source}}
  std::string clocks_text() const;                   // "F MHz (source)", or per accelerator where they differ
  std::string project_array;       // ASIC what-if: RxC
  uint32_t project_rows = 0, project_cols = 0;
  double project_clock_mhz = 0;    // 0: --clock-mhz
  bool project_clock_given = false;
  std::string energy_table_name = "7nm";  // a shipped table or a file (docs/ENERGY.md)
  uint64_t seed = 1;
  bool json = false, csv = false;
  unsigned cpu_threads = 0;        // --cpu-threads; 0: the CPU backend chooses (cpu_backend.hpp)
  bool profile_ops = false;        // --profile-ops: GPU stages op by op (Pipeline::profile_ops)

  void add_options(boost::program_options::options_description& opts);
  void add_energy_option(boost::program_options::options_description& opts);  // generate and bench too
  void add_clock_option(boost::program_options::options_description& opts);   // likewise
  void add_cpu_threads_option(boost::program_options::options_description& opts);  // likewise, and eval
  void add_profile_ops_option(boost::program_options::options_description& opts);  // run, generate, bench, eval
  // Sets the CPU backend's threads where --cpu-threads was given (finish() calls it).
  void apply_cpu_threads(const boost::program_options::variables_map& vm) const;
  // Each of `plan`'s accelerators' clocks: --clock-mhz, or its own preset's estimated Fmax
  // (rtl/fmax.json; an assumed 250 MHz where it has none); clock_mhz is the slowest of them.
  void resolve_clock(const Plan& plan);
  // After parsing: checks the combination, loads the model's configuration, and resolves the
  // plans (default: every layer on rtl:0) and the token shape; throws std::invalid_argument.
  void finish(const boost::program_options::variables_map& vm);
  // Makes plans[i] the plan, with its accelerators' clock where --clock-mhz did not give it.
  void select_plan(size_t i);
  // Where only one plan can be run (`what`): std::invalid_argument if --plan listed several.
  void require_one_plan(std::string_view what) const;
  // --plan auto: chooses the plan (and the microbatches, unless --microbatches gave them) over
  // --devices for the workload, each accelerator at its own clock unless --clock-mhz gives one;
  // then selects it. Nothing without --plan auto. Under mpirun every rank calls it: the devices
  // go on ranks (a model device each without --devices), the ranks time their all-reduces, rank 0
  // plans and the others run its plan.
  void resolve_auto(RunPhase phase, uint32_t new_tokens = 0, Comm* comm = nullptr);
  std::shared_ptr<const CostModel> costs;  // --plan auto: what the choice rests on
  std::optional<AutoPlan> auto_plan;
  CommStats planning_traffic;                // --plan auto under mpirun: the all-reduces it timed

  Gpt2Config cfg;
  Plan plan;                // the one being run: plans[0] until select_plan
  std::vector<Plan> plans;  // --plan P,P,...: run, generate, eval and bench compare them side by side
  EnergyTable energy_table;
  Gpt2Config model_config() const;  // of --model, without loading weights
  Gpt2Model load_model() const;
  // The tokens: --tokens, or `batch` x `seq` ids drawn from `seed`.
  std::vector<int32_t> tokens() const;
};

// --plan's help, in every command that takes it.
inline constexpr const char* kPlanHelp =
    "stages: LAYERS@DEV[*W][+DEV[*W]...][;...]; several plans, comma-separated, are compared side by side "
    "(default: every layer on rtl:0); auto: chosen over --devices";
inline constexpr const char* kDevicesHelp =
    "with --plan auto: the devices to place the model on, comma-separated (model:0,rtl:0?preset=large,cpu,cuda:0)";

// The precision the plan's devices compute in: an accelerator's or a GPU's, fp32 on a CPU; "bf16+fp32"
// where they differ.
std::string plan_precision(const Plan& plan);

// The CPU backend's threads, where `plan` has a cpu device (null where it has none), for the JSON
// reports, and the same as a line of text (empty where it has none).
nlohmann::ordered_json cpu_threads_json(const Plan& plan);
std::string cpu_threads_text(const Plan& plan);

// Comma-separated token ids ("464,3290"); std::invalid_argument names `option` and the bad item.
std::vector<int32_t> parse_token_ids(std::string_view text, std::string_view option);

}  // namespace tessera::cli
