#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "run_args.hpp"
#include "tessera/io/tokenizer.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

// A token's bytes as a JSON string: invalid UTF-8 (a token that ends inside a character) as U+FFFD.
nlohmann::ordered_json text_json(const std::string& bytes) {
  return nlohmann::ordered_json::parse(nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

int tokenize(const std::vector<std::string>& args) {
  std::string dir, text, file, decode;
  po::options_description opts(
      "tessera tokenize: GPT-2 byte-level BPE on the command line: text to token ids, or ids back to text\n"
      "(the ids print comma-separated, as --tokens of run and generate takes them)");
  opts.add_options()
      ("help,h", "this text")
      ("tokenizer", po::value(&dir)->required(),
       "a directory with vocab.json and merges.txt (or encoder.json and vocab.bpe), e.g. a model directory")
      ("text", po::value(&text), "the text to encode")
      ("file", po::value(&file), "encode this file's bytes")
      ("decode", po::value(&decode), "comma-separated token ids to decode; the text goes to stdout as is")
      ("json", "print one JSON object: ids and tokens (or ids and text with --decode)");
  const auto vm = parse_args(opts, args);
  if (!vm) return 0;
  if (vm->count("text") + vm->count("file") + vm->count("decode") != 1)
    throw std::invalid_argument("give one of --text, --file or --decode");
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(dir);
  const bool json = vm->count("json") > 0;

  if (vm->count("decode")) {
    const std::vector<int32_t> ids = parse_token_ids(decode, "--decode");
    const std::string out = tok.decode(ids);
    if (json)
      std::cout << nlohmann::ordered_json{{"ids", ids}, {"text", text_json(out)}}.dump(2) << "\n";
    else
      std::cout << out << std::flush;
    return 0;
  }
  if (vm->count("file")) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::invalid_argument(fmt::format("--file: cannot read {}", file));
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  const std::vector<int32_t> ids = tok.encode(text);
  if (json) {
    nlohmann::ordered_json tokens = nlohmann::ordered_json::array();
    for (int32_t id : ids) tokens.push_back(text_json(tok.token_bytes(id)));
    std::cout << nlohmann::ordered_json{{"ids", ids}, {"tokens", tokens}}.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{}\n", fmt::join(ids, ","));
  }
  return 0;
}

}  // namespace tessera::cli
