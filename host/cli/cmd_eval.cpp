#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
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

namespace {

// The numerics the plan's devices compute in: an accelerator's or a GPU's precision, fp32 on the CPU.
std::string precision_of(const Plan& plan) {
  std::set<std::string> kinds;
  for (const Stage& st : plan.stages)
    for (const PlanDevice& d : st.devices)
      kinds.insert(d.kind == "cpu" ? "fp32" : std::string(to_string(d.precision)));
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : "+") + k;
  return out;
}

}  // namespace

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
      ("plan", po::value(&ra.plan_text), "stages: LAYERS@DEV[*W][+DEV[*W]...][;...]  (default: every layer on rtl:0)")
      ("json", po::bool_switch(&ra.json), "print one JSON object");
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
  ra.plan.assign_ranks(comm ? comm->size() : 1);
  const Gpt2Model model = ra.load_model();
  return on_every_rank(comm.get(), "eval", [&](int me) {
    const auto devs = open_devices(ra, comm.get(), me, "eval");
    if (!devs) return 1;
    Pipeline pipeline(model, stage_shards(ra.plan, *devs, me), comm.get());
    const auto t0 = std::chrono::steady_clock::now();
    const Perplexity p = perplexity(pipeline, cfg, ids, window, stride);  // the logits are complete on rank 0
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (me != 0) return 0;
    if (ra.json) {
      std::cout << nlohmann::ordered_json{{"schema_version", 1}, {"model", ra.model}, {"text", text_path},
                                          {"plan", ra.plan.str()}, {"precision", precision_of(ra.plan)},
                                          {"perplexity", p.perplexity}, {"nll", p.nll}, {"tokens", p.tokens},
                                          {"windows", p.windows}, {"window", window}, {"stride", stride},
                                          {"wall_seconds", wall}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << fmt::format(
          "perplexity {:.4f} over {} tokens of {} (mean NLL {:.5f} nats), {} windows of {} tokens {} apart; "
          "plan {}, {}; {:.2f} s\n",
          p.perplexity, p.tokens, text_path, p.nll, p.windows, window, stride, ra.plan.str(), precision_of(ra.plan),
          wall);
    }
    return 0;
  });
}

}  // namespace tessera::cli
