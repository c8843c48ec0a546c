#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "run_args.hpp"
#include "run_report.hpp"
#include "tessera/backends/gpu_projection.hpp"
#include "tessera/io/tokenizer.hpp"
#include "tessera/runtime/perplexity.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

int eval(const std::vector<std::string>& args) {
  RunArgs ra;
  std::string text_path, tokenizer_dir;
  uint32_t window = 0, stride = 0;
  po::options_description opts(
      "tessera eval: perplexity of a model over a text, with a sliding window, over a plan of devices");
  opts.add_options()
      ("help,h", "this text")
      ("model", po::value(&ra.model)->required(), "a model directory (config.json, model.safetensors, vocab.json, merges.txt)")
      ("text", po::value(&text_path)->required(), "the text file to score")
      ("tokenizer", po::value(&tokenizer_dir), "the tokenizer's directory (default: the model's)")
      ("window", po::value(&window), "tokens per window (default: the model's positions)")
      ("stride", po::value(&stride), "tokens between windows' starts (default: half the window)")
      ("plan", po::value(&ra.plan_text), kPlanHelp)
      ("json", po::bool_switch(&ra.json), "print one JSON object");
  ra.add_cpu_threads_option(opts);
  ra.add_profile_ops_option(opts);
  const auto vm = parse_args(opts, args);
  if (!vm) return 0;
  ra.finish(*vm);
  const Gpt2Config& cfg = ra.cfg;
  if (window == 0) window = cfg.positions;
  if (stride == 0) stride = std::max<uint32_t>(window / 2, 1);
  if (tokenizer_dir.empty()) tokenizer_dir = ra.model;
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(tokenizer_dir);
  if (tok.vocab_size() > cfg.vocab)
    throw std::invalid_argument(fmt::format("the tokenizer in {} has {} tokens, more than the model's vocabulary of {}",
                                            tokenizer_dir, tok.vocab_size(), cfg.vocab));
  std::ifstream in(text_path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("--text: cannot read {}", text_path));
  std::ostringstream text;
  text << in.rdbuf();
  const std::vector<int32_t> ids = tok.encode(text.str());
  check_windows(cfg, ids.size(), window, stride);

  const std::unique_ptr<Comm> comm = mpi_world();
  if (comm) ra.require_one_plan("a run under mpirun");
  const Gpt2Model model = ra.load_model();
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < ra.plans.size(); ++i) {
    ra.select_plan(i);
    ra.plan.assign_ranks(comm ? comm->size() : 1);
    const int rc = on_every_rank(comm.get(), "eval", [&](int me) {
      const auto devs = open_devices(ra, comm.get(), me, "eval");
      if (!devs) return 1;
      Pipeline pipeline(model, stage_shards(ra.plan, *devs, me), comm.get());
      pipeline.profile_ops = ra.profile_ops;
      const auto t0 = std::chrono::steady_clock::now();
      const Perplexity p = perplexity(pipeline, cfg, ids, window, stride);  // the logits are complete on rank 0
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (me == 0)
        runs.push_back({{"schema_version", 1}, {"model", ra.model}, {"text", text_path}, {"plan", ra.plan.str()},
                        {"precision", plan_precision(ra.plan)}, {"perplexity", p.perplexity}, {"nll", p.nll},
                        {"tokens", p.tokens}, {"windows", p.windows}, {"window", window}, {"stride", stride},
                        {"wall_seconds", wall}, {"cpu_threads", cpu_threads_json(ra.plan)}});
      return 0;
    });
    if (rc != 0) return rc;
  }
  if (comm && comm->rank() != 0) return 0;
  if (ra.json) {
    // One plan: its object; several: each plan's, in order, under "runs".
    const nlohmann::ordered_json out =
        runs.size() == 1 ? runs[0]
                         : nlohmann::ordered_json{{"schema_version", 1}, {"model", ra.model}, {"text", text_path},
                                                  {"runs", runs}};
    std::cout << out.dump(2) << "\n";
  } else if (runs.size() == 1) {
    const auto& r = runs[0];
    std::cout << fmt::format(
        "perplexity {:.4f} over {} tokens of {} (mean NLL {:.5f} nats), {} windows of {} tokens {} apart; "
        "plan {}, {}; {:.2f} s\n",
        r["perplexity"].get<double>(), r["tokens"].get<uint64_t>(), text_path, r["nll"].get<double>(),
        r["windows"].get<uint64_t>(), window, stride, r["plan"].get<std::string>(), r["precision"].get<std::string>(),
        r["wall_seconds"].get<double>());
  } else {
    std::cout << fmt::format("perplexity over {} tokens of {}, {} windows of {} tokens {} apart\n\n",
                             runs[0]["tokens"].get<uint64_t>(), text_path, runs[0]["windows"].get<uint64_t>(), window,
                             stride);
    std::cout << fmt::format("{:<44} {:<10} {:>12} {:>10} {:>12} {:>9}\n", "PLAN", "PRECISION", "PERPLEXITY",
                             "VS FIRST", "NLL (nats)", "WALL s");
    const double first = runs[0]["perplexity"].get<double>();
    for (const auto& r : runs)
      std::cout << fmt::format("{:<44} {:<10} {:>12.5f} {:>+9.3f}% {:>12.6f} {:>9.2f}\n", r["plan"].get<std::string>(),
                               r["precision"].get<std::string>(), r["perplexity"].get<double>(),
                               100 * (r["perplexity"].get<double>() / first - 1), r["nll"].get<double>(),
                               r["wall_seconds"].get<double>());
  }
  return 0;
}

}  // namespace tessera::cli
