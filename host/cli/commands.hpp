// The tessera subcommands; each returns the process exit code and throws for errors main() maps.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace tessera::cli {

// Parses a subcommand's arguments; with --help prints `opts` and returns nothing (exit 0).
std::optional<boost::program_options::variables_map> parse_args(const boost::program_options::options_description& opts,
                                                                const std::vector<std::string>& args);

int devices(const std::vector<std::string>& args);
int gemm(const std::vector<std::string>& args);
int validate(const std::vector<std::string>& args);
int plan(const std::vector<std::string>& args);
int calibrate(const std::vector<std::string>& args);
int run(const std::vector<std::string>& args);
int replay(const std::vector<std::string>& args);
int tokenize(const std::vector<std::string>& args);
int generate(const std::vector<std::string>& args);
int eval(const std::vector<std::string>& args);
int bench(const std::vector<std::string>& args);

}  // namespace tessera::cli
